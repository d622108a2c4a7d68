//! A larger student's optimal teacher, predicted before it runs, and the check once it has.
//!
//! From the students of a teacher-budget sweep ([`BudgetComparison`]: each student's optimal
//! teacher in loss, pooled over budgets, and in size at each budget), [`predict_student`]
//! extrapolates to a student size not yet run: the optimal teacher loss, and at each teacher
//! budget the optimal teacher size, each a weighted line in ln S through the measured optima
//! (weights from their bootstrap intervals), its interval from redrawing every measured optimum
//! within its own interval. At each budget it also converts the predicted loss into the size
//! whose teacher reaches that loss on that budget (interpolated between the measured teachers),
//! which is what "the optimal teacher is a loss" predicts for the size.
//!
//! The file is written and committed before the student runs; [`check_student`] then reads the
//! sweep's fit of the new student against it, inside or not, whatever the outcome.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use super::prediction::Provenance;
use crate::fit::{BudgetComparison, CapacityGap, Optimum};

/// The kind tag of a student prediction file (a confirmation round's file has none).
pub(crate) const STUDENT_PREDICTION_KIND: &str = "student";

/// Redraws of the measured optima behind each interval.
const DRAWS: usize = 4000;

/// One measured optimum a prediction extrapolates from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// The measured student's non-embedding parameters.
    pub student_params: f64,
    /// Its optimum (teacher loss in nats per token, or teacher non-embedding parameters).
    pub at: f64,
    /// Its bootstrap interval.
    pub ci: [f64; 2],
}

/// A quantity extrapolated to the new student.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extrapolated {
    /// The prediction.
    pub at: f64,
    /// Its 95 % interval.
    pub interval: [f64; 2],
    /// The slope per e-fold of student size (d at / d ln S; for sizes d ln T* / d ln S); NaN
    /// where there is none (a size read off the teachers of one budget), written as `null`.
    #[serde(deserialize_with = "nan_if_null")]
    pub slope: f64,
    /// The measured optima it comes from.
    pub from: Vec<Anchor>,
}

/// A number that JSON may hold as `null`: serde_json writes NaN so, and a prediction file
/// written with a NaN must read back.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The prediction at one teacher budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetPrediction {
    /// The tokens every teacher of this budget trained on.
    pub teacher_tokens: f64,
    /// The optimal teacher size extrapolated from the measured students' size optima at this
    /// budget (`None` with fewer than two interior optima with intervals).
    pub by_size: Option<Extrapolated>,
    /// The size whose teacher reaches the predicted optimal loss on this budget, with the sizes
    /// reaching the ends of the loss interval (`None` where the loss lies beyond the measured
    /// teachers of this budget).
    pub size_of_loss: Option<Extrapolated>,
}

/// A student prediction file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudentPrediction {
    /// `super::PREDICTION_FORMAT`.
    pub format: u32,
    /// `STUDENT_PREDICTION_KIND`.
    pub kind: String,
    /// What it was made from.
    pub made_from: Provenance,
    /// The new student's non-embedding parameters.
    pub student_params: f64,
    /// Its tokens (those of the measured students).
    pub student_tokens: f64,
    /// The distillation config.
    pub config: String,
    /// The optimal teacher loss (nats per token), from the measured students' pooled optima.
    pub by_loss: Option<Extrapolated>,
    /// Per teacher budget, smallest first.
    pub budgets: Vec<BudgetPrediction>,
}

/// Why no prediction can be made.
#[derive(Debug, thiserror::Error)]
pub enum StudentPredictionError {
    /// The sweep has no student compared across teacher budgets.
    #[error(
        "no student of the sweep has teachers at two budgets or more, so no optimal teacher can be extrapolated\n\nhint: `--student` predicts from a teacher-budget sweep (`[teachers] tokens` with several budgets)"
    )]
    NoComparison,
    /// The new student is one the sweep measured already.
    #[error("a student of {params:.0} parameters is measured already: nothing to predict")]
    Measured {
        /// Its non-embedding parameters.
        params: f64,
    },
}

/// The prediction for a student of `student_params` non-embedding parameters from the sweep's
/// budget comparisons and capacity-gap groups (its teachers), with redraws seeded by `seed`.
pub fn predict_student(
    comparisons: &[BudgetComparison],
    gaps: &[CapacityGap],
    student_params: f64,
    made_from: Provenance,
    seed: u64,
) -> Result<StudentPrediction, StudentPredictionError> {
    let first = comparisons
        .first()
        .ok_or(StudentPredictionError::NoComparison)?;
    let same = |c: &&BudgetComparison| {
        c.config == first.config && c.student_tokens == first.student_tokens
    };
    let measured: Vec<&BudgetComparison> = comparisons.iter().filter(same).collect();
    if measured
        .iter()
        .any(|c| (c.student_params / student_params - 1.0).abs() < 0.02)
    {
        return Err(StudentPredictionError::Measured {
            params: student_params,
        });
    }
    let loss_anchors: Vec<Anchor> = measured
        .iter()
        .filter_map(|c| anchor(c.student_params, &c.pooled_by_teacher_loss.optimum))
        .collect();
    let by_loss = extrapolate(&loss_anchors, student_params, false, seed);
    let mut tokens: Vec<f64> = measured
        .iter()
        .flat_map(|c| c.budgets.iter().map(|b| b.teacher_tokens))
        .collect();
    tokens.sort_by(f64::total_cmp);
    tokens.dedup();
    let budgets = tokens
        .into_iter()
        .map(|d| {
            let anchors: Vec<Anchor> = measured
                .iter()
                .filter_map(|c| {
                    let b = c.budgets.iter().find(|b| b.teacher_tokens == d)?;
                    anchor(c.student_params, &b.by_size)
                })
                .collect();
            let teachers = teachers_at(gaps, &first.config, d);
            BudgetPrediction {
                teacher_tokens: d,
                by_size: extrapolate(&anchors, student_params, true, seed ^ d.to_bits()),
                size_of_loss: by_loss.as_ref().and_then(|l| size_of_loss(l, &teachers)),
            }
        })
        .collect();
    Ok(StudentPrediction {
        format: super::PREDICTION_FORMAT,
        kind: STUDENT_PREDICTION_KIND.into(),
        made_from,
        student_params,
        student_tokens: first.student_tokens,
        config: first.config.clone(),
        by_loss,
        budgets,
    })
}

/// An interior optimum with an interval as an anchor.
fn anchor(student_params: f64, optimum: &Optimum) -> Option<Anchor> {
    match optimum {
        Optimum::Interior {
            at, ci: Some(ci), ..
        } => Some(Anchor {
            student_params,
            at: *at,
            ci: *ci,
        }),
        _ => None,
    }
}

/// The line through `anchors` in ln S (in ln of the optimum when `log`), weighted by the inverse
/// squared half-widths of their intervals, at `student_params`; its interval from `DRAWS` redraws
/// of each anchor, normal within its interval (±1.96 σ), refitted.
///
/// Two anchors at least.
fn extrapolate(
    anchors: &[Anchor],
    student_params: f64,
    log: bool,
    seed: u64,
) -> Option<Extrapolated> {
    let y = |v: f64| if log { v.ln() } else { v };
    let points: Vec<(f64, f64, f64)> = anchors
        .iter()
        .map(|a| {
            let sd = ((y(a.ci[1]) - y(a.ci[0])) / 2.0 / 1.96).max(1e-9);
            (a.student_params.ln(), y(a.at), sd)
        })
        .collect();
    let (x0, back) = (student_params.ln(), |v: f64| if log { v.exp() } else { v });
    let (a, b) = weighted_line(&points)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut draws: Vec<f64> = (0..DRAWS)
        .filter_map(|_| {
            let redrawn: Vec<(f64, f64, f64)> = points
                .iter()
                .map(|&(x, yv, sd)| {
                    let noise = Normal::new(0.0, sd).map_or(0.0, |n| n.sample(&mut rng));
                    (x, yv + noise, sd)
                })
                .collect();
            weighted_line(&redrawn).map(|(a, b)| a + b * x0)
        })
        .collect();
    draws.sort_by(f64::total_cmp);
    let pick = |q: f64| draws[((draws.len() - 1) as f64 * q).round() as usize];
    (!draws.is_empty()).then(|| Extrapolated {
        at: back(a + b * x0),
        interval: [back(pick(0.025)), back(pick(0.975))],
        slope: b,
        from: anchors.to_vec(),
    })
}

/// Weighted least squares `y = a + b x` through `(x, y, sd)`; `None` with fewer than two
/// distinct x.
fn weighted_line(points: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let w: Vec<f64> = points.iter().map(|p| 1.0 / (p.2 * p.2)).collect();
    let sw: f64 = w.iter().sum();
    let mx = points.iter().zip(&w).map(|(p, w)| w * p.0).sum::<f64>() / sw;
    let my = points.iter().zip(&w).map(|(p, w)| w * p.1).sum::<f64>() / sw;
    let sxx: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.0 - mx).powi(2))
        .sum();
    let sxy: f64 = points
        .iter()
        .zip(&w)
        .map(|(p, w)| w * (p.0 - mx) * (p.1 - my))
        .sum();
    let b = sxy / sxx;
    (points.len() >= 2 && sxx > 1e-12 && b.is_finite()).then_some((my - b * mx, b))
}

/// The distinct teachers (non-embedding parameters, held-out loss) of budget `tokens` among
/// `gaps` of `config`, by size.
fn teachers_at(gaps: &[CapacityGap], config: &str, tokens: f64) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = gaps
        .iter()
        .filter(|g| g.config == config && g.teacher_tokens == Some(tokens))
        .flat_map(|g| g.points.iter().map(|p| (p.teacher_params, p.teacher_loss)))
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The size whose teacher (of `teachers`, by size) reaches `loss`: ln size interpolated
/// linearly in loss between the first pair of neighbours that brackets it.
fn size_reaching(loss: f64, teachers: &[(f64, f64)]) -> Option<f64> {
    teachers.windows(2).find_map(|w| {
        let ((n0, l0), (n1, l1)) = (w[0], w[1]);
        let (lo, hi) = (l0.min(l1), l0.max(l1));
        ((lo..=hi).contains(&loss) && l0 != l1).then(|| {
            let t = (loss - l0) / (l1 - l0);
            (n0.ln() + t * (n1.ln() - n0.ln())).exp()
        })
    })
}

/// The predicted loss (and its interval's ends) as teacher sizes of one budget; the interval's
/// ends swap when a larger size means a lower loss.
fn size_of_loss(loss: &Extrapolated, teachers: &[(f64, f64)]) -> Option<Extrapolated> {
    let at = size_reaching(loss.at, teachers)?;
    let a = size_reaching(loss.interval[0], teachers)?;
    let b = size_reaching(loss.interval[1], teachers)?;
    Some(Extrapolated {
        at,
        interval: [a.min(b), a.max(b)],
        slope: f64::NAN,
        from: Vec::new(),
    })
}

/// The student prediction in the file at `path`; `Ok(None)` when the file is a prediction of
/// another kind (a confirmation round's), which [`super::read_prediction`] reads.
pub fn read_student_prediction(
    path: &std::path::Path,
) -> Result<Option<StudentPrediction>, super::CheckError> {
    let fail = |source: crate::error::Cause| super::CheckError::Unreadable {
        path: path.display().to_string(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.into()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| fail(e.into()))?;
    if value.get("kind").and_then(|k| k.as_str()) != Some(STUDENT_PREDICTION_KIND) {
        return Ok(None);
    }
    let p: StudentPrediction = serde_json::from_value(value).map_err(|e| fail(e.into()))?;
    if p.format != super::PREDICTION_FORMAT {
        let format = format!(
            "format {} (this pdsweep reads {})",
            p.format,
            super::PREDICTION_FORMAT
        );
        return Err(fail(format.into()));
    }
    Ok(Some(p))
}

/// One predicted quantity against what the student measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuantityCheck {
    /// What (`teacher loss`, `teacher size at 4M tokens`, ...).
    pub what: String,
    /// The prediction and its interval.
    pub predicted: Option<Extrapolated>,
    /// The measured optimum, in words (interior with interval, edge, unsupported).
    pub measured: String,
    /// The measured interior optimum.
    pub at: Option<f64>,
    /// Its interval.
    pub ci: Option<[f64; 2]>,
    /// Whether the measured optimum lies inside the predicted interval.
    pub inside: Option<bool>,
}

/// The new student's fit (`comparisons`, the sweep fitted with it) against `prediction`: the
/// loss, each budget's size, and each budget's size implied by the loss.
pub fn check_student(
    prediction: &StudentPrediction,
    comparisons: &[BudgetComparison],
) -> Vec<QuantityCheck> {
    let found = comparisons.iter().find(|c| {
        c.config == prediction.config
            && (c.student_params / prediction.student_params - 1.0).abs() < 0.02
    });
    let row = |what: String, predicted: Option<&Extrapolated>, optimum: Option<&Optimum>| {
        let (at, ci) = match optimum {
            Some(Optimum::Interior { at, ci, .. }) => (Some(*at), *ci),
            _ => (None, None),
        };
        QuantityCheck {
            what,
            inside: predicted
                .zip(at)
                .map(|(p, t)| (p.interval[0]..=p.interval[1]).contains(&t)),
            predicted: predicted.cloned(),
            measured: optimum.map_or("not measured".into(), super::engine::describe),
            at,
            ci,
        }
    };
    let mut out = vec![row(
        "optimal teacher loss (nats/token)".into(),
        prediction.by_loss.as_ref(),
        found.map(|c| &c.pooled_by_teacher_loss.optimum),
    )];
    for b in &prediction.budgets {
        let measured = found
            .and_then(|c| {
                c.budgets
                    .iter()
                    .find(|m| m.teacher_tokens == b.teacher_tokens)
            })
            .map(|m| &m.by_size);
        let tokens = crate::spec::units::format_count(b.teacher_tokens);
        out.push(row(
            format!("optimal teacher size at {tokens} teacher tokens"),
            b.by_size.as_ref(),
            measured,
        ));
        out.push(row(
            format!("size reaching the predicted loss at {tokens}"),
            b.size_of_loss.as_ref(),
            measured,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchor_at(s: f64, at: f64, half: f64) -> Anchor {
        Anchor {
            student_params: s,
            at,
            ci: [at - half, at + half],
        }
    }

    /// Optima on an exact line in ln S are extrapolated onto it, with an interval that holds
    /// the truth and widens with the distance from the measured students.
    #[test]
    fn a_line_in_ln_s_is_recovered_and_its_interval_widens_outward() {
        let line = |s: f64| 1.9 - 0.05 * s.ln();
        let anchors: Vec<Anchor> = [5e3, 10e3, 20e3]
            .iter()
            .map(|&s| anchor_at(s, line(s), 0.02))
            .collect();
        let near = extrapolate(&anchors, 40e3, false, 1).expect("a line");
        let far = extrapolate(&anchors, 320e3, false, 1).expect("a line");
        assert!((near.at - line(40e3)).abs() < 1e-9, "{}", near.at);
        assert!((near.slope + 0.05).abs() < 1e-9, "{}", near.slope);
        assert!(near.interval[0] < line(40e3) && line(40e3) < near.interval[1]);
        let width = |e: &Extrapolated| e.interval[1] - e.interval[0];
        assert!(
            width(&far) > 1.5 * width(&near),
            "{} vs {}",
            width(&far),
            width(&near)
        );
        // sizes extrapolate in ln T*: T* = 3 S is predicted as 3 S
        let sizes: Vec<Anchor> = [5e3, 10e3, 20e3]
            .iter()
            .map(|&s| Anchor {
                student_params: s,
                at: 3.0 * s,
                ci: [2.5 * s, 3.6 * s],
            })
            .collect();
        let t = extrapolate(&sizes, 80e3, true, 2).expect("a line");
        assert!((t.at / 240e3 - 1.0).abs() < 1e-9, "{}", t.at);
        assert!((t.slope - 1.0).abs() < 1e-9);
        assert!(
            t.interval[0] < 240e3 && 240e3 < t.interval[1],
            "{:?}",
            t.interval
        );
        // one anchor is no line
        assert!(extrapolate(&sizes[..1], 80e3, true, 2).is_none());
    }

    /// A loss is turned into the size of the teacher that reaches it on a budget, between the
    /// measured teachers; a loss no teacher brackets has no size.
    #[test]
    fn a_loss_becomes_the_size_that_reaches_it() {
        let teachers = [(10e3, 2.0), (40e3, 1.8), (160e3, 1.7)];
        let n = size_reaching(1.9, &teachers).expect("bracketed");
        assert!((n - 20e3).abs() < 1e-6, "{n}");
        let n = size_reaching(1.75, &teachers).expect("bracketed");
        assert!((n - 80e3).abs() < 1e-6, "{n}");
        assert!(size_reaching(1.6, &teachers).is_none());
        let loss = Extrapolated {
            at: 1.75,
            interval: [1.72, 1.85],
            slope: 0.0,
            from: Vec::new(),
        };
        let size = size_of_loss(&loss, &teachers).expect("inside the grid");
        assert!(size.interval[0] < 80e3 && 80e3 < size.interval[1]);
        assert!((size.interval[0] - size_reaching(1.85, &teachers).unwrap_or(0.0)).abs() < 1e-6);
    }

    fn curve(variable: &str, optimum: Optimum) -> crate::fit::GapCurve {
        crate::fit::GapCurve {
            variable: variable.into(),
            fit: None,
            samples: Vec::new(),
            optimum,
            near_best: None,
            draws: Vec::new(),
        }
    }

    fn interior(at: f64, ci: [f64; 2]) -> Optimum {
        Optimum::Interior {
            at,
            student_loss: 1.0,
            ci: Some(ci),
            interior_fraction: Some(1.0),
        }
    }

    /// A student whose optimal teacher loss is 1.73 at every size, and whose optimal teacher at
    /// budget D is the size reaching 1.73 there (teachers' loss 2.3 − 0.05 ln N + 0.05 ln(4M / D)).
    fn comparison(s: f64, loss_ci: [f64; 2]) -> BudgetComparison {
        let budgets = [1e6, 4e6]
            .iter()
            .map(|&d| {
                let n = (((2.3 + 0.05 * (4e6f64 / d).ln()) - 1.73) / 0.05).exp();
                crate::fit::BudgetOptimum {
                    teacher_tokens: d,
                    by_size: interior(n, [0.8 * n, 1.25 * n]),
                    by_loss: interior(1.73, loss_ci),
                }
            })
            .collect();
        BudgetComparison {
            student_params: s,
            student_tokens: 2e6,
            config: "kl".into(),
            budgets,
            pooled_by_teacher_loss: curve("teacher_loss", interior(1.73, loss_ci)),
            verdict: crate::fit::BudgetVerdict::Loss,
        }
    }

    fn teachers(d: f64) -> CapacityGap {
        let points = [3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7]
            .iter()
            .map(|&n: &f64| crate::fit::GapPoint {
                teacher_params: n,
                teacher_loss: 2.3 - 0.05 * n.ln() + 0.05 * (4e6f64 / d).ln(),
                student_loss: 2.0,
                seed: Some(1),
                paired_baseline: None,
            })
            .collect();
        CapacityGap {
            student_params: 5e3,
            student_tokens: 2e6,
            teacher_tokens: Some(d),
            config: "kl".into(),
            baseline_loss: None,
            baseline_seeds: 0,
            teachers: 8,
            seeds: 1,
            noise_floor: None,
            paired: false,
            points,
            by_teacher_params: curve("teacher_params", Optimum::TooFewPoints),
            by_teacher_loss: curve("teacher_loss", Optimum::TooFewPoints),
            from_law: None,
        }
    }

    fn provenance() -> Provenance {
        Provenance {
            made_at: "2026-12-07T20:00:00Z".into(),
            pdsweep: "test".into(),
            sweep: "s.toml".into(),
            sweep_sha256: String::new(),
            database: "s.db".into(),
            finished_runs: 3,
            runs_sha256: String::new(),
        }
    }

    /// Three students that all want a teacher of loss 1.73: the 80K student is predicted to
    /// want it too, and at each budget the size that reaches it; its own fit inside those
    /// intervals checks INSIDE, one far off checks OUTSIDE, and a measured size is refused.
    #[test]
    fn a_larger_student_is_predicted_and_checked() {
        let measured: Vec<BudgetComparison> = [5.2e3, 9.8e3, 20.6e3]
            .iter()
            .map(|&s| comparison(s, [1.70, 1.76]))
            .collect();
        let gaps = [teachers(1e6), teachers(4e6)];
        let p = predict_student(&measured, &gaps, 76_440.0, provenance(), 1).expect("predicted");
        let loss = p.by_loss.as_ref().expect("a loss");
        assert!(
            (loss.at - 1.73).abs() < 1e-9 && loss.slope.abs() < 1e-9,
            "{loss:?}"
        );
        assert!(loss.interval[0] < 1.73 && 1.73 < loss.interval[1]);
        for b in &p.budgets {
            let want = (((2.3 + 0.05 * (4e6f64 / b.teacher_tokens).ln()) - 1.73) / 0.05).exp();
            let by_size = b.by_size.as_ref().expect("a size");
            assert!(
                (by_size.at / want - 1.0).abs() < 1e-6,
                "{} vs {want}",
                by_size.at
            );
            let of_loss = b.size_of_loss.as_ref().expect("inside the teachers");
            assert!(
                (of_loss.at / want - 1.0).abs() < 1e-6,
                "{} vs {want}",
                of_loss.at
            );
        }
        let json = serde_json::to_string(&p).expect("serialises");
        assert!(json.contains("\"kind\":\"student\""));
        let mut after = measured.clone();
        after.push(comparison(76_440.0, [1.71, 1.75]));
        let checks = check_student(&p, &after);
        assert_eq!(checks.len(), 1 + 2 * p.budgets.len());
        assert!(checks.iter().all(|c| c.inside == Some(true)), "{checks:?}");
        let mut off = comparison(76_440.0, [1.55, 1.60]);
        off.pooled_by_teacher_loss = curve("teacher_loss", interior(1.57, [1.55, 1.60]));
        let mut after = measured.clone();
        after.push(off);
        assert_eq!(check_student(&p, &after)[0].inside, Some(false));
        assert!(matches!(
            predict_student(&measured, &gaps, 9_800.0, provenance(), 1),
            Err(StudentPredictionError::Measured { .. })
        ));
    }

    /// A NaN slope (a size read off one budget's teachers) is written as `null` by serde_json
    /// and reads back as NaN: the committed 80K prediction has one.
    #[test]
    fn a_nan_slope_survives_the_prediction_file() {
        let x = Extrapolated {
            at: 78_700.0,
            interval: [37_200.0, 240_000.0],
            slope: f64::NAN,
            from: Vec::new(),
        };
        let text = serde_json::to_string(&x).expect("write");
        assert!(text.contains("\"slope\":null"), "{text}");
        let back: Extrapolated = serde_json::from_str(&text).expect("read");
        assert!(back.slope.is_nan() && back.at == x.at && back.interval == x.interval);
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("benches/teacher_budget_80k.prediction.json");
        let p = read_student_prediction(&file)
            .expect("reads")
            .expect("a student prediction");
        assert!((p.student_params - 76_440.0).abs() < 1e-9);
    }
}
