//! `pdsweep recommend`: the optimal teacher for a student, from a sweep's stored fits or from
//! Busbridge et al.'s published law.

use std::path::PathBuf;

use pdsweep::fit::{
    RecommendQuery, Recommendation, recommend_from_fits, recommend_published, stored_fits,
};
use pdsweep::spec::units::{format_count, parse_count};
use pdsweep::store::SweepDb;

use super::UsageError;
use super::fit::{FitTarget, locate_db};

/// Options of `pdsweep recommend`.
#[derive(Debug, Clone)]
pub struct RecommendCommand {
    /// The sweep (file or database); `None` with `published`.
    pub target: Option<FitTarget>,
    /// Results folder.
    pub results: PathBuf,
    /// Use Busbridge et al.'s published coefficients.
    pub published: bool,
    /// N_S as written.
    pub student: String,
    /// D_S as written.
    pub tokens: Option<String>,
    /// D_T as written.
    pub teacher_tokens: Option<String>,
    /// Part of the distillation config key to use.
    pub config: Option<String>,
    /// JSON output.
    pub json: bool,
}

fn count(flag: &str, text: &str) -> Result<f64, UsageError> {
    parse_count(text)
        .map(|v| v as f64)
        .map_err(|e| UsageError(format!("{flag}: {e}")))
}

/// Runs `pdsweep recommend`.
pub fn recommend(cmd: RecommendCommand) -> anyhow::Result<()> {
    let n_s = count("--student", &cmd.student)?;
    let d_s = cmd
        .tokens
        .as_deref()
        .map(|t| count("--tokens", t))
        .transpose()?;
    let d_t = cmd
        .teacher_tokens
        .as_deref()
        .map(|t| count("--teacher-tokens", t))
        .transpose()?;
    let rec = if cmd.published {
        let d_s = d_s.ok_or_else(|| {
            UsageError(
                "`--law busbridge2025` needs the student's budget\n\nhint: `--tokens 100B`".into(),
            )
        })?;
        recommend_published(n_s, d_s, d_t)?
    } else {
        let target = cmd.target.clone().ok_or_else(|| {
            UsageError("give a sweep file, `--db PATH`, or `--law busbridge2025`".into())
        })?;
        let db_path = locate_db(&target, &cmd.results)?;
        let db = SweepDb::open(&db_path)?;
        let fits = stored_fits(&db)?;
        let (student_params, student_input, vocab) = resolve_student(&db, &cmd.student, n_s)?;
        recommend_from_fits(
            &fits,
            &RecommendQuery {
                source: db_path.display().to_string(),
                student_params,
                student_input,
                student_tokens: d_s,
                teacher_tokens: d_t,
                config: cmd.config.clone(),
                vocab,
            },
        )?
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&rec)?);
    } else {
        print!("{}", text(&rec));
    }
    Ok(())
}

/// The exact non-embedding size N of `--student` on a sweep: a size the sweep planned a model for
/// (its target, `30K`, or its label) is that model's real N; any other number is taken as N itself.
///
/// Also the sweep's vocabulary size, for the ln V bound on losses.
fn resolve_student(
    db: &SweepDb,
    text: &str,
    value: f64,
) -> anyhow::Result<(f64, Option<String>, Option<u64>)> {
    let mut matched: Option<(String, f64)> = None;
    let mut vocab = None;
    for r in db.runs()? {
        let Ok(config) = serde_json::from_str::<serde_json::Value>(&r.config_json) else {
            continue;
        };
        let model = &config["model"];
        vocab = vocab.or(model["shape"]["vocab"].as_u64());
        let label = model["label"].as_str().unwrap_or("");
        let target = model["target"].as_f64();
        if (label == text || target == Some(value)) && r.params_non_embedding > 0 {
            matched = Some((label.to_string(), r.params_non_embedding as f64));
        }
    }
    Ok(match matched {
        Some((label, n)) => (
            n,
            Some(format!(
                "the sweep's `{label}` model: N = {} non-embedding parameters",
                group_digits(n)
            )),
            vocab,
        ),
        None => (
            value,
            Some(format!(
                "N = {} non-embedding parameters (not a size the sweep planned)",
                group_digits(value)
            )),
            vocab,
        ),
    })
}

/// 27792 → `27,792`.
fn group_digits(v: f64) -> String {
    let digits = format!("{:.0}", v.round());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn text(r: &Recommendation) -> String {
    let mut out = heading(r);
    out += &teacher_lines(r);
    out += &student_lines(r);
    if r.extrapolation.is_empty() {
        out += "  within the ranges measured\n";
    }
    for n in &r.notes {
        out += &format!("  note: {n}\n");
    }
    out
}

/// ` (95% CI lo – hi)` with each end shown by `f`, or nothing without an interval.
fn ci(c: Option<[f64; 2]>, f: &dyn Fn(f64) -> String) -> String {
    c.map_or(String::new(), |[lo, hi]| {
        format!(" (95% CI {} – {})", f(lo), f(hi))
    })
}

/// A loss to four decimals.
fn loss(x: f64) -> String {
    format!("{x:.4}")
}

/// A quantity with its refusal or warning on the same line.
fn line(r: &Recommendation, name: &str, field: &str, value: Option<String>) -> String {
    let problem = r.problems.get(field);
    let shown = match (value, problem) {
        (Some(v), Some(p)) => format!("{v} — REFUSED: {p}"),
        (Some(v), None) => v,
        (None, Some(p)) => format!("none: {p}"),
        (None, None) => "-".to_string(),
    };
    format!("  {name:<36}{shown}\n")
}

/// The student and where the answer comes from: its extrapolations, how its size was read,
/// the method and what the sweep measured.
fn heading(r: &Recommendation) -> String {
    let mut out = format!(
        "student {} on {} tokens ({}{})\n",
        format_count(r.student_params),
        format_count(r.student_tokens),
        r.source,
        r.config
            .as_ref()
            .map_or(String::new(), |c| format!(", {c}"))
    );
    for e in &r.extrapolation {
        out += &format!("  EXTRAPOLATION: {e}\n");
    }
    if let Some(input) = &r.student_input {
        out += &format!("  student size: {input}\n");
    }
    if !r.method.is_empty() {
        out += &format!("  answer from: {}\n", r.method);
    }
    for m in &r.measured {
        out += &format!("  measured: {m}\n");
    }
    out
}

/// The optimal teacher: its loss, its size and the cost of training it.
fn teacher_lines(r: &Recommendation) -> String {
    let mut out = line(
        r,
        "optimal teacher loss L_T*:",
        "teacher_loss",
        Some(format!(
            "{}{}",
            loss(r.teacher_loss),
            ci(r.teacher_loss_ci, &loss)
        ))
        .filter(|_| r.teacher_loss.is_finite()),
    );
    out += &line(
        r,
        "optimal teacher size N_T*:",
        "teacher_params",
        r.teacher_params.map(|n| {
            format!(
                "{}{}{}",
                format_count(n),
                ci(r.teacher_params_ci, &|x| format_count(x)),
                r.teacher_tokens
                    .map_or(String::new(), |d| format!(" on {} tokens", format_count(d)))
            )
        }),
    );
    if r.teacher_params.is_some() {
        if r.teacher_in_sweep == Some(true) {
            out += "  the sweep already has a teacher of about that size\n";
        } else {
            out += &line(
                r,
                "cost of training that teacher:",
                "teacher_flops",
                r.teacher_flops.map(|f| {
                    format!(
                        "{f:.3e} FLOPs (6·N·D){}",
                        if r.teacher_in_sweep == Some(false) {
                            "; the sweep has no teacher of that size"
                        } else {
                            ""
                        }
                    )
                }),
            );
        }
    }
    out
}

/// The student's losses without and with the teacher, the gain, and the empirical T*(S).
fn student_lines(r: &Recommendation) -> String {
    let mut out = line(
        r,
        "supervised student loss L̃_S:",
        "supervised_loss",
        Some(loss(r.supervised_loss)),
    );
    out += &line(
        r,
        "distilled student loss L_S at L_T*:",
        "student_loss",
        Some(loss(r.student_loss)).filter(|_| r.student_loss.is_finite()),
    );
    out += &line(
        r,
        "gain over no teacher:",
        "gain",
        Some(format!(
            "{:+.4} nats{}",
            r.gain,
            if r.gain <= 0.0 {
                " (distillation does not help here)"
            } else {
                ""
            }
        ))
        .filter(|_| r.gain.is_finite()),
    );
    if let Some((form, t)) = &r.tstar_empirical {
        out += &line(
            r,
            &format!("empirical T*(S) ({form} fit):"),
            "tstar_empirical",
            Some(format_count(*t)).filter(|_| *t > 0.0),
        );
    }
    out
}
