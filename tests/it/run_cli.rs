//! `pdsweep run` through the real binary on a tiny synthetic sweep: teachers and baselines
//! train, results and metrics land in the database, bigger models do better, finished runs are
//! skipped on the next run, and a missing corpus is refused before anything runs.

use crate::common::{pdsweep, stderr};
use pdsweep::plan::RunKind;
use pdsweep::store::RunState;
use pdsweep::store::{StoredRun, SweepDb};

const SWEEP: &str = r#"
name = "tiny"
[corpus]
val_tokens = "16K"
[model]
context = 64
[teachers]
sizes = ["20K", "120K"]
tokens = ["300K"]
[students]
sizes = ["20K"]
tokens = ["100K"]
[train]
batch_tokens = "2K"
evals = 2
"#;

#[test]
fn run_trains_every_run_and_records_it() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.toml"), SWEEP).unwrap();
    let out = pdsweep(tmp.path(), &["run", "tiny.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db = SweepDb::open(&tmp.path().join("results/tiny/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    let loss = |name: &str| {
        let run = runs
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no run {name}"));
        assert_eq!(run.state, RunState::Done, "{name}");
        assert_eq!(
            db.val_curve(&run.id).unwrap().len(),
            2,
            "{name} has two evaluations"
        );
        db.result(&run.id).unwrap().unwrap().0
    };
    let (small, large, baseline) = (
        loss("teacher-20K"),
        loss("teacher-120K"),
        loss("baseline-20K"),
    );
    assert!(
        large < small,
        "the larger teacher is better: {large} vs {small}"
    );
    assert!(
        small < baseline,
        "more tokens help the same size: {small} vs {baseline}"
    );
    assert!(large < 5.0, "far below the uniform 5.55 nats: {large}");
    for run in runs
        .iter()
        .filter(|r| r.kind == RunKind::Student || r.kind == RunKind::Logits)
    {
        assert_eq!(run.state, RunState::Done, "{}", run.name);
    }
    assert!(
        tmp.path()
            .join("results/tiny/checkpoints")
            .read_dir()
            .unwrap()
            .count()
            >= 3
    );

    let planned = pdsweep(tmp.path(), &["plan", "tiny.toml", "--format", "json"]);
    let totals: serde_json::Value = serde_json::from_str(&crate::common::stdout(&planned)).unwrap();
    let source = totals["totals"]["throughput_source"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        source.starts_with("fitted on"),
        "plan prices work from the finished runs: {source}"
    );

    let again = pdsweep(tmp.path(), &["run", "tiny.toml"]);
    assert!(again.status.success());
    assert!(
        stderr(&again).contains("finished 0 run(s)"),
        "{}",
        stderr(&again)
    );
    curves_are_tensorboard_files(tmp.path(), &db, &runs);
    let watched = pdsweep(tmp.path(), &["status", "tiny.toml", "--watch", "0.1"]);
    assert!(watched.status.success(), "{}", stderr(&watched));
    let text = crate::common::stdout(&watched);
    assert!(
        text.contains("runs done") && text.contains("curves  tensorboard --logdir"),
        "an idle sweep is printed once and --watch ends: {text}"
    );
}

/// Every trained run wrote TensorBoard event files under `results/tiny/tensorboard/RUN/`, and
/// a reader of the format finds in them what the database holds: each logged training loss,
/// each held-out evaluation and the result, α for a student and, where its baseline finished
/// first, the student's gain.
fn curves_are_tensorboard_files(root: &std::path::Path, db: &SweepDb, runs: &[StoredRun]) {
    use pdsweep::store::tfevents::{event_files, read_scalars};
    for run in runs.iter().filter(|r| r.kind != RunKind::Logits) {
        let dir = root.join("results/tiny/tensorboard").join(&run.name);
        let files = event_files(&dir);
        assert!(
            !files.is_empty(),
            "{}: no event file in {}",
            run.name,
            dir.display()
        );
        let scalars: Vec<_> = files
            .iter()
            .flat_map(|f| read_scalars(f).unwrap())
            .collect();
        let tagged = |tag: &str| scalars.iter().filter(|s| s.tag == tag).collect::<Vec<_>>();
        let val = db.val_curve(&run.id).unwrap();
        let heldout = tagged("heldout/loss");
        assert_eq!(heldout.len(), val.len(), "{}", run.name);
        for (s, point) in heldout.iter().zip(&val) {
            assert!(
                (s.value as f64 - point.2).abs() < 1e-5,
                "{}: {s:?} vs {point:?}",
                run.name
            );
        }
        assert!(!tagged("train/loss").is_empty() && !tagged("train/lr").is_empty());
        let result = db.result(&run.id).unwrap().unwrap().0;
        let last = tagged("result/heldout_loss");
        assert!((last[0].value as f64 - result).abs() < 1e-5, "{}", run.name);
        if run.kind == RunKind::Student {
            assert!(
                !tagged("train/alpha").is_empty(),
                "{}: α is logged",
                run.name
            );
            // the gain is logged when the baseline finished first
            let gain = db.gain(&run.id).unwrap().unwrap();
            for logged in tagged("result/gain") {
                assert!((logged.value as f64 - gain).abs() < 1e-5, "{}", run.name);
            }
        }
    }
}

/// A corpus path that did not exist passed `plan` (exit 0, runs recorded), and `run` then failed
/// run by run with exit 3 and the unresolved relative path. Both now refuse it at once (exit 2)
/// with the path as written and as resolved, and record nothing.
#[test]
fn a_missing_corpus_is_refused_at_plan_time_with_both_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let text = SWEEP.replace(
        "val_tokens = \"16K\"",
        "kind = \"text\"\npath = \"nowhere/texts\"\nval_tokens = \"16K\"",
    );
    std::fs::create_dir_all(tmp.path().join("sweeps")).unwrap();
    std::fs::write(tmp.path().join("sweeps/tiny.toml"), text).unwrap();
    let resolved = tmp.path().join("sweeps/nowhere/texts");
    for command in ["plan", "run"] {
        let out = pdsweep(tmp.path(), &[command, "sweeps/tiny.toml"]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("`[corpus] path` = `nowhere/texts`")
                && err.contains(&resolved.display().to_string()),
            "{command}: {err}"
        );
        assert_eq!(err.matches("error:").count(), 1, "one message: {err}");
    }
    assert!(
        !tmp.path().join("results/tiny/sweep.db").exists(),
        "nothing is recorded for a sweep whose corpus is missing"
    );
    std::fs::create_dir_all(tmp.path().join("sweeps/nowhere/texts")).unwrap();
    std::fs::write(
        tmp.path().join("sweeps/nowhere/texts/a.txt"),
        [0xff, 0xfe, 0x00],
    )
    .unwrap();
    let out = pdsweep(tmp.path(), &["plan", "sweeps/tiny.toml"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
}

#[test]
fn status_reports_counts_progress_and_an_estimate() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.toml"), SWEEP).unwrap();
    let none = pdsweep(tmp.path(), &["status", "tiny.toml"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("pdsweep plan"), "{}", stderr(&none));
    assert!(pdsweep(tmp.path(), &["plan", "tiny.toml"]).status.success());
    let out = pdsweep(tmp.path(), &["status", "tiny.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&crate::common::stdout(&out)).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(
        v["counts"]["planned"].as_u64().unwrap() as usize,
        runs.len()
    );
    for run in runs {
        for key in ["id", "kind", "name", "state", "progress", "error"] {
            assert!(run.get(key).is_some(), "{key} missing in {run}");
        }
    }
    assert!(v["eta_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn two_processes_on_one_sweep_run_every_run_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.toml"), SWEEP).unwrap();
    assert!(pdsweep(tmp.path(), &["plan", "tiny.toml"]).status.success());
    let spawn = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_pdsweep"))
            .args(["run", "tiny.toml"])
            .current_dir(tmp.path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut first, mut second) = (spawn(), spawn());
    assert!(first.wait().unwrap().success());
    assert!(second.wait().unwrap().success());
    let conn = rusqlite::Connection::open(tmp.path().join("results/tiny/sweep.db")).unwrap();
    let rows: Vec<(String, String, i64)> = conn
        .prepare("SELECT name, state, attempts FROM runs")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (name, state, attempts) in &rows {
        assert_eq!(state, "done", "{name}");
        assert_eq!(*attempts, 1, "{name} ran {attempts} times");
    }
    let results: i64 = conn
        .query_row("SELECT count(*) FROM results", [], |r| r.get(0))
        .unwrap();
    assert_eq!(results as usize, rows.len());
}

#[test]
fn run_refuses_a_sweep_database_in_use_on_another_host() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.toml"), SWEEP).unwrap();
    let results = tmp.path().join("results/tiny");
    std::fs::create_dir_all(&results).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let lease = format!(r#"{{"host":"node-17","pid":4242,"holder":"run","renewed_unix":{now}}}"#);
    std::fs::write(results.join("lease.json"), lease).unwrap();
    let out = pdsweep(tmp.path(), &["run", "tiny.toml"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("`node-17`") && err.contains("WAL"), "{err}");
    assert!(
        !results.join("sweep.db").exists(),
        "the database was not even opened"
    );
}
