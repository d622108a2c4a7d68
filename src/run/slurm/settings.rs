//! What `pdsweep slurm` asks Slurm for: the `[slurm]` table of the sweep file, overridden by
//! flags, resolved per kind of run into the resources of one job, with `time = "auto"`
//! estimated from the plan.

use std::path::PathBuf;

use crate::plan::RunKind;
use crate::spec::slurm::{SlurmResources, SlurmSection, SlurmTime};

/// Settings given as flags (each overrides the sweep file's key of the same meaning).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmFlags {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// `--cpus-per-task`.
    pub cpus: Option<u64>,
    /// `--mem`, in MiB.
    pub mem_mb: Option<u64>,
    /// GPUs per job.
    pub gpus: Option<u64>,
    /// `--time`.
    pub time: Option<SlurmTime>,
    /// The `%` throttle of each array.
    pub max_parallel: Option<u64>,
    /// Submissions of a run before it counts as failed.
    pub max_attempts: Option<u64>,
    /// More `sbatch` options (after the sweep file's).
    pub options: Vec<String>,
    /// The pdsweep executable the jobs run.
    pub binary: Option<PathBuf>,
}

/// The resources of one job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    /// `--partition` (the cluster's default when `None`).
    pub partition: Option<String>,
    /// `--cpus-per-task`.
    pub cpus: u64,
    /// `--mem` in MiB (the cluster's default when `None`).
    pub mem_mb: Option<u64>,
    /// GPUs (`--gres=gpu:N`; none when 0).
    pub gpus: u64,
    /// `--time` in seconds.
    pub time_s: u64,
    /// More `sbatch` options.
    pub options: Vec<String>,
}

/// Everything `pdsweep slurm` needs to know about submitting.
#[derive(Debug, Clone)]
pub struct SlurmSettings {
    section: SlurmSection,
    flags: SlurmFlags,
    /// `--account`.
    pub account: Option<String>,
    /// `--qos`.
    pub qos: Option<String>,
    /// The `%` throttle of each array.
    pub max_parallel: Option<u64>,
    /// Submissions of a run whose job ends without a result before it counts as failed.
    pub max_attempts: u32,
    /// Seconds before the time limit at which jobs get USR2.
    pub signal_s: u64,
    /// Multiplier of planned times for `time = "auto"`.
    pub time_margin: f64,
    /// The pdsweep executable the jobs run.
    pub binary: PathBuf,
}

/// Time limits for `time = "auto"` are rounded up to one of these (seconds), so runs of
/// similar length share an array; longer ones to whole days.
const TIME_STEPS: [u64; 10] = [
    600, 900, 1800, 3600, 7200, 14_400, 28_800, 43_200, 86_400, 172_800,
];
/// Added to every planned time: starting the job, preparing data, loading a teacher.
const STARTUP_S: f64 = 300.0;

impl SlurmSettings {
    /// Settings from the sweep file's `[slurm]` table (if any) and flags; `current_exe` is the
    /// running pdsweep.
    pub fn new(section: Option<&SlurmSection>, flags: SlurmFlags, current_exe: PathBuf) -> Self {
        let section = section.cloned().unwrap_or_default();
        SlurmSettings {
            account: flags.account.clone().or(section.account.clone()),
            qos: flags.qos.clone().or(section.qos.clone()),
            max_parallel: flags.max_parallel.or(section.max_parallel.map(|c| c.0)),
            max_attempts: flags
                .max_attempts
                .or(section.max_attempts.map(|c| c.0))
                .unwrap_or(3)
                .clamp(1, u32::MAX as u64) as u32,
            signal_s: section.signal_s.map_or(120, |c| c.0),
            time_margin: section.time_margin.map_or(2.0, |r| r.0),
            binary: flags
                .binary
                .clone()
                .or(section.binary.as_ref().map(PathBuf::from))
                .unwrap_or(current_exe),
            section,
            flags,
        }
    }

    /// The resources of a job running one run of `kind` planned to take `planned_s` seconds.
    pub fn resources(&self, kind: RunKind, planned_s: f64) -> Resources {
        let common = self.section.common();
        let own = self
            .section
            .kind(kind.as_str())
            .cloned()
            .unwrap_or_default();
        let pick = |f: fn(&SlurmResources) -> Option<u64>| f(&own).or(f(&common));
        let time = self
            .flags
            .time
            .or(own.time)
            .or(common.time)
            .unwrap_or(SlurmTime::Auto);
        Resources {
            partition: self
                .flags
                .partition
                .clone()
                .or(own.partition.clone())
                .or(common.partition.clone()),
            cpus: self
                .flags
                .cpus
                .or(pick(|r| r.cpus.map(|c| c.0)))
                .unwrap_or(1)
                .max(1),
            mem_mb: self.flags.mem_mb.or(pick(|r| r.mem.map(|m| m.0))),
            gpus: self
                .flags
                .gpus
                .or(pick(|r| r.gpus.map(|g| g.0)))
                .unwrap_or(0),
            time_s: match time {
                SlurmTime::Seconds(s) => s,
                SlurmTime::Auto => auto_time_s(planned_s, self.time_margin),
            },
            options: common
                .options
                .iter()
                .chain(&own.options)
                .chain(&self.flags.options)
                .cloned()
                .collect(),
        }
    }
}

/// The time limit for a run planned to take `planned_s` seconds: with the margin and start-up
/// time, rounded up to a step of [`TIME_STEPS`] (or whole days beyond).
pub(crate) fn auto_time_s(planned_s: f64, margin: f64) -> u64 {
    let want = if planned_s.is_finite() {
        (planned_s.max(0.0) * margin + STARTUP_S).ceil() as u64
    } else {
        TIME_STEPS[TIME_STEPS.len() - 1]
    };
    TIME_STEPS
        .iter()
        .copied()
        .find(|&s| s >= want)
        .unwrap_or_else(|| want.div_ceil(86_400) * 86_400)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Count;
    use crate::spec::slurm::SlurmMem;

    #[test]
    fn flags_beat_a_kind_table_which_beats_the_slurm_table() {
        let section = SlurmSection {
            partition: Some("cpu".into()),
            cpus: Some(Count(4)),
            mem: Some(SlurmMem(8192)),
            options: vec!["--constraint=x86".into()],
            teacher: Some(SlurmResources {
                partition: Some("gpu".into()),
                gpus: Some(Count(1)),
                time: Some(SlurmTime::Seconds(7200)),
                options: vec!["--exclusive".into()],
                ..Default::default()
            }),
            max_attempts: Some(Count(5)),
            ..Default::default()
        };
        let settings = SlurmSettings::new(Some(&section), SlurmFlags::default(), "pdsweep".into());
        let teacher = settings.resources(RunKind::parse("teacher").unwrap(), 100.0);
        assert_eq!(teacher.partition.as_deref(), Some("gpu"));
        assert_eq!(
            (teacher.cpus, teacher.mem_mb, teacher.gpus, teacher.time_s),
            (4, Some(8192), 1, 7200)
        );
        assert_eq!(teacher.options, ["--constraint=x86", "--exclusive"]);
        let student = settings.resources(RunKind::parse("student").unwrap(), 100.0);
        assert_eq!(
            (student.partition.as_deref(), student.gpus, student.time_s),
            (Some("cpu"), 0, 600)
        );
        assert_eq!(settings.max_attempts, 5);

        let flags = SlurmFlags {
            partition: Some("debug".into()),
            time: Some(SlurmTime::Seconds(60)),
            max_attempts: Some(2),
            ..Default::default()
        };
        let settings = SlurmSettings::new(Some(&section), flags, "pdsweep".into());
        let teacher = settings.resources(RunKind::parse("teacher").unwrap(), 100.0);
        assert_eq!(
            (teacher.partition.as_deref(), teacher.time_s),
            (Some("debug"), 60)
        );
        assert_eq!(settings.max_attempts, 2);
    }

    #[test]
    fn auto_time_adds_margin_and_start_up_and_rounds_up() {
        assert_eq!(auto_time_s(10.0, 2.0), 600);
        assert_eq!(auto_time_s(1000.0, 2.0), 3600); // 2300 s -> 1 h
        assert_eq!(auto_time_s(50_000.0, 2.0), 172_800); // 100 300 s -> 2 d
        assert_eq!(auto_time_s(200_000.0, 2.0), 5 * 86_400); // 400 300 s -> 5 d
        assert_eq!(auto_time_s(f64::NAN, 2.0), 172_800);
    }
}
