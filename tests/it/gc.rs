//! `pdsweep gc`: the logit stores of runs no longer in the current plan are removed (and only
//! those), their logit passes become planned runs again, every result is kept, and nothing is
//! removed while another process holds the sweep.

use crate::common::{pdsweep, stderr, stdout};

const SWEEP: &str = r#"
name = "gc"
[corpus]
val_tokens = "8K"
[model]
context = 64
[teachers]
sizes = ["20K"]
tokens = ["64K"]
[students]
sizes = ["10K"]
tokens = ["48K"]
[distill]
mode = "offline"
top_k = 50
[train]
batch_tokens = "2K"
evals = 3
"#;

fn rows(db: &std::path::Path, sql: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn gc_removes_only_stores_the_current_plan_does_not_read_and_keeps_every_result() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = dir.path().join("s.toml");
    std::fs::write(&sweep, SWEEP).unwrap();
    assert!(pdsweep(dir.path(), &["run", "s.toml"]).status.success());
    // a new truncation: a new logit pass and student; the top-50 store is left behind
    std::fs::write(&sweep, SWEEP.replace("top_k = 50", "top_k = 8")).unwrap();
    assert!(pdsweep(dir.path(), &["run", "s.toml"]).status.success());
    let db = dir.path().join("results/gc/sweep.db");
    let id_of =
        |name: &str| rows(&db, &format!("SELECT id FROM runs WHERE name = '{name}'"))[0].clone();
    let (old, new) = (id_of("logits-20K-k50"), id_of("logits-20K-k8"));
    let store = |id: &str| dir.path().join("results/gc/logits").join(id);
    assert!(store(&old).is_dir() && store(&new).is_dir());
    let results = || {
        rows(
            &db,
            "SELECT r.name || '=' || s.val_loss FROM results s JOIN runs r ON r.id = s.run_id WHERE r.kind != 'logits' ORDER BY r.name",
        )
    };
    let before = results();
    assert_eq!(before.len(), 4, "{before:?}"); // teacher, two students, baseline

    // a dry run names the store and removes nothing
    let out = pdsweep(dir.path(), &["gc", "s.toml", "--dry-run"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains(&old) && text.contains("logits-20K-k50"),
        "{text}"
    );
    assert!(!text.contains(&new), "{text}");
    assert!(store(&old).is_dir());

    // while another process holds the sweep, nothing is removed
    let lease = dir.path().join("results/gc/lease.json");
    let info = serde_json::json!({
        "host": pdsweep::store::this_host(),
        "pid": std::process::id(),
        "holder": "run",
        "renewed_unix": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64(),
    });
    std::fs::write(&lease, info.to_string()).unwrap();
    let out = pdsweep(dir.path(), &["gc", "s.toml"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("must not be removed while it runs"),
        "{}",
        stderr(&out)
    );
    assert!(store(&old).is_dir());
    std::fs::remove_file(&lease).unwrap();

    let out = pdsweep(dir.path(), &["gc", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!store(&old).exists() && store(&new).is_dir());
    assert_eq!(results(), before, "every result is kept");
    let state =
        |id: &str| rows(&db, &format!("SELECT state FROM runs WHERE id = '{id}'"))[0].clone();
    assert_eq!(state(&old), "planned");
    assert_eq!(state(&new), "done");

    // back to top-50: its store is made again, no student is trained again
    std::fs::write(&sweep, SWEEP).unwrap();
    let out = pdsweep(dir.path(), &["run", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(store(&old).is_dir());
    assert!(
        stderr(&out).contains("finished 1 run(s)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(results(), before);
}
