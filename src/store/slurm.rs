//! Slurm bookkeeping in the sweep database: each `sbatch` call and each run's attempt in it
//! (recorded before the call), the last job state seen, and each session of a run (a start, or a
//! restart after a requeue). Only the coordinator writes these; jobs never open the database.

use rusqlite::params;

use super::db::SweepDb;
use super::error::StoreError;
use crate::plan::{RunId, RunKind};

const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/// One run's attempt in a Slurm array job.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmTask {
    /// Run id.
    pub run_id: RunId,
    /// Run name.
    pub run_name: String,
    /// Run kind.
    pub kind: RunKind,
    /// 1 for the first submission of the run, 2 for its resubmission, ...
    pub attempt: u32,
    /// The submission (`sbatch` call) it belongs to.
    pub submission: i64,
    /// The array job's name (unique; finds the job if the coordinator died during `sbatch`).
    pub job_name: String,
    /// The array job's id, once `sbatch` returned it.
    pub job_id: Option<String>,
    /// The run's index in the array.
    pub array_index: u32,
    /// The last Slurm state seen (`SUBMITTING` before `sbatch` returned).
    pub state: String,
    /// Why it is in that state (Slurm's reason, or how the attempt ended).
    pub reason: Option<String>,
    /// Whether the job started the run (its start file was seen).
    pub started: bool,
    /// Whether the coordinator is done with this attempt.
    pub ended: bool,
}

impl SlurmTask {
    /// `JOBID_INDEX`, the array task's Slurm id, once known.
    pub fn job_ref(&self) -> Option<String> {
        self.job_id
            .as_ref()
            .map(|j| format!("{j}_{}", self.array_index))
    }
}

/// A session of a run: a start of its job, or a restart after a requeue.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `JOBID_INDEX.RESTART`.
    pub session: String,
    /// The host it ran on.
    pub host: Option<String>,
    /// The step it started from, once known.
    pub start_step: Option<u64>,
}

/// What becomes of a run when its attempt ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TaskEnd<'a> {
    /// The run's result was recorded (the run is `done`).
    Done,
    /// The run failed for good with this reason.
    Failed(&'a str),
    /// The run goes back to `planned` to be submitted again (resumes from its checkpoint).
    Retry,
}

const TASK_COLUMNS: &str = "t.run_id, r.name, r.kind, t.attempt, t.submission, s.job_name, s.job_id,
    t.array_index, t.state, t.reason, t.started, t.ended
    FROM slurm_tasks t JOIN slurm_submissions s ON s.id = t.submission JOIN runs r ON r.id = t.run_id";

impl SweepDb {
    /// Records a submission of `tasks` (run id, array index) as array job `job_name` before
    /// `sbatch` is called, in one transaction: each run gets its next attempt number and is marked
    /// `running`, owned by the job.
    ///
    /// Returns the submission's id.
    pub fn slurm_submit(
        &mut self,
        job_name: &str,
        kind: RunKind,
        script: &str,
        dependency: Option<&str>,
        tasks: &[(RunId, u32)],
    ) -> Result<i64, StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "record a Slurm submission", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        tx.execute(
            "INSERT INTO slurm_submissions (job_name, kind, script, dependency) VALUES (?1, ?2, ?3, ?4)",
            params![job_name, kind, script, dependency],
        )
        .map_err(fail)?;
        let submission = tx.last_insert_rowid();
        for (run_id, index) in tasks {
            tx.execute(
                "INSERT INTO slurm_tasks (run_id, attempt, submission, array_index)
                 VALUES (?1, (SELECT coalesce(max(attempt), 0) + 1 FROM slurm_tasks WHERE run_id = ?1), ?2, ?3)",
                params![run_id, submission, index],
            )
            .map_err(fail)?;
            tx.execute(
                &format!(
                    "UPDATE runs SET state = 'running', error = NULL, owner = ?2, heartbeat_at = NULL,
                     started_at = {NOW} WHERE id = ?1"
                ),
                params![run_id, format!("slurm:{job_name}")],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(submission)
    }

    /// Records the job id `sbatch` returned for `submission`.
    pub fn slurm_set_job_id(&self, submission: i64, job_id: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE slurm_submissions SET job_id = ?2 WHERE id = ?1",
                params![submission, job_id],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a Slurm job id", e))?;
        self.conn()
            .execute(
                &format!("UPDATE slurm_tasks SET state = 'PENDING', updated_at = {NOW} WHERE submission = ?1 AND state = 'SUBMITTING'"),
                [submission],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a Slurm job id", e))?;
        Ok(())
    }

    /// Attempts the coordinator still follows (not ended), oldest first.
    pub fn slurm_open_tasks(&self) -> Result<Vec<SlurmTask>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} WHERE t.ended = 0 ORDER BY t.submission, t.array_index"
            ),
            [],
        )
    }

    /// Every attempt of run `run_id`, oldest first.
    pub fn slurm_tasks_of(&self, run_id: &RunId) -> Result<Vec<SlurmTask>, StoreError> {
        self.query_tasks(
            &format!("SELECT {TASK_COLUMNS} WHERE t.run_id = ?1 ORDER BY t.attempt"),
            [run_id],
        )
    }

    /// The latest attempt of each run of plan `plan_id` that was ever submitted.
    pub fn slurm_latest_tasks(&self, plan_id: i64) -> Result<Vec<SlurmTask>, StoreError> {
        self.query_tasks(
            &format!(
                "SELECT {TASK_COLUMNS} JOIN plan_runs p ON p.run_id = t.run_id AND p.plan_id = ?1
                 WHERE t.attempt = (SELECT max(attempt) FROM slurm_tasks u WHERE u.run_id = t.run_id)
                 ORDER BY t.submission, t.array_index"
            ),
            [plan_id],
        )
    }

    fn query_tasks<P: rusqlite::Params>(
        &self,
        sql: &str,
        args: P,
    ) -> Result<Vec<SlurmTask>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read Slurm tasks", e);
        let mut stmt = self.conn().prepare(sql).map_err(fail)?;
        stmt.query_map(args, |r| {
            Ok(SlurmTask {
                run_id: r.get(0)?,
                run_name: r.get(1)?,
                kind: r.get(2)?,
                attempt: r.get(3)?,
                submission: r.get(4)?,
                job_name: r.get(5)?,
                job_id: r.get(6)?,
                array_index: r.get(7)?,
                state: r.get(8)?,
                reason: r.get(9)?,
                started: r.get(10)?,
                ended: r.get(11)?,
            })
        })
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)
    }

    /// Records the Slurm state last seen for an attempt (and Slurm's reason).
    pub fn slurm_task_state(
        &self,
        run_id: &RunId,
        attempt: u32,
        state: &str,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                &format!("UPDATE slurm_tasks SET state = ?3, reason = ?4, updated_at = {NOW}
                          WHERE run_id = ?1 AND attempt = ?2 AND (state != ?3 OR coalesce(reason, '') != coalesce(?4, ''))"),
                params![run_id, attempt, state, reason],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a Slurm job state", e))?;
        Ok(())
    }

    /// Records that an attempt started its run (counted in the run's `attempts`), once.
    pub fn slurm_task_started(&mut self, run_id: &RunId, attempt: u32) -> Result<(), StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "record a Slurm job's start", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        let changed = tx
            .execute(
                "UPDATE slurm_tasks SET started = 1 WHERE run_id = ?1 AND attempt = ?2 AND started = 0",
                params![run_id, attempt],
            )
            .map_err(fail)?;
        if changed == 1 {
            tx.execute(
                "UPDATE runs SET attempts = attempts + 1 WHERE id = ?1",
                [run_id],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }

    /// Ends an attempt with its final Slurm `state` and `reason`, and settles its run as `end`
    /// says, in one transaction. A run already `done` stays done.
    pub fn slurm_end_task(
        &mut self,
        run_id: &RunId,
        attempt: u32,
        state: &str,
        reason: Option<&str>,
        end: TaskEnd,
    ) -> Result<(), StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "record the end of a Slurm job", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        tx.execute(
            &format!(
                "UPDATE slurm_tasks SET ended = 1, state = ?3, reason = ?4, updated_at = {NOW}
                 WHERE run_id = ?1 AND attempt = ?2"
            ),
            params![run_id, attempt, state, reason],
        )
        .map_err(fail)?;
        match end {
            TaskEnd::Done => {}
            TaskEnd::Failed(error) => {
                tx.execute(
                    &format!(
                        "UPDATE runs SET state = 'failed', error = ?2, owner = NULL, finished_at = {NOW}
                         WHERE id = ?1 AND state != 'done'"
                    ),
                    params![run_id, error],
                )
                .map_err(fail)?;
            }
            TaskEnd::Retry => {
                tx.execute(
                    "UPDATE runs SET state = 'planned', owner = NULL, heartbeat_at = NULL
                     WHERE id = ?1 AND state = 'running'",
                    [run_id],
                )
                .map_err(fail)?;
            }
        }
        tx.commit().map_err(fail)
    }

    /// Records a session of run `run_id` (a start or restart of its job, or of a local process)
    /// and the step it started from, once known.
    pub fn record_session(
        &self,
        run_id: &RunId,
        session: &str,
        host: Option<&str>,
        start_step: Option<u64>,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO run_sessions (run_id, session, host, start_step) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run_id, session) DO UPDATE SET
                     host = coalesce(excluded.host, host),
                     start_step = coalesce(excluded.start_step, start_step)",
                params![run_id, session, host, start_step.map(|s| s as i64)],
            )
            .map_err(|e| StoreError::sql(self.path(), "record a run's session", e))?;
        Ok(())
    }

    /// The sessions of run `run_id`, oldest first.
    pub fn sessions(&self, run_id: &RunId) -> Result<Vec<Session>, StoreError> {
        let fail = |e| StoreError::sql(self.path(), "read a run's sessions", e);
        let mut stmt = self
            .conn()
            .prepare("SELECT session, host, start_step FROM run_sessions WHERE run_id = ?1 ORDER BY started_at, session")
            .map_err(fail)?;
        stmt.query_map([run_id], |r| {
            Ok(Session {
                session: r.get(0)?,
                host: r.get(1)?,
                start_step: r.get::<_, Option<i64>>(2)?.map(|s| s.max(0) as u64),
            })
        })
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)
    }
}

impl SweepDb {
    /// Ingests metric segments of run `run_id` written by its jobs, in one transaction:
    /// each segment's rows (replacing rows of the same kind and step, so ingesting twice
    /// changes nothing) and the step its session started from.
    pub fn ingest_segments(
        &mut self,
        run_id: &RunId,
        segments: &[(&str, Option<u64>, Vec<super::Metric>)],
    ) -> Result<(), StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "ingest a job's metrics", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        {
            let mut metric = tx
                .prepare(
                    "INSERT OR REPLACE INTO metrics (run_id, kind, step, tokens, loss, bpb, lr, tokens_per_s, wall_s)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(fail)?;
            let mut session = tx
                .prepare(
                    "INSERT INTO run_sessions (run_id, session, start_step) VALUES (?1, ?2, ?3)
                     ON CONFLICT (run_id, session) DO UPDATE SET start_step = excluded.start_step",
                )
                .map_err(fail)?;
            for (name, start_step, rows) in segments {
                if let Some(step) = start_step {
                    session
                        .execute(params![run_id, name, *step as i64])
                        .map_err(fail)?;
                }
                for m in rows {
                    metric
                        .execute(params![
                            run_id,
                            m.kind,
                            m.step as i64,
                            m.tokens as i64,
                            m.loss,
                            m.bpb,
                            m.lr,
                            m.tokens_per_s,
                            m.wall_s
                        ])
                        .map_err(fail)?;
                }
            }
        }
        tx.commit().map_err(fail)
    }
}

impl SweepDb {
    /// The id the next submission will get (names are made from it before it is recorded;
    /// only the coordinator, which holds the lease, submits).
    pub fn slurm_next_submission(&self) -> Result<i64, StoreError> {
        self.conn()
            .query_row(
                "SELECT coalesce(max(id), 0) + 1 FROM slurm_submissions",
                [],
                |r| r.get(0),
            )
            .map_err(|e| StoreError::sql(self.path(), "read Slurm submissions", e))
    }

    /// Ends the attempts of a submission that never reached Slurm (`sbatch` failed, or the
    /// coordinator died before calling it) and hands their runs back, in one transaction.
    pub fn slurm_drop_submission(
        &mut self,
        submission: i64,
        reason: &str,
    ) -> Result<(), StoreError> {
        let path = self.path().to_path_buf();
        let fail = |e| StoreError::sql(&path, "drop a Slurm submission", e);
        let tx = self.conn_mut().transaction().map_err(fail)?;
        tx.execute(
            "UPDATE runs SET state = 'planned', owner = NULL WHERE state = 'running'
             AND id IN (SELECT run_id FROM slurm_tasks WHERE submission = ?1 AND ended = 0)",
            [submission],
        )
        .map_err(fail)?;
        tx.execute(
            &format!("UPDATE slurm_tasks SET ended = 1, state = 'NOT_SUBMITTED', reason = ?2, updated_at = {NOW}
                      WHERE submission = ?1 AND ended = 0"),
            params![submission, reason],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }
}
