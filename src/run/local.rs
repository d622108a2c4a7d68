//! The local scheduler: `jobs` worker threads of this process each claim the runnable run that
//! unblocks the most others — with the runnable runs of its shape that can train beside it as
//! one stack (`--stack`, see [`super::stacks`]) — execute it (see [`super::execute`]) and
//! record it straight into the sweep database; a failing run is recorded and the others go on.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use burn::tensor::Device;

use super::error::RunError;
use super::events::RunEvent;
use super::execute::{ExecEnv, Outcome, execute_unit};
use super::graph::{EXECUTED, priority, unblock_counts};
use super::record::DbRecorder;
use super::stacks::{CPU_MIN_STACK, StackAdvisor, StackPolicy, partners};
use super::unit::WorkUnit;
use crate::plan::RunId;
use crate::spec::Backend;
use crate::store::{RunState, StoredRun, SweepDb, SweepLayout};
use crate::train;

/// How to execute a sweep on this machine.
pub struct RunOptions<'a> {
    /// Where the sweep's files are.
    pub layout: SweepLayout,
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
    /// Prices of work for time estimates until the sweep's own runs refine them.
    pub calibration: crate::plan::Calibration,
    /// How runs of one shape are grouped into stacks.
    pub stack: StackPolicy,
    /// Where `--stack auto` keeps what it measured (`None`: measure in memory only).
    pub stack_advisor: Option<&'a StackAdvisor>,
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

/// How long a worker with nothing to claim waits before looking again while other workers of
/// this process are still running (their results may unblock more runs).
const IDLE_POLL: Duration = Duration::from_millis(200);

/// Executes every runnable run of plan `plan_id` in `db`, `opts.jobs` at a time.
///
/// Each worker has its own database connection and device; events from all of them reach `on_event`
/// on the calling thread.
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
        .filter(|r| EXECUTED.contains(&r.kind) && r.state != RunState::Done)
        .count();
    on_event(RunEvent::Pending { runs: pending });
    let in_memory = StackAdvisor::new(None, opts.backend.to_string());
    let shared = Shared {
        plan_id,
        advisor: opts.stack_advisor.unwrap_or(&in_memory),
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
    let env = ExecEnv {
        layout: opts.layout.clone(),
        backend: opts.backend,
        stop: opts.stop,
    };
    let (tx, rx) = mpsc::channel::<RunEvent>();
    let threads = super::pools::threads_per_worker(opts.jobs, opts.threads);
    let results: Vec<Result<Summary, RunError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.jobs.max(1))
            .map(|w| {
                let tx = tx.clone();
                let (shared, env, device) = (&shared, &env, devices[w % devices.len()]);
                let path = db.path().to_path_buf();
                scope.spawn(move || {
                    let result = super::pools::on_own_pool(threads, w, || {
                        worker(&path, device, shared, env, opts, &mut |e| {
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
                    &db.calibration(opts.backend.as_str(), opts.calibration.clone()),
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
        .filter(|r| EXECUTED.contains(&r.kind) && !r.state.is_finished())
        .count();
    Ok(summary)
}

/// What the workers of one execution share.
struct Shared<'a> {
    plan_id: i64,
    /// Decides `--stack auto` sizes.
    advisor: &'a StackAdvisor,
    /// For each run, how many runs (transitively) wait for it.
    unblocks: HashMap<RunId, usize>,
    /// Runs being executed by this process now.
    active: AtomicUsize,
    /// Set when a worker hit an error that ends the execution.
    abort: AtomicBool,
    /// Runs that failed during this execution: `--retry-failed` tries a failed run once per
    /// execution, not again and again.
    failed_here: Mutex<HashSet<RunId>>,
}

/// One worker: claim the most useful runnable run, execute it, repeat until nothing is left
/// that this process could run.
fn worker(
    db_path: &Path,
    device_index: usize,
    shared: &Shared,
    env: &ExecEnv,
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
        let runs = match claim_next(&db, shared, opts, &device)? {
            Some(runs) => runs,
            None if shared.active.load(Ordering::SeqCst) > 0 => {
                std::thread::sleep(IDLE_POLL);
                continue;
            }
            // Nobody here can unblock anything; look once more (a run that just finished was
            // recorded before it left `active`), then stop.
            None => match claim_next(&db, shared, opts, &device)? {
                Some(runs) => runs,
                None => break,
            },
        };
        if run_claimed(&mut db, &runs, &device, shared, env, on_event, &mut summary)? {
            break;
        }
    }
    Ok(summary)
}

/// Executes claimed runs (one, or a stack), counting them in `summary`; returns whether the
/// worker should stop (a run was interrupted).
fn run_claimed(
    db: &mut SweepDb,
    runs: &[StoredRun],
    device: &Device,
    shared: &Shared,
    env: &ExecEnv,
    on_event: &mut dyn FnMut(RunEvent),
    summary: &mut Summary,
) -> Result<bool, RunError> {
    shared.active.fetch_add(1, Ordering::SeqCst);
    let outcomes = match WorkUnit::stack(db, runs) {
        Ok(unit) => execute_unit(&unit, env, device, &mut DbRecorder::new(db), on_event),
        Err(e) => {
            for run in runs {
                let _ = db.release(&run.id);
            }
            Err(e)
        }
    };
    shared.active.fetch_sub(1, Ordering::SeqCst);
    let mut stop = false;
    for (run, outcome) in runs.iter().zip(outcomes?) {
        match outcome {
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
                stop = true;
            }
        }
    }
    Ok(stop)
}

/// Claims the most useful runnable run that no other worker or process holds: the one that
/// unblocks the most others, teachers before baselines before logit passes before students on
/// ties; with the runnable runs of its shape that may train beside it as one stack (all
/// claimed in one transaction; one done or held elsewhere meanwhile is left out).
fn claim_next(
    db: &SweepDb,
    shared: &Shared,
    opts: &RunOptions,
    device: &Device,
) -> Result<Option<Vec<StoredRun>>, RunError> {
    let retry_failed = opts.retry_failed;
    let mut runnable = db.runnable(shared.plan_id, &EXECUTED, retry_failed)?;
    {
        let failed_here = shared.failed_here.lock().unwrap_or_else(|e| e.into_inner());
        runnable.retain(|r| !failed_here.contains(&r.id));
    }
    runnable.sort_by_key(|r| {
        let unblocks = shared.unblocks.get(&r.id).copied().unwrap_or(0);
        (std::cmp::Reverse(unblocks), priority(r.kind))
    });
    // runs another worker or process holds are not candidates (a stale one is, as a lead)
    let free: Vec<StoredRun> = runnable
        .iter()
        .filter(|r| r.state != RunState::Running)
        .cloned()
        .collect();
    for lead in &runnable {
        let max = stack_size(lead, &free, shared, opts, device);
        let mut members = vec![lead];
        members.extend(partners(lead, &free, max));
        let ids: Vec<&RunId> = members.iter().map(|r| &r.id).collect();
        let claimed = db.claim_many(&ids, retry_failed, max > 1)?;
        if !claimed.is_empty() {
            return Ok(Some(
                members
                    .into_iter()
                    .filter(|r| claimed.contains(&r.id))
                    .cloned()
                    .collect(),
            ));
        }
    }
    Ok(None)
}

/// The most members a stack led by `lead` may have under the stack policy, with `free` the
/// runs it could take.
fn stack_size(
    lead: &StoredRun,
    free: &[StoredRun],
    shared: &Shared,
    opts: &RunOptions,
    device: &Device,
) -> usize {
    match opts.stack {
        StackPolicy::Off => 1,
        StackPolicy::Max(n) => n,
        StackPolicy::Auto => {
            // small stacks measured slower than runs alone on the CPU (see `run::stacks`)
            let min = match opts.backend {
                Backend::Cpu => CPU_MIN_STACK,
                _ => 2,
            };
            let available = 1 + partners(lead, free, usize::MAX).len();
            match serde_json::from_str(&lead.config_json) {
                Ok(config) if available >= min => {
                    shared.advisor.members(&config, available, min, device)
                }
                _ => 1,
            }
        }
    }
}
