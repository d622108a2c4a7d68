//! `pdsweep recommend`: the optimal teacher for a student, from a sweep's stored fits or from
//! Busbridge et al.'s published law.

use std::path::PathBuf;

use pdsweep::fit::{Recommendation, recommend_from_fits, recommend_published, stored_fits};
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
        recommend_from_fits(
            &fits,
            &db_path.display().to_string(),
            n_s,
            d_s,
            d_t,
            cmd.config.as_deref(),
        )?
    };
    if cmd.json {
        println!("{}", serde_json::to_string_pretty(&rec)?);
    } else {
        print!("{}", text(&rec));
    }
    Ok(())
}

fn text(r: &Recommendation) -> String {
    let ci = |c: Option<[f64; 2]>, f: &dyn Fn(f64) -> String| {
        c.map_or(String::new(), |[lo, hi]| {
            format!(" (95% CI {} – {})", f(lo), f(hi))
        })
    };
    let loss = |x: f64| format!("{x:.4}");
    let mut out = format!(
        "student {} on {} tokens ({}{})\n",
        format_count(r.student_params),
        format_count(r.student_tokens),
        r.source,
        r.config
            .as_ref()
            .map_or(String::new(), |c| format!(", {c}"))
    );
    out += &format!(
        "  optimal teacher loss L_T*:        {}{}\n",
        loss(r.teacher_loss),
        ci(r.teacher_loss_ci, &loss)
    );
    match (r.teacher_params, r.teacher_tokens) {
        (Some(n), Some(d)) => {
            out += &format!(
                "  optimal teacher size N_T*:        {}{} on {} tokens\n",
                format_count(n),
                ci(r.teacher_params_ci, &|x| format_count(x)),
                format_count(d)
            );
            if r.teacher_in_sweep != Some(true) {
                out += &format!(
                    "  cost of training that teacher:    {:.3e} FLOPs (6·N·D){}\n",
                    r.teacher_flops.unwrap_or(f64::NAN),
                    if r.teacher_in_sweep == Some(false) {
                        "; the sweep has no teacher of that size"
                    } else {
                        ""
                    }
                );
            } else {
                out += "  the sweep already has a teacher of about that size\n";
            }
        }
        _ => out += "  optimal teacher size N_T*:        - (give --teacher-tokens)\n",
    }
    out += &format!(
        "  supervised student loss L̃_S:      {}\n",
        loss(r.supervised_loss)
    );
    out += &format!(
        "  distilled student loss L_S at L_T*: {}\n",
        loss(r.student_loss)
    );
    out += &format!(
        "  gain over no teacher:             {:+.4} nats{}\n",
        r.gain,
        if r.gain <= 0.0 {
            " (distillation does not help here)"
        } else {
            ""
        }
    );
    if let Some((form, t)) = &r.tstar_empirical {
        out += &format!(
            "  empirical T*(S) ({form} fit):      {}\n",
            format_count(*t)
        );
    }
    if r.extrapolation.is_empty() {
        out += "  within the ranges measured\n";
    } else {
        for e in &r.extrapolation {
            out += &format!("  EXTRAPOLATION: {e}\n");
        }
    }
    for n in &r.notes {
        out += &format!("  note: {n}\n");
    }
    out
}
