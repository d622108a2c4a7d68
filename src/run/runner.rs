//! The scheduler: `jobs` workers each claim the runnable run that unblocks the most others,
//! prepare its data, train it with the right objective, and record metrics and the result; a
//! failing run (error, NaN, panic) is recorded and the others go on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use super::events::RunEvent;
use burn::tensor::Device;

use crate::data::{self, Prepared};
use crate::distill::{self, DistillObjective, StoreReader, TeacherSource, logits_run};
use crate::model::Transformer;
use crate::plan::{RunConfig, RunKind, default_flops_per_s};
use crate::spec::{Backend, DistillMode};
use crate::store::{Metric, RunResult, StoreError, StoredRun, SweepDb};
use crate::train::{
    self, MissingBackend, NextToken, Objective, TrainError, TrainEvent, TrainJob, checkpoint,
};

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
    /// Runs executed at once by this process (at least 1).
    pub jobs: usize,
    /// Device indices the workers are spread over, round-robin (empty: device 0).
    pub devices: Vec<usize>,
    /// Threads of each worker's own pool (0: the cores shared out among the workers).
    pub threads: usize,
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

impl Summary {
    fn add(&mut self, other: &Summary) {
        self.finished += other.finished;
        self.failed += other.failed;
        self.interrupted |= other.interrupted;
    }
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
    /// `--devices` was given for a backend that has no device indices.
    #[error(
        "`--devices` selects GPUs, but the sweep's backend is `{backend}`\n\nhint: use `--jobs N` to run several runs at once on the CPU"
    )]
    DevicesOnCpu {
        /// The sweep's backend.
        backend: Backend,
    },
}

/// The kinds of run executed.
const EXECUTED: [&str; 4] = ["teacher", "logits", "student", "baseline"];

/// How long a worker with nothing to claim waits before looking again while other workers of
/// this process are still running (their results may unblock more runs).
const IDLE_POLL: Duration = Duration::from_millis(200);

/// Executes every runnable run of plan `plan_id` in `db`, `opts.jobs` at a time. Each worker
/// has its own database connection and device; events from all of them reach `on_event` on
/// the calling thread.
pub fn execute(
    db: &mut SweepDb,
    plan_id: i64,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Summary, RunError> {
    if !opts.devices.is_empty() && opts.backend == Backend::Cpu {
        return Err(RunError::DevicesOnCpu {
            backend: opts.backend,
        });
    }
    db.requeue_dead()?;
    let runs = db.plan_runs(plan_id)?;
    let pending = runs
        .iter()
        .filter(|r| EXECUTED.contains(&r.kind.as_str()) && r.state != "done")
        .count();
    on_event(RunEvent::Pending { runs: pending });
    let shared = Shared {
        plan_id,
        unblocks: unblock_counts(&runs),
        active: AtomicUsize::new(0),
        abort: AtomicBool::new(false),
        failed_here: Default::default(),
    };
    let devices = if opts.devices.is_empty() {
        vec![0]
    } else {
        opts.devices.clone()
    };
    let (tx, rx) = mpsc::channel::<RunEvent>();
    let threads = super::pools::threads_per_worker(opts.jobs, opts.threads);
    let results: Vec<Result<Summary, RunError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.jobs.max(1))
            .map(|w| {
                let tx = tx.clone();
                let (shared, device) = (&shared, devices[w % devices.len()]);
                let path = db.path().to_path_buf();
                scope.spawn(move || {
                    let result = super::pools::on_own_pool(threads, w, || {
                        worker(&path, device, shared, opts, &mut |e| {
                            let _ = tx.send(e);
                        })
                    });
                    if result.is_err() {
                        shared.abort.store(true, Ordering::SeqCst);
                    }
                    result
                })
            })
            .collect();
        drop(tx);
        let eta = |db: &SweepDb| RunEvent::Eta {
            one_at_a_time_s: db
                .eta_s(
                    plan_id,
                    opts.backend.as_str(),
                    default_flops_per_s(opts.backend),
                )
                .unwrap_or(f64::NAN),
            jobs: opts.jobs.max(1),
        };
        on_event(eta(db));
        for event in rx {
            let ended = matches!(event, RunEvent::Finished { .. } | RunEvent::Failed { .. });
            on_event(event);
            if ended {
                on_event(eta(db));
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut summary = Summary::default();
    for result in results {
        summary.add(&result?);
    }
    summary.remaining = db
        .plan_runs(plan_id)?
        .iter()
        .filter(|r| EXECUTED.contains(&r.kind.as_str()) && r.state != "done" && r.state != "failed")
        .count();
    Ok(summary)
}

/// What the workers of one execution share.
struct Shared {
    plan_id: i64,
    /// For each run, how many runs (transitively) wait for it.
    unblocks: HashMap<String, usize>,
    /// Runs being executed by this process now.
    active: AtomicUsize,
    /// Set when a worker hit an error that ends the execution.
    abort: AtomicBool,
    /// Runs that failed during this execution: `--retry-failed` tries a failed run once per
    /// execution, not again and again.
    failed_here: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// One worker: claim the most useful runnable run, execute it, repeat until nothing is left
/// that this process could run.
fn worker(
    db_path: &Path,
    device_index: usize,
    shared: &Shared,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Summary, RunError> {
    let mut db = SweepDb::open(db_path)?;
    let device = train::device_for(opts.backend, device_index)?;
    let mut summary = Summary::default();
    loop {
        if opts.stop.load(Ordering::Relaxed) {
            summary.interrupted = true;
            break;
        }
        if shared.abort.load(Ordering::Relaxed) {
            break;
        }
        let run = match claim_next(&db, shared, opts.retry_failed)? {
            Some(run) => run,
            None if shared.active.load(Ordering::SeqCst) > 0 => {
                std::thread::sleep(IDLE_POLL);
                continue;
            }
            // Nobody here can unblock anything; look once more (a run that just finished was
            // recorded before it left `active`), then stop.
            None => match claim_next(&db, shared, opts.retry_failed)? {
                Some(run) => run,
                None => break,
            },
        };
        if run_claimed(&mut db, &run, &device, shared, opts, on_event, &mut summary)? {
            break;
        }
    }
    Ok(summary)
}

/// Executes a claimed run, counting it in `summary`; returns whether the worker should stop
/// (the run was interrupted).
fn run_claimed(
    db: &mut SweepDb,
    run: &StoredRun,
    device: &Device,
    shared: &Shared,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
    summary: &mut Summary,
) -> Result<bool, RunError> {
    shared.active.fetch_add(1, Ordering::SeqCst);
    let outcome = execute_guarded(db, run, device, opts, on_event);
    shared.active.fetch_sub(1, Ordering::SeqCst);
    match outcome? {
        Outcome::Done => summary.finished += 1,
        Outcome::Failed => {
            summary.failed += 1;
            shared
                .failed_here
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(run.id.clone());
        }
        Outcome::Interrupted => {
            summary.interrupted = true;
            return Ok(true);
        }
    }
    Ok(false)
}

/// Runs `run`, turning a panic inside it (burn reports some failures, e.g. out of memory, by
/// panicking) into a recorded failure, and handing the run back if the database fails.
fn execute_guarded(
    db: &mut SweepDb,
    run: &StoredRun,
    device: &Device,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute_one(db, run, device, opts, on_event)
    }));
    match attempt {
        Ok(result) => result.inspect_err(|_| {
            let _ = db.release(&run.id); // hand the run back so the next `run` takes it at once
        }),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            fail(db, run, &format!("crashed: {reason}"), on_event)
        }
    }
}

/// Claims the most useful runnable run that no other worker or process holds: the one that
/// unblocks the most others, teachers before baselines before logit passes before students on
/// ties.
fn claim_next(
    db: &SweepDb,
    shared: &Shared,
    retry_failed: bool,
) -> Result<Option<StoredRun>, RunError> {
    let mut runnable = db.runnable(shared.plan_id, &EXECUTED, retry_failed)?;
    {
        let failed_here = shared.failed_here.lock().unwrap_or_else(|e| e.into_inner());
        runnable.retain(|r| !failed_here.contains(&r.id));
    }
    runnable.sort_by_key(|r| {
        let unblocks = shared.unblocks.get(&r.id).copied().unwrap_or(0);
        (std::cmp::Reverse(unblocks), priority(&r.kind))
    });
    for run in &runnable {
        if db.claim(&run.id, retry_failed)? {
            return Ok(Some(run.clone()));
        }
    }
    Ok(None)
}

/// For each run, how many runs depend on it directly or through others.
fn unblock_counts(runs: &[StoredRun]) -> HashMap<String, usize> {
    let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
    for run in runs {
        for dep in &run.depends_on {
            dependents
                .entry(dep.as_str())
                .or_default()
                .push(run.id.as_str());
        }
    }
    runs.iter()
        .map(|run| {
            let mut seen = std::collections::HashSet::new();
            let mut stack = vec![run.id.as_str()];
            while let Some(id) = stack.pop() {
                for &next in dependents.get(id).map_or(&[][..], Vec::as_slice) {
                    if seen.insert(next) {
                        stack.push(next);
                    }
                }
            }
            (run.id.clone(), seen.len())
        })
        .collect()
}

/// Tie-break among runs that unblock as many others: teachers (they unblock logit passes and
/// students), then baselines (so a student's gain is known when it finishes), logit passes,
/// students.
fn priority(kind: &str) -> u8 {
    match kind {
        "teacher" => 0,
        "baseline" => 1,
        "logits" => 2,
        _ => 3,
    }
}

enum Outcome {
    Done,
    Failed,
    Interrupted,
}

/// Everything one run needs besides the database.
struct Ctx<'a> {
    run: &'a StoredRun,
    config: RunConfig,
    device: Device,
    prepared: Prepared,
    opts: &'a RunOptions<'a>,
}

fn execute_one(
    db: &mut SweepDb,
    run: &StoredRun,
    device: &Device,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let config: RunConfig =
        serde_json::from_str(&run.config_json).map_err(|e| RunError::Config {
            id: run.id.clone(),
            reason: e.to_string(),
        })?;
    let device = device.clone();
    on_event(RunEvent::Preparing {
        id: run.id.clone(),
        name: run.name.clone(),
    });
    let cache = opts.results_dir.join("cache");
    let prepared = match data::prepare(&config.data, &opts.sweep_dir, &cache, config.tokens) {
        Ok(p) => p,
        Err(e) => return fail(db, run, &e.to_string(), on_event),
    };
    on_event(RunEvent::DataReady {
        id: run.id.clone(),
        name: run.name.clone(),
        info: prepared.info.clone(),
    });
    let ctx = Ctx {
        run,
        config,
        device,
        prepared,
        opts,
    };
    let outcome = match ctx.config.kind {
        RunKind::Teacher | RunKind::Baseline => train_run(db, &ctx, &mut NextToken, None, on_event),
        RunKind::Student => student_run(db, &ctx, on_event),
        RunKind::Logits => logits_run(db, &ctx, on_event),
    };
    match outcome {
        Ok(Step::Done(result)) => {
            db.finish(&run.id, &result)?;
            on_event(RunEvent::Finished {
                id: run.id.clone(),
                name: run.name.clone(),
                val_loss: result.val_loss,
                wall_s: result.wall_s,
                gain: db.gain(&run.id)?,
            });
            Ok(Outcome::Done)
        }
        Ok(Step::Interrupted) => {
            db.release(&run.id)?;
            Ok(Outcome::Interrupted)
        }
        Ok(Step::Failed(reason)) => fail(db, run, &reason, on_event),
        Err(e) => Err(e),
    }
}

/// How a run's work ended (database errors aside).
enum Step {
    Done(RunResult),
    Failed(String),
    Interrupted,
}

/// The result row of a finished run.
fn result_row(ctx: &Ctx, val_loss: f64, val_bpb: f64, wall_s: f64, tokens_per_s: f64) -> RunResult {
    RunResult {
        val_loss,
        val_bpb,
        train_loss: None,
        steps: ctx.config.train.as_ref().map_or(0, |t| t.steps),
        tokens: ctx.config.tokens,
        wall_s,
        tokens_per_s,
        flops: ctx.run.flops,
        peak_rss_bytes: peak_rss_bytes(),
        backend: ctx.opts.backend.to_string(),
        corpus_json: serde_json::to_string(&ctx.prepared.info).unwrap_or_default(),
        agreement: None,
        kl_teacher_student: None,
        extra_json: None,
    }
}

/// Trains the run with `objective`; a student also measures agreement with `teacher`.
fn train_run(
    db: &SweepDb,
    ctx: &Ctx,
    objective: &mut dyn Objective,
    teacher: Option<&Transformer>,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let id = &ctx.run.id;
    let checkpoint = checkpoint_path(&ctx.opts.results_dir, id);
    let job = TrainJob {
        run_id: id,
        config: &ctx.config,
        data: &ctx.prepared,
        device: &ctx.device,
        checkpoint: &checkpoint,
        stop: ctx.opts.stop,
    };
    let mut store_error = None;
    let mut forward = |event: TrainEvent| {
        if let Err(e) = record(db, id, &event) {
            store_error.get_or_insert(e);
        }
        on_event(RunEvent::Train {
            id: id.clone(),
            event,
        });
    };
    let result = train::train(&job, objective, &mut forward);
    if let Some(e) = store_error {
        return Err(e.into());
    }
    let outcome = match result {
        Ok(o) => o,
        Err(TrainError::Interrupted { .. }) => return Ok(Step::Interrupted),
        Err(e) => return Ok(Step::Failed(e.to_string())),
    };
    let mut row = result_row(
        ctx,
        outcome.val_loss,
        outcome.val_bpb,
        outcome.wall_s,
        outcome.tokens_per_s,
    );
    row.train_loss = outcome.train_loss.is_finite().then_some(outcome.train_loss);
    if let Some(teacher) = teacher {
        let context = ctx.config.data.context as usize;
        let (agree, kl) = distill::agreement(
            &outcome.model,
            teacher,
            &ctx.prepared.val,
            context,
            &ctx.device,
        );
        row.agreement = Some(agree);
        row.kl_teacher_student = Some(kl);
    }
    Ok(Step::Done(row))
}

/// The finished teacher run `teacher_id`: its model loaded from its final checkpoint, and the
/// checkpoint's content hash.
fn load_teacher(
    db: &SweepDb,
    ctx: &Ctx,
    teacher_id: &str,
) -> Result<Result<(Transformer, String), String>, RunError> {
    let Some(json) = db.run_config(teacher_id)? else {
        return Ok(Err(format!(
            "teacher run `{teacher_id}` is not in the sweep database"
        )));
    };
    let teacher: RunConfig = serde_json::from_str(&json).map_err(|e| RunError::Config {
        id: teacher_id.into(),
        reason: e.to_string(),
    })?;
    let path = checkpoint_path(&ctx.opts.results_dir, teacher_id);
    let loaded = match checkpoint::load(&path, teacher_id) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Ok(Err(format!(
                "teacher checkpoint `{}` is missing",
                path.display()
            )));
        }
        Err(e) => return Ok(Err(e.to_string())),
    };
    let model = match loaded.model(train::init_model(&teacher, &ctx.device)) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(checkpoint::content_hash(&path)
        .map(|h| (model, h))
        .map_err(|e| e.to_string()))
}

fn student_run(
    db: &SweepDb,
    ctx: &Ctx,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let Some(distill) = ctx.config.distill.as_ref() else {
        return Ok(Step::Failed(
            "student run has no distillation settings".into(),
        ));
    };
    let (teacher, teacher_sha) = match load_teacher(db, ctx, &distill.teacher.0)? {
        Ok(t) => t,
        Err(reason) => return Ok(Step::Failed(reason)),
    };
    let source = match distill.mode {
        DistillMode::Online => TeacherSource::Online {
            teacher: &teacher,
            device: &ctx.device,
        },
        DistillMode::Offline => {
            let Some(store_id) = ctx.run.depends_on.first() else {
                return Ok(Step::Failed(
                    "offline student has no logit store dependency".into(),
                ));
            };
            let Some(store_json) = db.run_config(store_id)? else {
                return Ok(Step::Failed(format!(
                    "logit store run `{store_id}` is not in the sweep database"
                )));
            };
            let store: RunConfig =
                serde_json::from_str(&store_json).map_err(|e| RunError::Config {
                    id: store_id.clone(),
                    reason: e.to_string(),
                })?;
            let Some(header) =
                logits_run::expected_header(store_id, &store, &teacher_sha, &ctx.prepared.info.key)
            else {
                return Ok(Step::Failed(format!(
                    "run `{store_id}` is not a logit store"
                )));
            };
            let dir = store_dir(&ctx.opts.results_dir, store_id);
            TeacherSource::Offline(Box::new(StoreReader::new(
                &dir,
                header.clone(),
                logits_run::shard_blocks(&header),
            )))
        }
    };
    let mut objective = DistillObjective {
        config: distill,
        source,
        error: None,
    };
    let step = train_run(db, ctx, &mut objective, Some(&teacher), on_event)?;
    match objective.error {
        Some(e) => Ok(Step::Failed(e.to_string())),
        None => Ok(step),
    }
}

fn logits_run(
    db: &SweepDb,
    ctx: &Ctx,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let Some(logits) = ctx.config.logits.as_ref() else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let (teacher, sha) = match load_teacher(db, ctx, &logits.teacher.0)? {
        Ok(t) => t,
        Err(reason) => return Ok(Step::Failed(reason)),
    };
    let Some(header) =
        logits_run::expected_header(&ctx.run.id, &ctx.config, &sha, &ctx.prepared.info.key)
    else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let id = ctx.run.id.clone();
    let total = ctx.config.tokens / header.block_positions.max(1);
    on_event(RunEvent::Train {
        id: id.clone(),
        event: TrainEvent::Started {
            steps: total,
            start_step: 0,
        },
    });
    let start = std::time::Instant::now();
    let mut progress = |done: u64, _total: u64| {
        if done.is_multiple_of(10) || done == total {
            let _ = db.heartbeat(&id);
            let tokens = done * header.block_positions;
            let tokens_per_s = tokens as f64 / start.elapsed().as_secs_f64().max(1e-9);
            let event = TrainEvent::Step {
                step: done,
                tokens,
                loss: f64::NAN,
                lr: 0.0,
                tokens_per_s,
                wall_s: start.elapsed().as_secs_f64(),
            };
            on_event(RunEvent::Train {
                id: id.clone(),
                event,
            });
        }
    };
    let dir = store_dir(&ctx.opts.results_dir, &ctx.run.id);
    let written = logits_run::write_store(
        &ctx.config,
        &header,
        &teacher,
        &ctx.prepared,
        &ctx.device,
        &dir,
        ctx.opts.stop,
        &mut progress,
    );
    let summary = match written {
        Ok(s) => s,
        Err(logits_run::LogitsError::Interrupted) => return Ok(Step::Interrupted),
        Err(e) => return Ok(Step::Failed(e.to_string())),
    };
    let context = ctx.config.data.context as usize;
    let (val_loss, val_bpb) = train::evaluate(
        &teacher,
        &ctx.prepared.val,
        context,
        &ctx.device,
        ctx.prepared.info.val_bytes_per_token,
    );
    let mut row = result_row(ctx, val_loss, val_bpb, summary.wall_s, summary.tokens_per_s);
    row.extra_json = Some(
        serde_json::json!({
            "store_bytes": summary.bytes,
            "positions": summary.positions,
            "kept_entries": summary.entries,
            "bytes_per_token": summary.bytes as f64 / summary.positions.max(1) as f64,
            "bytes_per_kept_logit": summary.bytes as f64 / summary.entries.max(1) as f64,
            "predicted_store_bytes": ctx.run_disk_bytes(),
        })
        .to_string(),
    );
    Ok(Step::Done(row))
}

impl Ctx<'_> {
    /// The plan's predicted disk bytes for this run.
    fn run_disk_bytes(&self) -> u64 {
        crate::plan::logit_bytes_per_token(
            self.config.data.vocab,
            self.config
                .logits
                .as_ref()
                .map_or(0, |l| l.truncation.top_k.kept(self.config.data.vocab)),
        ) * self.config.tokens
    }
}

/// Where the logit store of run `id` lives.
pub fn store_dir(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("logits").join(id)
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
