//! `pdsweep slurm` against a real Slurm (the one-node cluster `.ci/slurm/start.sh` starts in
//! CI): a tiny sweep of every kind of run finishes with every run done exactly once and the
//! same losses as a local run; a teacher job `scancel`led mid-run is submitted again and resumes
//! from its checkpoint with no metric row lost; a job requeued at the time-limit warning (USR2)
//! resumes from its checkpoint within the same job; a second coordinator is refused, and after
//! Ctrl-C a new one re-attaches to the running jobs. Where Slurm is absent each test says so and
//! skips, unless `PDSWEEP_REQUIRE_SLURM=1` (set by `.ci/run`), which makes that a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::common::{pdsweep, stderr};

/// A teacher, its logit store, an offline and an online student, and a baseline; checkpoints
/// every 4 steps and a metric row every 2, so an interrupted run has rows on both sides of a
/// checkpoint.
const SWEEP: &str = r#"
name = "NAME"
[corpus]
val_tokens = "8K"
[model]
context = 64
[teachers]
sizes = ["20K"]
tokens = ["120K"]
[students]
sizes = ["10K"]
tokens = ["40K"]
[distill]
mode = ["offline", "online"]
[train]
batch_tokens = "2K"
evals = 3
checkpoint_every = 4
log_every = 2
"#;

/// A field (JSON path) of run `name`'s recorded `extra_json`, as text.
fn extra(sweep: &Sweep, name: &str, path: &str) -> Option<String> {
    sweep.one(&format!(
        "SELECT CAST(json_extract(s.extra_json, '{path}') AS TEXT) FROM results s JOIN runs r
         ON r.id = s.run_id WHERE r.name = '{name}'"
    ))
}

/// The Slurm tests share one small cluster: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The lock, if a Slurm cluster answers; otherwise says why and returns `None` (or fails when
/// `PDSWEEP_REQUIRE_SLURM=1`).
fn slurm_or_skip(test: &str) -> Option<MutexGuard<'static, ()>> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let why = match Command::new("sinfo").args(["-h", "-o", "%t"]).output() {
        Err(e) => Some(format!("`sinfo` cannot run ({e}): Slurm is not installed")),
        Ok(out) if !out.status.success() => Some(format!(
            "`sinfo` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(out) => {
            let states = String::from_utf8_lossy(&out.stdout).to_string();
            (!states.lines().any(|s| {
                ["idle", "mix", "alloc", "comp"].contains(&s.trim().trim_end_matches('*'))
            }))
            .then(|| format!("no Slurm node is up (sinfo: `{}`)", states.trim()))
        }
    };
    match why {
        None => Some(guard),
        Some(why) if std::env::var("PDSWEEP_REQUIRE_SLURM").as_deref() == Ok("1") => {
            panic!("{test}: PDSWEEP_REQUIRE_SLURM=1 but {why}")
        }
        Some(why) => {
            // Written to the real standard error: the test harness captures `eprintln!`.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "skipping {test}: {why}");
            None
        }
    }
}

/// A sweep folder; cancels the sweep's jobs when dropped (also when a test fails).
struct Sweep {
    dir: tempfile::TempDir,
    name: String,
}

impl Sweep {
    fn new(name: &str) -> Sweep {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.toml"), SWEEP.replace("NAME", name)).unwrap();
        Sweep {
            dir,
            name: name.into(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn db(&self) -> PathBuf {
        self.path()
            .join("results")
            .join(&self.name)
            .join("sweep.db")
    }

    fn coordinator_args(&self) -> Vec<&'static str> {
        vec!["slurm", "s.toml", "--poll", "0.3", "--settle", "1"]
    }

    fn spawn_coordinator(&self) -> Child {
        self.spawn_coordinator_with(&[])
    }

    fn spawn_coordinator_with(&self, env: &[(&str, &str)]) -> Child {
        Command::new(env!("CARGO_BIN_EXE_pdsweep"))
            .args(self.coordinator_args())
            .envs(env.iter().copied())
            .current_dir(self.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Rows of a query on the sweep database (opened read-only beside the coordinator).
    fn query<T: rusqlite::types::FromSql>(&self, sql: &str) -> Vec<Vec<T>> {
        let conn = rusqlite::Connection::open_with_flags(
            self.db(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// The first column of the first row, or `None` (also while the coordinator has not
    /// created the database or its tables yet).
    fn one(&self, sql: &str) -> Option<String> {
        let conn = rusqlite::Connection::open_with_flags(
            self.db(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        conn.busy_timeout(Duration::from_secs(10)).ok()?;
        conn.query_row(sql, [], |r| r.get::<_, Option<String>>(0))
            .ok()
            .flatten()
    }

    /// `JOBID_INDEX` of the teacher's latest attempt, once submitted.
    fn teacher_job(&self) -> Option<String> {
        self.one(
            "SELECT s.job_id || '_' || t.array_index FROM slurm_tasks t
             JOIN slurm_submissions s ON s.id = t.submission JOIN runs r ON r.id = t.run_id
             WHERE r.kind = 'teacher' AND s.job_id IS NOT NULL ORDER BY t.attempt DESC LIMIT 1",
        )
    }

    fn teacher_id(&self) -> Option<String> {
        self.one("SELECT id FROM runs WHERE kind = 'teacher'")
    }

    /// The step of the teacher's checkpoint once it has one past step 0.
    fn teacher_checkpointed(&self) -> bool {
        self.teacher_id().is_some_and(|id| {
            self.path()
                .join("results")
                .join(&self.name)
                .join("checkpoints")
                .join(format!("{id}.ckpt"))
                .exists()
        })
    }

    /// Starts a coordinator and waits until the teacher's job has written a checkpoint;
    /// returns the coordinator and the teacher's `JOBID_INDEX`.
    fn start_until_the_teacher_checkpoints(&self) -> (Child, String) {
        let child = self.spawn_coordinator();
        wait_for(
            "the teacher's first checkpoint",
            Duration::from_secs(120),
            || self.teacher_checkpointed(),
        );
        (child, self.teacher_job().unwrap())
    }

    /// Jobs of this sweep Slurm still lists as pending or running.
    fn live_jobs(&self) -> Vec<String> {
        let out = Command::new("squeue")
            .args(["-h", "-r", "-o", "%i %j %T"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains(&format!(" pds-{}-", self.name)))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    }
}

impl Drop for Sweep {
    fn drop(&mut self) {
        let jobs = self.live_jobs();
        if !jobs.is_empty() {
            let _ = Command::new("scancel").args(&jobs).status();
        }
    }
}

/// Waits until `ready` holds (polling), or panics after `limit` with `what`.
fn wait_for(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for `child` to exit within `limit` (killing it otherwise) and returns its output.
fn finish(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the coordinator did not finish in {limit:?}:\n{}",
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// Final held-out loss of every run by name, from a plain local `pdsweep run` of the same
/// sweep (computed once for all tests).
fn local_losses() -> &'static Vec<(String, f64)> {
    static LOSSES: OnceLock<Vec<(String, f64)>> = OnceLock::new();
    LOSSES.get_or_init(|| {
        let sweep = Sweep::new("slurm-local");
        let out = pdsweep(sweep.path(), &["run", "s.toml"]);
        assert!(out.status.success(), "{}", stderr(&out));
        final_losses(&sweep)
    })
}

fn final_losses(sweep: &Sweep) -> Vec<(String, f64)> {
    let rows: Vec<Vec<rusqlite::types::Value>> = sweep.query(
        "SELECT r.name, s.val_loss FROM runs r JOIN results s ON s.run_id = r.id ORDER BY r.name",
    );
    rows.into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (rusqlite::types::Value::Text(n), rusqlite::types::Value::Real(l)) => (n.clone(), *l),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Every run is done, with one result, and the same loss as when run locally (jobs use one
/// CPU thread, the local run two: floating-point sums may differ in the last digits).
fn assert_all_done_like_local(sweep: &Sweep) {
    let states: Vec<Vec<String>> = sweep.query("SELECT name, state FROM runs ORDER BY name");
    assert_eq!(states.len(), 5, "{states:?}");
    for row in &states {
        assert_eq!(row[1], "done", "{row:?}");
    }
    let got = final_losses(sweep);
    let want = local_losses();
    assert_eq!(got.len(), want.len());
    for ((name, a), (_, b)) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-3, "{name}: {a} on Slurm, {b} locally");
    }
}

/// The teacher's metric rows: every logged training step and every evaluation exactly once.
fn assert_teacher_rows_complete(sweep: &Sweep) {
    let id = sweep.teacher_id().unwrap();
    let config: serde_json::Value = serde_json::from_str(
        &sweep
            .one(&format!("SELECT config_json FROM runs WHERE id = '{id}'"))
            .unwrap(),
    )
    .unwrap();
    let train = &config["train"];
    let (steps, evals, log_every) = (
        train["steps"].as_i64().unwrap(),
        train["evals"].as_i64().unwrap(),
        train["log_every"].as_i64().unwrap(),
    );
    let every =
        |n: i64| -> BTreeSet<i64> { (1..=steps).filter(|d| d % n == 0 || *d == steps).collect() };
    let rows: Vec<Vec<rusqlite::types::Value>> = sweep.query(&format!(
        "SELECT kind, step FROM metrics WHERE run_id = '{id}' ORDER BY kind, step"
    ));
    let logged = |kind: &str| -> BTreeSet<i64> {
        rows.iter()
            .filter(|r| r[0] == rusqlite::types::Value::Text(kind.into()))
            .map(|r| match r[1] {
                rusqlite::types::Value::Integer(s) => s,
                _ => panic!("{r:?}"),
            })
            .collect()
    };
    assert_eq!(
        logged("train"),
        every(log_every),
        "training rows of the teacher"
    );
    assert_eq!(
        logged("val"),
        every((steps + evals - 1) / evals),
        "held-out rows of the teacher"
    );
    assert_eq!(
        rows.len(),
        every(log_every).len() + every((steps + evals - 1) / evals).len()
    );
}

/// (attempt, final state, started) of every attempt of the run of `kind`.
fn attempts_of(sweep: &Sweep, kind: &str) -> Vec<(i64, String, i64)> {
    let rows: Vec<Vec<rusqlite::types::Value>> = sweep.query(&format!(
        "SELECT t.attempt, t.state, t.started FROM slurm_tasks t JOIN runs r ON r.id = t.run_id
         WHERE r.kind = '{kind}' ORDER BY t.attempt"
    ));
    rows.into_iter()
        .map(|r| match (&r[0], &r[1], &r[2]) {
            (
                rusqlite::types::Value::Integer(a),
                rusqlite::types::Value::Text(s),
                rusqlite::types::Value::Integer(st),
            ) => (*a, s.clone(), *st),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// The teacher's sessions: (session, start step).
fn teacher_sessions(sweep: &Sweep) -> Vec<(String, i64)> {
    let id = sweep.teacher_id().unwrap();
    let rows: Vec<Vec<rusqlite::types::Value>> = sweep.query(&format!(
        "SELECT session, start_step FROM run_sessions WHERE run_id = '{id}' ORDER BY started_at, session"
    ));
    rows.into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (rusqlite::types::Value::Text(s), rusqlite::types::Value::Integer(st)) => {
                (s.clone(), *st)
            }
            other => panic!("teacher session without a start step: {other:?}"),
        })
        .collect()
}

#[test]
fn a_tiny_sweep_on_slurm_finishes_with_every_run_done_exactly_once() {
    let Some(_slurm) =
        slurm_or_skip("a_tiny_sweep_on_slurm_finishes_with_every_run_done_exactly_once")
    else {
        return;
    };
    let sweep = Sweep::new("slurm-tiny");
    let out = finish(sweep.spawn_coordinator(), Duration::from_secs(180));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_all_done_like_local(&sweep);
    // one submission and one session per run; each run started once
    let per_run: Vec<Vec<i64>> = sweep.query(
        "SELECT (SELECT count(*) FROM slurm_tasks t WHERE t.run_id = r.id),
                (SELECT count(*) FROM run_sessions s WHERE s.run_id = r.id), r.attempts FROM runs r",
    );
    for row in per_run {
        assert_eq!(row, [1, 1, 1], "tasks, sessions, attempts");
    }
    // the graph became arrays with dependencies: logit pass and students wait for jobs
    let deps: Vec<Vec<Option<String>>> =
        sweep.query("SELECT kind, dependency FROM slurm_submissions ORDER BY id");
    for row in &deps {
        let (kind, dep) = (row[0].clone().unwrap(), row[1].clone());
        match kind.as_str() {
            "teacher" | "baseline" => assert_eq!(dep, None, "{row:?}"),
            _ => assert!(
                dep.as_deref().is_some_and(|d| d.starts_with("after")),
                "{row:?}"
            ),
        }
    }
    let script = sweep
        .one("SELECT script FROM slurm_submissions LIMIT 1")
        .unwrap();
    let script = std::fs::read_to_string(script).unwrap();
    assert!(script.contains("--kill-on-invalid-dep=yes") && script.contains("--signal=B:USR2@"));
    assert_teacher_rows_complete(&sweep);
    // A job whose result is recorded may still be leaving the queue (COMPLETING) on a loaded
    // machine: it must leave, not stay.
    wait_for(
        "the finished jobs to leave the queue",
        Duration::from_secs(60),
        || sweep.live_jobs().is_empty(),
    );
    // status shows the jobs; running again submits nothing
    let status = pdsweep(sweep.path(), &["status", "s.toml", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&crate::common::stdout(&status)).unwrap();
    for run in v["runs"].as_array().unwrap() {
        assert_eq!(run["slurm"]["state"], "COMPLETED", "{run}");
        assert!(run["slurm"]["job"].as_str().unwrap().contains('_'), "{run}");
    }
    let again = pdsweep(sweep.path(), &sweep.coordinator_args());
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(!stderr(&again).contains("submit "), "{}", stderr(&again));
}

#[test]
fn a_cancelled_teacher_job_is_submitted_again_and_loses_nothing() {
    let Some(_slurm) =
        slurm_or_skip("a_cancelled_teacher_job_is_submitted_again_and_loses_nothing")
    else {
        return;
    };
    let sweep = Sweep::new("slurm-cancel");
    let (child, job) = sweep.start_until_the_teacher_checkpoints();
    let cancelled = Command::new("scancel").arg(&job).status().unwrap();
    assert!(cancelled.success());
    let out = finish(child, Duration::from_secs(180));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(text.contains("retry   teacher-20K"), "{text}");
    let teacher = attempts_of(&sweep, "teacher");
    assert_eq!(teacher.len(), 2, "{teacher:?}");
    assert_eq!(
        (teacher[0].1.as_str(), teacher[0].2),
        ("CANCELLED", 1),
        "{teacher:?}"
    );
    assert_eq!(
        (teacher[1].1.as_str(), teacher[1].2),
        ("COMPLETED", 1),
        "{teacher:?}"
    );
    let sessions = teacher_sessions(&sweep);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0].1, 0);
    assert!(
        sessions[1].1 > 0,
        "the second attempt resumed from a checkpoint: {sessions:?}"
    );
    // the logit pass and students that waited for the cancelled job never started it: each
    // ran once
    for kind in ["logits", "student"] {
        let started: i64 = attempts_of(&sweep, kind).iter().map(|a| a.2).sum();
        assert!(started >= 1, "{kind}");
    }
    let attempts: Vec<Vec<i64>> = sweep.query("SELECT attempts FROM runs WHERE kind != 'teacher'");
    assert_eq!(attempts, vec![vec![1]; 4], "every other run ran once");
    assert_teacher_rows_complete(&sweep);
    assert_all_done_like_local(&sweep);
}

#[test]
fn a_job_requeued_at_the_time_limit_warning_resumes_from_its_checkpoint() {
    let Some(_slurm) =
        slurm_or_skip("a_job_requeued_at_the_time_limit_warning_resumes_from_its_checkpoint")
    else {
        return;
    };
    let sweep = Sweep::new("slurm-requeue");
    let (child, job) = sweep.start_until_the_teacher_checkpoints();
    // What Slurm sends `--signal=B:USR2@S` seconds before the time limit.
    let signalled = Command::new("scancel")
        .args(["--signal=USR2", "--batch", &job])
        .status()
        .unwrap();
    assert!(signalled.success());
    // Slurm holds a requeued job for about two minutes (BeginTime); once it is back in the
    // queue, and the node has had a moment to clean up after it (a job started again at once
    // fails with "job credential revoked"), release it as an admin would.
    wait_for(
        "the teacher to be requeued",
        Duration::from_secs(60),
        || {
            job_state(&job)
                .is_some_and(|(state, reason)| state == "PENDING" && reason == "BeginTime")
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    let released = Command::new("scontrol")
        .args(["update", &format!("JobId={job}"), "StartTime=now"])
        .status()
        .unwrap();
    assert!(released.success());
    let out = finish(child, Duration::from_secs(180));
    assert!(out.status.success(), "{}", stderr(&out));
    let log_path = sweep
        .path()
        .join("results/slurm-requeue/slurm/logs")
        .join(format!("{job}.log"));
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let teacher = attempts_of(&sweep, "teacher");
    assert_eq!(
        teacher.len(),
        1,
        "requeued within its job, not submitted again: {teacher:?}\ncoordinator:\n{}\njob log:\n{log}",
        stderr(&out)
    );
    let sessions = teacher_sessions(&sweep);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0].0, format!("{job}.0"));
    assert_eq!(sessions[1].0, format!("{job}.1"));
    assert!(
        sessions[1].1 > 0,
        "the restart resumed from its checkpoint: {sessions:?}"
    );
    assert!(log.contains("requeueing"), "{log}");
    assert_teacher_rows_complete(&sweep);
    assert_all_done_like_local(&sweep);
}

/// (state, reason) of array task `job` as squeue shows it.
fn job_state(job: &str) -> Option<(String, String)> {
    let out = Command::new("squeue")
        .args(["-h", "-r", "--states=all", "-j", job, "-o", "%T %r"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    Some((
        words.next()?.to_string(),
        words.next().unwrap_or("").to_string(),
    ))
}

#[test]
fn a_second_coordinator_is_refused_and_a_restarted_one_reattaches() {
    let Some(_slurm) =
        slurm_or_skip("a_second_coordinator_is_refused_and_a_restarted_one_reattaches")
    else {
        return;
    };
    let sweep = Sweep::new("slurm-two");
    // The journal a database on a network filesystem gets (this test's folder is local).
    let delete = [("PDSWEEP_SQLITE_JOURNAL", "delete")];
    let first = sweep.spawn_coordinator_with(&delete);
    wait_for("the first submission", Duration::from_secs(60), || {
        sweep.teacher_job().is_some()
    });
    let second = pdsweep(sweep.path(), &sweep.coordinator_args());
    assert_eq!(second.status.code(), Some(4), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("already has a coordinator"),
        "{}",
        stderr(&second)
    );
    // a local `run` is refused as well while the coordinator holds the sweep
    let local = pdsweep(sweep.path(), &["run", "s.toml"]);
    assert_eq!(local.status.code(), Some(4), "{}", stderr(&local));
    // Ctrl-C on the first: it stops following, the jobs keep running
    // SAFETY: sending SIGINT to a child process this test started.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGINT) };
    let out = finish(first, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("keep running"), "{}", stderr(&out));
    assert!(!sweep.live_jobs().is_empty(), "the jobs were left running");
    let third = finish(
        sweep.spawn_coordinator_with(&delete),
        Duration::from_secs(180),
    );
    assert!(third.status.success(), "{}", stderr(&third));
    assert!(
        stderr(&third).contains("attach  following"),
        "{}",
        stderr(&third)
    );
    // nothing was submitted twice
    let per_run: Vec<Vec<i64>> = sweep.query(
        "SELECT (SELECT count(*) FROM slurm_tasks t WHERE t.run_id = r.id), r.attempts FROM runs r",
    );
    for row in per_run {
        assert_eq!(row, [1, 1], "tasks, attempts");
    }
    let mode: Vec<Vec<String>> = sweep.query("PRAGMA journal_mode");
    assert_eq!(mode, [["delete"]]);
    assert_all_done_like_local(&sweep);
}

/// `[train] tune_lr` on Slurm: a student is submitted only once every learning-rate candidate
/// ended (its unit carries the chosen rate), and a candidate that diverged does not hold it.
#[test]
fn a_tuned_sweep_on_slurm_chooses_the_rate_after_every_candidate_and_survives_a_diverged_one() {
    let Some(_slurm) = slurm_or_skip(
        "a_tuned_sweep_on_slurm_chooses_the_rate_after_every_candidate_and_survives_a_diverged_one",
    ) else {
        return;
    };
    let sweep = Sweep::new("slurm-tuned");
    let file = SWEEP
        .replace("NAME", "slurm-tuned")
        .replace(r#"mode = ["offline", "online"]"#, r#"mode = "offline""#)
        .replace("log_every = 2", "log_every = 2\ntune_lr = [3e-3, 1e30]")
        .replace(
            "tokens = [\"120K\"]",
            "tokens = [\"120K\"]\ntune_lr = [3e-3, 1e30]",
        );
    std::fs::write(sweep.path().join("s.toml"), file).unwrap();
    let out = finish(sweep.spawn_coordinator(), Duration::from_secs(180));
    let err = stderr(&out);
    // one baseline and one teacher candidate diverge
    assert!(err.contains("2 run(s) failed"), "{err}");
    let states: Vec<Vec<String>> = sweep.query("SELECT name, state FROM runs ORDER BY name");
    let state = |name: &str| {
        states
            .iter()
            .find(|r| r[0] == name)
            .map(|r| r[1].clone())
            .unwrap_or_else(|| panic!("{name} in {states:?}"))
    };
    assert_eq!(state("baseline-10K-lr1e30"), "failed");
    assert_eq!(state("baseline-10K-lr3e-3"), "done");
    assert_eq!(state("teacher-20K-lr1e30"), "failed");
    assert_eq!(state("teacher-20K-lr3e-3"), "done");
    assert_eq!(state("teacher-20K"), "done");
    assert_eq!(state("student-10K-from-20K"), "done");
    let peak = |name: &str| {
        extra(&sweep, name, "$.lr.peak")
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    // the tuned teacher was submitted after both candidates ended, and takes the rate of the
    // one that did not diverge
    assert_eq!(peak("teacher-20K"), 3e-3);
    // it adopted that candidate's checkpoint (a Slurm task reads it from the shared folder)
    let adopted = extra(&sweep, "teacher-20K", "$.adopted_from");
    let candidate = sweep.one("SELECT id FROM runs WHERE name = 'teacher-20K-lr3e-3'");
    assert_eq!(adopted, candidate);
    assert_eq!(peak("student-10K-from-20K"), 3e-3);
    wait_for(
        "the finished jobs to leave the queue",
        Duration::from_secs(60),
        || sweep.live_jobs().is_empty(),
    );
}
