//! Learning rate per size. With `[train] tune_lr` the baselines of a student size and budget
//! are trained at every candidate peak; the peak whose baselines reach the lowest mean
//! held-out loss over the seeds is that size's rate. A student reads it when its unit is built
//! (from the sweep database, so a Slurm job carries it resolved), trains at it, and records it
//! with the baseline its gain is measured against. With `[teachers] tune_lr` every teacher has
//! one candidate run per peak (same seed, data and initialisation) and takes the peak of the
//! best candidate, the same rule on one seed (it adopts that candidate's checkpoint, see
//! `run::adopt`). The fits apply the rule (`best_peak`) to
//! keep only the tuned baselines, and leave teacher candidates out of every law.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::RunError;
use crate::plan::{RunConfig, RunId};
use crate::store::SweepDb;

/// The peak chosen for a run, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedLr {
    /// The chosen peak learning rate.
    pub peak: f64,
    /// The candidate at that peak with the run's own seed: a student's gain is measured
    /// against it (its baseline); a teacher adopts it.
    pub baseline: Option<RunId>,
    /// Every candidate peak with the mean held-out loss of its finished runs and their count.
    pub candidates: Vec<PeakScore>,
}

/// One candidate peak's score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PeakScore {
    /// The peak learning rate.
    pub peak: f64,
    /// Mean held-out loss of its finished runs (NaN when none finished).
    pub mean_loss: f64,
    /// How many of its runs finished with a finite loss.
    pub finished: usize,
}

/// Scores every peak of `(peak, held-out loss)` results (one per finished run).
pub fn scores(results: &[(f64, f64)]) -> Vec<PeakScore> {
    let mut by_peak: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for &(peak, loss) in results {
        let losses = by_peak.entry(peak.to_bits()).or_default();
        if loss.is_finite() {
            losses.push(loss);
        }
    }
    let mut out: Vec<PeakScore> = by_peak
        .into_iter()
        .map(|(bits, losses)| PeakScore {
            peak: f64::from_bits(bits),
            mean_loss: if losses.is_empty() {
                f64::NAN
            } else {
                losses.iter().sum::<f64>() / losses.len() as f64
            },
            finished: losses.len(),
        })
        .collect();
    out.sort_by(|a, b| a.peak.total_cmp(&b.peak));
    out
}

/// The tuned peak of `(peak, held-out loss)` results: among the peaks with the most finished runs
/// (a peak that diverged for some seed is not compared on fewer seeds), the one with the lowest
/// mean loss; the smaller peak on a tie.
///
/// `None` when nothing finished.
pub(crate) fn best_peak(results: &[(f64, f64)]) -> Option<f64> {
    best_of(&scores(results))
}

fn best_of(scores: &[PeakScore]) -> Option<f64> {
    let most = scores.iter().map(|s| s.finished).max().filter(|&n| n > 0)?;
    scores
        .iter()
        .filter(|s| s.finished == most)
        .min_by(|a, b| a.mean_loss.total_cmp(&b.mean_loss))
        .map(|s| s.peak)
}

/// The peak `config` trains at, when its rate is tuned (`train.tune`): `Ok(None)` for a run
/// that is not tuned, `Ok(Some(Err(reason)))` when no candidate finished.
pub fn resolve(
    db: &SweepDb,
    config: &RunConfig,
) -> Result<Option<Result<TunedLr, String>>, RunError> {
    let Some(tune) = config.tune.as_ref() else {
        return Ok(None);
    };
    let mut finished = Vec::new();
    let mut same_seed = Vec::new();
    for id in &tune.candidates {
        let Some(json) = db.run_config(id)? else {
            continue;
        };
        let candidate: RunConfig = serde_json::from_str(&json).map_err(|e| RunError::Config {
            id: id.to_string(),
            source: e.into(),
        })?;
        let Some(peak) = candidate.train.as_ref().map(|t| t.lr.peak()) else {
            continue;
        };
        if candidate.data.seed == config.data.seed {
            same_seed.push((peak, id.clone()));
        }
        if let Some((loss, _, _)) = db.result(id)? {
            finished.push((peak, loss));
        }
    }
    let candidates = scores(&finished);
    let Some(peak) = best_of(&candidates) else {
        return Ok(Some(Err(format!(
            "no candidate run to tune its learning rate on finished (candidates: {})",
            tune.candidates
                .iter()
                .map(RunId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ))));
    };
    let baseline = same_seed
        .into_iter()
        .find(|(p, _)| *p == peak)
        .map(|(_, id)| id);
    Ok(Some(Ok(TunedLr {
        peak,
        baseline,
        candidates,
    })))
}

/// `config` with its tuned peak in place of the planned one.
pub fn apply(config: &mut RunConfig, tuned: &TunedLr) {
    if let Some(train) = config.train.as_mut() {
        train.lr.0.peak = tuned.peak;
    }
}

/// `extra_json` (a JSON object, or `None`) with the tuning recorded under `lr`.
pub(crate) fn annotate(extra_json: Option<&str>, tuned: &TunedLr) -> String {
    let mut extra: serde_json::Value = extra_json
        .and_then(|s| serde_json::from_str(s).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    extra["lr"] = serde_json::to_value(tuned).unwrap_or(serde_json::Value::Null);
    extra.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_mean_over_seeds_wins() {
        let r = [
            (1e-3, 3.10),
            (1e-3, 3.00),
            (3e-3, 2.90),
            (3e-3, 3.05),
            (1e-2, 2.80),
            (1e-2, 3.50),
        ];
        // means: 3.05, 2.975, 3.15
        assert_eq!(best_peak(&r), Some(3e-3));
    }

    #[test]
    fn a_peak_that_diverged_for_a_seed_is_not_compared_on_fewer_seeds() {
        // 1e-2 finished only one of two seeds (its other run failed), with the lowest loss.
        let r = [(1e-3, 3.0), (1e-3, 3.1), (1e-2, 2.5)];
        assert_eq!(best_peak(&r), Some(1e-3));
        // A NaN loss counts as not finished.
        let r = [(1e-3, 3.0), (1e-2, f64::NAN), (3e-4, 3.2)];
        assert_eq!(best_peak(&r), Some(1e-3));
    }

    #[test]
    fn ties_take_the_smaller_peak_and_nothing_finished_gives_none() {
        assert_eq!(best_peak(&[(3e-3, 2.0), (1e-3, 2.0)]), Some(1e-3));
        assert_eq!(best_peak(&[]), None);
        assert_eq!(best_peak(&[(1e-3, f64::INFINITY)]), None);
    }

    #[test]
    fn annotate_keeps_other_keys() {
        let tuned = TunedLr {
            peak: 3e-3,
            baseline: Some(RunId::from_stored("abc".into())),
            candidates: scores(&[(3e-3, 2.0)]),
        };
        let out: serde_json::Value =
            serde_json::from_str(&annotate(Some(r#"{"probe":1}"#), &tuned)).unwrap();
        assert_eq!(out["probe"], 1);
        assert_eq!(out["lr"]["peak"], 3e-3);
        assert_eq!(out["lr"]["baseline"], "abc");
    }
}
