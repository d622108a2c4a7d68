//! Distillation end to end through the binary: a teacher, its logit store, students offline and
//! online next to their baseline; the store's size matches the plan; a damaged shard is refused
//! by the student with the shard's name.

use crate::common::{pdsweep, stderr};
use pdsweep::store::RunState;
use pdsweep::store::SweepDb;

const SWEEP: &str = r#"
name = "distill"
[corpus]
val_tokens = "16K"
[model]
context = 64
[teachers]
sizes = ["120K"]
tokens = ["600K"]
[students]
sizes = ["20K"]
tokens = ["200K"]
[distill]
mode = ["offline", "online"]
top_k = 16
[train]
batch_tokens = "2K"
evals = 2
"#;

#[test]
fn students_learn_from_their_teacher_in_both_modes_and_a_damaged_shard_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("d.toml"), SWEEP).unwrap();
    let out = pdsweep(tmp.path(), &["run", "d.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db_path = tmp.path().join("results/distill/sweep.db");
    let db = SweepDb::open(&db_path).unwrap();
    let runs = db.runs().unwrap();
    let by_name = |name: &str| {
        runs.iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let loss = |name: &str| db.result(&by_name(name).id).unwrap().unwrap().0;
    let baseline = loss("baseline-20K");
    let (offline, online) = (
        loss("student-20K-from-120K-offline"),
        loss("student-20K-from-120K-online"),
    );
    assert!(
        offline < baseline - 0.05,
        "distillation helps: {offline} vs baseline {baseline}"
    );
    assert!(
        (offline - online).abs() < 0.02,
        "8-bit stored logits cost little: {offline} vs {online}"
    );
    for mode in ["offline", "online"] {
        let (agreement, kl) = db
            .agreement(&by_name(&format!("student-20K-from-120K-{mode}")).id)
            .unwrap()
            .unwrap();
        assert!(
            (0.0..=1.0).contains(&agreement) && kl > 0.0,
            "{agreement} {kl}"
        );
    }
    // the store's real size is within 5 % of the plan's prediction
    let store = by_name("logits-120K-k16");
    let folder = tmp
        .path()
        .join("results/distill/logits")
        .join(store.id.as_str());
    let shards: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let bytes: u64 = shards
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let predicted = runs.iter().find(|r| r.id == store.id).unwrap();
    let predicted: serde_json::Value = serde_json::from_str(&predicted.config_json).unwrap();
    let per_token = 16 * 2; // 16 kept logits of 2 bytes each
    let expected = predicted["tokens"].as_u64().unwrap() * per_token;
    assert!(
        (bytes as f64 / expected as f64 - 1.0).abs() < 0.05,
        "{bytes} vs {expected}"
    );

    // flip one byte of the shard, make the offline student run again: it refuses the shard
    let shard = &shards[0];
    let mut data = std::fs::read(shard).unwrap();
    let at = data.len() - 100;
    data[at] ^= 0x20;
    std::fs::write(shard, data).unwrap();
    let student = by_name("student-20K-from-120K-offline");
    db.set_state(&student.id, RunState::Planned, None).unwrap();
    std::fs::remove_file(
        tmp.path()
            .join("results/distill/checkpoints")
            .join(format!("{}.ckpt", student.id)),
    )
    .unwrap();
    let again = pdsweep(tmp.path(), &["run", "d.toml"]);
    assert_eq!(again.status.code(), Some(3), "{}", stderr(&again));
    let err = stderr(&again);
    let name = shard.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        err.contains(&name) && err.contains("does not match its checksum"),
        "{err}"
    );
    let state = SweepDb::open(&db_path)
        .unwrap()
        .runs()
        .unwrap()
        .into_iter()
        .find(|r| r.id == student.id)
        .unwrap()
        .state;
    assert_eq!(state, RunState::Failed);
}

const FIDELITY: &str = r#"
name = "fidelity"
[corpus]
val_tokens = "16K"
[model]
context = 64
[teachers]
sizes = ["120K"]
tokens = ["600K"]
[students]
sizes = ["20K"]
tokens = ["200K"]
[distill]
mode = ["offline", "online"]
top_k = 16
targets = ["top_k", "sampled"]
missing = ["renormalise", "bucket"]
[train]
batch_tokens = "2K"
evals = 2
"#;

/// Sampled targets and the tail bucket end to end, offline and online: every student learns
/// from its teacher, a live teacher gives what its store gives (the same draws; the store's
/// quantised values), each store is the size the plan predicts for its layout, and each logit
/// pass records its store's fidelity.
#[test]
fn sampled_and_bucket_students_run_offline_and_online_and_stores_record_their_fidelity() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("f.toml"), FIDELITY).unwrap();
    let out = pdsweep(tmp.path(), &["run", "f.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db_path = tmp.path().join("results/fidelity/sweep.db");
    let db = SweepDb::open(&db_path).unwrap();
    let runs = db.runs().unwrap();
    assert!(runs.iter().all(|r| r.state == RunState::Done));
    let students: Vec<_> = runs
        .iter()
        .filter(|r| r.name.starts_with("student"))
        .collect();
    assert_eq!(
        students.len(),
        6,
        "sampled × bucket is planned once per mode"
    );
    let loss = |suffix: &str| {
        let run = runs
            .iter()
            .find(|r| r.name.ends_with(suffix))
            .unwrap_or_else(|| panic!("no run ending {suffix}"));
        db.result(&run.id).unwrap().unwrap().0
    };
    let baseline = loss("baseline-20K");
    for setting in ["top_k-bucket", "sampled-renormalise"] {
        let (offline, online) = (
            loss(&format!("offline-{setting}")),
            loss(&format!("online-{setting}")),
        );
        assert!(
            offline < baseline - 0.05,
            "{setting}: {offline} vs baseline {baseline}"
        );
        assert!(
            (offline - online).abs() < 0.02,
            "{setting}: {offline} vs {online}"
        );
    }
    let conn = rusqlite::Connection::open(&db_path).unwrap();
    for (store, per_token) in [
        ("logits-120K-k16-tail", 16 * 2 + 1),
        ("logits-120K-sampled16", 16 * 21 / 8),
    ] {
        let run = runs
            .iter()
            .find(|r| r.name == store)
            .unwrap_or_else(|| panic!("no {store}"));
        let extra: String = conn
            .query_row(
                "SELECT extra_json FROM results WHERE run_id = ?1",
                [run.id.as_str()],
                |r| r.get(0),
            )
            .unwrap();
        let extra: serde_json::Value = serde_json::from_str(&extra).unwrap();
        let kl = extra["fidelity_kl"].as_f64().unwrap();
        let mass = extra["fidelity_kept_mass"].as_f64().unwrap();
        assert!(extra["fidelity_positions"].as_u64().unwrap() > 0, "{extra}");
        assert!(
            kl >= 0.0 && (0.0..=1.0 + 1e-9).contains(&mass),
            "{store}: {extra}"
        );
        if store.ends_with("tail") {
            assert!(kl < 0.01, "a tail keeps the coarsened distribution: {kl}");
        }
        // 9-bit ids would not fit a byte: V = 256 here, 8-bit ids, 8-bit values (+5-bit counts)
        let bytes = extra["store_bytes"].as_u64().unwrap() as f64;
        let positions = extra["positions"].as_u64().unwrap() as f64;
        let want = if store.ends_with("tail") {
            per_token as f64
        } else {
            (16.0 * 21.0 / 8.0f64).ceil()
        };
        assert!(
            (bytes / positions / want - 1.0).abs() < 0.05,
            "{store}: {} B/token vs {want}",
            bytes / positions
        );
    }
}
