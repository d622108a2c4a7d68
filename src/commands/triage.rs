//! `pdsweep triage`: the sweep's finished teachers (trained and released, of any tokenizer)
//! ranked for a student by how far their held-out bits per byte lie from an optimal teacher
//! loss, before distilling from them; checked against the gains where the sweep distilled.

use std::path::PathBuf;

use pdsweep::fit::{
    Beyond, BudgetComparison, CapacityGap, Optimum, RankedTeacher, RankingCheck, Role,
    SCOPE_CAPACITY_GAP, TriageError, TriageTarget, check_ranking, finished_runs, nats_per_bpb,
    rank, stored_fits,
};
use pdsweep::plan::RunKind;
use pdsweep::spec::units::{format_count, parse_count};
use pdsweep::store::SweepDb;

use super::UsageError;
use super::fit::{FitTarget, locate_db};

/// Bootstrap resamples of the ranking check's interval.
const CHECK_RESAMPLES: usize = 1000;

/// Options of `pdsweep triage`.
#[derive(Debug, Clone)]
pub struct TriageCommand {
    /// The sweep whose finished teachers are the candidates.
    pub target: FitTarget,
    /// Results folder.
    pub results: PathBuf,
    /// The student's size as written (a model label of the sweep, or a count).
    pub student: String,
    /// The optimal teacher as `BPB` or `BPB:LO:HI`, given by the user.
    pub optimal_bpb: Option<String>,
    /// The sweep (or database) whose fitted optimum to use (default: the candidates' own).
    pub optimum_from: Option<FitTarget>,
    /// JSON output.
    pub json: bool,
}

/// Bootstrap resamples of the pooled curve of a teacher-budget sweep's target.
const POOLED_RESAMPLES: usize = 1000;

/// For a student whose teachers trained at several budgets (`near`: its capacity-gap groups,
/// one per budget): the interior optimum of student loss against teacher loss over every
/// budget's teachers together, converted to bits per byte. `None` when the student has fewer
/// than two budgets or the pooled curve has no interior optimum.
///
/// One budget's optimum can be the flat top of what that budget reaches (the teacher-budget
/// reference's 1M-token teachers never get near the others' optimum), with a narrow interval
/// that is not the student's optimum; the pooled curve sees every teacher loss the sweep made.
fn pooled_target(
    db: &SweepDb,
    near: &[&CapacityGap],
    path: &std::path::Path,
) -> anyhow::Result<Option<TriageTarget>> {
    let Some(comparison) = BudgetComparison::of_student(near, POOLED_RESAMPLES, 1) else {
        return Ok(None);
    };
    let Optimum::Interior { at, ci, .. } = comparison.pooled_by_teacher_loss.optimum else {
        return Ok(None);
    };
    let Some(k) = student_nats_per_bpb(db, comparison.student_params)? else {
        return Ok(None);
    };
    Ok(Some(TriageTarget {
        bpb: at / k,
        ci: ci.map(|[lo, hi]| [lo / k, hi / k]),
        source: format!(
            "the fitted optimal teacher loss over every budget's teachers, {at:.4} nats/token, of student {} on {} tokens, teachers at {} budgets, in {}",
            format_count(comparison.student_params),
            format_count(comparison.student_tokens),
            comparison.budgets.len(),
            path.display()
        ),
        beyond: None,
    }))
}

/// Nats per token of one bit per byte for the students (or baselines) of `params` parameters.
fn student_nats_per_bpb(db: &SweepDb, params: f64) -> anyhow::Result<Option<f64>> {
    Ok(finished_runs(db)?
        .iter()
        .filter(|r| matches!(r.kind, Role::Student | Role::Baseline) && r.params == params)
        .find_map(|r| nats_per_bpb(r.loss, r.bpb)))
}

/// Runs `pdsweep triage`.
pub fn triage(cmd: TriageCommand) -> anyhow::Result<()> {
    let db_path = locate_db(&cmd.target, &cmd.results)?;
    let db = SweepDb::open(&db_path)?;
    let runs = finished_runs(&db)?;
    let student = student_params(&db, &cmd.student)?;
    let target = match &cmd.optimal_bpb {
        Some(text) => parse_target(text)?,
        None => {
            let from = cmd.optimum_from.as_ref().unwrap_or(&cmd.target);
            let from_path = locate_db(from, &cmd.results)?;
            fitted_target(&SweepDb::open(&from_path)?, student, &from_path)?
        }
    };
    let names: std::collections::HashMap<String, String> = db
        .runs()?
        .into_iter()
        .map(|r| (r.id.to_string(), r.name))
        .collect();
    let ranked = rank(&runs, &target).map_err(|e| match e {
        TriageError::NotByteScorable { teacher } => TriageError::NotByteScorable {
            teacher: names.get(&teacher).cloned().unwrap_or(teacher),
        },
        other => other,
    })?;
    let check = check_ranking(&ranked, &runs, student, CHECK_RESAMPLES, 1);
    if cmd.json {
        let out = serde_json::json!({
            "student_params": student, "target": target, "teachers": ranked, "check": check,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!(
            "{}",
            render(student, &target, &ranked, check.as_ref(), &names)
        );
    }
    Ok(())
}

/// The student's non-embedding parameters: a model label of the sweep (`10K`) names its exact
/// size; otherwise the count as written.
fn student_params(db: &SweepDb, text: &str) -> anyhow::Result<f64> {
    for r in db.runs()? {
        let config: serde_json::Value = serde_json::from_str(&r.config_json).unwrap_or_default();
        let is_student = matches!(r.kind, RunKind::Student | RunKind::Baseline);
        if is_student && config["model"]["label"].as_str() == Some(text) {
            return Ok(r.params_non_embedding as f64);
        }
    }
    Ok(parse_count(text).map_err(|e| UsageError(format!("--student: {e}")))? as f64)
}

/// `2.48` or `2.48:2.45:2.51`.
fn parse_target(text: &str) -> Result<TriageTarget, UsageError> {
    let bad = || {
        UsageError(format!(
            "--optimal-bpb `{text}`: expected bits per byte, `BPB` or `BPB:LO:HI` (e.g. `2.48:2.45:2.51`)"
        ))
    };
    let parts: Vec<f64> = text
        .split(':')
        .map(|p| p.trim().parse::<f64>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if parts.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return Err(bad());
    }
    match parts[..] {
        [bpb] => Ok(TriageTarget {
            bpb,
            ci: None,
            source: "given with --optimal-bpb".into(),
            beyond: None,
        }),
        [bpb, lo, hi] if lo <= bpb && bpb <= hi => Ok(TriageTarget {
            bpb,
            ci: Some([lo, hi]),
            source: "given with --optimal-bpb".into(),
            beyond: None,
        }),
        _ => Err(bad()),
    }
}

/// The optimal teacher loss of the stored capacity-gap fits of `db` for the student size
/// nearest `student` (by log size): the interior optimum against teacher loss with the
/// narrowest interval (one group per teacher budget when the sweep has several), in bits per
/// byte through the nats per bit-per-byte of the sweep's students.
fn fitted_target(
    db: &SweepDb,
    student: f64,
    path: &std::path::Path,
) -> anyhow::Result<TriageTarget> {
    let gaps: Vec<CapacityGap> = stored_fits(db)?
        .iter()
        .filter(|f| f.scope == SCOPE_CAPACITY_GAP)
        .filter_map(|f| f.as_gap())
        .collect();
    let hint = "run `pdsweep fit` on a sweep that distilled students of about this size, or give the target with `--optimal-bpb BPB[:LO:HI]`";
    let nearest = gaps
        .iter()
        .map(|g| (g.student_params / student).ln().abs())
        .fold(f64::INFINITY, f64::min);
    let near: Vec<&CapacityGap> = gaps
        .iter()
        .filter(|g| ((g.student_params / student).ln().abs() - nearest).abs() < 1e-9)
        .collect();
    if let Some(target) = pooled_target(db, &near, path)? {
        return Ok(target);
    }
    let best = near
        .iter()
        .copied()
        .filter_map(|g| match &g.by_teacher_loss.optimum {
            Optimum::Interior { at, ci, .. } => Some((g, *at, *ci, None)),
            // at the edge of the grid: the optimum is there or beyond it
            Optimum::Boundary { at, edge } => {
                let side = match edge.as_str() {
                    "smallest" => Beyond::Stronger,
                    _ => Beyond::Weaker,
                };
                Some((g, *at, None, Some(side)))
            }
            _ => None,
        })
        // an interior optimum before an edge, then the narrowest interval
        .min_by(|a, b| {
            (a.3.is_some(), width(a.2)).partial_cmp(&(b.3.is_some(), width(b.2))).unwrap_or(std::cmp::Ordering::Equal)
        })
        .ok_or_else(|| {
            UsageError(format!(
                "{}: no capacity-gap fit that locates an optimal teacher loss (inside or at the edge of its grid) for a student near {}\n\nhint: {hint}",
                path.display(),
                format_count(student)
            ))
        })?;
    let (g, at, ci, beyond) = best;
    let k = student_nats_per_bpb(db, g.student_params)?.ok_or_else(|| {
            UsageError(format!(
                "{}: its students have no bits per byte to convert the optimal teacher loss with\n\nhint: {hint}",
                path.display()
            ))
        })?;
    let budget = g.teacher_tokens.map_or(String::new(), |d| {
        format!(", teachers on {} tokens", format_count(d))
    });
    Ok(TriageTarget {
        bpb: at / k,
        ci: ci.map(|[lo, hi]| [lo / k, hi / k]),
        source: format!(
            "{} of student {} on {} tokens{budget} in {}",
            match beyond {
                None => format!("the fitted optimal teacher loss, {at:.4} nats/token,"),
                Some(Beyond::Stronger) => format!(
                    "the strongest teacher's loss, {at:.4} nats/token: the fit puts the optimum at the edge of the grid, there or at stronger teachers,"
                ),
                Some(Beyond::Weaker) => format!(
                    "the weakest teacher's loss, {at:.4} nats/token: the fit puts the optimum at the edge of the grid, there or at weaker teachers,"
                ),
            },
            format_count(g.student_params),
            format_count(g.student_tokens),
            path.display()
        ),
        beyond,
    })
}

fn width(ci: Option<[f64; 2]>) -> f64 {
    ci.map_or(f64::INFINITY, |[lo, hi]| hi - lo)
}

/// The ranking as text.
fn render(
    student: f64,
    target: &TriageTarget,
    ranked: &[RankedTeacher],
    check: Option<&RankingCheck>,
    names: &std::collections::HashMap<String, String>,
) -> String {
    let interval = target
        .ci
        .map_or(String::new(), |[lo, hi]| format!(" [{lo:.4}, {hi:.4}]"));
    let side = match target.beyond {
        None => "",
        Some(Beyond::Stronger) => " or stronger",
        Some(Beyond::Weaker) => " or weaker",
    };
    let mut out = format!(
        "teachers for a student of {}, ranked by distance from the optimal teacher: {:.4} bits/byte{side}{interval}\n  ({})\n",
        format_count(student),
        target.bpb,
        target.source
    );
    out += "  rank  teacher                                  params      kind       bits/byte   distance   in interval\n";
    for (i, t) in ranked.iter().enumerate() {
        out += &format!(
            "  {:>4}  {:<40} {:>7}  {:<9}  {:>9.4}  {:>9.4}   {}\n",
            i + 1,
            names.get(&t.id).unwrap_or(&t.id),
            format_count(t.params),
            if t.pretrained { "released" } else { "trained" },
            t.bpb,
            t.distance,
            t.inside.map_or("-", |b| if b { "yes" } else { "no" })
        );
    }
    match check {
        Some(c) => {
            out += &format!(
                "check against distillation: Spearman ρ = {:.2}{} between closeness to the target and the measured gain, over {} teachers and {} seed(s) of student {}\n",
                c.spearman,
                c.ci.map_or(String::new(), |[lo, hi]| format!(
                    " (95% interval from resampling seeds [{lo:.2}, {hi:.2}])"
                )),
                c.teachers,
                c.seeds,
                format_count(c.student_params)
            );
        }
        None => {
            out += "no check against distillation: the sweep has distilled this student from fewer than 3 of these teachers\n";
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_or_say_the_form() {
        let t = parse_target("2.48:2.45:2.51").unwrap();
        assert_eq!((t.bpb, t.ci), (2.48, Some([2.45, 2.51])));
        assert_eq!(parse_target("2.5").unwrap().ci, None);
        for bad in ["", "x", "2.5:2.6:2.7", "-1", "2:1"] {
            let e = pdsweep::error::chain(&parse_target(bad).unwrap_err());
            assert!(e.contains("BPB:LO:HI"), "{bad}: {e}");
        }
    }
}
