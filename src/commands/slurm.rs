//! `pdsweep slurm`: plan (or reuse the plan), take the sweep's lease, then coordinate the
//! sweep's runs on Slurm, printing a line per submission, job state, start, result and retry.
//! Ctrl-C stops following and leaves the jobs running; the same command re-attaches.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;

use pdsweep::plan::{Calibration, Plan, PlanOptions, RunId};
use pdsweep::run::lease::{Holder, Lease};
use pdsweep::run::slurm::arrays::{ArrayRef, group};

use pdsweep::run::slurm::script::batch_script;
use pdsweep::run::slurm::{
    CoordinatorOptions, Slurm, SlurmEvent, SlurmFlags, SlurmSettings, candidates, coordinate,
    in_flight,
};
use pdsweep::spec::Sweep;
use pdsweep::spec::slurm::{SlurmMem, SlurmTime};
use pdsweep::spec::units::format_duration;
use pdsweep::store::{RunState, StoredRun, SweepDb, SweepLayout};

use super::UsageError;
use super::run::{Interrupted, RunsFailed};

/// Options of `pdsweep slurm`.
#[derive(Debug, Clone)]
pub struct SlurmCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Results folder.
    pub results: PathBuf,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// CPUs per job.
    pub cpus: Option<u64>,
    /// Memory per job (a size string).
    pub mem: Option<String>,
    /// GPUs per job.
    pub gpus: Option<u64>,
    /// Time limit (a time string).
    pub time: Option<String>,
    /// The `%` throttle.
    pub max_parallel: Option<u64>,
    /// Attempts before a run fails.
    pub max_attempts: Option<u64>,
    /// More sbatch options.
    pub sbatch_options: Vec<String>,
    /// Submit failed runs once more.
    pub retry_failed: bool,
    /// Seconds between looks at the jobs.
    pub poll_s: f64,
    /// Seconds before an ended job without a result counts as a failed attempt.
    pub settle_s: f64,
    /// Submit and exit.
    pub detach: bool,
    /// Print the scripts only.
    pub dry_run: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

/// Runs `pdsweep slurm`.
pub fn slurm(cmd: SlurmCommand) -> anyhow::Result<()> {
    let sweep = Sweep::load(&cmd.sweep)?;
    let mut plan = Plan::build(&sweep, &PlanOptions::default())?;
    let settings = SlurmSettings::new(
        sweep.file.slurm.as_ref(),
        flags(&cmd)?,
        std::env::current_exe().context("cannot find the running pdsweep executable")?,
    );
    // absolute paths: the jobs run elsewhere
    let sweep_dir = absolute(cmd.sweep.parent().unwrap_or(Path::new("")))?;
    let layout = SweepLayout::new(sweep_dir, &absolute(&cmd.results)?, &plan.sweep_name);
    let db_path = layout.database();
    // Job time limits ("auto") are priced on this machine until the sweep's own runs (on the
    // cluster's nodes) refine them.
    let calibration = match sweep.file.estimate.flops_per_s {
        Some(f) => Calibration::flops_only(f.get(), "[estimate] flops_per_s"),
        None => super::estimate::calibration(None, sweep.file.backend, true),
    };
    if cmd.dry_run {
        return dry_run(&plan, &layout, &settings, &cmd, &calibration);
    }
    let lease = Lease::acquire(&layout, Holder::Slurm)?;
    let mut slurm = Slurm::detect()?;
    // The corpus is prepared here, before anything is submitted, so that no job (and no GPU
    // it holds) waits on it: run this command inside a CPU allocation for a large corpus.
    super::corpus::prepare(&mut plan, &sweep, &layout, true)?;
    let mut db = SweepDb::open(&db_path)?;
    let write = db.write_plan(&plan, &cmd.sweep, &sweep.source)?;
    install_stop_handler();
    eprintln!(
        "sweep `{}`: {} runs planned, recorded in {}; following them on Slurm (Ctrl-C stops following, the jobs keep running)",
        plan.sweep_name,
        plan.runs.len(),
        db_path.display()
    );
    let options = CoordinatorOptions {
        sweep_name: plan.sweep_name.clone(),
        layout,
        backend: sweep.file.backend,
        calibration,
        settings,
        retry_failed: cmd.retry_failed,
        poll: Duration::from_secs_f64(cmd.poll_s.clamp(0.1, 3600.0)),
        settle: Duration::from_secs_f64(cmd.settle_s.clamp(0.0, 86_400.0)),
        detach: cmd.detach,
        stop: &STOP,
        lease: Some(&lease),
    };
    let summary = coordinate(
        &mut db,
        write.plan_id,
        &options,
        &mut slurm,
        &mut print_event,
    )?;
    eprintln!(
        "finished {} run(s), {} failed, {} not done",
        summary.finished, summary.failed, summary.remaining
    );
    if summary.interrupted {
        eprintln!("the jobs keep running on Slurm; run the same command again to follow them");
        return Err(Interrupted.into());
    }
    if summary.detached {
        eprintln!(
            "submitted; run the same command again to follow the jobs and record their results"
        );
        return Ok(());
    }
    if summary.failed > 0 || db_failed(&db, write.plan_id)? > 0 {
        return Err(RunsFailed {
            failed: db_failed(&db, write.plan_id)?,
        }
        .into());
    }
    Ok(())
}

fn db_failed(db: &SweepDb, plan_id: i64) -> anyhow::Result<usize> {
    Ok(db
        .plan_runs(plan_id)?
        .iter()
        .filter(|r| r.state == RunState::Failed)
        .count())
}

fn flags(cmd: &SlurmCommand) -> anyhow::Result<SlurmFlags> {
    let mem_mb = cmd
        .mem
        .as_deref()
        .map(|m| {
            m.parse::<SlurmMem>()
                .map(SlurmMem::mib)
                .map_err(|e| UsageError(format!("--mem: {e}")))
        })
        .transpose()?;
    let time = cmd
        .time
        .as_deref()
        .map(|t| {
            t.parse::<SlurmTime>()
                .map_err(|e| UsageError(format!("--time: {e}")))
        })
        .transpose()?;
    Ok(SlurmFlags {
        partition: cmd.partition.clone(),
        account: cmd.account.clone(),
        qos: cmd.qos.clone(),
        cpus: cmd.cpus,
        mem_mb,
        gpus: cmd.gpus,
        time,
        max_parallel: cmd.max_parallel,
        max_attempts: cmd.max_attempts,
        options: cmd.sbatch_options.clone(),
        binary: None,
    })
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    let base = if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    };
    std::path::absolute(base).with_context(|| format!("cannot resolve `{}`", path.display()))
}

/// First Ctrl-C (or SIGTERM): stop following, leave the jobs running. Second: exit at once.
fn install_stop_handler() {
    let installed = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            eprintln!("\nstopping now; the jobs keep running");
            std::process::exit(130);
        }
        eprintln!(
            "\nstopping: the jobs keep running on Slurm; run the same command again to re-attach"
        );
    });
    if let Err(e) = installed {
        eprintln!(
            "warning: cannot catch Ctrl-C ({e}); the jobs keep running whatever happens here"
        );
    }
}

fn print_event(event: SlurmEvent) {
    let line = match event {
        SlurmEvent::Reattached { tasks } => {
            format!("attach  following {tasks} job(s) submitted earlier")
        }
        SlurmEvent::Submitted {
            job_id,
            job_name,
            kind,
            runs,
            array,
            dependency,
            script,
        } => format!(
            "submit  {kind} array job {job_id} ({job_name}, --array={array}{}): {}  [{}]",
            dependency.map_or(String::new(), |d| format!(", --dependency={d}")),
            runs.join(", "),
            script.display()
        ),
        SlurmEvent::State { name, job, state } => format!("job     {job} {name}: {state}"),
        SlurmEvent::Began {
            name,
            session,
            host,
            start_step,
        } => {
            let on = host.map_or(String::new(), |h| format!(" on {h}"));
            match start_step {
                Some(s) if s > 0 => format!("resume  {name} at step {s} ({session}{on})"),
                _ => format!("start   {name} ({session}{on})"),
            }
        }
        SlurmEvent::Finished {
            name,
            job,
            val_loss,
            wall_s,
            gain,
        } => {
            let gain = gain.map_or(String::new(), |g| format!(", {g:+.4} vs its baseline"));
            format!(
                "done    {name}: held-out loss {val_loss:.4} nats/token{gain} in {} (job {job})",
                format_duration(wall_s)
            )
        }
        SlurmEvent::Failed { name, job, error } => format!("FAILED  {name} (job {job}): {error}"),
        SlurmEvent::Retrying {
            name,
            job,
            state,
            attempts,
            max_attempts,
        } => format!(
            "retry   {name}: job {job} ended {state} without a result (attempt {attempts} of {max_attempts}); submitting it again"
        ),
        SlurmEvent::Unreachable { error } => {
            format!("wait    Slurm does not answer ({error}); looking again")
        }
        SlurmEvent::Cancelled { names, because } => {
            format!(
                "cancel  {} ({because}; submitted again with it)",
                names.join(", ")
            )
        }
    };
    eprintln!("{line}");
}

/// Prints the scripts `pdsweep slurm` would submit now, from the database if there is one.
fn dry_run(
    plan: &Plan,
    layout: &SweepLayout,
    settings: &SlurmSettings,
    cmd: &SlurmCommand,
    calibration: &Calibration,
) -> anyhow::Result<()> {
    let db_path = layout.database();
    let (runs, open, calibration) = if db_path.exists() {
        let db = SweepDb::open(&db_path)?;
        let plan_id = db.current_plan()?.unwrap_or_default();
        let backend = plan
            .runs
            .first()
            .map_or(pdsweep::spec::Backend::Cpu, |r| r.config.backend);
        (
            db.plan_runs(plan_id)?,
            db.slurm_open_tasks()?,
            db.calibration(backend.as_str(), calibration.clone()),
        )
    } else {
        let runs = plan
            .runs
            .iter()
            .map(|r| StoredRun {
                id: r.id.clone(),
                kind: r.kind(),
                name: r.name.clone(),
                state: RunState::Planned,
                config_json: r.config_json.clone(),
                params_total: r.params.total as i64,
                params_non_embedding: r.params.non_embedding as i64,
                tokens: r.tokens() as i64,
                flops: r.flops,
                depends_on: r.depends_on.clone(),
            })
            .collect();
        (runs, Vec::new(), calibration.clone())
    };
    let retry = |_: &StoredRun| cmd.retry_failed;
    let wave = candidates(&runs, &open, &retry, settings, &calibration);
    let arrays = group(&wave, &in_flight(&open));
    let name = |r: &RunId| {
        runs.iter()
            .find(|x| &x.id == r)
            .map_or(r.to_string(), |x| x.name.clone())
    };
    println!(
        "# {} run(s) in {} array job(s); nothing is submitted (--dry-run)",
        wave.len(),
        arrays.len()
    );
    for (n, a) in arrays.iter().enumerate() {
        let job_name = format!("pds-{}-new{}", plan.sweep_name, n + 1);
        let job = |r: &ArrayRef| match r {
            ArrayRef::Job(j) => j.clone(),
            ArrayRef::New(k) => format!("<job of array {}>", k + 1),
        };
        let dependency = a.dependency.sbatch_value(&job);
        println!(
            "\n# array {}: {}",
            n + 1,
            a.tasks
                .iter()
                .map(|(i, r)| format!("[{i}] {}", name(r)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        print!(
            "{}",
            batch_script(
                &job_name,
                a,
                settings,
                dependency.as_deref(),
                &layout.slurm_manifest(&job_name),
                &layout.slurm_logs()
            )
        );
    }
    Ok(())
}
