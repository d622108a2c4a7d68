//! The coordinator's side of recording: reading what jobs wrote into their runs' files and
//! putting it into the sweep database, idempotently (a segment ingested twice replaces the same
//! rows with the same values), oldest session first so a resumed session's rows win.

use std::collections::{HashMap, HashSet};

use super::files::RunFiles;
use crate::plan::RunId;
use crate::run::error::RecordError;
use crate::store::{SweepDb, SweepLayout};

/// Ingests runs' files, remembering which segments it has read.
pub(crate) struct Ingester {
    layout: SweepLayout,
    seen: HashMap<RunId, HashSet<String>>,
}

impl Ingester {
    /// An ingester for the sweep laid out as `layout`.
    pub fn new(layout: &SweepLayout) -> Self {
        Ingester {
            layout: layout.clone(),
            seen: HashMap::new(),
        }
    }

    /// Reads run `run_id`'s files and records new sessions and metric rows in `db`; returns
    /// what the files say (the result or failure is left to the caller).
    pub fn ingest(&mut self, db: &mut SweepDb, run_id: &RunId) -> Result<RunFiles, RecordError> {
        let seen = self.seen.entry(run_id.clone()).or_default();
        let files = RunFiles::read(&self.layout, run_id, seen)?;
        for (session, start) in &files.starts {
            db.record_session(run_id, session, Some(&start.host), None)?;
        }
        let mut names: Vec<&String> = files.segments.keys().collect();
        names.sort_by_key(|n| segment_order(n));
        let batch: Vec<_> = names
            .iter()
            .map(|n| {
                let s = &files.segments[*n];
                (
                    s.session.as_str(),
                    s.start_step,
                    s.metrics.iter().map(|m| m.metric()).collect::<Vec<_>>(),
                )
            })
            .collect();
        if !batch.is_empty() {
            db.ingest_segments(run_id, &batch)?;
        }
        seen.extend(files.segments.keys().cloned());
        Ok(files)
    }
}

/// Sorts segment names `m-JOB_TASK.RESTART-SEQ.json` by job, task, restart and sequence as
/// numbers (job 9 before job 15); other names after, by text.
fn segment_order(name: &str) -> (u8, Vec<u64>, String) {
    let numbers = name
        .strip_prefix("m-")
        .and_then(|n| n.strip_suffix(".json"))
        .and_then(|n| {
            n.split(['_', '.', '-'])
                .map(|p| p.parse::<u64>().ok())
                .collect::<Option<Vec<u64>>>()
        });
    match numbers {
        Some(v) => (0, v, String::new()),
        None => (1, Vec::new(), name.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> RunId {
        RunId::from_stored(s.into())
    }
    use crate::run::record::{FileRecorder, Recorder};
    use crate::train::TrainEvent;

    #[test]
    fn segments_sort_by_job_then_restart_then_sequence() {
        let mut names = vec![
            "m-15_0.0-000001.json",
            "m-9_0.10-000001.json",
            "m-9_0.2-000003.json",
            "m-9_0.2-000010.json",
            "m-local-vm-12-000001.json",
        ];
        names.sort_by_key(|n| segment_order(n));
        assert_eq!(
            names,
            [
                "m-9_0.2-000003.json",
                "m-9_0.2-000010.json",
                "m-9_0.10-000001.json",
                "m-15_0.0-000001.json",
                "m-local-vm-12-000001.json"
            ]
        );
    }

    #[test]
    fn ingesting_twice_changes_nothing_and_later_sessions_win() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = SweepDb::open(&dir.path().join("sweep.db")).unwrap();
        db.conn()
            .execute_batch(
                "INSERT INTO plans (id, sweep_hash, sweep_name, sweep_path, sweep_toml, pdsweep_version)
                 VALUES (1, 'h', 's', 's.toml', '', '0');
                 INSERT INTO runs (id, kind, name, config_json, params_total, params_non_embedding, tokens, flops, disk_bytes, first_plan)
                 VALUES ('r', 'teacher', 'teacher-1', '{}', 1, 1, 1, 1, 0, 1);",
            )
            .unwrap();
        let step = |step, loss| TrainEvent::Step {
            step,
            tokens: step * 10,
            loss,
            lr: 0.1,
            tokens_per_s: 1.0,
            wall_s: 1.0,
        };
        let mut first = FileRecorder::new(&SweepLayout::at("", dir.path()), "9_0.0");
        first.begin(&id("r")).unwrap();
        first
            .event(
                &id("r"),
                &TrainEvent::Started {
                    steps: 40,
                    start_step: 0,
                },
            )
            .unwrap();
        first.event(&id("r"), &step(10, 3.0)).unwrap();
        first.event(&id("r"), &step(20, 2.9)).unwrap();
        let mut second = FileRecorder::new(&SweepLayout::at("", dir.path()), "9_0.1");
        second.begin(&id("r")).unwrap();
        second
            .event(
                &id("r"),
                &TrainEvent::Started {
                    steps: 40,
                    start_step: 16,
                },
            )
            .unwrap();
        second.event(&id("r"), &step(20, 2.8)).unwrap();
        second.event(&id("r"), &step(30, 2.7)).unwrap();
        let mut ingester = Ingester::new(&SweepLayout::at("", dir.path()));
        ingester.ingest(&mut db, &id("r")).unwrap();
        let rows = |db: &SweepDb| -> Vec<(i64, f64)> {
            db.conn()
                .prepare("SELECT step, loss FROM metrics WHERE run_id = 'r' ORDER BY step")
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(rows(&db), [(10, 3.0), (20, 2.8), (30, 2.7)]);
        // a fresh coordinator ingests everything again: same rows
        Ingester::new(&SweepLayout::at("", dir.path()))
            .ingest(&mut db, &id("r"))
            .unwrap();
        assert_eq!(rows(&db), [(10, 3.0), (20, 2.8), (30, 2.7)]);
        let sessions = db.sessions(&id("r")).unwrap();
        let starts: Vec<_> = sessions
            .iter()
            .map(|s| (s.session.as_str(), s.start_step))
            .collect();
        assert_eq!(starts, [("9_0.0", Some(0)), ("9_0.1", Some(16))]);
    }
}
