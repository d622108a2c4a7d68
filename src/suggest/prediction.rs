//! Pre-registered confirmation: a prediction written before a confirmation round, and the check
//! of the round against it.
//!
//! [`predict`] takes the fits of a sweep as they stand and a round of new seeds (the
//! confirmation design: every teacher size already measured, each with the new seeds) and
//! writes down, for every capacity-gap group, the T* interval the data give now (the
//! prediction: the round's own optimum should lie in it), the width the round's own interval is
//! expected to have (simulated from the fitted curve and the measured noise, [`expected_width`])
//! and how often such a round supports an optimum at all. [`check`] compares a fit of the
//! round's seeds alone with it, group by group: inside or not, and the measured width against
//! the expected one. The file also records the database state it was made from (how many runs
//! were finished, and a digest of their ids and losses), so a reader can tell the prediction
//! was made before the round's results existed.

use crate::error::Cause;
use serde::{Deserialize, Serialize};

use super::expected::{CurveModel, expected_width};
use crate::fit::{CapacityGap, Optimum};

/// The format of a prediction file ([`Prediction::format`]).
pub(crate) const PREDICTION_FORMAT: u32 = 1;

/// What a prediction was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// When it was written (UTC, RFC 3339).
    pub made_at: String,
    /// The pdsweep version that wrote it.
    pub pdsweep: String,
    /// The sweep file, as given.
    pub sweep: String,
    /// SHA-256 of the sweep file's text.
    pub sweep_sha256: String,
    /// The database fitted.
    pub database: String,
    /// Finished runs fitted.
    pub finished_runs: usize,
    /// SHA-256 of the finished runs' ids and held-out losses, one `id loss` line each, sorted.
    pub runs_sha256: String,
}

/// The prediction for one capacity-gap group (student size, budget, distillation config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupPrediction {
    /// Student non-embedding parameters.
    pub student_params: f64,
    /// Student tokens.
    pub student_tokens: f64,
    /// The distillation config.
    pub config: String,
    /// What the data said when the prediction was made.
    pub now: String,
    /// T* then (teacher non-embedding parameters), when the curve had an interior optimum.
    pub t_star: Option<f64>,
    /// Its interval then: the prediction is that the round's own optimum lies in it.
    pub interval: Option<[f64; 2]>,
    /// Where the best teacher sat at an edge of the grid then (`smallest` or `largest`): the
    /// prediction is that the round's best teacher sits there too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<String>,
    /// The median width (97.5th / 2.5th percentile) of the round's own interval, simulated
    /// from the fitted curve and measured noise; `None` without a U-shaped curve.
    pub expected_width: Option<f64>,
    /// The fraction of simulated rounds that support an optimum.
    pub expected_supported: Option<f64>,
    /// The round's runs of this group: (teacher non-embedding parameters, seed).
    pub design: Vec<(f64, u64)>,
}

/// A prediction file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// `PREDICTION_FORMAT`.
    pub format: u32,
    /// What it was made from.
    pub made_from: Provenance,
    /// The confirmation round's seeds (students and baselines; teachers are not retrained).
    pub seeds: Vec<u64>,
    /// One entry per capacity-gap group.
    pub groups: Vec<GroupPrediction>,
}

/// The seed of the simulation of a prediction (fixed, so a prediction can be re-derived).
const SIMULATION_SEED: u64 = 7;

/// The prediction for `gaps` (the sweep's capacity-gap fits now) of a round that trains every
/// measured teacher size of each group with each of `seeds`.
pub fn predict(gaps: &[CapacityGap], seeds: &[u64], made_from: Provenance) -> Prediction {
    let groups = gaps
        .iter()
        .map(|g| {
            let mut teachers: Vec<f64> = g.points.iter().map(|p| p.teacher_params).collect();
            teachers.sort_by(f64::total_cmp);
            teachers.dedup();
            let design: Vec<(f64, u64)> = seeds
                .iter()
                .flat_map(|&s| teachers.iter().map(move |&t| (t, s)))
                .collect();
            let model = CurveModel::of(&g.points, g.by_teacher_params.fit);
            let expected = model.map(|m| expected_width(&m, &design, SIMULATION_SEED));
            let (t_star, interval) = match g.by_teacher_params.optimum {
                Optimum::Interior { at, ci, .. } => (Some(at), ci),
                _ => (None, None),
            };
            let edge = match &g.by_teacher_params.optimum {
                Optimum::Boundary { edge, .. } => Some(edge.clone()),
                _ => None,
            };
            GroupPrediction {
                edge,
                student_params: g.student_params,
                student_tokens: g.student_tokens,
                config: g.config.clone(),
                now: super::engine::describe(&g.by_teacher_params.optimum),
                t_star,
                interval,
                expected_width: expected.map(|e| e.0),
                expected_supported: expected.map(|e| e.1),
                design,
            }
        })
        .collect();
    Prediction {
        format: PREDICTION_FORMAT,
        made_from,
        seeds: seeds.to_vec(),
        groups,
    }
}

/// One group's outcome against its prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupCheck {
    /// The prediction.
    pub predicted: GroupPrediction,
    /// What the round's seeds alone say.
    pub measured: String,
    /// The round's T*, when its curve has an interior optimum.
    pub t_star: Option<f64>,
    /// The round's interval.
    pub interval: Option<[f64; 2]>,
    /// Whether the round's T* lies in the predicted interval (`None`: no predicted interval or
    /// no measured optimum).
    pub inside: Option<bool>,
    /// For a group predicted at an edge: whether the round's best teacher is at the same edge.
    pub edge_held: Option<bool>,
    /// The round's interval width (97.5th / 2.5th percentile).
    pub width: Option<f64>,
    /// Measured width / expected width.
    pub width_ratio: Option<f64>,
    /// Runs of the round found for the group (of the design's).
    pub runs_found: usize,
}

/// Why a prediction cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The file is not a prediction of this format.
    #[error("`{path}` is not a pdsweep prediction file")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: Cause,
    },
}

/// Reads a prediction file.
pub fn read_prediction(path: &std::path::Path) -> Result<Prediction, CheckError> {
    let fail = |reason: Cause| CheckError::Unreadable {
        path: path.display().to_string(),
        source: reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.into()))?;
    let p: Prediction = serde_json::from_str(&text).map_err(|e| fail(e.into()))?;
    if p.format != PREDICTION_FORMAT {
        return Err(fail(
            format!(
                "format {} (this pdsweep reads {PREDICTION_FORMAT})",
                p.format
            )
            .into(),
        ));
    }
    Ok(p)
}

/// The round's fits (`gaps`, fitted on the prediction's seeds alone) against `prediction`, one
/// row per predicted group (a group the round did not measure has no optimum and 0 runs).
pub fn check(prediction: &Prediction, gaps: &[CapacityGap]) -> Vec<GroupCheck> {
    prediction
        .groups
        .iter()
        .map(|p| {
            let g = gaps.iter().find(|g| {
                g.student_params == p.student_params
                    && g.student_tokens == p.student_tokens
                    && g.config == p.config
            });
            let runs_found = g.map_or(0, |g| {
                g.points
                    .iter()
                    .filter(|pt| {
                        p.design
                            .iter()
                            .any(|d| d.0 == pt.teacher_params && Some(d.1) == pt.seed)
                    })
                    .count()
            });
            let (t_star, interval) = match g.map(|g| &g.by_teacher_params.optimum) {
                Some(Optimum::Interior { at, ci, .. }) => (Some(*at), *ci),
                _ => (None, None),
            };
            let width = interval.map(|[a, b]| b / a);
            let edge_held = p.edge.as_ref().zip(g).map(|(e, g)| {
                matches!(&g.by_teacher_params.optimum, Optimum::Boundary { edge, .. } if edge == e)
            });
            GroupCheck {
                edge_held,
                predicted: p.clone(),
                measured: g.map_or("not measured".into(), |g| {
                    super::engine::describe(&g.by_teacher_params.optimum)
                }),
                t_star,
                interval,
                inside: p
                    .interval
                    .zip(t_star)
                    .map(|([a, b], t)| (a..=b).contains(&t)),
                width,
                width_ratio: width.zip(p.expected_width).map(|(w, e)| w / e),
                runs_found,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::{GapPoint, gap_curve};

    /// A group whose student loss is a parabola in ln T with its minimum at `t_star`, with
    /// small deterministic noise per seed.
    fn gap(t_star: f64, seeds: &[u64]) -> CapacityGap {
        let teachers = [5e3, 1e4, 2e4, 4e4, 8e4, 1.6e5];
        let points: Vec<GapPoint> = seeds
            .iter()
            .flat_map(|&s| {
                teachers.iter().map(move |&t| {
                    let x = (t / t_star).ln();
                    let noise = (((s * 7919 + t as u64) % 13) as f64 - 6.0) * 1e-3;
                    GapPoint {
                        teacher_params: t,
                        teacher_loss: f64::NAN,
                        student_loss: 3.0 + 0.02 * x * x + noise,
                        seed: Some(s),
                        paired_baseline: None,
                    }
                })
            })
            .collect();
        let curve = gap_curve("teacher_params", &points, |p| p.teacher_params, 200, 1);
        CapacityGap {
            student_params: 1e4,
            student_tokens: 2e6,
            teacher_tokens: None,
            config: "kl".into(),
            baseline_loss: None,
            baseline_seeds: 0,
            teachers: teachers.len(),
            seeds: seeds.len(),
            noise_floor: None,
            paired: false,
            points,
            by_teacher_params: curve.clone(),
            by_teacher_loss: curve,
            from_law: None,
        }
    }

    fn provenance() -> Provenance {
        Provenance {
            made_at: "2026-12-03T00:00:00Z".into(),
            pdsweep: "test".into(),
            sweep: "s.toml".into(),
            sweep_sha256: "0".into(),
            database: "db".into(),
            finished_runs: 18,
            runs_sha256: "0".into(),
        }
    }

    #[test]
    fn a_round_from_the_same_curve_lands_inside_and_one_from_another_does_not() {
        let now = gap(2e4, &[1, 2, 3]);
        let Optimum::Interior { ci: Some(_), .. } = now.by_teacher_params.optimum else {
            panic!(
                "the test curve has an interval: {:?}",
                now.by_teacher_params.optimum
            );
        };
        let prediction = predict(std::slice::from_ref(&now), &[21, 22, 23], provenance());
        let p = &prediction.groups[0];
        assert_eq!(p.design.len(), 6 * 3);
        assert!(p.expected_width.is_some_and(|w| w > 1.0));
        // written and read back unchanged (to the 17 digits JSON keeps)
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prediction.json");
        let text = serde_json::to_string(&prediction).unwrap();
        std::fs::write(&path, &text).unwrap();
        let back = read_prediction(&path).unwrap();
        assert_eq!(back.groups[0].design, p.design);
        assert!((back.groups[0].t_star.unwrap() / p.t_star.unwrap() - 1.0).abs() < 1e-12);
        std::fs::write(&path, text.replace("\"format\":1", "\"format\":9")).unwrap();
        assert!(crate::error::chain(&read_prediction(&path).unwrap_err()).contains("format 9"));
        let same = check(&prediction, &[gap(2e4, &[21, 22, 23])]);
        assert_eq!(same[0].runs_found, 18);
        assert_eq!(same[0].inside, Some(true), "{:?}", same[0]);
        assert!(same[0].width_ratio.is_some());
        let moved = check(&prediction, &[gap(1.2e5, &[21, 22, 23])]);
        assert_eq!(moved[0].inside, Some(false), "{:?}", moved[0]);
        let none = check(&prediction, &[]);
        assert_eq!((none[0].runs_found, none[0].inside), (0, None));
    }
}
