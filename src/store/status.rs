//! Where a sweep stands: each run's state, progress, last error and measured throughput, for
//! `pdsweep status` and for time estimates from measurements.

use std::collections::HashMap;

use rusqlite::params;
use serde::Serialize;

use crate::model::ModelShape;
use crate::plan::{Calibration, RunConfig, RunId, RunKind, StepWork, step_work};

use super::db::SweepDb;
use super::error::StoreError;
use super::state::RunState;

/// One run's standing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStatus {
    /// Run id.
    pub id: RunId,
    /// Kind.
    pub kind: RunKind,
    /// Name.
    pub name: String,
    /// Where it stands.
    pub state: RunState,
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
    /// The stack it trains (or last trained) in, as `LEAD_ID/MEMBERS` (`run --stack`); `None`
    /// for a run trained alone.
    pub stack: Option<String>,
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
                         ORDER BY m.step DESC LIMIT 1)),
                    r.stack
                 FROM runs r JOIN plan_runs p ON p.run_id = r.id WHERE p.plan_id = ?1
                 ORDER BY CASE r.kind WHEN 'teacher' THEN 0 WHEN 'logits' THEN 1 WHEN 'student' THEN 2 ELSE 3 END, r.name",
            )
            .map_err(fail)?;
        let rows = stmt
            .query_map(params![plan_id], |r| {
                let state: RunState = r.get(3)?;
                let tokens = r.get::<_, i64>(5)?.max(0) as u64;
                let done_tokens: Option<i64> = r.get(7)?;
                let progress = if state == RunState::Done {
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
                    stack: r.get(9)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(rows)
    }

    /// Step times measured by the finished runs of `backend`: the work of one step (from each
    /// run's configuration) and its seconds, for fitting a [`Calibration`].
    pub fn measured_steps(&self, backend: &str) -> Result<Vec<(StepWork, f64)>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read measured throughput", e);
        let configs = self.run_configs()?;
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT s.run_id, s.tokens_per_s FROM results s
                 WHERE s.backend = ?1 AND s.tokens_per_s > 0",
            )
            .map_err(fail)?;
        let rows: Vec<(RunId, f64)> = stmt
            .query_map([backend], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(fail)?
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, tokens_per_s)| {
                let config = configs.get(&id)?;
                let per_step = (config.data.context * config.data.batch_seqs) as f64;
                let work = step_work(config, teacher_shape(config, &configs));
                Some((work, per_step / tokens_per_s))
            })
            .collect())
    }

    /// The prices of work on `backend` fitted on this sweep's finished runs (at least three),
    /// else `fallback`.
    pub fn calibration(&self, backend: &str, fallback: Calibration) -> Calibration {
        let Ok(samples) = self.measured_steps(backend) else {
            return fallback;
        };
        if samples.len() < 3 {
            return fallback;
        }
        let source = format!("fitted on {} finished runs of this backend", samples.len());
        Calibration::fit(&samples, source).unwrap_or(fallback)
    }

    /// Seconds left for the unfinished runs of plan `plan_id`, run one at a time: a running
    /// run's remaining tokens at its own measured throughput, the others at the prices of
    /// `calibration`.
    pub fn eta_s(&self, plan_id: i64, calibration: &Calibration) -> Result<f64, StoreError> {
        let configs = self.run_configs()?;
        Ok(self
            .status(plan_id)?
            .iter()
            .map(|r| remaining_seconds(r, &configs, calibration))
            .sum())
    }

    /// Every run's resolved configuration, by id (unreadable ones are left out).
    fn run_configs(&self) -> Result<HashMap<RunId, RunConfig>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read run configurations", e);
        let mut stmt = self
            .conn()
            .prepare("SELECT id, config_json FROM runs")
            .map_err(fail)?;
        let rows: Vec<(RunId, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(fail)?
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, json)| Some((id, serde_json::from_str(&json).ok()?)))
            .collect())
    }
}

/// The shape of the teacher of a student (online students pay its forward passes).
fn teacher_shape<'a>(
    config: &RunConfig,
    configs: &'a HashMap<RunId, RunConfig>,
) -> Option<&'a ModelShape> {
    let teacher = &config.distill.as_ref()?.teacher;
    configs.get(teacher).map(|t| &t.model.shape)
}

/// Seconds left for `run`: its remaining tokens at its own measured throughput while it runs,
/// else its remaining share of the time `calibration` predicts for it.
pub(crate) fn remaining_seconds(
    run: &RunStatus,
    configs: &HashMap<RunId, RunConfig>,
    calibration: &Calibration,
) -> f64 {
    if run.state.is_finished() {
        return 0.0;
    }
    let left = 1.0 - run.progress;
    if run.state == RunState::Running
        && let Some(tps) = run.tokens_per_s.filter(|t| *t > 0.0)
    {
        return run.tokens as f64 * left / tps;
    }
    configs.get(&run.id).map_or(0.0, |config| {
        left * calibration.run_seconds(config, teacher_shape(config, configs))
    })
}
