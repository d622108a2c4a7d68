//! Talking to Slurm through its commands: `sbatch` to submit, `scancel` to cancel, and the
//! state of jobs from `sacct` where accounting exists, else from `squeue` (which lists finished
//! jobs until Slurm forgets them, `MinJobAge`) and `scontrol show job`. A task none of them
//! knows is reported as gone; the coordinator then judges it by the job's own files.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// A Slurm command failed.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// The command is not installed.
    #[error(
        "`{command}` not found: is Slurm installed on this machine?\n\nhint: run `pdsweep slurm` on a login node of the cluster, where `sbatch` and `squeue` work"
    )]
    Missing {
        /// The command.
        command: String,
    },
    /// The command ran and failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on standard error.
        stderr: String,
    },
}

/// A job's state as Slurm reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobState {
    /// Slurm's state name (`PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, ...).
    pub state: String,
    /// Slurm's reason (`Dependency`, `BeginTime`, `DependencyNeverSatisfied`, ...), if any.
    pub reason: Option<String>,
    /// The exit code (`code:signal`), if known.
    pub exit_code: Option<String>,
}

impl JobState {
    /// Whether the job may still run (or is running): anything but a final state.
    pub fn is_active(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "COMPLETED"
                | "FAILED"
                | "CANCELLED"
                | "TIMEOUT"
                | "NODE_FAIL"
                | "PREEMPTED"
                | "OUT_OF_MEMORY"
                | "BOOT_FAIL"
                | "DEADLINE"
                | "REVOKED"
        )
    }

    /// `STATE (reason, exit code)` for messages.
    pub fn describe(&self) -> String {
        let mut extra = Vec::new();
        if let Some(r) = self.reason.as_deref().filter(|r| *r != "None") {
            extra.push(r.to_string());
        }
        if let Some(e) = self.exit_code.as_deref().filter(|e| *e != "0:0") {
            extra.push(format!("exit {e}"));
        }
        if extra.is_empty() {
            self.state.clone()
        } else {
            format!("{} ({})", self.state, extra.join(", "))
        }
    }
}

/// The Slurm commands of this machine.
#[derive(Debug, Clone)]
pub struct Slurm {
    /// Whether `sacct` works (accounting exists); found out on first use.
    sacct: Option<bool>,
}

impl Slurm {
    /// The Slurm of this machine, if `sbatch` runs.
    pub fn detect() -> Result<Slurm, SlurmError> {
        run("sbatch", &["--version"])?;
        Ok(Slurm { sacct: None })
    }

    /// Submits the batch script `script`; returns the job id.
    pub fn sbatch(&self, script: &Path, dependency: Option<&str>) -> Result<String, SlurmError> {
        let script = script.to_string_lossy();
        let mut args = vec!["--parsable"];
        let dep;
        if let Some(d) = dependency {
            dep = format!("--dependency={d}");
            args.push(&dep);
        }
        args.push(&script);
        let out = run("sbatch", &args)?;
        // `--parsable` prints `JOBID` or `JOBID;CLUSTER`
        let id = out
            .trim()
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            return Err(SlurmError::Failed {
                command: format!("sbatch {}", args.join(" ")),
                status: "0".into(),
                stderr: format!("unexpected output `{}`", out.trim()),
            });
        }
        Ok(id)
    }

    /// Cancels array tasks (`JOBID_INDEX`); tasks already ended are ignored.
    pub fn cancel(&self, tasks: &[String]) -> Result<(), SlurmError> {
        if tasks.is_empty() {
            return Ok(());
        }
        let args: Vec<&str> = tasks.iter().map(String::as_str).collect();
        run("scancel", &args).map(|_| ())
    }

    /// Asks Slurm to stop array task `task` (`JOBID_INDEX`) and queue it again; used by a job
    /// on its own task after checkpointing at the time-limit warning.
    pub fn requeue(task: &str) -> Result<(), SlurmError> {
        run("scontrol", &["requeue", task]).map(|_| ())
    }

    /// The array job named `name`, if Slurm knows it.
    pub fn find_by_name(&mut self, name: &str) -> Result<Option<String>, SlurmError> {
        let out = run(
            "squeue",
            &["-h", "--states=all", "--name", name, "-o", "%F"],
        )?;
        if let Some(id) = out.lines().map(str::trim).find(|l| !l.is_empty()) {
            return Ok(Some(id.to_string()));
        }
        if self.has_sacct() {
            let out = run(
                "sacct",
                &["-n", "-P", "-X", "--name", name, "--format=JobID"],
            )?;
            return Ok(out
                .lines()
                .filter_map(|l| l.split('_').next())
                .map(|j| j.trim().to_string())
                .find(|j| !j.is_empty()));
        }
        Ok(None)
    }

    /// The state of every task of the array jobs `job_ids`, by `JOBID_INDEX`.
    pub fn states(&mut self, job_ids: &[String]) -> Result<HashMap<String, JobState>, SlurmError> {
        if job_ids.is_empty() {
            return Ok(HashMap::new());
        }
        if self.has_sacct() {
            let list = job_ids.join(",");
            match run(
                "sacct",
                &[
                    "-n",
                    "-P",
                    "-X",
                    "-j",
                    &list,
                    "--format=JobID,State,ExitCode,Reason",
                ],
            ) {
                Ok(out) => return Ok(parse_sacct(&out)),
                // an older sacct without a field, or accounting gone: use the fallback from now on
                Err(_) => self.sacct = Some(false),
            }
        }
        // One squeue call for every job; it fails as a whole if Slurm has forgotten one of
        // them, and then each job is asked alone.
        let squeue = |ids: &str| {
            run(
                "squeue",
                &["-h", "-r", "--states=all", "-j", ids, "-o", "%i|%T|%r"],
            )
        };
        let mut states = match squeue(&job_ids.join(",")) {
            Ok(out) => parse_squeue(&out),
            Err(SlurmError::Missing { command }) => return Err(SlurmError::Missing { command }),
            Err(_) => {
                let mut states = HashMap::new();
                for id in job_ids {
                    if let Ok(out) = squeue(id) {
                        states.extend(parse_squeue(&out));
                    }
                }
                states
            }
        };
        // Nothing known of any job: make sure the controller answers before the coordinator
        // takes the jobs for gone (and submits their runs again).
        if states.is_empty() {
            run("scontrol", &["ping"])?;
        }
        // Jobs squeue does not list, and the exit codes of those that ended: scontrol.
        for id in job_ids {
            let prefix = format!("{id}_");
            let listed: Vec<&JobState> = states
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix) || *k == id)
                .map(|(_, s)| s)
                .collect();
            if !listed.is_empty() && listed.iter().all(|s| s.is_active()) {
                continue;
            }
            if let Ok(out) = run("scontrol", &["show", "job", id]) {
                for (task, s) in parse_scontrol(&out) {
                    let entry = states.entry(task).or_insert_with(|| s.clone());
                    if entry.exit_code.is_none() {
                        entry.exit_code = s.exit_code;
                    }
                }
            }
        }
        Ok(states)
    }

    fn has_sacct(&mut self) -> bool {
        *self.sacct.get_or_insert_with(|| {
            // Without accounting sacct exits 1 ("Slurm accounting storage is disabled").
            run("sacct", &["-n", "-X", "-S", "now", "--format=JobID"]).is_ok()
        })
    }
}

/// Runs `command args`, returning standard output.
fn run(command: &str, args: &[&str]) -> Result<String, SlurmError> {
    let out = Command::new(command).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            SlurmError::Missing {
                command: command.into(),
            }
        } else {
            SlurmError::Failed {
                command: format!("{command} {}", args.join(" ")),
                status: "not started".into(),
                stderr: e.to_string(),
            }
        }
    })?;
    if !out.status.success() {
        return Err(SlurmError::Failed {
            command: format!("{command} {}", args.join(" ")),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `12_[4-6,9%2]` -> `12_4, 12_5, 12_6, 12_9`; `12_3` -> itself; a plain job id -> itself.
fn expand_tasks(id: &str) -> Vec<String> {
    let Some((job, tasks)) = id.split_once('_') else {
        return vec![id.to_string()];
    };
    let Some(inner) = tasks.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
        return vec![id.to_string()];
    };
    let inner = inner.split('%').next().unwrap_or("");
    let mut out = Vec::new();
    for part in inner.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend((a..=b.min(a.saturating_add(100_000))).map(|i| format!("{job}_{i}")));
        }
    }
    out
}

fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty() && s != "(null)").then(|| s.to_string())
}

/// Parses `sacct -n -P -X --format=JobID,State,ExitCode,Reason`.
pub(crate) fn parse_sacct(out: &str) -> HashMap<String, JobState> {
    let mut states = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 3 {
            continue;
        }
        let state = JobState {
            state: first_word(f[1]), // "CANCELLED by 0" -> CANCELLED
            reason: f.get(3).and_then(|r| non_empty(r)),
            exit_code: non_empty(f[2]),
        };
        for task in expand_tasks(f[0].trim()) {
            states.insert(task, state.clone());
        }
    }
    states
}

/// Parses `squeue -h -r -o '%i|%T|%r'`.
pub(crate) fn parse_squeue(out: &str) -> HashMap<String, JobState> {
    let mut states = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() < 2 {
            continue;
        }
        let state = JobState {
            state: first_word(f[1]),
            reason: f.get(2).and_then(|r| non_empty(r)),
            exit_code: None,
        };
        for task in expand_tasks(f[0].trim()) {
            states.insert(task, state.clone());
        }
    }
    states
}

/// Parses `scontrol show job`: one record per array task (or per pending range), fields as
/// `Key=Value`.
pub(crate) fn parse_scontrol(out: &str) -> HashMap<String, JobState> {
    let mut states = HashMap::new();
    for record in out.split("\n\n") {
        let fields: HashMap<&str, &str> = record
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let Some(state) = fields.get("JobState") else {
            continue;
        };
        let state = JobState {
            state: state.to_string(),
            reason: fields.get("Reason").and_then(|r| non_empty(r)),
            exit_code: fields.get("ExitCode").and_then(|r| non_empty(r)),
        };
        let ids = match (fields.get("ArrayJobId"), fields.get("ArrayTaskId")) {
            (Some(job), Some(tasks)) if tasks.contains(['-', ',', '%']) => {
                expand_tasks(&format!("{job}_[{tasks}]"))
            }
            (Some(job), Some(task)) => vec![format!("{job}_{task}")],
            _ => fields
                .get("JobId")
                .map(|j| j.to_string())
                .into_iter()
                .collect(),
        };
        for id in ids {
            states.insert(id, state.clone());
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sacct_output_with_pending_ranges_and_cancel_notes() {
        let out = "12_0|COMPLETED|0:0|None\n12_1|CANCELLED by 0|0:15|None\n12_[2-4,7%2]|PENDING|0:0|Dependency\n13|FAILED|1:0|NonZeroExitCode\n";
        let s = parse_sacct(out);
        assert_eq!(s["12_0"].state, "COMPLETED");
        assert!(!s["12_0"].is_active());
        assert_eq!(s["12_1"].describe(), "CANCELLED (exit 0:15)");
        for t in ["12_2", "12_3", "12_4", "12_7"] {
            assert_eq!(s[t].state, "PENDING");
            assert!(s[t].is_active());
        }
        assert!(!s.contains_key("12_5"));
        assert_eq!(s["13"].describe(), "FAILED (NonZeroExitCode, exit 1:0)");
    }

    #[test]
    fn squeue_and_scontrol_output_as_slurm_22_prints_it() {
        let squeue =
            "7_0|CANCELLED|DependencyNeverSatisfied\n6_1|RUNNING|None\n8_1|PENDING|Dependency\n";
        let s = parse_squeue(squeue);
        assert_eq!(s["7_0"].describe(), "CANCELLED (DependencyNeverSatisfied)");
        assert!(s["6_1"].is_active() && s["8_1"].is_active());
        let scontrol = "JobId=9 ArrayJobId=6 ArrayTaskId=0 JobName=s.sh\n   JobState=CANCELLED Reason=None Dependency=(null)\n   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0\n\nJobId=10 ArrayJobId=6 ArrayTaskId=2-3%1 JobName=s.sh\n   JobState=PENDING Reason=JobArrayTaskLimit Dependency=(null)\n   ExitCode=0:0\n";
        let s = parse_scontrol(scontrol);
        assert_eq!(s["6_0"].describe(), "CANCELLED (exit 143:0)");
        assert_eq!(s["6_2"].reason.as_deref(), Some("JobArrayTaskLimit"));
        assert!(s.contains_key("6_3"));
    }
}
