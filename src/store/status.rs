//! Where a sweep stands: each run's state, progress, last error and measured throughput, for
//! `pdsweep status` and for time estimates from measurements.

use rusqlite::params;
use serde::Serialize;

use super::db::SweepDb;
use super::error::StoreError;

/// One run's standing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStatus {
    /// Run id.
    pub id: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
    /// planned, running, done or failed.
    pub state: String,
    /// Fraction of its tokens done (1 when done).
    pub progress: f64,
    /// The failure reason, if failed.
    pub error: Option<String>,
    /// Tokens the run trains on (or scores).
    pub tokens: u64,
    /// Non-embedding parameters.
    pub params_non_embedding: u64,
    /// Latest measured throughput of this run, if any.
    pub tokens_per_s: Option<f64>,
}

impl SweepDb {
    /// Every run of plan `plan_id` with its standing, in graph order.
    pub fn status(&self, plan_id: i64) -> Result<Vec<RunStatus>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read the sweep's status", e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT r.id, r.kind, r.name, r.state, r.error, r.tokens, r.params_non_embedding,
                    (SELECT max(m.tokens) FROM metrics m WHERE m.run_id = r.id),
                    coalesce((SELECT s.tokens_per_s FROM results s WHERE s.run_id = r.id),
                        (SELECT m.tokens_per_s FROM metrics m WHERE m.run_id = r.id AND m.kind = 'train'
                         ORDER BY m.step DESC LIMIT 1))
                 FROM runs r JOIN plan_runs p ON p.run_id = r.id WHERE p.plan_id = ?1
                 ORDER BY CASE r.kind WHEN 'teacher' THEN 0 WHEN 'logits' THEN 1 WHEN 'student' THEN 2 ELSE 3 END, r.name",
            )
            .map_err(fail)?;
        let rows = stmt
            .query_map(params![plan_id], |r| {
                let state: String = r.get(3)?;
                let tokens = r.get::<_, i64>(5)?.max(0) as u64;
                let done_tokens: Option<i64> = r.get(7)?;
                let progress = if state == "done" {
                    1.0
                } else {
                    done_tokens.map_or(0.0, |d| (d.max(0) as f64 / tokens.max(1) as f64).min(1.0))
                };
                Ok(RunStatus {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    name: r.get(2)?,
                    state,
                    progress,
                    error: r.get(4)?,
                    tokens,
                    params_non_embedding: r.get::<_, i64>(6)?.max(0) as u64,
                    tokens_per_s: r.get(8)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(rows)
    }

    /// Measured training throughput of finished runs: (non-embedding parameters, tokens/s),
    /// for estimating the time of runs not measured yet.
    pub fn measured_throughput(&self, backend: &str) -> Result<Vec<(u64, f64)>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read measured throughput", e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT r.params_non_embedding, s.tokens_per_s FROM results s JOIN runs r ON r.id = s.run_id
                 WHERE s.backend = ?1 AND r.kind IN ('teacher', 'baseline', 'student') AND s.tokens_per_s > 0",
            )
            .map_err(fail)?;
        let rows = stmt
            .query_map([backend], |r| {
                Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get(1)?))
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(rows)
    }

    /// Seconds left for the unfinished runs of plan `plan_id`, run one at a time: each run's
    /// remaining tokens at its own measured throughput, or the throughput measured for the
    /// nearest model size, or `flops_per_s`.
    pub fn eta_s(&self, plan_id: i64, backend: &str, flops_per_s: f64) -> Result<f64, StoreError> {
        let measured = self.measured_throughput(backend)?;
        Ok(self
            .status(plan_id)?
            .iter()
            .map(|r| remaining_seconds(r, &measured, flops_per_s))
            .sum())
    }
}

/// Seconds left for `run`: its remaining tokens at its measured throughput, or at the
/// throughput measured for the nearest model size, or at `flops_per_s`.
pub fn remaining_seconds(run: &RunStatus, measured: &[(u64, f64)], flops_per_s: f64) -> f64 {
    if run.state == "done" || run.state == "failed" {
        return 0.0;
    }
    let left = run.tokens as f64 * (1.0 - run.progress);
    let tps = run
        .tokens_per_s
        .or_else(|| crate::plan::estimate_tokens_per_s(measured, run.params_non_embedding))
        .unwrap_or(flops_per_s / (6.0 * run.params_non_embedding.max(1) as f64));
    left / tps.max(1e-9)
}
