//! The scheduler loop: claim the next runnable run, prepare its data, train it with the right
//! objective, record metrics and the result; a failing run is recorded and the others go on.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::events::RunEvent;
use crate::data;
use crate::plan::{RunConfig, RunKind};
use crate::spec::Backend;
use crate::store::{Metric, RunResult, StoreError, StoredRun, SweepDb};
use crate::train::{self, MissingBackend, NextToken, TrainError, TrainEvent, TrainJob};

/// How to execute a sweep.
pub struct RunOptions<'a> {
    /// The sweep file's folder (corpus paths are relative to it).
    pub sweep_dir: PathBuf,
    /// `results/NAME/`: checkpoints and caches go below it.
    pub results_dir: PathBuf,
    /// Retry runs that failed before.
    pub retry_failed: bool,
    /// The backend to train on (from the sweep file; not part of a run's identity).
    pub backend: Backend,
    /// Set to stop gracefully (runs checkpoint and return to `planned`).
    pub stop: &'a AtomicBool,
}

/// What an execution did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    /// Runs finished now.
    pub finished: usize,
    /// Runs that failed now.
    pub failed: usize,
    /// Runs still waiting (dependencies not done, or interrupted).
    pub remaining: usize,
    /// Whether a stop request ended the execution.
    pub interrupted: bool,
}

/// Errors that stop the whole execution (a single run's failure does not).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sweep asks for a backend this binary lacks.
    #[error(transparent)]
    Backend(#[from] MissingBackend),
    /// A stored run configuration cannot be read (written by another version?).
    #[error("run `{id}` has an unreadable configuration in the sweep database: {reason}")]
    Config {
        /// Run id.
        id: String,
        /// Why.
        reason: String,
    },
}

/// The kinds of run this version executes.
const EXECUTED: [&str; 2] = ["teacher", "baseline"];

/// Executes every runnable run of plan `plan_id` in `db`, one at a time.
pub fn execute(
    db: &mut SweepDb,
    plan_id: i64,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Summary, RunError> {
    let mut summary = Summary::default();
    let pending = db
        .plan_runs(plan_id)?
        .iter()
        .filter(|r| EXECUTED.contains(&r.kind.as_str()) && r.state != "done")
        .count();
    on_event(RunEvent::Pending { runs: pending });
    loop {
        if opts.stop.load(std::sync::atomic::Ordering::Relaxed) {
            summary.interrupted = true;
            break;
        }
        let runnable = db.runnable(plan_id, &EXECUTED, opts.retry_failed)?;
        let Some(run) = next_claimed(db, &runnable, opts.retry_failed)? else {
            break;
        };
        match execute_one(db, &run, opts, on_event)? {
            Outcome::Done => summary.finished += 1,
            Outcome::Failed => summary.failed += 1,
            Outcome::Interrupted => {
                summary.interrupted = true;
                break;
            }
        }
    }
    summary.remaining = db
        .plan_runs(plan_id)?
        .iter()
        .filter(|r| EXECUTED.contains(&r.kind.as_str()) && r.state != "done" && r.state != "failed")
        .count();
    Ok(summary)
}

/// Claims the first run of `runnable` that no other process holds.
fn next_claimed(
    db: &SweepDb,
    runnable: &[StoredRun],
    retry_failed: bool,
) -> Result<Option<StoredRun>, RunError> {
    for run in runnable {
        if db.claim(&run.id, retry_failed)? {
            return Ok(Some(run.clone()));
        }
    }
    Ok(None)
}

enum Outcome {
    Done,
    Failed,
    Interrupted,
}

fn execute_one(
    db: &mut SweepDb,
    run: &StoredRun,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let config: RunConfig =
        serde_json::from_str(&run.config_json).map_err(|e| RunError::Config {
            id: run.id.clone(),
            reason: e.to_string(),
        })?;
    let device = train::device_for(opts.backend, 0)?;
    on_event(RunEvent::Preparing {
        id: run.id.clone(),
        name: run.name.clone(),
    });
    let prepared = match data::prepare(
        &config.data,
        &opts.sweep_dir,
        &opts.results_dir.join("cache"),
        config.tokens,
    ) {
        Ok(p) => p,
        Err(e) => return fail(db, run, &e.to_string(), on_event),
    };
    on_event(RunEvent::DataReady {
        id: run.id.clone(),
        name: run.name.clone(),
        info: prepared.info.clone(),
    });
    let checkpoint = checkpoint_path(&opts.results_dir, &run.id);
    let job = TrainJob {
        run_id: &run.id,
        config: &config,
        data: &prepared,
        device: &device,
        checkpoint: &checkpoint,
        stop: opts.stop,
    };
    let mut store_error = None;
    let mut forward = |event: TrainEvent| {
        if let Err(e) = record(db, &run.id, &event) {
            store_error.get_or_insert(e);
        }
        on_event(RunEvent::Train {
            id: run.id.clone(),
            event,
        });
    };
    let result = match config.kind {
        RunKind::Teacher | RunKind::Baseline => train::train(&job, &mut NextToken, &mut forward),
        other => {
            return fail(
                db,
                run,
                &format!("runs of kind `{other}` are not executed by this version"),
                on_event,
            );
        }
    };
    if let Some(e) = store_error {
        return Err(e.into());
    }
    match result {
        Ok(outcome) => {
            let result = RunResult {
                val_loss: outcome.val_loss,
                val_bpb: outcome.val_bpb,
                train_loss: outcome.train_loss.is_finite().then_some(outcome.train_loss),
                steps: outcome.steps,
                tokens: outcome.tokens,
                wall_s: outcome.wall_s,
                tokens_per_s: outcome.tokens_per_s,
                flops: run.flops,
                peak_rss_bytes: peak_rss_bytes(),
                backend: opts.backend.to_string(),
                corpus_json: serde_json::to_string(&prepared.info).unwrap_or_default(),
            };
            db.finish(&run.id, &result)?;
            on_event(RunEvent::Finished {
                id: run.id.clone(),
                name: run.name.clone(),
                val_loss: outcome.val_loss,
                wall_s: outcome.wall_s,
            });
            Ok(Outcome::Done)
        }
        Err(TrainError::Interrupted { .. }) => {
            db.release(&run.id)?;
            Ok(Outcome::Interrupted)
        }
        Err(e) => fail(db, run, &e.to_string(), on_event),
    }
}

/// Writes a training event to the database (metrics and heartbeats).
fn record(db: &SweepDb, id: &str, event: &TrainEvent) -> Result<(), StoreError> {
    match *event {
        TrainEvent::Step {
            step,
            tokens,
            loss,
            lr,
            tokens_per_s,
            wall_s,
        } => {
            db.record_metric(
                id,
                &Metric {
                    kind: "train",
                    step,
                    tokens,
                    loss,
                    bpb: None,
                    lr: Some(lr),
                    tokens_per_s: Some(tokens_per_s),
                    wall_s,
                },
            )?;
            db.heartbeat(id)
        }
        TrainEvent::Eval {
            step,
            tokens,
            loss,
            bpb,
            wall_s,
        } => db.record_metric(
            id,
            &Metric {
                kind: "val",
                step,
                tokens,
                loss,
                bpb: Some(bpb),
                lr: None,
                tokens_per_s: None,
                wall_s,
            },
        ),
        TrainEvent::Started { .. } | TrainEvent::Checkpoint { .. } => db.heartbeat(id),
    }
}

fn fail(
    db: &SweepDb,
    run: &StoredRun,
    error: &str,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    db.fail(&run.id, error)?;
    on_event(RunEvent::Failed {
        id: run.id.clone(),
        name: run.name.clone(),
        error: error.to_string(),
    });
    Ok(Outcome::Failed)
}

/// Where run `id` keeps its checkpoint.
pub fn checkpoint_path(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("checkpoints").join(format!("{id}.ckpt"))
}

/// The process's peak resident memory (Linux `VmHWM`), if the system reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
