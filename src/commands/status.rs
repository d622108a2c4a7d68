//! `pdsweep status`: where a sweep stands — runs per kind and state, progress and ETA from
//! measured throughput, the last error of each failed run, and the Slurm job of each run on
//! Slurm (its live state where Slurm answers).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use serde_json::json;

use pdsweep::plan::{Calibration, RunId, RunKind};
use pdsweep::run::slurm::Slurm;
use pdsweep::spec::Sweep;
use pdsweep::spec::units::format_duration;
use pdsweep::store::{RunState, RunStatus, SweepDb, SweepLayout};

use super::UsageError;

/// Options of `pdsweep status`.
#[derive(Debug, Clone)]
pub struct StatusCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Results folder.
    pub results: PathBuf,
    /// JSON output.
    pub json: bool,
    /// Refresh every this many seconds until the sweep is idle (`--watch`).
    pub watch: Option<f64>,
}

/// Runs `pdsweep status`: once, or every `--watch` seconds until no run is planned or running.
pub fn status(cmd: StatusCommand) -> anyhow::Result<()> {
    let Some(every) = cmd.watch else {
        print!("{}", snapshot(&cmd)?.text);
        return Ok(());
    };
    if !every.is_finite() || every <= 0.0 {
        return Err(UsageError(format!(
            "`--watch {every}` is not a number of seconds above 0"
        ))
        .into());
    }
    let redraw = std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        let shot = snapshot(&cmd)?;
        if redraw {
            print!("\x1b[2J\x1b[H"); // clear the screen, cursor home
        }
        print!("{}", shot.text);
        std::io::Write::flush(&mut std::io::stdout())?;
        if shot.idle {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(every));
    }
}

/// One look at the sweep: what `status` prints, and whether nothing is planned or running.
struct Snapshot {
    text: String,
    idle: bool,
}

/// Reads the sweep's state once and renders it as a table or as JSON (compact under `--watch`).
fn snapshot(cmd: &StatusCommand) -> anyhow::Result<Snapshot> {
    let sweep = Sweep::load(&cmd.sweep)?;
    let layout = SweepLayout::for_file(&cmd.sweep, &cmd.results, sweep.file.name.as_str());
    let db_path = layout.database();
    if !db_path.exists() {
        return Err(UsageError(format!(
            "sweep `{}` has no database at `{}` yet\n\nhint: run `pdsweep plan {}` or `pdsweep run {}` first",
            sweep.file.name,
            db_path.display(),
            cmd.sweep.display(),
            cmd.sweep.display()
        ))
        .into());
    }
    let db = SweepDb::open(&db_path)?;
    let plan_id = db.current_plan()?.unwrap_or_default();
    let runs = db.status(plan_id)?;
    let backend = sweep.file.backend;
    let calibration = match sweep.file.estimate.flops_per_s {
        Some(f) => Calibration::flops_only(f.get(), "[estimate] flops_per_s"),
        None => super::estimate::calibration(Some(&db), backend, true),
    };
    let eta = db.eta_s(plan_id, &calibration)?;
    let jobs = slurm_jobs(&db, plan_id)?;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &runs {
        *counts.entry(r.state.to_string()).or_default() += 1;
    }
    let idle = runs
        .iter()
        .all(|r| !matches!(r.state, RunState::Planned | RunState::Running));
    if cmd.json {
        let value = json!({
            "sweep": sweep.file.name.as_str(),
            "runs": runs.iter().map(|r| json!({
                "id": r.id, "kind": r.kind, "name": r.name, "state": r.state,
                "progress": r.progress, "error": r.error, "tokens_per_s": r.tokens_per_s,
                "stack": r.stack,
                "slurm": jobs.get(&r.id).map(|j| json!({
                    "job": j.job, "state": j.state, "attempt": j.attempt, "open": j.open,
                })),
            })).collect::<Vec<_>>(),
            "counts": counts,
            "eta_s": eta,
        });
        let text = if cmd.watch.is_some() {
            serde_json::to_string(&value)?
        } else {
            serde_json::to_string_pretty(&value)?
        };
        return Ok(Snapshot {
            text: text + "\n",
            idle,
        });
    }
    let mut text = table(&sweep.file.name.to_string(), &runs, eta);
    text += &slurm_lines(&runs, &jobs);
    let curves = pdsweep::run::record::tensorboard_dir(layout.root());
    if curves.is_dir() {
        text += &format!("curves  tensorboard --logdir {}\n", curves.display());
    }
    Ok(Snapshot { text, idle })
}

/// A run's latest Slurm job.
struct JobLine {
    /// `JOBID_INDEX` (or the job name before `sbatch` returned).
    job: String,
    /// Its state: live from Slurm where it answers, else as last recorded.
    state: String,
    /// Which submission of the run.
    attempt: u32,
    /// Whether the coordinator still follows it.
    open: bool,
}

/// The latest Slurm job of each run that was ever submitted, with live states for the jobs
/// still followed when Slurm's commands work here.
fn slurm_jobs(db: &SweepDb, plan_id: i64) -> anyhow::Result<HashMap<RunId, JobLine>> {
    let tasks = db.slurm_latest_tasks(plan_id)?;
    let mut live = HashMap::new();
    let mut open_jobs: Vec<String> = tasks
        .iter()
        .filter(|t| !t.ended)
        .filter_map(|t| t.job_id.clone())
        .collect();
    open_jobs.sort();
    open_jobs.dedup();
    if !open_jobs.is_empty()
        && let Ok(mut slurm) = Slurm::detect()
    {
        live = slurm.states(&open_jobs).unwrap_or_default();
    }
    Ok(tasks
        .into_iter()
        .map(|t| {
            let job = t.job_ref().unwrap_or_else(|| t.job_name.clone());
            let state = match live.get(&job) {
                Some(s) if !t.ended => s.describe(),
                _ => match &t.reason {
                    Some(r) if r != "None" => format!("{} ({r})", t.state),
                    _ => t.state.clone(),
                },
            };
            let line = JobLine {
                job,
                state,
                attempt: t.attempt,
                open: !t.ended,
            };
            (t.run_id, line)
        })
        .collect())
}

/// One line per run with a Slurm job the coordinator still follows.
fn slurm_lines(runs: &[RunStatus], jobs: &HashMap<RunId, JobLine>) -> String {
    let mut out = String::new();
    for r in runs {
        if let Some(j) = jobs.get(&r.id).filter(|j| j.open) {
            let attempt = if j.attempt > 1 {
                format!(", attempt {}", j.attempt)
            } else {
                String::new()
            };
            out += &format!(
                "slurm   {} job {} {}{attempt}, {:.0}%\n",
                r.name,
                j.job,
                j.state,
                100.0 * r.progress
            );
        }
    }
    out
}

/// `, in a stack of N led by NAME` for a run whose stack label is `LEAD_ID/N`.
fn stack_note(label: &str, runs: &[RunStatus]) -> String {
    let Some((lead, members)) = label.rsplit_once('/') else {
        return String::new();
    };
    let lead = runs
        .iter()
        .find(|r| r.id.as_str() == lead)
        .map_or(lead, |r| r.name.as_str());
    format!(", in a stack of {members} led by {lead}")
}

fn table(name: &str, runs: &[RunStatus], eta: f64) -> String {
    let mut by_kind: BTreeMap<RunKind, BTreeMap<RunState, usize>> = BTreeMap::new();
    for r in runs {
        *by_kind
            .entry(r.kind)
            .or_default()
            .entry(r.state)
            .or_default() += 1;
    }
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t.set_header(["kind", "planned", "running", "done", "failed"]);
    for (kind, states) in &by_kind {
        let mut row = vec![kind.to_string()];
        row.extend(RunState::ALL.map(|s| states.get(&s).copied().unwrap_or(0).to_string()));
        t.add_row(row);
    }
    let done = runs.iter().filter(|r| r.state == RunState::Done).count();
    let mut out = format!(
        "sweep `{name}`: {done}/{} runs done, about {} left\n{t}\n",
        runs.len(),
        format_duration(eta)
    );
    for r in runs.iter().filter(|r| r.state == RunState::Running) {
        let speed = r
            .tokens_per_s
            .map_or(String::new(), |s| format!(", {:.1}k tokens/s", s / 1e3));
        let stack = r
            .stack
            .as_deref()
            .map_or(String::new(), |s| stack_note(s, runs));
        out += &format!(
            "running {} {:.0}%{speed}{stack}\n",
            r.name,
            100.0 * r.progress
        );
    }
    for r in runs.iter().filter(|r| r.state == RunState::Failed) {
        let first = r
            .error
            .as_deref()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("");
        out += &format!("failed  {}: {first}\n", r.name);
    }
    out
}
