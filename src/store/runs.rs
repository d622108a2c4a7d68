//! Run bookkeeping in the sweep database: which runs can start, claiming one (so two
//! processes never execute the same run), heartbeats, metrics, and the final result or failure.

use rusqlite::{OptionalExtension, params};

use super::db::{StoredRun, SweepDb};
use super::error::StoreError;
use super::state::RunState;
use crate::plan::{RunId, RunKind};

/// A `running` run whose heartbeat is older than this many seconds belongs to a process that
/// died; another process may take it over.
pub(crate) const STALE_AFTER_S: f64 = 120.0;

/// One metric row.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric<'a> {
    /// `train` or `val`.
    pub kind: &'a str,
    /// Steps completed.
    pub step: u64,
    /// Tokens consumed.
    pub tokens: u64,
    /// Loss in nats/token.
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

/// The final numbers of a finished run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// Held-out loss (nats/token).
    pub val_loss: f64,
    /// Held-out bits per byte.
    pub val_bpb: f64,
    /// Last training loss.
    pub train_loss: Option<f64>,
    /// Steps.
    pub steps: u64,
    /// Tokens.
    pub tokens: u64,
    /// Wall time.
    pub wall_s: f64,
    /// Mean throughput.
    pub tokens_per_s: f64,
    /// FLOPs spent.
    pub flops: f64,
    /// Peak resident memory of the process, where known.
    pub peak_rss_bytes: Option<u64>,
    /// Backend name.
    pub backend: String,
    /// Facts about the corpus (JSON).
    pub corpus_json: String,
    /// Students: top-1 agreement with the teacher on held-out text.
    pub agreement: Option<f64>,
    /// Students: KL(teacher ‖ student) on held-out text (nats/token).
    pub kl_teacher_student: Option<f64>,
    /// Other facts as JSON (logit runs: store bytes and bytes per kept logit).
    pub extra_json: Option<String>,
}

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// This host's name (the kernel's hostname).
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `host:pid` of this process.
pub fn this_process() -> String {
    format!("{}:{}", this_host(), std::process::id())
}

/// Whether `owner` (`host:pid`) is a process of this host that no longer exists. Processes of
/// other hosts are never judged dead here (their heartbeat decides), nor is this process.
fn is_dead(owner: &str) -> bool {
    let Some((h, pid)) = owner.rsplit_once(':') else {
        return false;
    };
    if h != this_host() || pid == std::process::id().to_string() {
        return false;
    }
    !std::path::Path::new("/proc").join(pid).exists() && std::path::Path::new("/proc/self").exists()
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SweepDb {
    /// Runs of plan `plan_id` of the given kinds that are not finished and whose dependencies
    /// are all `done` (or `failed`, for a learning-rate candidate), in graph order.
    pub fn runnable(
        &self,
        plan_id: i64,
        kinds: &[RunKind],
        retry_failed: bool,
    ) -> Result<Vec<StoredRun>, StoreError> {
        let runs = self.plan_runs(plan_id)?;
        let done: std::collections::HashSet<&RunId> = runs
            .iter()
            .filter(|r| r.state == RunState::Done)
            .map(|r| &r.id)
            .collect();
        let failed: std::collections::HashSet<&RunId> = runs
            .iter()
            .filter(|r| r.state == RunState::Failed)
            .map(|r| &r.id)
            .collect();
        // a failed learning-rate candidate settles its dependents (see `plan::tuned_on`)
        let settled = |r: &StoredRun| {
            let tuned = if r.depends_on.iter().any(|d| failed.contains(d)) {
                crate::plan::tuned_on(&r.config_json)
            } else {
                Vec::new()
            };
            r.depends_on
                .iter()
                .all(|d| done.contains(d) || (failed.contains(d) && tuned.contains(d)))
        };
        Ok(runs
            .iter()
            .filter(|r| kinds.contains(&r.kind))
            .filter(|r| match r.state {
                RunState::Planned | RunState::Running => true,
                RunState::Failed => retry_failed,
                RunState::Done => false,
            })
            .filter(|r| settled(r))
            .cloned()
            .collect())
    }

    /// Claims run `id` for this process: succeeds only if it is `planned`, `failed` (when
    /// `retry_failed`), or `running` with a stale heartbeat and not submitted to Slurm (a
    /// queued job has no heartbeat; its coordinator follows it). Atomic in SQLite.
    pub fn claim(&self, id: &RunId, retry_failed: bool) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE runs SET state = 'running', error = NULL, started_at = {NOW}, heartbeat_at = {NOW},
                 attempts = attempts + 1, owner = ?4
             WHERE id = ?1 AND (state = 'planned' OR (?2 AND state = 'failed')
                 OR (state = 'running' AND coalesce(owner, '') NOT LIKE 'slurm:%' AND (heartbeat_at IS NULL
                     OR julianday('now') - julianday(heartbeat_at) > ?3 / 86400.0)))"
        );
        let changed = self
            .conn()
            .execute(
                &sql,
                params![id, retry_failed, STALE_AFTER_S, this_process()],
            )
            .map_err(|e| StoreError::sql(self.path(), "claim a run", e))?;
        Ok(changed == 1)
    }

    /// Claims the runs `ids` for this process in one transaction, each as [`SweepDb::claim`]
    /// would, and records the stack they train in when `stacked` and more than one was claimed
    /// (`FIRST_ID/MEMBERS`; cleared otherwise); returns the ids claimed, in order (a run done
    /// or held elsewhere is left out).
    pub fn claim_many(
        &self,
        ids: &[&RunId],
        retry_failed: bool,
        stacked: bool,
    ) -> Result<Vec<RunId>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "claim runs", e);
        self.conn().execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
        let claimed = (|| {
            let mut claimed = Vec::with_capacity(ids.len());
            for &id in ids {
                if self.claim(id, retry_failed)? {
                    claimed.push(id.clone());
                }
            }
            let label =
                (stacked && claimed.len() > 1).then(|| format!("{}/{}", claimed[0], claimed.len()));
            for id in &claimed {
                self.conn()
                    .execute(
                        "UPDATE runs SET stack = ?2 WHERE id = ?1",
                        params![id, label],
                    )
                    .map_err(|e| StoreError::sql(self.path(), "record a stack", e))?;
            }
            Ok::<_, StoreError>(claimed)
        })();
        match claimed {
            Ok(claimed) => {
                self.conn().execute_batch("COMMIT").map_err(fail)?;
                Ok(claimed)
            }
            Err(e) => {
                let _ = self.conn().execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Returns to `planned` every `running` run whose owner is a process of this host that no
    /// longer exists (killed, crashed, rebooted); returns how many.
    ///
    /// Their checkpoints let them resume where they stopped.
    pub fn requeue_dead(&self) -> Result<usize, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "find runs of dead processes", e);
        let mut stmt = self
            .conn()
            .prepare(
                "SELECT DISTINCT owner FROM runs WHERE state = 'running' AND owner IS NOT NULL",
            )
            .map_err(fail)?;
        let owners: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(fail)?
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let mut requeued = 0;
        for owner in owners.into_iter().filter(|o| is_dead(o)) {
            requeued += self
                .conn()
                .execute("UPDATE runs SET state = 'planned', heartbeat_at = NULL WHERE state = 'running' AND owner = ?1", [owner])
                .map_err(|e| StoreError::sql(self.path(), "requeue runs of a dead process", e))?;
        }
        Ok(requeued)
    }

    /// Records that run `id` is alive.
    pub fn heartbeat(&self, id: &RunId) -> Result<(), StoreError> {
        self.conn()
            .execute(
                &format!("UPDATE runs SET heartbeat_at = {NOW} WHERE id = ?1"),
                [id],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a heartbeat", e))?;
        Ok(())
    }

    /// Records a metric row (replacing the row of the same run, kind and step, so a resumed run
    /// never duplicates one).
    pub fn record_metric(&self, id: &RunId, m: &Metric) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO metrics (run_id, kind, step, tokens, loss, bpb, lr, tokens_per_s, wall_s)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![id, m.kind, to_i64(m.step), to_i64(m.tokens), m.loss, m.bpb, m.lr, m.tokens_per_s, m.wall_s],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a metric", e))?;
        Ok(())
    }

    /// Stores the result of run `id` and marks it `done`, in one transaction.
    pub fn finish(&mut self, id: &RunId, r: &RunResult) -> Result<(), StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "record a result", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        tx.execute(
            "INSERT OR REPLACE INTO results (run_id, val_loss, val_bpb, train_loss, steps, tokens, wall_s,
                 tokens_per_s, flops, peak_rss_bytes, backend, corpus_json, agreement, kl_teacher_student, extra_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                id,
                r.val_loss,
                r.val_bpb,
                r.train_loss,
                to_i64(r.steps),
                to_i64(r.tokens),
                r.wall_s,
                r.tokens_per_s,
                r.flops,
                r.peak_rss_bytes.map(to_i64),
                r.backend,
                r.corpus_json,
                r.agreement,
                r.kl_teacher_student,
                r.extra_json
            ],
        )
        .map_err(fail)?;
        tx.execute(
            &format!(
                "UPDATE runs SET state = 'done', error = NULL, finished_at = {NOW} WHERE id = ?1"
            ),
            [id],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    /// Marks run `id` `failed` with `error`; its metrics so far are kept.
    pub fn fail(&self, id: &RunId, error: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(&format!("UPDATE runs SET state = 'failed', error = ?2, finished_at = {NOW} WHERE id = ?1"), params![id, error])
            .map_err(|e| StoreError::sql(self.path(), "record a failure", e))?;
        Ok(())
    }

    /// Returns run `id` to `planned` (an interrupted run, resumed from its checkpoint later).
    pub fn release(&self, id: &RunId) -> Result<(), StoreError> {
        self.conn()
            .execute("UPDATE runs SET state = 'planned', heartbeat_at = NULL WHERE id = ?1 AND state = 'running'", [id])
            .map_err(|e| StoreError::sql(self.path(), "release a run", e))?;
        Ok(())
    }

    /// The stored configuration of run `id` (JSON), if the run exists.
    pub fn run_config(&self, id: &RunId) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row("SELECT config_json FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read a run", e))
    }

    /// A finished student's distillation gain (matching baseline's held-out loss minus its own),
    /// once both have finished.
    pub fn gain(&self, id: &RunId) -> Result<Option<f64>, StoreError> {
        self.conn()
            .query_row(
                "SELECT gain FROM student_gain WHERE run_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read a gain", e))
    }

    /// A student's agreement and KL with its teacher, if recorded.
    pub fn agreement(&self, id: &RunId) -> Result<Option<(f64, f64)>, StoreError> {
        self.conn()
            .query_row(
                "SELECT agreement, kl_teacher_student FROM results WHERE run_id = ?1 AND agreement IS NOT NULL",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read a result", e))
    }

    /// The stored result of run `id`, if finished: (val_loss, val_bpb, tokens_per_s).
    pub fn result(&self, id: &RunId) -> Result<Option<(f64, f64, f64)>, StoreError> {
        self.conn()
            .query_row(
                "SELECT val_loss, val_bpb, tokens_per_s FROM results WHERE run_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read a result", e))
    }

    /// The extra JSON recorded with run `id`'s result (a tuned student's chosen rate under
    /// `lr`), if it finished and recorded one.
    pub fn result_extra(&self, id: &RunId) -> Result<Option<String>, StoreError> {
        self.conn()
            .query_row(
                "SELECT extra_json FROM results WHERE run_id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(|e| StoreError::sql(self.path(), "read a result", e))
    }

    /// The unigram entropy (nats/token) of the sweep's corpus, as the first run that
    /// recorded its corpus measured it.
    pub fn unigram_entropy(&self) -> Result<Option<f64>, StoreError> {
        self.conn()
            .query_row(
                "SELECT json_extract(corpus_json, '$.unigram_entropy_nats') AS u FROM results
                 WHERE u > 0 LIMIT 1",
                [],
                |r| r.get::<_, f64>(0),
            )
            .optional()
            .map_err(|e| StoreError::sql(self.path(), "read the corpus facts", e))
    }

    /// Held-out metric rows of run `id` as (step, tokens, loss).
    pub fn val_curve(&self, id: &RunId) -> Result<Vec<(u64, u64, f64)>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read metrics", e);
        let mut stmt = self
            .conn()
            .prepare("SELECT step, tokens, loss FROM metrics WHERE run_id = ?1 AND kind = 'val' ORDER BY step")
            .map_err(fail)?;
        let rows = stmt
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get::<_, i64>(1)? as u64,
                    r.get(2)?,
                ))
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(rows)
    }
}
