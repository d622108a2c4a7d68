//! The sweep database on real files: re-planning is idempotent, a changed knob adds runs and
//! keeps the old ones with their state, and the schema is migrated and healthy.

use std::path::Path;

use crate::common::{dump, pdsweep, stderr};
use pdsweep::plan::RunKind;
use pdsweep::store::RunState;
use pdsweep::store::SweepDb;

const SWEEP: &str = r#"
name = "db-test"
[teachers]
sizes = ["400K", "1.6M"]
tokens = ["4M"]
[students]
sizes = ["200K"]
tokens = ["2M"]
[distill]
temperature = 1.0
"#;

fn plan(dir: &Path, text: &str) {
    std::fs::write(dir.join("sweep.toml"), text).unwrap();
    let out = pdsweep(dir, &["plan", "sweep.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn replanning_the_same_file_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    plan(tmp.path(), SWEEP);
    let db = tmp.path().join("results/db-test/sweep.db");
    let before = dump(&db);
    assert!(before.contains("teacher-400K"), "{before}");
    plan(tmp.path(), SWEEP);
    assert_eq!(before, dump(&db));
}

#[test]
fn changing_a_knob_adds_runs_and_keeps_old_results() {
    let tmp = tempfile::tempdir().unwrap();
    plan(tmp.path(), SWEEP);
    let path = tmp.path().join("results/db-test/sweep.db");
    let (old_runs, finished) = {
        let db = SweepDb::open(&path).unwrap();
        let runs = db.runs().unwrap();
        let teacher = runs
            .iter()
            .find(|r| r.kind == RunKind::Teacher)
            .unwrap()
            .id
            .clone();
        db.set_state(&teacher, RunState::Done, None).unwrap();
        (runs, teacher)
    };
    plan(
        tmp.path(),
        &SWEEP.replace("temperature = 1.0", "temperature = [1.0, 2.0]"),
    );
    let db = SweepDb::open(&path).unwrap();
    let runs = db.runs().unwrap();
    for old in &old_runs {
        assert!(
            runs.iter().any(|r| r.id == old.id),
            "run {} was lost",
            old.name
        );
    }
    let students =
        |rs: &[pdsweep::store::StoredRun]| rs.iter().filter(|r| r.kind == RunKind::Student).count();
    assert_eq!(
        students(&runs),
        2 * students(&old_runs),
        "τ = 2 adds one student per pair"
    );
    assert_eq!(
        runs.iter().filter(|r| r.kind == RunKind::Teacher).count(),
        2,
        "teachers are shared, not re-planned"
    );
    assert_eq!(
        runs.iter().find(|r| r.id == finished).unwrap().state,
        RunState::Done
    );
    let current = db.current_plan().unwrap().unwrap();
    assert_eq!(db.plan_runs(current).unwrap().len(), runs.len());
    assert_eq!(db.integrity_check().unwrap(), "ok");
}

#[test]
fn dependencies_are_stored() {
    let tmp = tempfile::tempdir().unwrap();
    plan(tmp.path(), SWEEP);
    let db = SweepDb::open(&tmp.path().join("results/db-test/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    for run in &runs {
        let expected = match run.kind.as_str() {
            "teacher" | "baseline" => 0,
            _ => 1,
        };
        assert_eq!(run.depends_on.len(), expected, "{}", run.name);
        for dep in &run.depends_on {
            assert!(runs.iter().any(|r| &r.id == dep));
        }
    }
}

#[test]
fn a_corrupt_database_is_refused_with_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("results/db-test");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("sweep.db"),
        b"this is not a database, just bytes that look wrong ........",
    )
    .unwrap();
    std::fs::write(tmp.path().join("sweep.toml"), SWEEP).unwrap();
    let out = pdsweep(tmp.path(), &["plan", "sweep.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("results/db-test/sweep.db"), "{err}");
    assert_eq!(
        std::fs::read(dir.join("sweep.db")).unwrap()[..4],
        *b"this",
        "the file is left as it was"
    );
}

#[test]
fn runs_of_a_dead_process_are_requeued_and_claims_are_exclusive() {
    let tmp = tempfile::tempdir().unwrap();
    plan(tmp.path(), SWEEP);
    let path = tmp.path().join("results/db-test/sweep.db");
    let db = SweepDb::open(&path).unwrap();
    let runs = db.runs().unwrap();
    let (a, b) = (&runs[0].id, &runs[1].id);
    assert!(db.claim(a, false).unwrap(), "a planned run can be claimed");
    let other = SweepDb::open(&path).unwrap();
    assert!(
        !other.claim(a, false).unwrap(),
        "a second process cannot claim it again"
    );
    // a run left `running` by a process of this host that no longer exists
    assert!(db.claim(b, false).unwrap());
    let dead = format!(
        "{}:{}",
        pdsweep::store::this_process().rsplit_once(':').unwrap().0,
        u32::MAX - 7
    );
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE runs SET owner = ?1 WHERE id = ?2",
            [&dead, b.as_str()],
        )
        .unwrap();
    assert_eq!(
        other.requeue_dead().unwrap(),
        1,
        "only the dead process's run"
    );
    let states: Vec<(pdsweep::plan::RunId, RunState)> = other
        .runs()
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.state))
        .collect();
    assert!(states.contains(&(b.clone(), RunState::Planned)));
    assert!(
        states.contains(&(a.clone(), RunState::Running)),
        "a live process keeps its run"
    );
}

/// A student not finished waits for the dependencies of the current plan only: one planned
/// by an older pdsweep whose logit pass had another id (per seed, before stores were shared)
/// must not wait for a pass no plan runs.
#[test]
fn a_pending_run_waits_for_the_current_plans_dependencies_only() {
    let tmp = tempfile::tempdir().unwrap();
    plan(tmp.path(), SWEEP);
    let path = tmp.path().join("results/db-test/sweep.db");
    let student = {
        let db = SweepDb::open(&path).unwrap();
        let runs = db.runs().unwrap();
        let student = runs.iter().find(|r| r.kind == RunKind::Student).unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "INSERT INTO runs (id, kind, name, config_json, params_total, params_non_embedding,
             tokens, flops, disk_bytes, first_plan) VALUES ('old-pass', 'logits', 'logits-old', '{}', 0, 0, 0, 0, 0, 1)",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO run_deps (run_id, depends_on) VALUES (?1, 'old-pass')",
            [student.id.as_str()],
        )
        .unwrap();
        student.id.clone()
    };
    plan(tmp.path(), SWEEP);
    let db = SweepDb::open(&path).unwrap();
    let plan_id = db.current_plan().unwrap().unwrap();
    let runs = db.plan_runs(plan_id).unwrap();
    let deps = &runs.iter().find(|r| r.id == student).unwrap().depends_on;
    assert!(!deps.is_empty());
    assert!(deps.iter().all(|d| d.as_str() != "old-pass"), "{deps:?}");
}
