//! Crash safety of `pdsweep run`, through the real binary: a sweep killed with SIGKILL at
//! random moments and restarted each time ends with the same database as an uninterrupted run
//! (no metric row lost or duplicated, equal final losses, an intact file); in-process parallel
//! runs (`--jobs`) give the same numbers as one at a time; stacks (`--stack 4`) killed
//! mid-step resume, stacked or alone, to the numbers of runs never stacked nor interrupted;
//! and a run forced to diverge fails with its reason while the rest of the sweep finishes.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{pdsweep, stderr};

/// Teacher → logit store → offline student, plus an online student and baselines: every kind
/// of run, with checkpoints every 4 steps so killed runs keep most of their work.
const SWEEP: &str = r#"
name = "crash"
[corpus]
val_tokens = "8K"
[model]
context = 64
[teachers]
sizes = ["20K"]
tokens = ["200K"]
[students]
sizes = ["10K"]
tokens = ["80K"]
[distill]
mode = ["offline", "online"]
[train]
batch_tokens = "2K"
evals = 3
checkpoint_every = 4
"#;

type Metrics = BTreeMap<(String, String, i64), f64>;

/// Every metric row's loss by (run name, kind, step).
fn metrics(db: &Path) -> Metrics {
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

/// Each run's (state, final held-out loss, attempts) by name.
fn outcomes(db: &Path) -> BTreeMap<String, (String, Option<f64>, i64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare(
        "SELECT r.name, r.state, s.val_loss, r.attempts FROM runs r
         LEFT JOIN results s ON s.run_id = r.id",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?))))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn integrity(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// A small deterministic generator for the kill delays (SplitMix64).
struct Delays(u64);

impl Delays {
    fn next_ms(&mut self, low: u64, high: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        low + (z ^ (z >> 31)) % (high - low)
    }
}

#[test]
fn a_sweep_killed_twenty_times_ends_as_if_never_interrupted() {
    let reference = tempfile::tempdir().unwrap();
    std::fs::write(reference.path().join("crash.toml"), SWEEP).unwrap();
    let started = Instant::now();
    let out = pdsweep(reference.path(), &["run", "crash.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let uninterrupted = started.elapsed();

    let killed = tempfile::tempdir().unwrap();
    std::fs::write(killed.path().join("crash.toml"), SWEEP).unwrap();
    let db = killed.path().join("results/crash/sweep.db");
    let mut delays = Delays(7);
    let mut kills = 0;
    // Twenty kills whose delays add up to about half an uninterrupted sweep: the work kept
    // between kills moves the sweep through every kind of run (and its checkpoint and
    // logit-store writes) without finishing it. Restarts alternate one and two jobs, so the
    // comparison also checks that parallel runs compute the same numbers.
    let span_ms = (uninterrupted.as_millis() as u64 / 20).clamp(300, 3000);
    while kills < 20 {
        let jobs = if kills % 2 == 0 { "1" } else { "2" };
        let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
            .args(["run", "crash.toml", "--jobs", jobs])
            .current_dir(killed.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delays.next_ms(100, span_ms)));
        if child.try_wait().unwrap().is_some() {
            break; // finished before the kill
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    let out = pdsweep(killed.path(), &["run", "crash.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(kills >= 20, "only {kills} kills before the sweep finished");

    let resumed = assert_same_sweep(&reference.path().join("results/crash/sweep.db"), &db);
    assert!(resumed >= 2, "the kills interrupted only {resumed} runs");
}

/// Asserts that the sweep in `got` ended as the one in `want`: the same runs all done with
/// final losses within 1e-5, the same metric rows with losses within 1e-4; returns how many
/// runs took more than one attempt.
fn assert_same_sweep(want: &Path, got: &Path) -> usize {
    assert_eq!(integrity(got), "ok");
    let (want_runs, got_runs) = (outcomes(want), outcomes(got));
    assert_eq!(
        want_runs.keys().collect::<Vec<_>>(),
        got_runs.keys().collect::<Vec<_>>()
    );
    let mut resumed = 0;
    for (name, (state, loss, _)) in &want_runs {
        let (got_state, got_loss, attempts) = &got_runs[name];
        assert_eq!(
            (state.as_str(), got_state.as_str()),
            ("done", "done"),
            "{name}"
        );
        let (a, b) = (loss.unwrap(), got_loss.unwrap());
        assert!(
            (a - b).abs() < 1e-5,
            "{name}: {a} uninterrupted, {b} killed"
        );
        resumed += usize::from(*attempts > 1);
    }
    let (want, got) = (metrics(want), metrics(got));
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(missing.is_empty(), "metric rows lost: {missing:?}");
    assert!(extra.is_empty(), "metric rows added: {extra:?}");
    for (key, a) in &want {
        let b = got[key];
        assert!(
            (a - b).abs() < 1e-4 || (a.is_nan() && b.is_nan()),
            "{key:?}: {a} vs {b}"
        );
    }
    resumed
}

/// Starts `pdsweep run crash.toml` with `args` in `dir`; returns the child once its progress
/// says a stack started training (`None`: it finished or stopped without one).
fn run_until_stacked(dir: &Path, args: &[&str]) -> Option<std::process::Child> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
        .args(["run", "crash.toml"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // read the progress on a thread that drains it to the end (a closed pipe would make the
    // child's next progress line fail)
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (seen, stacked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines() {
            let Ok(line) = line else { break };
            if line.contains("train as one model") {
                let _ = seen.send(());
            }
        }
    });
    match stacked.recv() {
        Ok(()) => Some(child),
        Err(_) => {
            child.wait().unwrap();
            None
        }
    }
}

#[test]
fn stacks_killed_mid_step_resume_to_the_numbers_of_runs_never_stacked() {
    // one size of student in four settings and its baseline: stacks of up to four
    let sweep = SWEEP.replace(
        "mode = [\"offline\", \"online\"]",
        "mode = [\"offline\", \"online\"]\nalpha = [0.5, 0.9]",
    );
    let reference = tempfile::tempdir().unwrap();
    std::fs::write(reference.path().join("crash.toml"), &sweep).unwrap();
    let started = Instant::now();
    let out = pdsweep(reference.path(), &["run", "crash.toml", "--stack", "off"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let span_ms = (started.elapsed().as_millis() as u64 / 10).clamp(200, 2000);

    let killed = tempfile::tempdir().unwrap();
    std::fs::write(killed.path().join("crash.toml"), &sweep).unwrap();
    let mut delays = Delays(11);
    let mut stack_kills = 0;
    // Each restart trains stacks of up to four (one or two jobs) and is killed a random moment
    // after its first stack started, so kills land inside stacked steps, checkpoints and
    // result writes; every third restart runs alone (`--stack off`) and is killed at random,
    // so stacked members also resume alone.
    for restart in 0..12 {
        if restart % 3 == 2 {
            let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
                .args(["run", "crash.toml", "--stack", "off"])
                .current_dir(killed.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(delays.next_ms(100, span_ms)));
            child.kill().unwrap();
            child.wait().unwrap();
            continue;
        }
        let jobs = if restart % 2 == 0 { "1" } else { "2" };
        let Some(mut child) = run_until_stacked(killed.path(), &["--stack", "4", "--jobs", jobs])
        else {
            break; // no stack left to train
        };
        std::thread::sleep(Duration::from_millis(delays.next_ms(20, span_ms)));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            stack_kills += 1;
        }
        child.wait().unwrap();
    }
    assert!(stack_kills >= 3, "only {stack_kills} kills inside a stack");
    let out = pdsweep(killed.path(), &["run", "crash.toml", "--stack", "4"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let resumed = assert_same_sweep(
        &reference.path().join("results/crash/sweep.db"),
        &killed.path().join("results/crash/sweep.db"),
    );
    assert!(resumed >= 3, "the kills interrupted only {resumed} runs");
}

#[test]
fn a_diverging_run_fails_with_its_reason_and_the_rest_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = SWEEP.replace(
        "[students]",
        "[[teachers.models]]\nname = \"hot\"\nsize = \"20K\"\nlr = 1e30\n\n[students]",
    );
    std::fs::write(tmp.path().join("crash.toml"), sweep).unwrap();
    let out = pdsweep(tmp.path(), &["run", "crash.toml", "--jobs", "2"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("FAILED  teacher-hot"), "{text}");
    let got = outcomes(&tmp.path().join("results/crash/sweep.db"));
    let conn = rusqlite::Connection::open(tmp.path().join("results/crash/sweep.db")).unwrap();
    let error: String = conn
        .query_row(
            "SELECT error FROM runs WHERE name = 'teacher-hot'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(error.contains("step"), "{error}");
    assert!(
        error.to_lowercase().contains("nan") || error.contains("finite"),
        "{error}"
    );
    for (name, (state, _, _)) in &got {
        let expected = if name == "teacher-hot" {
            "failed"
        } else if name.contains("-from-hot") || name.contains("-hot-") {
            "planned" // waits for a teacher that never finished
        } else {
            "done"
        };
        assert_eq!(state, expected, "{name}");
    }
    // Regression: `--retry-failed` tried the failed run again and again without end; it tries
    // it once per invocation.
    let again = pdsweep(tmp.path(), &["run", "crash.toml", "--retry-failed"]);
    assert_eq!(again.status.code(), Some(3), "{}", stderr(&again));
    let attempts: i64 = conn
        .query_row(
            "SELECT attempts FROM runs WHERE name = 'teacher-hot'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(attempts, 2);
}

/// A JSON-lines corpus in `dir/corpus/`: two shards (one zstd-compressed) of 6,000 generated
/// documents, about 6 MB of text, enough that preparing it takes a while.
fn write_prepare_corpus(dir: &Path) {
    let words = [
        "teacher", "student", "logit", "the", "of", "capacity", "gap", "distils", "a", "token",
        "window", "scale", "law", "fits", "bytes", "and", "grows", "smaller", "than", "loss",
    ];
    let mut seed = Delays(11);
    std::fs::create_dir_all(dir.join("corpus")).unwrap();
    for shard in 0..2 {
        let mut lines = String::new();
        for doc in 0..3_000 {
            let n = seed.next_ms(100, 250) as usize;
            let text: Vec<&str> = (0..n)
                .map(|_| words[seed.next_ms(0, words.len() as u64) as usize])
                .collect();
            let text = format!("document {shard}-{doc}: {}", text.join(" "));
            lines.push_str(&serde_json::json!({ "id": doc, "text": text }).to_string());
            lines.push('\n');
        }
        let path = dir.join(format!("corpus/shard-{shard}.jsonl"));
        if shard == 0 {
            std::fs::write(path, lines).unwrap();
        } else {
            let packed = zstd::encode_all(lines.as_bytes(), 3).unwrap();
            std::fs::write(path.with_extension("jsonl.zst"), packed).unwrap();
        }
    }
    std::fs::write(
        dir.join("prep.toml"),
        "name = \"prep\"\n[corpus]\nkind = \"jsonl\"\npath = \"corpus\"\ntokenizer = \"bpe\"\n\
         vocab_size = 512\nval_tokens = \"20K\"\n[model]\ncontext = 64\n[teachers]\n\
         sizes = [\"20K\"]\ntokens = [\"200K\"]\n[students]\nsizes = [\"10K\"]\ntokens = [\"80K\"]\n",
    )
    .unwrap();
}

/// The files of the prepared cache of the sweep in `dir` (tokens, facts, split, tokenizer), by
/// kind, and whatever else is in the cache folder.
fn cache_files(dir: &Path) -> (BTreeMap<String, Vec<u8>>, Vec<String>) {
    let cache = dir.join("results/prep/cache");
    let (mut kept, mut other) = (BTreeMap::new(), Vec::new());
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let kind = name.split('-').next().unwrap_or_default().to_string();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        match (kind.as_str(), ext) {
            ("tokens", "bin") | ("corpus" | "split" | "tokenizer", "json") => {
                kept.insert(format!("{kind}.{ext}"), std::fs::read(&path).unwrap());
            }
            ("tokens", "lock" | "verified") | ("alias", _) => {}
            _ => other.push(name),
        }
    }
    (kept, other)
}

/// Preparation killed with SIGKILL at random moments and restarted each time ends with a token
/// cache, facts, split and tokenizer byte-identical to an uninterrupted preparation's, and
/// leaves no scratch or temporary file behind.
#[test]
fn a_preparation_killed_at_random_moments_ends_byte_identical() {
    let reference = tempfile::tempdir().unwrap();
    write_prepare_corpus(reference.path());
    let started = Instant::now();
    let out = pdsweep(reference.path(), &["plan", "prep.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let uninterrupted = started.elapsed().as_millis() as u64;
    let (want, other) = cache_files(reference.path());
    assert_eq!(want.len(), 4, "{:?}", want.keys().collect::<Vec<_>>());
    assert!(other.is_empty(), "left behind: {other:?}");

    let killed = tempfile::tempdir().unwrap();
    write_prepare_corpus(killed.path());
    let mut delays = Delays(23);
    let mut interrupted = 0;
    // Up to 24 starts: a start that finishes, or a kill that lands after the cache is complete,
    // counts for nothing, and until two kills have landed mid-build a complete cache is removed
    // and built again (machines under load make the timing of a kill a draw).
    for _ in 0..24 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
            .args(["plan", "prep.toml"])
            .current_dir(killed.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = delays.next_ms(uninterrupted / 20 + 1, uninterrupted.max(40) * 9 / 10);
        std::thread::sleep(Duration::from_millis(at));
        let finished = child.try_wait().unwrap().is_some();
        if !finished {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
        let cache = killed.path().join("results/prep/cache");
        let building = !finished
            && std::fs::read_dir(&cache).is_ok_and(|entries| {
                entries.flatten().any(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.ends_with(".scratch") || name.contains(".tmp")
                })
            });
        interrupted += usize::from(building);
        let complete = std::fs::read_dir(&cache).is_ok_and(|e| {
            e.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".bin"))
        });
        match (complete, interrupted >= 2) {
            (true, true) => break,
            (true, false) => std::fs::remove_dir_all(&cache).unwrap(),
            (false, _) => {}
        }
    }
    let out = pdsweep(killed.path(), &["plan", "prep.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (got, other) = cache_files(killed.path());
    assert!(other.is_empty(), "left behind after the kills: {other:?}");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (kind, bytes) in &want {
        assert!(
            got[kind] == *bytes,
            "{kind} differs from the uninterrupted preparation's"
        );
    }
    assert!(
        interrupted >= 2,
        "only {interrupted} kills landed while the cache was being built ({uninterrupted} ms uninterrupted)"
    );
}
