//! The priors of `plan`'s design checks: T*(S), a supervised law and each student size's
//! optimal teacher loss from the sweep's own stored fits when it has them (`pdsweep fit`), else
//! the sweep file's `[prior] teacher_ratio`, else the rule of thumb T* ≈ 2.5·S and no loss law.

use pdsweep::fit::{BudgetComparison, CapacityGap, Optimum, StoredFit, stored_fits};
use pdsweep::plan::{LossPrior, Priors, TStarPrior, TeacherLossPrior};
use pdsweep::spec::Sweep;
use pdsweep::store::SweepDb;

/// The priors for `sweep`, whose database is `db` (if it exists yet): its stored fits first,
/// then its `[prior]`, then the defaults.
pub fn priors(sweep: &Sweep, db: Option<&SweepDb>) -> Priors {
    let mut priors = Priors::default();
    let prior = &sweep.file.prior;
    if let Some(ratio) = prior.teacher_ratio {
        let from = prior
            .source
            .as_deref()
            .unwrap_or("the sweep file's `[prior]`");
        priors.tstar = TStarPrior::Linear {
            ratio: ratio.get(),
            source: format!(
                "T* ≈ {}·S, {from}, until this sweep's own fits replace it",
                ratio.get()
            ),
        };
    }
    let Some(fits) = db.and_then(|db| stored_fits(db).ok()) else {
        return priors;
    };
    let number = |v: &serde_json::Value, key: &str| v.get(key).and_then(|x| x.as_f64());
    for fit in &fits {
        match (fit.scope.as_str(), fit.law.as_str()) {
            ("tstar", _) => {
                let power = fit.params.get("power").and_then(|p| p.as_array());
                if let Some([c, k]) = power
                    .map(|p| p.iter().filter_map(|x| x.as_f64()).collect::<Vec<_>>())
                    .as_deref()
                    && c.is_finite()
                    && *c > 0.0
                {
                    priors.tstar = TStarPrior::Power {
                        c: *c,
                        k: *k,
                        source: format!("this sweep's fitted T* = {c:.3}·S^{k:.2}"),
                    };
                }
            }
            ("capacity_gap", _) => {
                let Some(gap) = fit.as_gap() else { continue };
                if let Optimum::Interior { at, ci, .. } = gap.by_teacher_loss.optimum {
                    // one per student size: of several (a group per teacher budget, or per
                    // student budget) the one with the narrowest interval
                    let width = |ci: Option<[f64; 2]>| ci.map_or(f64::INFINITY, |[a, b]| b - a);
                    let narrower = priors
                        .teacher_loss
                        .iter()
                        .filter(|p| p.student_params == gap.student_params)
                        .all(|p| width(ci) < width(p.ci));
                    if !narrower {
                        continue;
                    }
                    priors
                        .teacher_loss
                        .retain(|p| p.student_params != gap.student_params);
                    priors.teacher_loss.push(TeacherLossPrior {
                        student_params: gap.student_params,
                        loss: at,
                        ci,
                        source: "this sweep's capacity-gap fit".into(),
                    });
                }
            }
            ("supervised", "chinchilla") => {
                let p = &fit.params;
                if let (Some(e), Some(a), Some(b), Some(alpha), Some(beta)) = (
                    number(p, "E"),
                    number(p, "A"),
                    number(p, "B"),
                    number(p, "alpha"),
                    number(p, "beta"),
                ) {
                    priors.loss = Some(LossPrior {
                        params: [e, a, b, alpha, beta],
                        source: "this sweep's fitted supervised law".into(),
                    });
                }
            }
            _ => {}
        }
    }
    pool_budgets(&mut priors, &fits);
    priors
}

/// Bootstrap resamples of a pooled curve in `plan`'s priors (fewer than `fit`'s: a prior).
const POOLED_RESAMPLES: usize = 200;

/// For each student whose teachers trained at several budgets: the optimum over every
/// budget's teachers together replaces the per-budget one. One budget's own optimum can be the
/// flat top of what that budget reaches (narrow, and not the student's optimum).
fn pool_budgets(priors: &mut Priors, fits: &[StoredFit]) {
    let gaps: Vec<CapacityGap> = fits
        .iter()
        .filter(|f| f.scope == "capacity_gap")
        .filter_map(|f| f.as_gap())
        .filter(|g| g.teacher_tokens.is_some())
        .collect();
    let mut students: Vec<f64> = gaps.iter().map(|g| g.student_params).collect();
    students.sort_by(f64::total_cmp);
    students.dedup();
    for s in students {
        let group: Vec<&CapacityGap> = gaps.iter().filter(|g| g.student_params == s).collect();
        let Some(c) = BudgetComparison::of_student(&group, POOLED_RESAMPLES, 1) else {
            continue;
        };
        if let Optimum::Interior { at, ci, .. } = c.pooled_by_teacher_loss.optimum {
            priors.teacher_loss.retain(|p| p.student_params != s);
            priors.teacher_loss.push(TeacherLossPrior {
                student_params: s,
                loss: at,
                ci,
                source: "this sweep's capacity-gap fit over every teacher budget".into(),
            });
        }
    }
}
