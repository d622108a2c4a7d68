//! Recording into a run's own files, for jobs that must not open the sweep database (Slurm):
//! `results/NAME/slurm/runs/ID/` holds a start file per session, metric segments, and at the
//! end `result.json` or `failed.json`. Every file is written whole (temporary file, fsync,
//! rename), so a reader never sees half a file; a segment is written at every metric event,
//! before the checkpoint that follows it, so a job killed at any moment loses no row that its
//! checkpoint has moved past. The coordinator reads them back ([`RunFiles`]) and ingests them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Recorder;
use crate::atomic::write_atomic;
use crate::plan::RunId;
use crate::run::error::RecordError;
use crate::store::{Metric, RunResult, SweepLayout, this_host};
use crate::train::TrainEvent;

use super::db::metric_of;

/// A session's start: written when a job (or its restart after a requeue) begins a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StartFile {
    /// `ARRAYJOB_TASK.RESTART` in Slurm (or `local-HOST-PID` outside it).
    pub session: String,
    /// The host the job runs on.
    pub host: String,
    /// The job's process id.
    pub pid: u32,
}

/// One metric row as written to a segment (a non-finite loss is written as `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricRecord {
    /// `train` or `val`.
    pub kind: String,
    /// Steps completed.
    pub step: u64,
    /// Tokens consumed.
    pub tokens: u64,
    /// Loss in nats/token.
    pub loss: Option<f64>,
    /// Bits per byte (held-out rows).
    pub bpb: Option<f64>,
    /// Learning rate (training rows).
    pub lr: Option<f64>,
    /// Throughput (training rows).
    pub tokens_per_s: Option<f64>,
    /// Wall time so far.
    pub wall_s: f64,
}

impl MetricRecord {
    fn of(metric: &Metric) -> MetricRecord {
        MetricRecord {
            kind: metric.kind.to_string(),
            step: metric.step,
            tokens: metric.tokens,
            loss: metric.loss.is_finite().then_some(metric.loss),
            bpb: metric.bpb,
            lr: metric.lr,
            tokens_per_s: metric.tokens_per_s,
            wall_s: metric.wall_s,
        }
    }

    /// The row as the database stores it.
    pub fn metric(&self) -> Metric<'_> {
        Metric {
            kind: &self.kind,
            step: self.step,
            tokens: self.tokens,
            loss: self.loss.unwrap_or(f64::NAN),
            bpb: self.bpb,
            lr: self.lr,
            tokens_per_s: self.tokens_per_s,
            wall_s: self.wall_s,
        }
    }
}

/// A metric segment: what one session recorded at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Segment {
    /// The session that wrote it.
    pub session: String,
    /// The step training started (or resumed) from, when this segment says so.
    #[serde(default)]
    pub start_step: Option<u64>,
    /// Metric rows.
    #[serde(default)]
    pub metrics: Vec<MetricRecord>,
}

/// A run that failed for a reason of its own (not a killed job).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FailedFile {
    /// Why.
    pub reason: String,
    /// The session that failed.
    pub session: String,
}

/// Records a job's runs into their own files.
pub struct FileRecorder {
    layout: SweepLayout,
    session: String,
    next_segment: u64,
}

impl FileRecorder {
    /// A recorder for session `session` of runs of the sweep laid out as `layout`.
    pub fn new(layout: &SweepLayout, session: &str) -> Self {
        FileRecorder {
            layout: layout.clone(),
            session: session.to_string(),
            next_segment: 0,
        }
    }

    /// This process's session name: `ARRAYJOB_TASK.RESTART` inside a Slurm array job,
    /// `JOB.RESTART` in a plain job, else `local-HOST-PID`.
    pub fn session_from_env() -> String {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let restart = var("SLURM_RESTART_COUNT").unwrap_or_else(|| "0".into());
        match (
            var("SLURM_ARRAY_JOB_ID"),
            var("SLURM_ARRAY_TASK_ID"),
            var("SLURM_JOB_ID"),
        ) {
            (Some(array), Some(task), _) => format!("{array}_{task}.{restart}"),
            (_, _, Some(job)) => format!("{job}.{restart}"),
            _ => format!("local-{}-{}", this_host(), std::process::id()),
        }
    }

    fn write<T: Serialize>(&self, path: &Path, value: &T) -> Result<(), RecordError> {
        let bytes = serde_json::to_vec(value).map_err(|e| RecordError::file("encode", path, e))?;
        write_atomic(path, &[&bytes]).map_err(|e| RecordError::file("write", path, e))
    }

    fn segment(&mut self, id: &RunId, segment: &Segment) -> Result<(), RecordError> {
        self.next_segment += 1;
        let name = format!("m-{}-{:06}.json", self.session, self.next_segment);
        self.write(&self.layout.slurm_run(id).join(name), segment)
    }
}

impl Recorder for FileRecorder {
    fn begin(&mut self, id: &RunId) -> Result<(), RecordError> {
        let start = StartFile {
            session: self.session.clone(),
            host: this_host(),
            pid: std::process::id(),
        };
        let path = self
            .layout
            .slurm_run(id)
            .join(format!("start-{}.json", self.session));
        self.write(&path, &start)
    }

    fn event(&mut self, id: &RunId, event: &TrainEvent) -> Result<(), RecordError> {
        let segment = match (event, metric_of(event)) {
            (TrainEvent::Started { start_step, .. }, _) => Segment {
                session: self.session.clone(),
                start_step: Some(*start_step),
                metrics: Vec::new(),
            },
            (_, Some(metric)) => Segment {
                session: self.session.clone(),
                start_step: None,
                metrics: vec![MetricRecord::of(&metric)],
            },
            _ => return Ok(()),
        };
        self.segment(id, &segment)
    }

    fn heartbeat(&mut self, _id: &RunId) -> Result<(), RecordError> {
        Ok(()) // Slurm knows whether the job lives
    }

    fn finish(&mut self, id: &RunId, result: &RunResult) -> Result<(), RecordError> {
        self.write(&self.layout.slurm_run(id).join("result.json"), result)
    }

    fn fail(&mut self, id: &RunId, reason: &str) -> Result<(), RecordError> {
        let failed = FailedFile {
            reason: reason.to_string(),
            session: self.session.clone(),
        };
        self.write(&self.layout.slurm_run(id).join("failed.json"), &failed)
    }

    fn release(&mut self, _id: &RunId) -> Result<(), RecordError> {
        Ok(()) // every row is already in its segment; the checkpoint holds the rest
    }
}

/// What a run's files say, read back by the coordinator.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RunFiles {
    /// Session starts, by session.
    pub starts: BTreeMap<String, StartFile>,
    /// Metric segments by file name (in the order written within a session).
    pub segments: BTreeMap<String, Segment>,
    /// The result, if the run finished.
    pub result: Option<RunResult>,
    /// The failure, if the run failed for a reason of its own.
    pub failed: Option<FailedFile>,
}

impl RunFiles {
    /// Reads run `id`'s files, skipping segments named in `seen` (already ingested). A missing
    /// folder is an empty record; an unreadable file is an error naming it.
    pub fn read(
        layout: &SweepLayout,
        id: &RunId,
        seen: &std::collections::HashSet<String>,
    ) -> Result<RunFiles, RecordError> {
        let dir = layout.slurm_run(id);
        let mut files = RunFiles::default();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
            Err(e) => return Err(RecordError::file("read", &dir, e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json")) // temporary files are not
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            if name == "result.json" {
                files.result = Some(parse(&path)?);
            } else if name == "failed.json" {
                files.failed = Some(parse(&path)?);
            } else if name.starts_with("start-") {
                let start: StartFile = parse(&path)?;
                files.starts.insert(start.session.clone(), start);
            } else if name.starts_with("m-") && !seen.contains(&name) {
                files.segments.insert(name, parse(&path)?);
            }
        }
        Ok(files)
    }
}

fn parse<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, RecordError> {
    let bytes = std::fs::read(path).map_err(|e| RecordError::file("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| RecordError::file("parse", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> RunId {
        RunId::from_stored(s.into())
    }

    fn result() -> RunResult {
        RunResult {
            val_loss: 2.5,
            val_bpb: 3.6,
            train_loss: Some(2.4),
            steps: 10,
            tokens: 20_480,
            wall_s: 1.5,
            tokens_per_s: 13_653.0,
            flops: 1e9,
            peak_rss_bytes: Some(1 << 20),
            backend: "cpu".into(),
            corpus_json: "{}".into(),
            agreement: None,
            kl_teacher_student: None,
            extra_json: None,
        }
    }

    #[test]
    fn what_a_job_records_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = FileRecorder::new(&SweepLayout::at("", dir.path()), "12_3.0");
        rec.begin(&id("run1")).unwrap();
        rec.event(
            &id("run1"),
            &TrainEvent::Started {
                steps: 10,
                start_step: 4,
            },
        )
        .unwrap();
        rec.event(
            &id("run1"),
            &TrainEvent::Step {
                step: 5,
                tokens: 10_240,
                loss: 2.7,
                lr: 1e-3,
                tokens_per_s: 9e3,
                wall_s: 0.5,
            },
        )
        .unwrap();
        rec.event(&id("run1"), &TrainEvent::Checkpoint { step: 5 })
            .unwrap();
        rec.event(
            &id("run1"),
            &TrainEvent::Eval {
                step: 10,
                tokens: 20_480,
                loss: f64::NAN,
                bpb: 3.6,
                wall_s: 1.0,
            },
        )
        .unwrap();
        rec.finish(&id("run1"), &result()).unwrap();
        let files = RunFiles::read(
            &SweepLayout::at("", dir.path()),
            &id("run1"),
            &Default::default(),
        )
        .unwrap();
        assert_eq!(files.starts["12_3.0"].host, this_host());
        assert_eq!(files.segments.len(), 3, "{:?}", files.segments.keys());
        let first = files.segments.values().next().unwrap();
        assert_eq!(first.start_step, Some(4));
        let rows: Vec<_> = files
            .segments
            .values()
            .flat_map(|s| s.metrics.clone())
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].kind.as_str(), rows[0].step, rows[0].loss),
            ("train", 5, Some(2.7))
        );
        assert!(rows[1].metric().loss.is_nan(), "a NaN loss survives as NaN");
        assert_eq!(files.result, Some(result()));
        assert!(files.failed.is_none());
        // segments already ingested are skipped; a folder without files is empty
        let seen = files.segments.keys().cloned().collect();
        assert!(
            RunFiles::read(&SweepLayout::at("", dir.path()), &id("run1"), &seen)
                .unwrap()
                .segments
                .is_empty()
        );
        assert_eq!(
            RunFiles::read(&SweepLayout::at("", dir.path()), &id("nothing"), &seen).unwrap(),
            RunFiles::default()
        );
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = FileRecorder::new(&SweepLayout::at("", dir.path()), "7_0.0");
        rec.fail(&id("r"), "training diverged at step 3").unwrap();
        let path = SweepLayout::at("", dir.path())
            .slurm_run(&id("r"))
            .join("result.json");
        std::fs::write(&path, b"{\"val_loss\": 2.").unwrap();
        let err = RunFiles::read(
            &SweepLayout::at("", dir.path()),
            &id("r"),
            &Default::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("result.json"), "{err}");
    }
}
