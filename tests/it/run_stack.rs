//! Stacks through `pdsweep run --stack N`: a baseline, offline students (from a logit store)
//! and online students of one shape trained as one stack record what they record trained
//! alone — every metric row and every final held-out loss to 1e-4 — and `plan` shows the stack.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{pdsweep, stderr, stdout};

/// One teacher; four students of one size (offline and online, two α) and their baseline:
/// five runs of one shape.
const SWEEP: &str = r#"
name = "stacked"
[corpus]
val_tokens = "8K"
[model]
context = 64
[teachers]
sizes = ["20K"]
tokens = ["64K"]
[students]
sizes = ["10K"]
tokens = ["40K"]
baseline = true
[distill]
mode = ["offline", "online"]
alpha = [0.5, 0.9]
[train]
batch_tokens = "2K"
evals = 3
"#;

/// Every metric row's loss by (run name, kind, step).
fn metrics(db: &Path) -> BTreeMap<(String, String, i64), f64> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare(
        "SELECT r.name, m.kind, m.step, m.loss FROM metrics m JOIN runs r ON r.id = m.run_id",
    )
    .unwrap()
    .query_map([], |r| Ok(((r.get(0)?, r.get(1)?, r.get(2)?), r.get(3)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Each finished run's (final held-out loss, members of the stack it trained in) by name.
fn results(db: &Path) -> BTreeMap<String, (f64, Option<i64>)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare(
        "SELECT r.name, s.val_loss, json_extract(s.extra_json, '$.stack_members')
         FROM results s JOIN runs r ON r.id = s.run_id",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn a_stack_of_four_records_what_its_runs_record_alone() {
    let (alone, stacked) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for dir in [&alone, &stacked] {
        std::fs::write(dir.path().join("s.toml"), SWEEP).unwrap();
    }
    let plan = pdsweep(alone.path(), &["plan", "s.toml", "--no-probe"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let text = stdout(&plan);
    assert!(text.contains("1 group(s) of same-shape runs"), "{text}");
    assert!(text.contains("5 × 2L"), "{text}");

    let out = pdsweep(alone.path(), &["run", "s.toml", "--stack", "off"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("train as one model"),
        "{}",
        stderr(&out)
    );
    let out = pdsweep(stacked.path(), &["run", "s.toml", "--stack", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("stack   4 runs train as one model"),
        "{}",
        stderr(&out)
    );

    let db = |dir: &tempfile::TempDir| dir.path().join("results/stacked/sweep.db");
    let (want, got) = (results(&db(&alone)), results(&db(&stacked)));
    // the teacher, the logit pass, four students, the baseline
    assert_eq!(want.len(), 7, "{want:?}");
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    let members: Vec<&String> = got
        .iter()
        .filter(|(_, (_, m))| *m == Some(4))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(members.len(), 4, "{got:?}");
    assert!(
        members.iter().any(|n| n.starts_with("baseline")),
        "{members:?}"
    );
    assert!(members.iter().any(|n| n.contains("offline")), "{members:?}");
    assert!(want.values().all(|(_, m)| m.is_none()), "{want:?}");
    for (name, (a, _)) in &want {
        let b = got[name].0;
        assert!((a - b).abs() < 1e-4, "{name}: {a} alone, {b} stacked");
    }
    let (want, got) = (metrics(&db(&alone)), metrics(&db(&stacked)));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    for (key, a) in &want {
        let b = got[key];
        assert!((a - b).abs() < 1e-4, "{key:?}: {a} alone, {b} stacked");
    }
}
