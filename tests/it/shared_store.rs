//! One logit store for every seed (issue 28), through the binary on real text: a sweep of two
//! seeds has one logit pass per teacher, whose store holds the union of the windows both
//! seeds' students read; adding a third seed re-plans the same pass (same id, same folder),
//! which computes only the windows the new seed adds, as new shards beside the old ones
//! (byte-identical), without re-running the finished students; and an extension killed with
//! SIGKILL at random moments ends with the store and students of one never interrupted. (That
//! a student reads from the shared store exactly the targets a store of its own steps held is
//! `distill::logits_run`'s unit test.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{pdsweep, stderr};
use pdsweep::plan::RunKind;
use pdsweep::store::SweepDb;

const PLAYS: [&str; 2] = ["macbeth_gut.txt", "tempest_gut.txt"];

fn corpus(root: &Path) -> Option<()> {
    crate::common::shakespeare_plays(root, &PLAYS)
}

fn sweep(seeds: &str) -> String {
    format!(
        r#"
name = "shared"
seed = {seeds}
[corpus]
kind = "text"
path = "books"
tokenizer = "byte"
val_tokens = "8K"
[model]
context = 32
[teachers]
sizes = ["20K"]
tokens = ["40K"]
seed = 1
[students]
sizes = ["8K"]
tokens = ["64K"]
[distill]
top_k = 8
[train]
batch_tokens = "1K"
evals = 1
checkpoint_every = 8
"#
    )
}

/// The files of a store folder and their bytes, by name.
fn shards(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

struct Sweep {
    root: PathBuf,
}

impl Sweep {
    fn db(&self) -> SweepDb {
        SweepDb::open(&self.root.join("results/shared/sweep.db")).unwrap()
    }

    fn run(&self, seeds: &str) {
        std::fs::write(self.root.join("s.toml"), sweep(seeds)).unwrap();
        let out = pdsweep(&self.root, &["run", "s.toml"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }

    /// The one logit pass: its id, its result's extra JSON and its store folder.
    fn store(&self) -> (String, serde_json::Value, PathBuf) {
        let db = self.db();
        let stores: Vec<_> = db
            .runs()
            .unwrap()
            .into_iter()
            .filter(|r| r.kind == RunKind::Logits)
            .collect();
        assert_eq!(stores.len(), 1, "one logit pass for every seed");
        let id = stores[0].id.clone();
        let extra = db
            .result_extra(&id)
            .unwrap()
            .expect("the pass has a result");
        let dir = self.root.join("results/shared/logits").join(id.as_str());
        (id.to_string(), serde_json::from_str(&extra).unwrap(), dir)
    }

    /// Every student's and baseline's (state, held-out loss, attempts), by name.
    fn students(&self) -> BTreeMap<String, (String, Option<f64>, i64)> {
        let conn = rusqlite::Connection::open(self.root.join("results/shared/sweep.db")).unwrap();
        conn.prepare(
            "SELECT r.name, r.state, s.val_loss, r.attempts FROM runs r
             LEFT JOIN results s ON s.run_id = r.id WHERE r.kind IN ('student', 'baseline')",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }
}

#[test]
fn one_store_serves_every_seed_and_a_new_seed_only_adds_shards() {
    let tmp = tempfile::tempdir().unwrap();
    if corpus(tmp.path()).is_none() {
        return;
    }
    let s = Sweep {
        root: tmp.path().into(),
    };
    s.run("[1, 2]");
    let (id, extra, dir) = s.store();
    let positions = extra["positions"].as_u64().unwrap();
    assert!(
        positions > 64_000 && positions < 2 * 64_000,
        "two seeds' windows, shared where they meet: {positions}"
    );
    let before = shards(&dir);
    let students = s.students();
    assert_eq!(students.len(), 4);

    s.run("[1, 2, 3]");
    let (id2, extra2, dir2) = s.store();
    assert_eq!(
        (id2.as_str(), &dir2),
        (id.as_str(), &dir),
        "the same pass and folder"
    );
    let after = shards(&dir);
    for (name, bytes) in &before {
        assert_eq!(after.get(name), Some(bytes), "{name} was rewritten");
    }
    assert!(
        after.len() > before.len(),
        "the new seed's windows are new shards"
    );
    let computed = extra2["computed_positions"].as_u64().unwrap();
    let held = extra2["positions"].as_u64().unwrap();
    assert_eq!(
        held,
        positions + computed,
        "only the added windows are computed"
    );
    assert!(computed > 0 && computed <= 64_000, "{computed}");
    let now = s.students();
    for (name, old) in &students {
        assert_eq!(&now[name], old, "{name} ran again");
    }
    assert_eq!(now.len(), 6);
    assert!(now.values().all(|(state, _, _)| state == "done"), "{now:?}");
}

#[test]
fn an_extension_killed_at_random_ends_as_one_never_interrupted() {
    let (reference, killed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    if corpus(reference.path()).is_none() || corpus(killed.path()).is_none() {
        return;
    }
    let want = Sweep {
        root: reference.path().into(),
    };
    let got = Sweep {
        root: killed.path().into(),
    };
    for s in [&want, &got] {
        s.run("[1]");
    }
    want.run("[1, 2]");
    std::fs::write(got.root.join("s.toml"), sweep("[1, 2]")).unwrap();
    let mut state = 11u64;
    for _ in 0..8 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
            .args(["run", "s.toml"])
            .current_dir(&got.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(150 + (state >> 33) % 900));
        if child.try_wait().unwrap().is_some() {
            break;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    got.run("[1, 2]");
    let (.., want_dir) = want.store();
    let (.., got_dir) = got.store();
    let held = |dir: &Path| -> Vec<u64> {
        let header = shards(dir);
        assert!(!header.is_empty());
        let mut reader_windows = Vec::new();
        for bytes in header.values() {
            // the windows a shard holds are in its JSON header
            let h = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
            let json: serde_json::Value = serde_json::from_slice(&bytes[44..44 + h]).unwrap();
            reader_windows.extend(
                json["windows"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_u64().unwrap()),
            );
        }
        reader_windows.sort();
        reader_windows
    };
    let windows = held(&got_dir);
    assert!(
        windows.windows(2).all(|w| w[0] < w[1]),
        "no window is stored twice"
    );
    assert_eq!(windows, held(&want_dir));
    let (a, b) = (want.students(), got.students());
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, (state, loss, _)) in &a {
        let (got_state, got_loss, _) = &b[name];
        assert_eq!(
            (state.as_str(), got_state.as_str()),
            ("done", "done"),
            "{name}"
        );
        let (x, y) = (loss.unwrap(), got_loss.unwrap());
        assert!((x - y).abs() < 1e-5, "{name}: {x} vs {y}");
    }
}

/// `[limits] disk` counts a shared store once, as the union of the windows its students read:
/// eight seeds of 64K tokens each read more windows than the corpus has, so a budget above the
/// union (and far under eight streams' worth) plans, and one byte under the union is refused.
#[test]
fn the_disk_limit_counts_a_shared_store_as_its_union() {
    let tmp = tempfile::tempdir().unwrap();
    if corpus(tmp.path()).is_none() {
        return;
    }
    let plan = |limit: Option<u64>| {
        let mut text = sweep("[1, 2, 3, 4, 5, 6, 7, 8]");
        if let Some(bytes) = limit {
            text += &format!("[limits]\ndisk = \"{bytes}\"\n");
        }
        std::fs::write(tmp.path().join("s.toml"), text).unwrap();
        pdsweep(tmp.path(), &["plan", "s.toml", "--format", "json"])
    };
    let out = plan(None);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let totals = &json["totals"];
    let store = totals["logit_store_bytes"].as_u64().unwrap();
    let needed = store + totals["checkpoint_bytes"].as_u64().unwrap();
    let train = json["corpus"]["train_tokens"].as_u64().unwrap();
    assert!(train < 8 * 64_000, "the seeds overlap: {train}");
    let streams = store / train * 8 * 64_000;
    assert!(needed + (1 << 20) < streams, "{needed} vs {streams}");

    let out = plan(Some(needed + (1 << 20)));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = plan(Some(needed - 1));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("key `limits.disk`") && err.contains("of logit stores"),
        "{err}"
    );
}
