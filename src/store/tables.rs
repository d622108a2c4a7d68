//! Read-only views of the sweep database for reports and exports: every run of a plan joined
//! with its result, teacher and gain; metric rows; the plan's provenance; any table as text.

use rusqlite::{OptionalExtension, params};

use super::db::SweepDb;
use super::error::StoreError;
use super::state::RunState;
use crate::plan::{RunId, RunKind};

/// A run of a plan with everything known about it (result columns are `None` until it is done).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// Run id.
    pub id: RunId,
    /// Its kind.
    pub kind: RunKind,
    /// Name.
    pub name: String,
    /// Where it stands.
    pub state: RunState,
    /// The failure reason, if failed.
    pub error: Option<String>,
    /// The resolved configuration as JSON.
    pub config_json: String,
    /// Total parameters.
    pub params_total: i64,
    /// Non-embedding parameters (N of the scaling laws).
    pub params_non_embedding: i64,
    /// Tokens trained on (or scored).
    pub tokens: i64,
    /// Planned FLOPs.
    pub flops: f64,
    /// Students and logit runs: the teacher run's id.
    pub teacher_id: Option<RunId>,
    /// Students and logit runs: the teacher run's name.
    pub teacher_name: Option<String>,
    /// Held-out loss (nats/token).
    pub val_loss: Option<f64>,
    /// Held-out bits per byte.
    pub val_bpb: Option<f64>,
    /// Last training loss.
    pub train_loss: Option<f64>,
    /// Mean throughput.
    pub tokens_per_s: Option<f64>,
    /// Wall time.
    pub wall_s: Option<f64>,
    /// Peak resident memory, where known.
    pub peak_rss_bytes: Option<i64>,
    /// Backend the run finished on.
    pub backend: Option<String>,
    /// Students: top-1 agreement with the teacher on held-out text.
    pub agreement: Option<f64>,
    /// Students: KL(teacher ‖ student) on held-out text (nats/token).
    pub kl_teacher_student: Option<f64>,
    /// Students: matching baseline's held-out loss minus this student's.
    pub gain: Option<f64>,
    /// Students: the matching baseline's id.
    pub baseline_id: Option<RunId>,
}

/// One metric row.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    /// Run id.
    pub run_id: RunId,
    /// `train` or `val`.
    pub kind: String,
    /// Steps completed.
    pub step: i64,
    /// Tokens consumed.
    pub tokens: i64,
    /// Loss (nats/token).
    pub loss: f64,
    /// Bits per byte (held-out rows).
    pub bpb: Option<f64>,
    /// Learning rate (training rows).
    pub lr: Option<f64>,
    /// Throughput (training rows).
    pub tokens_per_s: Option<f64>,
    /// Wall time so far.
    pub wall_s: f64,
}

/// Where a plan came from.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInfo {
    /// Row id.
    pub id: i64,
    /// SHA-256 of the sweep file (hex).
    pub sweep_hash: String,
    /// The sweep's name.
    pub sweep_name: String,
    /// The sweep file's path when planned.
    pub sweep_path: String,
    /// The sweep file's text.
    pub sweep_toml: String,
    /// The pdsweep version that planned it.
    pub pdsweep_version: String,
    /// When it was planned (UTC, ISO 8601).
    pub created_at: String,
}

/// A table read generically: column names and rows of SQLite values.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawTable {
    /// Column names in table order.
    pub columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<rusqlite::types::Value>>,
}

impl SweepDb {
    /// Every run of plan `plan_id` joined with its result, teacher and gain, in graph order.
    pub fn run_rows(&self, plan_id: i64) -> Result<Vec<RunRow>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read runs and results", e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT r.id, r.kind, r.name, r.state, r.error, r.config_json, r.params_total,
                    r.params_non_embedding, r.tokens, r.flops,
                    coalesce(json_extract(r.config_json, '$.distill.teacher'),
                             json_extract(r.config_json, '$.logits.teacher')),
                    s.val_loss, s.val_bpb, s.train_loss, s.tokens_per_s, s.wall_s, s.peak_rss_bytes,
                    s.backend, s.agreement, s.kl_teacher_student,
                    (SELECT g.gain FROM student_gain g WHERE g.run_id = r.id ORDER BY g.baseline_id LIMIT 1),
                    (SELECT g.baseline_id FROM student_gain g WHERE g.run_id = r.id ORDER BY g.baseline_id LIMIT 1)
                 FROM runs r JOIN plan_runs p ON p.run_id = r.id
                 LEFT JOIN results s ON s.run_id = r.id
                 WHERE p.plan_id = ?1
                 ORDER BY CASE r.kind WHEN 'teacher' THEN 0 WHEN 'logits' THEN 1 WHEN 'student' THEN 2 ELSE 3 END, r.name",
            )
            .map_err(fail)?;
        let mut rows = stmt
            .query_map(params![plan_id], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    name: r.get(2)?,
                    state: r.get(3)?,
                    error: r.get(4)?,
                    config_json: r.get(5)?,
                    params_total: r.get(6)?,
                    params_non_embedding: r.get(7)?,
                    tokens: r.get(8)?,
                    flops: r.get(9)?,
                    teacher_id: r.get(10)?,
                    teacher_name: None,
                    val_loss: r.get(11)?,
                    val_bpb: r.get(12)?,
                    train_loss: r.get(13)?,
                    tokens_per_s: r.get(14)?,
                    wall_s: r.get(15)?,
                    peak_rss_bytes: r.get(16)?,
                    backend: r.get(17)?,
                    agreement: r.get(18)?,
                    kl_teacher_student: r.get(19)?,
                    gain: r.get(20)?,
                    baseline_id: r.get(21)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let mut name_of = self
            .conn()
            .prepare("SELECT name FROM runs WHERE id = ?1")
            .map_err(fail)?;
        for row in &mut rows {
            if let Some(teacher) = &row.teacher_id {
                row.teacher_name = name_of
                    .query_row([teacher], |r| r.get(0))
                    .optional()
                    .map_err(fail)?;
            }
        }
        Ok(rows)
    }

    /// Every metric row of the runs of plan `plan_id`, by run, kind and step.
    pub fn metric_rows(&self, plan_id: i64) -> Result<Vec<MetricRow>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read metrics", e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT m.run_id, m.kind, m.step, m.tokens, m.loss, m.bpb, m.lr, m.tokens_per_s, m.wall_s
                 FROM metrics m JOIN plan_runs p ON p.run_id = m.run_id
                 WHERE p.plan_id = ?1 ORDER BY m.run_id, m.kind, m.step",
            )
            .map_err(fail)?;
        let rows = stmt
            .query_map(params![plan_id], |r| {
                Ok(MetricRow {
                    run_id: r.get(0)?,
                    kind: r.get(1)?,
                    step: r.get(2)?,
                    tokens: r.get(3)?,
                    loss: r.get(4)?,
                    bpb: r.get(5)?,
                    lr: r.get(6)?,
                    tokens_per_s: r.get(7)?,
                    wall_s: r.get(8)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(rows)
    }

    /// The plan with row id `plan_id`, if any.
    pub fn plan_info(&self, plan_id: i64) -> Result<Option<PlanInfo>, StoreError> {
        self.conn()
            .query_row(
                "SELECT id, sweep_hash, sweep_name, sweep_path, sweep_toml, pdsweep_version, created_at
                 FROM plans WHERE id = ?1",
                [plan_id],
                |r| {
                    Ok(PlanInfo {
                        id: r.get(0)?,
                        sweep_hash: r.get(1)?,
                        sweep_name: r.get(2)?,
                        sweep_path: r.get(3)?,
                        sweep_toml: r.get(4)?,
                        pdsweep_version: r.get(5)?,
                        created_at: r.get(6)?,
                    })
                },
            )
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read the plan", e))
    }

    /// Whether a table (or view) called `name` exists.
    pub fn has_table(&self, name: &str) -> Result<bool, StoreError> {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1",
                [name],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::sql(self.path(), "look up a table", e))?;
        Ok(n > 0)
    }

    /// Every row of table `name` as raw values (empty when the table does not exist), for
    /// tables whose columns other parts of pdsweep own (such as `fits`).
    pub fn raw_table(&self, name: &str) -> Result<RawTable, StoreError> {
        if !self.has_table(name)? {
            return Ok(RawTable::default());
        }
        let fail = |e| StoreError::sql(self.path(), "read a table", e);
        let quoted = name.replace('"', "\"\"");
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT * FROM \"{quoted}\""))
            .map_err(fail)?;
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        let n = columns.len();
        let rows = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| r.get::<_, rusqlite::types::Value>(i))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(RawTable { columns, rows })
    }
}
