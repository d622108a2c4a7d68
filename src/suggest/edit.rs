//! Edits of a sweep file that `suggest` proposes, applied to its text with `toml_edit` so the
//! researcher's comments, order and formatting survive: a teacher size added to the grid, a
//! seed added to every student (and baseline) or to one `[[students.models]]` entry's, a longer
//! student budget.

use std::fmt;

use toml_edit::{Array, DocumentMut, Item, Table, Value, value};

use super::error::SuggestError;

/// One change to the sweep file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Edit {
    /// Train one more teacher of about this many non-embedding parameters.
    AddTeacher {
        /// Target size, as a sweep file writes it.
        target: u64,
    },
    /// Repeat every student and baseline with `count` more seeds (`seed`, `seed + 1`, …).
    AddSeed {
        /// The first new seed.
        seed: u64,
        /// How many seeds, one after the other.
        count: u64,
    },
    /// Repeat the students and baselines of one `[[students.models]]` entry with `count` more
    /// seeds (replicates where the noise is widest, without paying for the other sizes).
    AddStudentSeed {
        /// Index of the entry in `[[students.models]]`.
        entry: usize,
        /// The first new seed.
        seed: u64,
        /// How many seeds, one after the other.
        count: u64,
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
            Edit::AddSeed { seed, count } => {
                write!(f, "{} for students and baselines", seeds(*seed, *count))
            }
            Edit::AddStudentSeed { entry, seed, count } => write!(
                f,
                "{} for the students and baselines of [[students.models]] #{}",
                seeds(*seed, *count),
                entry + 1
            ),
            Edit::AddStudentBudget { tokens } => write!(
                f,
                "students and baselines on {} tokens",
                crate::spec::units::format_count(*tokens as f64)
            ),
        }
    }
}

/// "seed 7" or "seeds 7–9".
fn seeds(first: u64, count: u64) -> String {
    if count <= 1 {
        format!("seed {first}")
    } else {
        format!("seeds {first}–{}", first + count - 1)
    }
}

/// `text` with `edit` applied.
///
/// Teacher sizes join `[teachers] sizes` (or become a `[[teachers.models]]` entry when the file
/// lists models one by one); a seed joins `[students] seed` when the students have their own seeds,
/// else the sweep's `seed` (teachers keep training on the first seed only, so no teacher is
/// retrained), and every `[[students.models]]` entry with its own `seed` list; a seed for one entry
/// joins its `seed` list, which starts as a copy of the seeds it inherits.
pub fn apply(text: &str, edit: Edit) -> Result<String, SuggestError> {
    let mut doc: DocumentMut = text.parse().map_err(SuggestError::Parse)?;
    match edit {
        Edit::AddTeacher { target } => add_teacher(&mut doc, target)?,
        Edit::AddSeed { seed, count } => {
            for s in seed..seed + count {
                add_seed(&mut doc, s)?;
            }
        }
        Edit::AddStudentSeed { entry, seed, count } => {
            for s in seed..seed + count {
                add_student_seed(&mut doc, entry, s)?;
            }
        }
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

/// The seeds students train with when their entry sets none: `[students] seed`, else the
/// sweep's `seed` (default 1).
pub fn inherited_student_seeds(doc: &DocumentMut) -> Vec<u64> {
    let slot = doc
        .get("students")
        .and_then(|s| s.get("seed"))
        .or_else(|| doc.get("seed"));
    slot.map_or(vec![1], seeds_of)
}

/// The seeds of `[[students.models]]` entries, in order (their own list or the inherited one).
pub fn student_entry_seeds(doc: &DocumentMut) -> Vec<Vec<u64>> {
    let inherited = inherited_student_seeds(doc);
    student_entries(doc)
        .map(|models| {
            models
                .iter()
                .map(|m| m.get("seed").map_or(inherited.clone(), seeds_of))
                .collect()
        })
        .unwrap_or_default()
}

/// What an entry of `[[students.models]]` is called: its `name`, else its `size`.
pub fn student_entry_labels(doc: &DocumentMut) -> Vec<String> {
    student_entries(doc)
        .map(|models| {
            models
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    m.get("name")
                        .or_else(|| m.get("size"))
                        .and_then(|v| {
                            v.as_str()
                                .map(str::to_string)
                                .or_else(|| v.as_integer().map(|n| n.to_string()))
                        })
                        .unwrap_or_else(|| format!("#{}", i + 1))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn student_entries(doc: &DocumentMut) -> Option<&toml_edit::ArrayOfTables> {
    doc.get("students")?.get("models")?.as_array_of_tables()
}

fn seeds_of(item: &Item) -> Vec<u64> {
    match item.as_value() {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_integer().and_then(|n| u64::try_from(n).ok()))
            .collect(),
        Some(Value::Integer(n)) => u64::try_from(*n.value()).ok().into_iter().collect(),
        _ => Vec::new(),
    }
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
    push_seed(slot, seed, "the sweep's `seed`")?;
    // Entries with their own list get the seed too (entries without one inherit it above).
    let lacking: Vec<usize> = student_entries(doc)
        .map(|models| {
            models
                .iter()
                .enumerate()
                .filter(|(_, m)| {
                    m.get("seed")
                        .is_some_and(|own| !seeds_of(own).contains(&seed))
                })
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default();
    for i in lacking {
        add_student_seed(doc, i, seed)?;
    }
    Ok(())
}

fn add_student_seed(doc: &mut DocumentMut, entry: usize, seed: u64) -> Result<(), SuggestError> {
    let inherited = inherited_student_seeds(doc);
    let model = doc
        .get_mut("students")
        .and_then(|s| s.get_mut("models"))
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|m| m.get_mut(entry))
        .ok_or_else(|| {
            SuggestError::Edit(format!(
                "the sweep file has no [[students.models]] entry #{}",
                entry + 1
            ))
        })?;
    if !model.contains_key("seed") {
        let mut a = Array::new();
        for s in inherited {
            a.push(i64::try_from(s).map_err(|_| SuggestError::Edit(format!("seed {s}")))?);
        }
        model["seed"] = value(a);
    }
    let what = format!("[[students.models]] #{} `seed`", entry + 1);
    push_seed(&mut model["seed"], seed, &what)
}

/// Appends `seed` to the seed list at `slot` (a number becomes a list).
fn push_seed(slot: &mut Item, seed: u64, what: &str) -> Result<(), SuggestError> {
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
            return Err(SuggestError::Edit(format!(
                "{what} is neither a number nor a list of numbers"
            )));
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
        let s = apply(&t, Edit::AddSeed { seed: 2, count: 1 }).unwrap();
        assert!(s.contains("seed = [1, 2]"), "{s}");
        let s = apply(&s, Edit::AddSeed { seed: 3, count: 1 }).unwrap();
        assert!(s.contains("seed = [1, 2, 3]"), "{s}");
        let own = FILE.replace("sizes = [\"10K\"]", "sizes = [\"10K\"]\nseed = [4]");
        let s = apply(&own, Edit::AddSeed { seed: 5, count: 1 }).unwrap();
        assert!(
            s.contains("seed = [4, 5]") && s.contains("seed = 1\n"),
            "{s}"
        );
    }

    #[test]
    fn a_seed_for_one_student_entry_copies_the_inherited_seeds_first() {
        let file = "name = \"x\"\nseed = 1\n[teachers]\nsizes = [\"5K\"]\n[students]\nseed = [1, 2]\n[[students.models]]\nsize = \"1K\"\n[[students.models]]\nsize = \"2K\"\n";
        let t = apply(
            file,
            Edit::AddStudentSeed {
                entry: 1,
                seed: 3,
                count: 1,
            },
        )
        .unwrap();
        let doc: DocumentMut = t.parse().unwrap();
        assert_eq!(student_entry_seeds(&doc), vec![vec![1, 2], vec![1, 2, 3]]);
        assert_eq!(student_entry_labels(&doc), vec!["1K", "2K"]);
        // A seed for everyone joins the group's list and the entry's own list, once.
        let t = apply(&t, Edit::AddSeed { seed: 4, count: 1 }).unwrap();
        let doc: DocumentMut = t.parse().unwrap();
        assert_eq!(
            student_entry_seeds(&doc),
            vec![vec![1, 2, 4], vec![1, 2, 3, 4]]
        );
        assert!(
            apply(
                &t,
                Edit::AddStudentSeed {
                    entry: 5,
                    seed: 9,
                    count: 1
                }
            )
            .is_err()
        );
    }

    #[test]
    fn a_block_of_seeds_adds_each_seed_once() {
        let edit = Edit::AddSeed { seed: 2, count: 3 };
        assert_eq!(edit.to_string(), "seeds 2–4 for students and baselines");
        let t = apply(FILE, edit).unwrap();
        assert!(t.contains("seed = [1, 2, 3, 4]"), "{t}");
        let file = "name = \"x\"\nseed = 1\n[teachers]\nsizes = [\"5K\"]\n[[students.models]]\nsize = \"1K\"\n[[students.models]]\nsize = \"2K\"\n";
        let edit = Edit::AddStudentSeed {
            entry: 0,
            seed: 2,
            count: 2,
        };
        assert_eq!(
            edit.to_string(),
            "seeds 2–3 for the students and baselines of [[students.models]] #1"
        );
        let doc: DocumentMut = apply(file, edit).unwrap().parse().unwrap();
        assert_eq!(student_entry_seeds(&doc), vec![vec![1, 2, 3], vec![1]]);
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
