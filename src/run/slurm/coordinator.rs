//! The coordinator (`pdsweep slurm`): the only writer of the sweep database while a sweep runs
//! on Slurm. It submits the runs that are not done as job arrays with dependencies (recording
//! each submission before `sbatch`), follows the jobs (Slurm's state plus the files they write),
//! ingests their metrics and results, and resubmits a run whose job ended without a result —
//! with its unfinished dependents, since Slurm never revives a failed dependency — until
//! `max_attempts`. Stopping it leaves the jobs running; running it again re-attaches.

use crate::error::Cause;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::arrays::{ArrayPlan, ArrayRef, Candidate, array_spec, group};
use super::queue::{JobState, Slurm, SlurmError};
use super::script::{MANIFEST_VERSION, Manifest, batch_script};
use super::settings::SlurmSettings;
use crate::atomic::write_atomic;
use crate::plan::{Calibration, RunConfig, RunId, RunKind};
use crate::run::error::{RecordError, RunError};
use crate::run::graph::{EXECUTED, priority};
use crate::run::lease::Lease;
use crate::run::record::{Ingester, RunFiles};
use crate::run::unit::WorkUnit;
use crate::spec::Backend;
use crate::store::{RunState, SlurmTask, StoreError, StoredRun, SweepDb, SweepLayout, TaskEnd};

/// How to coordinate a sweep on Slurm.
pub struct CoordinatorOptions<'a> {
    /// The sweep's name.
    pub sweep_name: String,
    /// Where the sweep's files are (absolute paths: jobs run elsewhere).
    pub layout: SweepLayout,
    /// The backend the jobs train on.
    pub backend: Backend,
    /// Prices of work for time limits until the sweep's own runs refine them.
    pub calibration: Calibration,
    /// Resources and submission settings.
    pub settings: SlurmSettings,
    /// Submit runs that failed before once more.
    pub retry_failed: bool,
    /// How often to look at the jobs.
    pub poll: Duration,
    /// How long a job must have ended before its missing result counts as a failed attempt
    /// (a network filesystem may show a job's last files late).
    pub settle: Duration,
    /// Submit, then return without following the jobs.
    pub detach: bool,
    /// Set to stop following (the jobs keep running).
    pub stop: &'a AtomicBool,
    /// The sweep's lease, held by the caller; losing it stops the coordinator.
    pub lease: Option<&'a Lease>,
}

/// What the coordinator reports.
#[derive(Debug, Clone, PartialEq)]
pub enum SlurmEvent {
    /// Attempts submitted by an earlier coordinator are followed again.
    Reattached {
        /// How many.
        tasks: usize,
    },
    /// An array job was submitted.
    Submitted {
        /// Its id.
        job_id: String,
        /// Its name.
        job_name: String,
        /// The kind of its runs.
        kind: RunKind,
        /// Run names.
        runs: Vec<String>,
        /// `--array`'s value.
        array: String,
        /// `--dependency`'s value.
        dependency: Option<String>,
        /// Its batch script.
        script: PathBuf,
    },
    /// A job's state changed.
    State {
        /// Run name.
        name: String,
        /// `JOBID_INDEX`.
        job: String,
        /// State and reason.
        state: String,
    },
    /// A job began (or resumed) a run.
    Began {
        /// Run name.
        name: String,
        /// The session (`JOBID_INDEX.RESTART`).
        session: String,
        /// Its host.
        host: Option<String>,
        /// The step it started from (non-zero when resuming from a checkpoint).
        start_step: Option<u64>,
    },
    /// A run finished and its result is recorded.
    Finished {
        /// Run name.
        name: String,
        /// `JOBID_INDEX`.
        job: String,
        /// Held-out loss.
        val_loss: f64,
        /// Wall time.
        wall_s: f64,
        /// Students: gain over the matching baseline.
        gain: Option<f64>,
    },
    /// A run failed for good.
    Failed {
        /// Run name.
        name: String,
        /// `JOBID_INDEX`.
        job: String,
        /// Why.
        error: String,
    },
    /// A job ended without a result; its run will be submitted again.
    Retrying {
        /// Run name.
        name: String,
        /// `JOBID_INDEX`.
        job: String,
        /// How it ended.
        state: String,
        /// Attempts that ran so far.
        attempts: u32,
        /// The most allowed.
        max_attempts: u32,
    },
    /// Slurm did not answer; the jobs are looked at again at the next poll.
    Unreachable {
        /// What the command said.
        error: String,
    },
    /// Pending jobs of runs waiting for a failed attempt were cancelled (they are submitted
    /// again with it).
    Cancelled {
        /// Run names.
        names: Vec<String>,
        /// The attempt they waited for.
        because: String,
    },
}

/// How a coordination ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmSummary {
    /// Runs that finished while following.
    pub finished: usize,
    /// Runs that failed for good while following.
    pub failed: usize,
    /// Runs neither done nor failed (waiting for a failed run, or still on Slurm).
    pub remaining: usize,
    /// Stopped on request (the jobs keep running).
    pub interrupted: bool,
    /// Returned after submitting (`detach`).
    pub detached: bool,
}

/// Errors that stop the coordinator (the jobs keep running).
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A job's files could not be read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A run's configuration could not be read.
    #[error(transparent)]
    Run(#[from] RunError),
    /// A Slurm command failed.
    #[error(transparent)]
    Slurm(#[from] SlurmError),
    /// A manifest or script could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// Another process took the sweep's lease.
    #[error("another process took this sweep's lease `{}`; stopping (the jobs keep running)", path.display())]
    LeaseLost {
        /// The lease file.
        path: PathBuf,
    },
}

/// Follows the sweep's runs on Slurm until every run is done, failed, or waiting for a failed
/// one (or until stopped).
pub fn coordinate(
    db: &mut SweepDb,
    plan_id: i64,
    opts: &CoordinatorOptions,
    slurm: &mut Slurm,
    on_event: &mut dyn FnMut(SlurmEvent),
) -> Result<SlurmSummary, CoordinatorError> {
    db.requeue_dead()?;
    let mut c = Coordinator {
        plan_id,
        opts,
        ingester: Ingester::new(&opts.layout),
        ended_at: HashMap::new(),
        retried: HashSet::new(),
        reported: HashSet::new(),
        summary: SlurmSummary::default(),
    };
    c.resolve_unsubmitted(db, slurm)?;
    let open = db.slurm_open_tasks()?;
    if !open.is_empty() {
        on_event(SlurmEvent::Reattached { tasks: open.len() });
    }
    loop {
        if opts.stop.load(Ordering::SeqCst) {
            c.summary.interrupted = true;
            break;
        }
        if let Some(lease) = opts.lease.filter(|l| l.lost()) {
            return Err(CoordinatorError::LeaseLost {
                path: lease.path().to_path_buf(),
            });
        }
        c.follow(db, slurm, on_event)?;
        let submitted = c.submit(db, slurm, on_event)?;
        if db.slurm_open_tasks()?.is_empty() && submitted == 0 {
            break;
        }
        if opts.detach {
            c.summary.detached = true;
            break;
        }
        let until = Instant::now() + opts.poll;
        while Instant::now() < until && !opts.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100).min(opts.poll));
        }
    }
    c.summary.remaining = db
        .plan_runs(plan_id)?
        .iter()
        .filter(|r| EXECUTED.contains(&r.kind) && !r.state.is_finished())
        .count();
    Ok(c.summary)
}

struct Coordinator<'a> {
    plan_id: i64,
    opts: &'a CoordinatorOptions<'a>,
    ingester: Ingester,
    /// When each attempt (run, attempt) was first seen ended without a result.
    ended_at: HashMap<(RunId, u32), Instant>,
    /// Failed runs submitted again by `--retry-failed` (once per coordination).
    retried: HashSet<RunId>,
    /// Sessions already reported.
    reported: HashSet<(RunId, String)>,
    summary: SlurmSummary,
}

impl Coordinator<'_> {
    /// Finds the job ids of submissions recorded before a coordinator died in `sbatch`, or
    /// drops those that never reached Slurm.
    fn resolve_unsubmitted(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
    ) -> Result<(), CoordinatorError> {
        let mut seen = HashSet::new();
        for task in db.slurm_open_tasks()? {
            if task.job_id.is_some() || !seen.insert(task.submission) {
                continue;
            }
            match slurm.find_by_name(&task.job_name)? {
                Some(job_id) => db.slurm_set_job_id(task.submission, &job_id)?,
                None => db.slurm_drop_submission(
                    task.submission,
                    "the coordinator stopped before `sbatch` returned, and Slurm has no such job",
                )?,
            }
        }
        Ok(())
    }

    /// Ingests every open attempt's files and settles the attempts that ended.
    fn follow(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<(), CoordinatorError> {
        let open = db.slurm_open_tasks()?;
        let mut job_ids: Vec<String> = open.iter().filter_map(|t| t.job_id.clone()).collect();
        job_ids.sort();
        job_ids.dedup();
        // States first, files second: a job seen ended has written its last files already.
        let states = match slurm.states(&job_ids) {
            Ok(states) => states,
            Err(SlurmError::Missing { command }) => {
                return Err(SlurmError::Missing { command }.into());
            }
            // The controller does not answer (restarting, overloaded): judge nothing now.
            Err(e) => {
                on_event(SlurmEvent::Unreachable {
                    error: e.to_string(),
                });
                return Ok(());
            }
        };
        let mut failed_attempts = Vec::new();
        for task in &open {
            let Some(job) = task.job_ref() else { continue };
            let files = self.ingester.ingest(db, &task.run_id)?;
            self.report_sessions(db, task, &files, on_event)?;
            let prefix = format!("{job}.");
            if !task.started && files.starts.keys().any(|s| s.starts_with(&prefix)) {
                db.slurm_task_started(&task.run_id, task.attempt)?;
            }
            if let Some(result) = &files.result {
                db.finish(&task.run_id, result)?;
                db.slurm_end_task(&task.run_id, task.attempt, "COMPLETED", None, TaskEnd::Done)?;
                self.summary.finished += 1;
                on_event(SlurmEvent::Finished {
                    name: task.run_name.clone(),
                    job,
                    val_loss: result.val_loss,
                    wall_s: result.wall_s,
                    gain: db.gain(&task.run_id)?,
                });
                continue;
            }
            if let Some(failed) = files
                .failed
                .as_ref()
                .filter(|f| f.session.starts_with(&prefix))
            {
                let state = states
                    .get(&job)
                    .map_or("FAILED".into(), |s| s.state.clone());
                db.slurm_end_task(
                    &task.run_id,
                    task.attempt,
                    &state,
                    Some(&failed.reason),
                    TaskEnd::Failed(&failed.reason),
                )?;
                self.summary.failed += 1;
                on_event(SlurmEvent::Failed {
                    name: task.run_name.clone(),
                    job,
                    error: failed.reason.clone(),
                });
                continue;
            }
            match states.get(&job) {
                Some(state) if state.is_active() => {
                    self.ended_at.remove(&(task.run_id.clone(), task.attempt));
                    if state.state != task.state || state.reason != task.reason {
                        db.slurm_task_state(
                            &task.run_id,
                            task.attempt,
                            &state.state,
                            state.reason.as_deref(),
                        )?;
                        on_event(SlurmEvent::State {
                            name: task.run_name.clone(),
                            job,
                            state: state.describe(),
                        });
                    }
                }
                ended => {
                    let since = *self
                        .ended_at
                        .entry((task.run_id.clone(), task.attempt))
                        .or_insert_with(Instant::now);
                    if since.elapsed() >= self.opts.settle {
                        failed_attempts.push((task.clone(), ended.cloned()));
                    }
                }
            }
        }
        for (task, state) in failed_attempts {
            self.failed_attempt(db, slurm, &task, state, on_event)?;
        }
        Ok(())
    }

    /// Reports sessions not reported yet, once their start step is known.
    fn report_sessions(
        &mut self,
        db: &SweepDb,
        task: &SlurmTask,
        files: &RunFiles,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<(), CoordinatorError> {
        if files
            .starts
            .keys()
            .all(|s| self.reported.contains(&(task.run_id.clone(), s.clone())))
        {
            return Ok(());
        }
        for s in db.sessions(&task.run_id)? {
            let key = (task.run_id.clone(), s.session.clone());
            if s.start_step.is_some() && self.reported.insert(key) {
                on_event(SlurmEvent::Began {
                    name: task.run_name.clone(),
                    session: s.session,
                    host: s.host,
                    start_step: s.start_step,
                });
            }
        }
        Ok(())
    }

    /// A job ended without a result: submit its run again (and cancel the pending jobs of the
    /// runs waiting for it, which are submitted again with it), or fail it for good after
    /// `max_attempts` attempts that ran.
    fn failed_attempt(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
        task: &SlurmTask,
        state: Option<JobState>,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<(), CoordinatorError> {
        let job = task.job_ref().unwrap_or_default();
        let how = state
            .as_ref()
            .map_or_else(|| "gone from Slurm's queue".to_string(), JobState::describe);
        let final_state = state.as_ref().map_or("GONE", |s| s.state.as_str());
        let attempts = db
            .slurm_tasks_of(&task.run_id)?
            .iter()
            .filter(|t| t.started)
            .count() as u32;
        let max = self.opts.settings.max_attempts;
        let reason = format!("job {job} ended {how} without a result");
        self.ended_at.remove(&(task.run_id.clone(), task.attempt));
        let started = db
            .slurm_tasks_of(&task.run_id)?
            .iter()
            .any(|t| t.attempt == task.attempt && t.started);
        if started && attempts >= max {
            let error =
                format!("{reason}; {attempts} attempt(s), the most `--max-attempts` allows");
            db.slurm_end_task(
                &task.run_id,
                task.attempt,
                final_state,
                Some(&how),
                TaskEnd::Failed(&error),
            )?;
            self.summary.failed += 1;
            on_event(SlurmEvent::Failed {
                name: task.run_name.clone(),
                job: job.clone(),
                error,
            });
        } else {
            db.slurm_end_task(
                &task.run_id,
                task.attempt,
                final_state,
                Some(&how),
                TaskEnd::Retry,
            )?;
            if started {
                on_event(SlurmEvent::Retrying {
                    name: task.run_name.clone(),
                    job: job.clone(),
                    state: how,
                    attempts,
                    max_attempts: max,
                });
            }
        }
        self.cancel_dependents(db, slurm, &task.run_id, &job, on_event)
    }

    /// Cancels the open attempts, not started, of runs that wait (through any chain) for run
    /// `failed`: Slurm would cancel them (`--kill-on-invalid-dep`), but not always at once,
    /// and a dependent must never start on a dependency that has no result.
    fn cancel_dependents(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
        failed: &RunId,
        job: &str,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<(), CoordinatorError> {
        let runs = db.plan_runs(self.plan_id)?;
        let mut waiting: HashSet<&RunId> = HashSet::from([failed]);
        let mut grew = true;
        while grew {
            grew = false;
            for r in &runs {
                if !waiting.contains(&r.id) && r.depends_on.iter().any(|d| waiting.contains(d)) {
                    waiting.insert(&r.id);
                    grew = true;
                }
            }
        }
        let doomed: Vec<SlurmTask> = db
            .slurm_open_tasks()?
            .into_iter()
            .filter(|t| &t.run_id != failed && waiting.contains(&t.run_id) && !t.started)
            .collect();
        if doomed.is_empty() {
            return Ok(());
        }
        let refs: Vec<String> = doomed.iter().filter_map(SlurmTask::job_ref).collect();
        slurm.cancel(&refs)?;
        let because = format!("job {job} ended without a result");
        for t in &doomed {
            db.slurm_end_task(
                &t.run_id,
                t.attempt,
                "CANCELLED",
                Some(&because),
                TaskEnd::Retry,
            )?;
        }
        on_event(SlurmEvent::Cancelled {
            names: doomed.iter().map(|t| t.run_name.clone()).collect(),
            because,
        });
        Ok(())
    }

    /// Submits every run that can be submitted now (its dependencies done, in flight, or
    /// submitted with it); returns how many.
    fn submit(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<usize, CoordinatorError> {
        let runs = db.plan_runs(self.plan_id)?;
        let open = db.slurm_open_tasks()?;
        let calibration = db.calibration(self.opts.backend.as_str(), self.opts.calibration.clone());
        let retry = |r: &StoredRun| self.opts.retry_failed && !self.retried.contains(&r.id);
        let candidates = candidates(&runs, &open, &retry, &self.opts.settings, &calibration);
        if candidates.is_empty() {
            return Ok(0);
        }
        let in_flight = in_flight(&open);
        let by_id: HashMap<&RunId, &StoredRun> = runs.iter().map(|r| (&r.id, r)).collect();
        let arrays = group(&candidates, &in_flight);
        let mut job_ids: Vec<String> = Vec::new();
        for plan in &arrays {
            let job_id = self.submit_array(db, slurm, plan, &job_ids, &by_id, on_event)?;
            job_ids.push(job_id);
        }
        Ok(candidates.len())
    }

    /// Writes the manifest and script of `plan`, records the submission, calls `sbatch`.
    fn submit_array(
        &mut self,
        db: &mut SweepDb,
        slurm: &mut Slurm,
        plan: &ArrayPlan,
        submitted: &[String],
        by_id: &HashMap<&RunId, &StoredRun>,
        on_event: &mut dyn FnMut(SlurmEvent),
    ) -> Result<String, CoordinatorError> {
        let job = |a: &ArrayRef| match a {
            ArrayRef::Job(j) => j.clone(),
            ArrayRef::New(n) => submitted[*n].clone(),
        };
        let dependency = plan.dependency.sbatch_value(&job);
        let job_name = format!(
            "pds-{}-{}",
            self.opts.sweep_name,
            db.slurm_next_submission()?
        );
        let mut units = std::collections::BTreeMap::new();
        for (index, id) in &plan.tasks {
            let run = by_id[id];
            units.insert(*index, WorkUnit::single(db, run)?);
            if run.state == RunState::Failed {
                self.retried.insert(run.id.clone());
                let _ =
                    std::fs::remove_file(self.opts.layout.slurm_run(&run.id).join("failed.json"));
            }
        }
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            sweep: self.opts.sweep_name.clone(),
            sweep_dir: self.opts.layout.sweep_dir().to_path_buf(),
            results_dir: self.opts.layout.root().to_path_buf(),
            backend: self.opts.backend,
            units,
        };
        let manifest_path = self.opts.layout.slurm_manifest(&job_name);
        let script_path = self.opts.layout.slurm_script(&job_name);
        let script = batch_script(
            &job_name,
            plan,
            &self.opts.settings,
            dependency.as_deref(),
            &manifest_path,
            &self.opts.layout.slurm_logs(),
        );
        let write = |path: &std::path::Path, bytes: &[u8]| {
            write_atomic(path, &[bytes]).map_err(|e| CoordinatorError::Write {
                path: path.to_path_buf(),
                source: e.into(),
            })
        };
        let manifest_json =
            serde_json::to_vec_pretty(&manifest).map_err(|e| CoordinatorError::Write {
                path: manifest_path.clone(),
                source: e.into(),
            })?;
        write(&manifest_path, &manifest_json)?;
        write(&script_path, script.as_bytes())?;
        std::fs::create_dir_all(self.opts.layout.slurm_logs()).map_err(|e| {
            CoordinatorError::Write {
                path: self.opts.layout.slurm_logs(),
                source: e.into(),
            }
        })?;
        let submission = db.slurm_submit(
            &job_name,
            plan.kind,
            &script_path.to_string_lossy(),
            dependency.as_deref(),
            &plan
                .tasks
                .iter()
                .map(|(i, id)| (id.clone(), *i))
                .collect::<Vec<_>>(),
        )?;
        let job_id = match slurm.sbatch(&script_path, None) {
            Ok(id) => id,
            Err(e) => {
                db.slurm_drop_submission(submission, &e.to_string())?;
                return Err(e.into());
            }
        };
        db.slurm_set_job_id(submission, &job_id)?;
        on_event(SlurmEvent::Submitted {
            job_id: job_id.clone(),
            job_name,
            kind: plan.kind,
            runs: plan
                .tasks
                .iter()
                .map(|(_, id)| by_id[id].name.clone())
                .collect(),
            array: array_spec(&plan.tasks, self.opts.settings.max_parallel),
            dependency,
            script: script_path,
        });
        Ok(job_id)
    }
}

/// (array job id, index) of each run with an attempt in flight.
pub fn in_flight(open: &[SlurmTask]) -> HashMap<RunId, (String, u32)> {
    open.iter()
        .filter_map(|t| {
            t.job_id
                .clone()
                .map(|j| (t.run_id.clone(), (j, t.array_index)))
        })
        .collect()
}

/// The runs to submit now, with the resources of their jobs: runs not done and not in flight
/// (`planned`, or `failed` where `retry` says so) whose dependencies are each done, in
/// flight, or submitted with them.
pub fn candidates(
    runs: &[StoredRun],
    open: &[SlurmTask],
    retry: &dyn Fn(&StoredRun) -> bool,
    settings: &SlurmSettings,
    calibration: &Calibration,
) -> Vec<Candidate> {
    let in_flight = in_flight(open);
    let open_runs: HashSet<&RunId> = open.iter().map(|t| &t.run_id).collect();
    let by_id: HashMap<&RunId, &StoredRun> = runs.iter().map(|r| (&r.id, r)).collect();
    let done = |d: &RunId| by_id.get(d).is_some_and(|x| x.state == RunState::Done);
    let mut order: Vec<&StoredRun> = runs.iter().filter(|r| EXECUTED.contains(&r.kind)).collect();
    order.sort_by_key(|r| priority(r.kind));
    let mut chosen: HashSet<&RunId> = HashSet::new();
    let mut out = Vec::new();
    for r in order {
        let eligible = match r.state {
            RunState::Planned => true,
            RunState::Failed => retry(r),
            RunState::Running | RunState::Done => false,
        };
        if !eligible || open_runs.contains(&r.id) {
            continue;
        }
        // A tuned run's unit carries its learning rate, chosen when the unit is written:
        // every candidate must have ended first (done, or failed: that rate diverged).
        let tuned = crate::plan::tuned_on(&r.config_json);
        let ended = |d: &RunId| {
            by_id.get(d).is_some_and(|x| match x.state {
                RunState::Done => true,
                RunState::Failed => !retry(x),
                RunState::Planned | RunState::Running => false,
            }) && !in_flight.contains_key(d)
                && !chosen.contains(d)
        };
        let ready = r.depends_on.iter().all(|d| {
            if tuned.contains(d) {
                ended(d)
            } else {
                done(d) || in_flight.contains_key(d) || chosen.contains(d)
            }
        });
        if ready {
            chosen.insert(&r.id);
            out.push(Candidate {
                id: r.id.clone(),
                kind: r.kind,
                resources: settings.resources(r.kind, planned_seconds(r, &by_id, calibration)),
                waits_for: r
                    .depends_on
                    .iter()
                    .filter(|d| !done(d) && !tuned.contains(d))
                    .cloned()
                    .collect(),
            });
        }
    }
    out
}

/// Seconds run `run` should take at the prices of `calibration` (an online student also pays
/// its teacher's forward passes); its planned FLOPs at that FLOP price if its configuration
/// cannot be read.
fn planned_seconds(
    run: &StoredRun,
    by_id: &HashMap<&RunId, &StoredRun>,
    calibration: &Calibration,
) -> f64 {
    let config = |r: &StoredRun| serde_json::from_str::<RunConfig>(&r.config_json).ok();
    let Some(own) = config(run) else {
        return run.flops * calibration.s_per_flop;
    };
    let teacher = own
        .distill
        .as_ref()
        .and_then(|d| by_id.get(&d.teacher))
        .and_then(|t| config(t))
        .map(|t| t.model.shape);
    calibration.run_seconds(&own, teacher.as_ref())
}
