//! Edits of a sweep file that `suggest` proposes, applied to its text with `toml_edit` so the
//! researcher's comments, order and formatting survive: a teacher size added to the grid, a
//! seed added to the students (and baselines), a longer student budget.

use std::fmt;

use toml_edit::{Array, DocumentMut, Item, Table, Value, value};

use super::SuggestError;

/// One change to the sweep file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Edit {
    /// Train one more teacher of about this many non-embedding parameters.
    AddTeacher {
        /// Target size, as a sweep file writes it.
        target: u64,
    },
    /// Repeat every student and baseline with one more seed.
    AddSeed {
        /// The new seed.
        seed: u64,
    },
    /// Train every student and baseline on one more (longer) budget.
    AddStudentBudget {
        /// Tokens, as a sweep file writes them.
        tokens: u64,
    },
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Edit::AddTeacher { target } => write!(
                f,
                "teacher of {}",
                crate::spec::units::format_count(*target as f64)
            ),
            Edit::AddSeed { seed } => write!(f, "seed {seed} for students and baselines"),
            Edit::AddStudentBudget { tokens } => write!(
                f,
                "students and baselines on {} tokens",
                crate::spec::units::format_count(*tokens as f64)
            ),
        }
    }
}

/// `text` with `edit` applied. Teacher sizes join `[teachers] sizes` (or become a
/// `[[teachers.models]]` entry when the file lists models one by one); a seed joins
/// `[students] seed` when the students have their own seeds, else the sweep's `seed` (teachers
/// keep training on the first seed only, so no teacher is retrained).
pub fn apply(text: &str, edit: Edit) -> Result<String, SuggestError> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| SuggestError::Edit(e.to_string()))?;
    match edit {
        Edit::AddTeacher { target } => add_teacher(&mut doc, target)?,
        Edit::AddSeed { seed } => add_seed(&mut doc, seed)?,
        Edit::AddStudentBudget { tokens } => add_student_budget(&mut doc, tokens)?,
    }
    Ok(doc.to_string())
}

fn add_teacher(doc: &mut DocumentMut, target: u64) -> Result<(), SuggestError> {
    let teachers = doc
        .get_mut("teachers")
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| SuggestError::Edit("the sweep file has no [teachers] table".into()))?;
    if let Some(sizes) = teachers.get_mut("sizes").and_then(Item::as_array_mut) {
        sizes.push(target.to_string());
        return Ok(());
    }
    let models = teachers
        .entry("models")
        .or_insert(Item::ArrayOfTables(Default::default()));
    let Some(models) = models.as_array_of_tables_mut() else {
        return Err(SuggestError::Edit(
            "[teachers] models is not a list of [[teachers.models]] tables".into(),
        ));
    };
    let mut entry = Table::new();
    entry["size"] = value(target.to_string());
    models.push(entry);
    Ok(())
}

fn add_student_budget(doc: &mut DocumentMut, tokens: u64) -> Result<(), SuggestError> {
    let slot = doc
        .get_mut("students")
        .and_then(|s| s.get_mut("tokens"))
        .ok_or_else(|| SuggestError::Edit("the sweep file has no [students] tokens".into()))?;
    let tokens = tokens.to_string();
    match slot.as_value_mut() {
        Some(Value::Array(a)) => a.push(tokens),
        Some(one @ (Value::String(_) | Value::Integer(_))) => {
            let mut first = one.clone();
            first.decor_mut().clear();
            let mut a = Array::new();
            a.push(first);
            a.push(tokens);
            *slot = value(a);
        }
        _ => {
            return Err(SuggestError::Edit(
                "[students] tokens is neither a budget nor a list of budgets".into(),
            ));
        }
    }
    Ok(())
}

fn add_seed(doc: &mut DocumentMut, seed: u64) -> Result<(), SuggestError> {
    let students_own = doc.get("students").and_then(|s| s.get("seed")).is_some();
    let slot = if students_own {
        doc.get_mut("students")
            .and_then(|s| s.get_mut("seed"))
            .ok_or_else(|| SuggestError::Edit("[students] seed vanished".into()))?
    } else {
        doc.entry("seed").or_insert(value(1))
    };
    let seed = i64::try_from(seed).map_err(|_| SuggestError::Edit(format!("seed {seed}")))?;
    match slot.as_value_mut() {
        Some(Value::Array(a)) => a.push(seed),
        Some(Value::Integer(first)) => {
            let mut a = Array::new();
            a.push(*first.value());
            a.push(seed);
            *slot = value(a);
        }
        _ => {
            return Err(SuggestError::Edit(
                "the sweep's `seed` is neither a number nor a list of numbers".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"# my sweep
name = "gap"
seed = 1

[teachers]
sizes = ["5K", "20K"] # two teachers
tokens = ["400K"]

[students]
sizes = ["10K"]
tokens = ["200K"]
"#;

    #[test]
    fn edits_keep_comments_and_join_the_right_lists() {
        let t = apply(FILE, Edit::AddTeacher { target: 80_000 }).unwrap();
        assert!(
            t.contains(r#"sizes = ["5K", "20K", "80000"] # two teachers"#),
            "{t}"
        );
        assert!(t.starts_with("# my sweep"));
        let s = apply(&t, Edit::AddSeed { seed: 2 }).unwrap();
        assert!(s.contains("seed = [1, 2]"), "{s}");
        let s = apply(&s, Edit::AddSeed { seed: 3 }).unwrap();
        assert!(s.contains("seed = [1, 2, 3]"), "{s}");
        let own = FILE.replace("sizes = [\"10K\"]", "sizes = [\"10K\"]\nseed = [4]");
        let s = apply(&own, Edit::AddSeed { seed: 5 }).unwrap();
        assert!(
            s.contains("seed = [4, 5]") && s.contains("seed = 1\n"),
            "{s}"
        );
    }

    #[test]
    fn teachers_listed_one_by_one_gain_an_entry() {
        let file = "name = \"x\"\n[teachers]\ntokens = [\"1M\"]\n[[teachers.models]]\nsize = \"5K\"\n[students]\nsizes = [\"1K\"]\ntokens = [\"1M\"]\n";
        let t = apply(file, Edit::AddTeacher { target: 9000 }).unwrap();
        let doc: DocumentMut = t.parse().unwrap();
        let models = doc["teachers"]["models"].as_array_of_tables().unwrap();
        assert_eq!(models.len(), 2);
        assert_eq!(models.get(1).unwrap()["size"].as_str(), Some("9000"));
    }

    #[test]
    fn a_longer_student_budget_joins_the_budgets() {
        let t = apply(FILE, Edit::AddStudentBudget { tokens: 2_000_000 }).unwrap();
        assert!(t.contains(r#"tokens = ["200K", "2000000"]"#), "{t}");
        let one = FILE.replace("tokens = [\"200K\"]\n", "tokens = \"200K\"\n");
        let t = apply(&one, Edit::AddStudentBudget { tokens: 400_000 }).unwrap();
        assert!(t.contains(r#"tokens = ["200K", "400000"]"#), "{t}");
    }
}
