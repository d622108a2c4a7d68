//! `pdsweep worker`: what a Slurm job runs. It traps Slurm's warning signal (USR2, sent
//! `--signal=B:USR2@S` seconds before the time limit) and SIGTERM (`scancel`, preemption):
//! either ends the current step with a checkpoint. After USR2 the job requeues itself
//! (`scontrol requeue`), so Slurm starts it again and it resumes from the checkpoint. It prints
//! one line per event to the job's log.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use pdsweep::plan::RunId;
use pdsweep::run::record::FileRecorder;
use pdsweep::run::slurm::{Slurm, work};
use pdsweep::run::{Outcome, RunEvent};
use pdsweep::train::TrainEvent;

use super::run::RunsFailed;

/// The worker stopped on a signal after a checkpoint (exit code 130).
#[derive(Debug, thiserror::Error)]
#[error(
    "stopped on a signal after a checkpoint; the run resumes from it when Slurm requeues this job or the coordinator submits it again"
)]
pub struct WorkerStopped;

/// Options of `pdsweep worker`.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    /// The array's manifest.
    pub manifest: PathBuf,
    /// The array index.
    pub index: u32,
}

static STOP: AtomicBool = AtomicBool::new(false);
static REQUEUE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_usr2(_: libc::c_int) {
    REQUEUE.store(true, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

static TERMINATED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERMINATED.store(true, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// After asking for a requeue: lets Slurm end the job (it sends SIGTERM) rather than ending it
/// first, which Slurm could record as the job failing instead of being requeued.
fn wait_to_be_stopped() {
    let start = std::time::Instant::now();
    while !TERMINATED.load(Ordering::SeqCst)
        && start.elapsed() < std::time::Duration::from_secs(120)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Installs the handlers; each only sets a flag (async-signal-safe).
fn install_handlers() {
    // SAFETY: the handlers only store to atomics, which is async-signal-safe; the sigaction
    // structure is zeroed and then filled before use.
    unsafe {
        for (signal, handler) in [
            (libc::SIGUSR2, on_usr2 as extern "C" fn(libc::c_int)),
            (libc::SIGTERM, on_term),
            (libc::SIGINT, on_term),
        ] {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Runs `pdsweep worker`.
pub fn worker(cmd: WorkerCommand) -> anyhow::Result<()> {
    install_handlers();
    let session = FileRecorder::session_from_env();
    eprintln!(
        "worker  session {session}: unit {} of {}",
        cmd.index,
        cmd.manifest.display()
    );
    let mut names = HashMap::new();
    let outcomes = work(&cmd.manifest, cmd.index, &session, &STOP, &mut |e| {
        log_event(&mut names, e)
    })?;
    let interrupted = outcomes.contains(&Outcome::Interrupted);
    if interrupted
        && REQUEUE.load(Ordering::SeqCst)
        && let Some(task) = array_task()
    {
        eprintln!("worker  checkpointed at the time-limit warning; requeueing {task}");
        // Slurm stops this job now and starts it again later; it resumes from the checkpoint.
        match Slurm::requeue(&task) {
            Ok(()) => wait_to_be_stopped(),
            Err(e) => {
                eprintln!("worker  cannot requeue: {e}; the coordinator will submit the run again")
            }
        }
    }
    if interrupted {
        return Err(WorkerStopped.into());
    }
    let failed = outcomes.iter().filter(|o| **o == Outcome::Failed).count();
    if failed > 0 {
        return Err(RunsFailed { failed }.into());
    }
    Ok(())
}

/// `ARRAYJOB_TASK` of this job, from Slurm's environment.
fn array_task() -> Option<String> {
    let job = std::env::var("SLURM_ARRAY_JOB_ID").ok()?;
    let task = std::env::var("SLURM_ARRAY_TASK_ID").ok()?;
    Some(format!("{job}_{task}"))
}

/// Prints a line for `event`; `names` maps run ids to names (learnt from `Preparing`).
fn log_event(names: &mut HashMap<RunId, String>, event: RunEvent) {
    let name = |id: &RunId| names.get(id).cloned().unwrap_or_else(|| id.to_string());
    let line = match event {
        RunEvent::Preparing { id, name } => {
            names.insert(id, name.clone());
            format!("prepare {name}")
        }
        RunEvent::Train {
            event: TrainEvent::Started { steps, start_step },
            id,
        } => format!("train   {}: steps {start_step}..{steps}", name(&id)),
        RunEvent::Train {
            event: TrainEvent::Eval {
                step, loss, bpb, ..
            },
            id,
        } => format!(
            "eval    {} step {step}: held-out {loss:.4} nats/token, {bpb:.4} bits/byte",
            name(&id)
        ),
        RunEvent::Train {
            event: TrainEvent::Checkpoint { step },
            id,
        } => format!("ckpt    {} step {step}", name(&id)),
        RunEvent::Finished {
            name,
            val_loss,
            wall_s,
            ..
        } => format!("done    {name}: held-out loss {val_loss:.4} nats/token in {wall_s:.1}s"),
        RunEvent::Failed { name, error, .. } => format!("FAILED  {name}: {error}"),
        _ => return,
    };
    eprintln!("{line}");
}
