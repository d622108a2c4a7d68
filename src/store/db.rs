//! Opening the sweep database (WAL, or a rollback journal on a network filesystem; foreign
//! keys; migrations) and writing and reading the run graph. Every multi-row write is one
//! transaction.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::error::StoreError;
use super::journal::journal_mode_for;
use super::schema::migrations;
use super::state::RunState;
use crate::plan::{Plan, RunId, RunKind};

/// The sweep database of one sweep.
pub struct SweepDb {
    conn: Connection,
    path: PathBuf,
}

/// What writing a plan changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanWrite {
    /// The plan's row id.
    pub plan_id: i64,
    /// Whether this sweep file (by hash) was new to the database.
    pub new_plan: bool,
    /// Runs that were not in the database before.
    pub runs_added: usize,
    /// Runs of the plan that were already there (kept with their state and results).
    pub runs_kept: usize,
    /// All runs in the database, including those of earlier plans.
    pub runs_in_db: usize,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// Run id.
    pub id: RunId,
    /// Kind.
    pub kind: RunKind,
    /// Name.
    pub name: String,
    /// Where it stands.
    pub state: RunState,
    /// The resolved configuration as JSON.
    pub config_json: String,
    /// Total parameters.
    pub params_total: i64,
    /// Non-embedding parameters.
    pub params_non_embedding: i64,
    /// Tokens.
    pub tokens: i64,
    /// FLOPs.
    pub flops: f64,
    /// Dependencies.
    pub depends_on: Vec<RunId>,
}

impl SweepDb {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<SweepDb, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source: e,
            })?;
        }
        let fail = |e: rusqlite::Error| StoreError::sql(path, "open", e);
        let mut conn = Connection::open(path).map_err(fail)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(fail)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        conn.pragma_update(None, "journal_mode", journal_mode_for(dir).pragma())
            .map_err(fail)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(fail)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(fail)?;
        migrations()
            .to_latest(&mut conn)
            .map_err(|e| StoreError::Migrate {
                path: path.to_path_buf(),
                source: e,
            })?;
        Ok(SweepDb {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The file this database lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Records `plan` (from the sweep file `sweep_path` with text `sweep_toml`). Runs already
    /// present keep their state and results; a sweep file already recorded changes nothing.
    pub fn write_plan(
        &mut self,
        plan: &Plan,
        sweep_path: &Path,
        sweep_toml: &str,
    ) -> Result<PlanWrite, StoreError> {
        let path = self.path.clone();
        let fail = |e: rusqlite::Error| StoreError::sql(&path, "write the plan", e);
        let tx = self.conn.transaction().map_err(fail)?;
        let new_plan = tx
            .execute(
                "INSERT OR IGNORE INTO plans (sweep_hash, sweep_name, sweep_path, sweep_toml, pdsweep_version)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![plan.sweep_hash, plan.sweep_name, sweep_path.display().to_string(), sweep_toml, env!("CARGO_PKG_VERSION")],
            )
            .map_err(fail)?
            == 1;
        let plan_id: i64 = tx
            .query_row(
                "SELECT id FROM plans WHERE sweep_hash = ?1",
                [&plan.sweep_hash],
                |r| r.get(0),
            )
            .map_err(fail)?;
        let mut runs_added = 0;
        {
            let mut insert_run = tx
                .prepare(
                    "INSERT OR IGNORE INTO runs (id, kind, name, config_json, params_total, params_non_embedding,
                     tokens, flops, disk_bytes, first_plan) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .map_err(fail)?;
            let mut insert_dep = tx
                .prepare("INSERT OR IGNORE INTO run_deps (run_id, depends_on) VALUES (?1, ?2)")
                .map_err(fail)?;
            let mut insert_member = tx
                .prepare("INSERT OR IGNORE INTO plan_runs (plan_id, run_id) VALUES (?1, ?2)")
                .map_err(fail)?;
            // A tuned student's id leaves out its candidates (every seed's baselines): when a
            // plan adds seeds, a student that has not finished chooses among all of them.
            let mut update_candidates = tx
                .prepare(
                    "UPDATE runs SET config_json = ?2
                     WHERE id = ?1 AND state IN ('planned', 'failed') AND config_json != ?2",
                )
                .map_err(fail)?;
            for run in &plan.runs {
                if run.config.tune.is_some() {
                    update_candidates
                        .execute(params![run.id, run.config_json])
                        .map_err(fail)?;
                }
                if run.kind() == RunKind::Logits {
                    extend_store(&tx, run).map_err(fail)?;
                }
                runs_added += insert_run
                    .execute(params![
                        run.id,
                        run.kind(),
                        run.name,
                        run.config_json,
                        to_i64(run.params.total),
                        to_i64(run.params.non_embedding),
                        to_i64(run.tokens()),
                        run.flops,
                        to_i64(run.disk_bytes),
                        plan_id
                    ])
                    .map_err(fail)?;
                insert_member
                    .execute(params![plan_id, run.id])
                    .map_err(fail)?;
            }
            // A run not finished waits for the dependencies of this plan, not of an older one
            // (a logit pass re-keyed, as when stores stopped being per seed, would otherwise
            // leave it waiting for a pass no plan runs); a finished run keeps its history.
            let mut clear_deps = tx
                .prepare(
                    "DELETE FROM run_deps WHERE run_id = ?1
                     AND run_id IN (SELECT id FROM runs WHERE state != 'done')",
                )
                .map_err(fail)?;
            for run in &plan.runs {
                clear_deps.execute(params![run.id]).map_err(fail)?;
                for dep in &run.depends_on {
                    insert_dep.execute(params![run.id, dep]).map_err(fail)?;
                }
            }
        }
        let current: Option<String> = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'current_plan'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(fail)?;
        if current.as_deref() != Some(plan_id.to_string().as_str()) {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('current_plan', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [plan_id.to_string()],
            )
            .map_err(fail)?;
        }
        let runs_in_db: i64 = tx
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        Ok(PlanWrite {
            plan_id,
            new_plan,
            runs_added,
            runs_kept: plan.runs.len() - runs_added,
            runs_in_db: runs_in_db as usize,
        })
    }

    /// The id of the most recently written plan, if any.
    pub fn current_plan(&self) -> Result<Option<i64>, StoreError> {
        let value: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'current_plan'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| StoreError::sql(&self.path, "read the current plan", e))?;
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// Every run in the database (of every plan), ordered by kind then name.
    pub fn runs(&self) -> Result<Vec<StoredRun>, StoreError> {
        self.query_runs("SELECT id, kind, name, state, config_json, params_total, params_non_embedding, tokens, flops FROM runs", [])
    }

    /// The runs of plan `plan_id`, ordered by kind then name.
    pub fn plan_runs(&self, plan_id: i64) -> Result<Vec<StoredRun>, StoreError> {
        self.query_runs(
            "SELECT r.id, r.kind, r.name, r.state, r.config_json, r.params_total, r.params_non_embedding, r.tokens, r.flops
             FROM runs r JOIN plan_runs p ON p.run_id = r.id WHERE p.plan_id = ?1",
            [plan_id],
        )
    }

    fn query_runs<P: rusqlite::Params>(
        &self,
        select: &str,
        args: P,
    ) -> Result<Vec<StoredRun>, StoreError> {
        let fail = |e: rusqlite::Error| StoreError::sql(&self.path, "read runs", e);
        let order = RunKind::ALL
            .iter()
            .enumerate()
            .map(|(i, k)| format!("WHEN '{k}' THEN {i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let sql = format!("{select} ORDER BY CASE kind {order} END, name");
        let mut stmt = self.conn.prepare(&sql).map_err(fail)?;
        let mut runs = stmt
            .query_map(args, |r| {
                Ok(StoredRun {
                    id: r.get(0)?,
                    kind: r.get(1)?,
                    name: r.get(2)?,
                    state: r.get(3)?,
                    config_json: r.get(4)?,
                    params_total: r.get(5)?,
                    params_non_embedding: r.get(6)?,
                    tokens: r.get(7)?,
                    flops: r.get(8)?,
                    depends_on: Vec::new(),
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let mut deps = self
            .conn
            .prepare("SELECT depends_on FROM run_deps WHERE run_id = ?1 ORDER BY depends_on")
            .map_err(fail)?;
        for run in &mut runs {
            run.depends_on = deps
                .query_map([&run.id], |r| r.get(0))
                .map_err(fail)?
                .collect::<Result<Vec<RunId>, _>>()
                .map_err(fail)?;
        }
        Ok(runs)
    }

    /// Sets a run's state (used by the runner and by tests that simulate finished runs).
    pub fn set_state(
        &self,
        run_id: &RunId,
        state: RunState,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE runs SET state = ?2, error = ?3 WHERE id = ?1",
                params![run_id, state, error],
            )
            .map_err(|e| StoreError::sql(&self.path, "update a run's state", e))?;
        Ok(())
    }

    /// Makes a finished logit pass whose store was removed (`pdsweep gc`) a planned run again:
    /// its result row (the teacher's held-out loss, also in the teacher's own result) is
    /// deleted, so a later plan that needs the store re-creates it instead of failing.
    pub fn replan_logits(&self, run_id: &RunId) -> Result<(), StoreError> {
        let fail = |e| StoreError::sql(&self.path, "re-plan a logit pass", e);
        let tx = self.conn.unchecked_transaction().map_err(fail)?;
        tx.execute(
            "DELETE FROM results WHERE run_id = ?1 AND run_id IN (SELECT id FROM runs WHERE kind = 'logits')",
            params![run_id],
        )
        .map_err(fail)?;
        tx.execute(
            "UPDATE runs SET state = 'planned', error = NULL WHERE id = ?1 AND kind = 'logits'",
            params![run_id],
        )
        .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    /// Runs `PRAGMA integrity_check` and returns its verdict (`ok` when healthy).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| StoreError::sql(&self.path, "check integrity", e))
    }
}

/// A logit pass already recorded whose plan now serves more student streams (a seed added, a
/// longer budget): its configuration is updated, and if it had finished it is planned again, so
/// that `run` extends its store by the windows they add (its id, and the store's folder, stay).
fn extend_store(tx: &rusqlite::Transaction, run: &crate::plan::Run) -> rusqlite::Result<()> {
    let stored: Option<(String, String)> = tx
        .query_row(
            "SELECT config_json, state FROM runs WHERE id = ?1",
            [&run.id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((json, state)) = stored else {
        return Ok(());
    };
    if json == run.config_json || state == "running" {
        return Ok(());
    }
    let covered = serde_json::from_str::<crate::plan::RunConfig>(&json)
        .ok()
        .and_then(|old| old.logits)
        .zip(run.config.logits.as_ref())
        .is_some_and(|(old, new)| {
            new.reads.iter().all(|n| {
                old.reads
                    .iter()
                    .any(|o| o.seed == n.seed && o.tokens >= n.tokens)
            })
        });
    if state == "done" && covered {
        return Ok(());
    }
    tx.execute(
        "UPDATE runs SET config_json = ?2, tokens = ?3, flops = ?4, disk_bytes = ?5 WHERE id = ?1",
        params![
            run.id,
            run.config_json,
            to_i64(run.tokens()),
            run.flops,
            to_i64(run.disk_bytes)
        ],
    )?;
    if state == "done" {
        tx.execute("DELETE FROM results WHERE run_id = ?1", [&run.id])?;
        tx.execute(
            "UPDATE runs SET state = 'planned', error = NULL WHERE id = ?1",
            [&run.id],
        )?;
    }
    Ok(())
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
