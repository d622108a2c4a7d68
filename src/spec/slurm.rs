//! The sweep file's `[slurm]` table: the resources of the jobs `pdsweep slurm` submits, for
//! every kind of run and per kind (`[slurm.teacher]`, ...), and how it submits them. Flags of
//! `pdsweep slurm` override these keys.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::units::Count;
use super::values::Ratio;

/// `[slurm]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSection {
    /// `--partition` of every job.
    #[serde(default)]
    pub partition: Option<String>,
    /// `--cpus-per-task` of every job (default 1).
    #[serde(default)]
    pub cpus: Option<Count>,
    /// `--mem` of every job, as Slurm reads it (`"8G"` is 8 GiB; a bare number is MiB).
    #[serde(default)]
    pub mem: Option<SlurmMem>,
    /// GPUs per job (`--gres=gpu:N`).
    #[serde(default)]
    pub gpus: Option<Count>,
    /// `--time` of every job: `"auto"` (estimated from the plan, the default), a duration such
    /// as `"90m"`, `"2h"`, `"1d"`, or Slurm's `"D-HH:MM:SS"`.
    #[serde(default)]
    pub time: Option<SlurmTime>,
    /// More `sbatch` options for every job, e.g. `["--constraint=a100"]`.
    #[serde(default)]
    pub options: Vec<String>,
    /// `--account`.
    #[serde(default)]
    pub account: Option<String>,
    /// `--qos`.
    #[serde(default)]
    pub qos: Option<String>,
    /// Multiplies the planned time of a run for `time = "auto"` (default 2).
    #[serde(default)]
    pub time_margin: Option<Ratio>,
    /// At most this many tasks of each job array run at once (`--array=...%N`).
    #[serde(default)]
    pub max_parallel: Option<Count>,
    /// Submissions of a run whose job ends without a result before it counts as failed
    /// (default 3).
    #[serde(default)]
    pub max_attempts: Option<Count>,
    /// Seconds before the time limit at which Slurm sends USR2 (the job checkpoints and
    /// requeues itself); default 120.
    #[serde(default)]
    pub signal_s: Option<Count>,
    /// The pdsweep executable the jobs run (default: the one submitting, which must then be on
    /// a filesystem the nodes see).
    #[serde(default)]
    pub binary: Option<String>,
    /// `[slurm.teacher]`: teacher jobs.
    #[serde(default)]
    pub teacher: Option<SlurmResources>,
    /// `[slurm.logits]`: logit passes.
    #[serde(default)]
    pub logits: Option<SlurmResources>,
    /// `[slurm.student]`: students.
    #[serde(default)]
    pub student: Option<SlurmResources>,
    /// `[slurm.baseline]`: baselines.
    #[serde(default)]
    pub baseline: Option<SlurmResources>,
}

impl SlurmSection {
    /// The resources every job asks for, before a kind's own table.
    pub fn common(&self) -> SlurmResources {
        SlurmResources {
            partition: self.partition.clone(),
            cpus: self.cpus,
            mem: self.mem,
            gpus: self.gpus,
            time: self.time,
            options: self.options.clone(),
        }
    }

    /// The table of `kind` (`teacher`, `logits`, `student`, `baseline`), if written.
    pub fn kind(&self, kind: &str) -> Option<&SlurmResources> {
        match kind {
            "teacher" => self.teacher.as_ref(),
            "logits" => self.logits.as_ref(),
            "student" => self.student.as_ref(),
            "baseline" => self.baseline.as_ref(),
            _ => None,
        }
    }
}

/// What one job asks for (`[slurm.KIND]`; keys left out come from `[slurm]`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmResources {
    /// `--partition`.
    #[serde(default)]
    pub partition: Option<String>,
    /// `--cpus-per-task` (default 1).
    #[serde(default)]
    pub cpus: Option<Count>,
    /// `--mem`, as Slurm reads it (`"8G"` is 8 GiB; a bare number is MiB).
    #[serde(default)]
    pub mem: Option<SlurmMem>,
    /// GPUs per job (`--gres=gpu:N`).
    #[serde(default)]
    pub gpus: Option<Count>,
    /// `--time`: `"auto"` (estimated from the plan, the default), a duration such as
    /// `"90m"`, `"2h"`, `"1d"`, or Slurm's `"D-HH:MM:SS"`.
    #[serde(default)]
    pub time: Option<SlurmTime>,
    /// More `sbatch` options, added after those of `[slurm]`.
    #[serde(default)]
    pub options: Vec<String>,
}

/// Memory per job in MiB, written as Slurm reads `--mem`: a number with an optional suffix
/// `K`, `M` (the default), `G` or `T`, in powers of 1024 (`"16G"`, `"500M"`, `16000`).
///
/// Outside this crate one is made only by parsing, so its value has passed the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlurmMem(pub(crate) u64);

impl SlurmMem {
    /// The memory in MiB.
    pub fn mib(self) -> u64 {
        self.0
    }
}

impl FromStr for SlurmMem {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("`{text}` is not a memory size: use Slurm's form, such as \"16G\" or \"500M\"")
        };
        let t = text.trim().to_ascii_uppercase();
        let t = t
            .strip_suffix("IB")
            .or_else(|| t.strip_suffix('B'))
            .unwrap_or(&t);
        let (number, scale) = match t.chars().last() {
            Some('K') => (&t[..t.len() - 1], 1.0 / 1024.0),
            Some('M') => (&t[..t.len() - 1], 1.0),
            Some('G') => (&t[..t.len() - 1], 1024.0),
            Some('T') => (&t[..t.len() - 1], 1024.0 * 1024.0),
            _ => (t, 1.0),
        };
        let n: f64 = number.trim().parse().map_err(|_| bad())?;
        let mib = (n * scale).ceil();
        if !(mib.is_finite() && mib >= 1.0) {
            return Err(bad());
        }
        Ok(SlurmMem(mib as u64))
    }
}

impl<'de> Deserialize<'de> for SlurmMem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SlurmMem;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a memory size such as \"16G\" or MiB")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SlurmMem, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SlurmMem, E> {
                v.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A job's time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmTime {
    /// Estimated from the plan's FLOPs and the measured (or stated) throughput.
    Auto,
    /// This many seconds.
    Seconds(u64),
}

impl SlurmTime {
    /// Slurm's `D-HH:MM:SS` for `seconds` (rounded up to a whole minute).
    pub fn format(seconds: u64) -> String {
        let minutes = seconds.div_ceil(60).max(1);
        let (d, h, m) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
        format!("{d}-{h:02}:{m:02}:00")
    }
}

impl FromStr for SlurmTime {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let bad = || {
            format!(
                "`{text}` is not a time limit: use \"auto\", a duration such as \"90m\", \"2h\" or \"1d\", or Slurm's \"D-HH:MM:SS\""
            )
        };
        if t.eq_ignore_ascii_case("auto") {
            return Ok(SlurmTime::Auto);
        }
        let seconds = if let Some((unit_at, unit)) = t
            .char_indices()
            .last()
            .filter(|(_, c)| c.is_ascii_alphabetic())
        {
            let n: f64 = t[..unit_at].trim().parse().map_err(|_| bad())?;
            let scale = match unit.to_ascii_lowercase() {
                's' => 1.0,
                'm' => 60.0,
                'h' => 3600.0,
                'd' => 86_400.0,
                _ => return Err(bad()),
            };
            if !(n.is_finite() && n > 0.0) {
                return Err(bad());
            }
            (n * scale).ceil() as u64
        } else {
            // Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
            let (days, rest) = match t.split_once('-') {
                Some((d, r)) => (d.parse::<u64>().map_err(|_| bad())?, r),
                None => (0, t),
            };
            let parts: Vec<u64> = rest
                .split(':')
                .map(|p| p.parse::<u64>().map_err(|_| bad()))
                .collect::<Result<_, _>>()?;
            let hms = match (t.contains('-'), parts.as_slice()) {
                (false, [m]) => m * 60,
                (false, [m, s]) => m * 60 + s,
                (_, [h, m, s]) => h * 3600 + m * 60 + s,
                (true, [h]) => h * 3600,
                (true, [h, m]) => h * 3600 + m * 60,
                _ => return Err(bad()),
            };
            days * 86_400 + hms
        };
        if seconds == 0 {
            return Err(bad());
        }
        Ok(SlurmTime::Seconds(seconds))
    }
}

impl<'de> Deserialize<'de> for SlurmTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SlurmTime;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"auto\", a duration such as \"2h\", or minutes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SlurmTime, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SlurmTime, E> {
                v.to_string().parse().map_err(E::custom) // Slurm reads a bare number as minutes
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWEEP: &str = r#"
name = "s"
[teachers]
sizes = ["20K"]
[students]
sizes = ["10K"]
[slurm]
partition = "cpu"
mem = "8G"
time = "auto"
max_parallel = 4
options = ["--constraint=x86"]
[slurm.teacher]
gpus = 1
time = "1-00:00:00"
"#;

    #[test]
    fn a_slurm_table_parses_with_its_kind_tables() {
        let sweep =
            crate::spec::Sweep::parse(std::path::Path::new("s.toml"), SWEEP.into()).unwrap();
        let slurm = sweep.file.slurm.unwrap();
        assert_eq!(slurm.common().partition.as_deref(), Some("cpu"));
        assert_eq!(slurm.common().mem, Some(SlurmMem(8192)));
        assert_eq!(slurm.max_parallel, Some(Count(4)));
        let teacher = slurm.kind("teacher").unwrap();
        assert_eq!(
            (teacher.gpus, teacher.time),
            (Some(Count(1)), Some(SlurmTime::Seconds(86_400)))
        );
        assert!(slurm.kind("student").is_none());
    }

    #[test]
    fn unknown_slurm_keys_and_bad_times_are_errors_at_their_line() {
        let base = "name = \"s\"\n[teachers]\nsizes = [\"20K\"]\n[students]\nsizes = [\"10K\"]\n";
        for (table, needle) in [
            ("[slurm]\npartiton = \"x\"\n", "partiton"),
            ("[slurm.teacher]\ngpu = 1\n", "gpu"),
            ("[slurm]\ntime = \"soon\"\n", "soon"),
            ("[slurm]\nmem = \"lots\"\n", "lots"),
        ] {
            let err =
                crate::spec::Sweep::parse(std::path::Path::new("s.toml"), format!("{base}{table}"))
                    .unwrap_err()
                    .to_string();
            assert!(err.contains(needle) && err.contains("s.toml:"), "{err}");
        }
    }

    #[test]
    fn time_limits_parse_in_every_form_slurm_and_people_write() {
        let s = |t: &str| t.parse::<SlurmTime>().unwrap();
        assert_eq!(s("auto"), SlurmTime::Auto);
        assert_eq!(s("90m"), SlurmTime::Seconds(5400));
        assert_eq!(s("1.5h"), SlurmTime::Seconds(5400));
        assert_eq!(s("2d"), SlurmTime::Seconds(172_800));
        assert_eq!(s("30"), SlurmTime::Seconds(1800));
        assert_eq!(s("30:15"), SlurmTime::Seconds(1815));
        assert_eq!(s("12:00:00"), SlurmTime::Seconds(43_200));
        assert_eq!(s("1-12"), SlurmTime::Seconds(129_600));
        assert_eq!(s("1-00:30:00"), SlurmTime::Seconds(88_200));
        for bad in ["", "soon", "0", "-5m", "1:2:3:4", "3w"] {
            assert!(bad.parse::<SlurmTime>().is_err(), "{bad}");
        }
        assert_eq!(SlurmTime::format(5400), "0-01:30:00");
        let m = |t: &str| t.parse::<SlurmMem>().map(|m| m.0);
        assert_eq!(m("16G"), Ok(16_384));
        assert_eq!(m("16GiB"), Ok(16_384));
        assert_eq!(m("500M"), Ok(500));
        assert_eq!(m("16000"), Ok(16_000));
        assert_eq!(m("1.5T"), Ok(1_572_864));
        assert_eq!(m("512K"), Ok(1));
        assert!(m("lots").is_err() && m("0").is_err());
        assert_eq!(SlurmTime::format(61), "0-00:02:00");
        assert_eq!(SlurmTime::format(90_000), "1-01:00:00");
    }
}
