//! `pdsweep run`: plan (or reuse the plan), then execute every runnable run, recording
//! metrics and results in the sweep database.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use pdsweep::plan::{Plan, PlanOptions, RunId};
use pdsweep::run::lease::{Holder, Lease};
use pdsweep::run::{DeviceChoice, RunOptions, StackAdvisor, StackPolicy, execute};
use pdsweep::spec::Sweep;
use pdsweep::store::{RunState, SweepDb, SweepLayout};

use super::progress::ProgressView;

/// Options of `pdsweep run`.
#[derive(Debug, Clone)]
pub struct RunCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Results folder.
    pub results: PathBuf,
    /// Retry failed runs.
    pub retry_failed: bool,
    /// Runs at once (at least one per device).
    pub jobs: usize,
    /// The GPUs to use (none: the backend's default device).
    pub devices: DeviceChoice,
    /// CPU threads per job (0: the cores shared out among the jobs).
    pub threads: usize,
    /// How runs of one shape are grouped into stacks.
    pub stack: StackPolicy,
}

/// A sweep finished with failed runs (exit code 3).
#[derive(Debug, thiserror::Error)]
#[error(
    "{failed} run(s) failed; see `FAILED` lines above (rerun with --retry-failed to try them again)"
)]
pub struct RunsFailed {
    /// How many.
    pub failed: usize,
}

/// The sweep was stopped on request (exit code 130).
#[derive(Debug, thiserror::Error)]
#[error("stopped on request; run the same command again to resume")]
pub struct Interrupted;

static STOP: AtomicBool = AtomicBool::new(false);

/// First Ctrl-C (or SIGTERM): finish the current step, checkpoint, hand the run back.
///
/// Second: stop at once — every metric already recorded stays, and the run resumes from its last
/// checkpoint next time (its process is gone, so the next `run` takes it over).
fn install_stop_handler() {
    let installed = ctrlc::set_handler(|| {
        if STOP.swap(true, std::sync::atomic::Ordering::SeqCst) {
            eprintln!("\nstopping now");
            std::process::exit(130);
        }
        eprintln!(
            "\nstopping after the current step (checkpointing); press Ctrl-C again to stop at once"
        );
    });
    if let Err(e) = installed {
        eprintln!(
            "warning: cannot catch Ctrl-C ({e}); an interrupted run resumes from its last checkpoint"
        );
    }
}

/// Runs `pdsweep run`.
pub fn run(cmd: RunCommand) -> anyhow::Result<()> {
    let sweep = Sweep::load(&cmd.sweep)?;
    // `--devices all` is resolved first, so a choice that cannot be met stops before planning.
    let devices = cmd.devices.indices(sweep.file.backend)?;
    let mut plan = Plan::build(&sweep, &PlanOptions::default())?;
    let layout = SweepLayout::for_file(&cmd.sweep, &cmd.results, &plan.sweep_name);
    let db_path = layout.database();
    // Before opening the database: refuses a database in use on another host.
    let _lease = Lease::acquire(&layout, Holder::Run)?;
    super::corpus::prepare(&mut plan, &sweep, &layout, true)?;
    if let Some(corpus) = plan.corpus.as_ref().filter(|c| c.files > 0) {
        eprintln!(
            "corpus: {} ({} training tokens, {} held out; {})",
            corpus.description, corpus.train_tokens, corpus.val_tokens, corpus.val_split
        );
    }
    let existing = db_path
        .exists()
        .then(|| SweepDb::open(&db_path))
        .transpose()?;
    plan.check_design(&super::priors::priors(&sweep, existing.as_ref()));
    drop(existing);
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    install_stop_handler();
    let mut db = SweepDb::open(&db_path)?;
    let write = db.write_plan(&plan, &cmd.sweep, &sweep.source)?;
    let advisor = StackAdvisor::new(
        super::estimate::cache_file_named(&format!("stacks-{}.json", sweep.file.backend)),
        super::estimate::machine(sweep.file.backend),
    );
    let options = RunOptions {
        layout,
        retry_failed: cmd.retry_failed,
        backend: sweep.file.backend,
        jobs: cmd.jobs.max(devices.len()),
        devices,
        threads: cmd.threads,
        stop: &STOP,
        calibration: super::estimate::calibration(Some(&db), sweep.file.backend, true),
        stack: cmd.stack,
        stack_advisor: Some(&advisor),
    };
    eprintln!(
        "sweep `{}`: {} runs planned, recorded in {}",
        plan.sweep_name,
        plan.runs.len(),
        db_path.display()
    );
    let mut view = ProgressView::new();
    let summary = execute(&mut db, write.plan_id, &options, &mut |e| view.handle(e))?;
    view.finish();
    eprintln!(
        "finished {} run(s), {} failed, {} waiting",
        summary.finished, summary.failed, summary.remaining
    );
    if summary.interrupted {
        return Err(Interrupted.into());
    }
    if summary.failed > 0 {
        let diverged = diverged_candidates(&db, write.plan_id, &plan)?;
        if diverged.len() < summary.failed || diverged.is_empty() {
            return Err(RunsFailed {
                failed: summary.failed,
            }
            .into());
        }
        eprintln!(
            "note: every failed run is a learning-rate candidate (`tune_lr`) that diverged: {}; the runs tuned on them train at the best of the others",
            diverged.join(", ")
        );
    }
    Ok(())
}

/// Names of the plan's failed runs when every one of them is a learning-rate candidate of a
/// tuned run (a rate that diverged is an answer, not a failure of the sweep); empty otherwise.
fn diverged_candidates(db: &SweepDb, plan_id: i64, plan: &Plan) -> anyhow::Result<Vec<String>> {
    let candidates: std::collections::HashSet<&RunId> = plan
        .runs
        .iter()
        .filter_map(|r| r.config.tune.as_ref())
        .flat_map(|t| t.candidates.iter())
        .collect();
    let failed: Vec<_> = db
        .plan_runs(plan_id)?
        .into_iter()
        .filter(|r| r.state == RunState::Failed)
        .collect();
    if failed.iter().any(|r| !candidates.contains(&r.id)) {
        return Ok(Vec::new());
    }
    Ok(failed
        .into_iter()
        .map(|r| format!("`{}`", r.name))
        .collect())
}
