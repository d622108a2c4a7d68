//! Fits in the sweep database's `fits` table: written by `pdsweep fit` (one transaction per
//! call, history kept), read back as [`StoredFit`] by `recommend` and the report.

use rusqlite::params;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capacity_gap::{CapacityGap, TStarScaling};
use super::error::FitError;
use super::estimate::Fit;
use crate::store::{StoreError, SweepDb};

/// Scope of a supervised-law fit (teachers and baselines).
pub const SCOPE_SUPERVISED: &str = "supervised";
/// Scope of a distillation-law fit (key: the distillation config).
pub const SCOPE_DISTILL: &str = "distill";
/// Scope of a capacity-gap group (key: student size, budget and config).
pub const SCOPE_CAPACITY_GAP: &str = "capacity_gap";
/// Scope of a T*(S) fit (key: budget and config).
pub(crate) const SCOPE_TSTAR: &str = "tstar";
/// Scope of the summary of one `pdsweep fit` call (key empty): the runs it used and what it
/// could not fit, with the reason, so `recommend` and the report can say why a fit is missing.
pub(crate) const SCOPE_SUMMARY: &str = "summary";

/// What one `pdsweep fit` call did, stored with its fits.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FitSummary {
    /// Finished runs it used.
    pub runs: usize,
    /// Fits that could not be made, and why.
    #[serde(default)]
    pub skipped: Vec<super::sweep::Skipped>,
    /// Pre-trained teachers against the trained teachers' law.
    #[serde(default)]
    pub released: Vec<super::released::ReleasedCheck>,
}

/// One row to write.
#[derive(Debug, Clone)]
pub enum FitRecord {
    /// A law fit in `scope` under `key`.
    Law {
        /// `supervised` or `distill`.
        scope: String,
        /// The config key (empty for supervised).
        key: String,
        /// The fit.
        fit: Box<Fit>,
    },
    /// A capacity-gap group.
    Gap(Box<CapacityGap>),
    /// T*(S).
    TStar(Box<TStarScaling>),
    /// What the `fit` call did and skipped.
    Summary(FitSummary),
}

/// A fit as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFit {
    /// Row id (increasing with time).
    pub id: i64,
    /// The law (`chinchilla`, `busbridge`, `distill`), or `quadratic` for capacity gaps and
    /// `tstar` for T*(S).
    pub law: String,
    /// `supervised`, `distill`, `capacity_gap` or `tstar`.
    pub scope: String,
    /// What within the scope (config, student size and budget).
    pub key: String,
    /// Natural parameters (laws) or the headline numbers (others).
    pub params: Value,
    /// Confidence intervals.
    pub ci: Value,
    /// The objective at the optimum (laws only).
    pub objective: Option<f64>,
    /// Points used.
    pub n_points: i64,
    /// The points used, as JSON.
    pub points: Value,
    /// Huber δ (laws only).
    pub delta: Option<f64>,
    /// Bootstrap resamples.
    pub bootstrap: i64,
    /// Bootstrap seed.
    pub seed: i64,
    /// When it was written (UTC).
    pub created_at: String,
    /// The whole result ([`Fit`], [`CapacityGap`] or [`TStarScaling`]) as JSON.
    pub result: Value,
    /// Bootstrap samples of the natural parameters (laws only).
    pub samples: Vec<Vec<f64>>,
}

impl StoredFit {
    /// The law fit, with its bootstrap samples.
    pub fn as_fit(&self) -> Option<Fit> {
        let mut fit: Fit = serde_json::from_value(self.result.clone()).ok()?;
        fit.samples = self.samples.clone();
        Some(fit)
    }

    /// The capacity-gap group.
    pub fn as_gap(&self) -> Option<CapacityGap> {
        serde_json::from_value(self.result.clone()).ok()
    }

    /// The T*(S) fit.
    pub fn as_tstar(&self) -> Option<TStarScaling> {
        serde_json::from_value(self.result.clone()).ok()
    }

    /// The summary of a `fit` call.
    pub fn as_summary(&self) -> Option<FitSummary> {
        serde_json::from_value(self.result.clone()).ok()
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<String, FitError> {
    serde_json::to_string(v).map_err(|e| FitError::Store(StoreError::Encode { source: e }))
}

/// Writes `records` in one transaction.
pub fn save_fits(db: &mut SweepDb, records: &[FitRecord]) -> Result<(), FitError> {
    let path = db.path().to_path_buf();
    let fail = |e| FitError::Store(StoreError::sql(&path, "write fits", e));
    let tx = db.conn_mut().transaction().map_err(fail)?;
    for r in records {
        let (law, scope, key, params, ci, objective, n, points, delta, boot, seed, samples, result) =
            match r {
                FitRecord::Law { scope, key, fit } => {
                    let points: Vec<_> = fit.residuals.iter().map(|r| r.point).collect();
                    (
                        fit.law.to_string(),
                        scope.clone(),
                        key.clone(),
                        to_json(&fit.params)?,
                        to_json(&fit.ci)?,
                        Some(fit.objective),
                        fit.n_points,
                        to_json(&points)?,
                        Some(fit.delta),
                        fit.bootstrap,
                        fit.seed,
                        Some(to_json(&fit.samples)?),
                        to_json(fit)?,
                    )
                }
                FitRecord::Gap(g) => {
                    let headline = serde_json::json!({
                        "by_teacher_params": g.by_teacher_params.optimum,
                        "near_best": g.by_teacher_params.near_best,
                        "by_teacher_loss": g.by_teacher_loss.optimum,
                        "from_law": g.from_law,
                    });
                    (
                        "quadratic".to_string(),
                        SCOPE_CAPACITY_GAP.to_string(),
                        gap_key(
                            g.student_params,
                            g.student_tokens,
                            g.teacher_tokens,
                            &g.config,
                        ),
                        headline.to_string(),
                        "{}".to_string(),
                        None,
                        g.points.len(),
                        to_json(&g.points)?,
                        None,
                        g.by_teacher_params.draws.len(),
                        0,
                        None,
                        to_json(g)?,
                    )
                }
                FitRecord::TStar(t) => {
                    let params = serde_json::json!({
                        "linear": t.linear.params, "power": t.power.params, "better": t.better,
                    });
                    let ci = serde_json::json!({ "linear": t.linear.ci, "power": t.power.ci });
                    (
                        "tstar".to_string(),
                        SCOPE_TSTAR.to_string(),
                        tstar_key(t.student_tokens, t.teacher_tokens, &t.config),
                        params.to_string(),
                        ci.to_string(),
                        None,
                        t.points.len(),
                        to_json(&t.points)?,
                        None,
                        0,
                        0,
                        None,
                        to_json(t)?,
                    )
                }
                FitRecord::Summary(sum) => (
                    "summary".to_string(),
                    SCOPE_SUMMARY.to_string(),
                    String::new(),
                    "{}".to_string(),
                    "{}".to_string(),
                    None,
                    sum.runs,
                    "[]".to_string(),
                    None,
                    0,
                    0,
                    None,
                    to_json(sum)?,
                ),
            };
        tx.execute(
            "INSERT INTO fits (law, scope, key, params_json, ci_json, objective, n_points, points_json, delta, bootstrap, seed, samples_json, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![law, scope, key, params, ci, objective, n as i64, points, delta, boot as i64, seed as i64, samples, result],
        )
        .map_err(fail)?;
    }
    tx.commit().map_err(fail)
}

/// The key of a capacity-gap group.
pub fn gap_key(
    student_params: f64,
    student_tokens: f64,
    teacher_tokens: Option<f64>,
    config: &str,
) -> String {
    match teacher_tokens {
        Some(t) => format!("S={student_params} D={student_tokens} D_T={t} {config}"),
        None => format!("S={student_params} D={student_tokens} {config}"),
    }
}

/// The key of a T*(S) fit.
pub(crate) fn tstar_key(student_tokens: f64, teacher_tokens: Option<f64>, config: &str) -> String {
    match teacher_tokens {
        Some(t) => format!("D={student_tokens} D_T={t} {config}"),
        None => format!("D={student_tokens} {config}"),
    }
}

/// The row id after which the newest `pdsweep fit` call's rows start: every call writes its rows in
/// one transaction with its summary last, so that call's rows are those after the summary before it
/// (0 when there is none, as in databases of older versions).
///
/// Fits of an earlier call whose group the newest call did not fit (a budget or student size no
/// longer in the sweep file) are history, not the sweep's current answer.
pub(crate) fn current_call_floor(summary_ids: impl IntoIterator<Item = i64>) -> i64 {
    let mut ids: Vec<i64> = summary_ids.into_iter().collect();
    ids.sort_unstable();
    ids.len().checked_sub(2).map_or(0, |i| ids[i])
}

/// The fits of the newest `pdsweep fit` call (`current_call_floor`), the newest of each
/// (scope, key, law), oldest scope first.
pub fn stored_fits(db: &SweepDb) -> Result<Vec<StoredFit>, FitError> {
    let fail = |e| FitError::Store(StoreError::sql(db.path(), "read fits", e));
    let summaries = db
        .conn()
        .prepare("SELECT id FROM fits WHERE scope = ?1")
        .and_then(|mut s| {
            s.query_map([SCOPE_SUMMARY], |r| r.get::<_, i64>(0))?
                .collect::<Result<Vec<i64>, _>>()
        })
        .map_err(fail)?;
    let floor = current_call_floor(summaries);
    let mut stmt = db
        .conn()
        .prepare(
            "SELECT id, law, scope, key, params_json, ci_json, objective, n_points, points_json, delta, bootstrap, seed, created_at, result_json, samples_json
             FROM fits WHERE id IN (SELECT max(id) FROM fits WHERE id > ?1 GROUP BY scope, key, law)
             ORDER BY scope, key, law",
        )
        .map_err(fail)?;
    let rows = stmt
        .query_map([floor], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                [
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(8)?,
                    r.get::<_, String>(13)?,
                ],
                r.get::<_, Option<f64>>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, Option<f64>>(9)?,
                (r.get::<_, i64>(10)?, r.get::<_, i64>(11)?),
                r.get::<_, String>(12)?,
                r.get::<_, Option<String>>(14)?,
            ))
        })
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    rows.into_iter()
        .map(
            |(id, law, scope, key, json, objective, n, delta, (boot, seed), created, samples)| {
                let decode = |s: &str| {
                    serde_json::from_str::<Value>(s).map_err(|e| FitError::Decode {
                        key: key.clone(),
                        source: e.into(),
                    })
                };
                let samples: Vec<Vec<f64>> = match samples {
                    Some(s) => serde_json::from_str(&s).map_err(|e| FitError::Decode {
                        key: key.clone(),
                        source: e.into(),
                    })?,
                    None => Vec::new(),
                };
                Ok(StoredFit {
                    id,
                    params: decode(&json[0])?,
                    ci: decode(&json[1])?,
                    points: decode(&json[2])?,
                    result: decode(&json[3])?,
                    law,
                    scope,
                    key: key.clone(),
                    objective,
                    n_points: n,
                    delta,
                    bootstrap: boot,
                    seed,
                    created_at: created,
                    samples,
                })
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::current_call_floor;

    #[test]
    fn the_newest_call_starts_after_the_summary_before_its_own() {
        assert_eq!(current_call_floor([]), 0, "no summary: every row");
        assert_eq!(current_call_floor([7]), 0, "one call: every row");
        assert_eq!(current_call_floor([30, 7, 19]), 19);
    }
}
