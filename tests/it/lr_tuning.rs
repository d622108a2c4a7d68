//! Learning rate per size (`[train] tune_lr`): baselines are trained at every candidate peak,
//! the peak with the lowest mean held-out loss over the seeds wins, students train at it and
//! their gains are measured against their seed's baseline at that peak. A rate that diverges
//! fails its baselines without blocking the students. Teachers (`[teachers] tune_lr`) train one
//! candidate run per peak and adopt the best.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{pdsweep, stderr, stdout};

/// One teacher, a 10K student with two seeds; three candidate peaks: far too low (the runs
/// barely move in 25 steps), a good one, and one so high that the weights overflow.
const SWEEP: &str = r#"
name = "tuned"
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
seed = [1, 2]
baseline = true
[distill]
mode = "offline"
[train]
batch_tokens = "2K"
evals = 3
tune_lr = [1e-4, 3e-3, 1e30]
"#;

/// (name, state, planned peak, held-out loss, result's extra JSON) of every run, by id.
type Row = (String, String, Option<f64>, Option<f64>, Option<String>);

fn runs(db: &Path) -> BTreeMap<String, Row> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.prepare(
        "SELECT r.id, r.name, r.state, json_extract(r.config_json, '$.train.lr.peak'),
                s.val_loss, s.extra_json
         FROM runs r LEFT JOIN results s ON s.run_id = r.id",
    )
    .unwrap()
    .query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
        ))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn the_learning_rate_selection_picks_the_known_best_on_a_tiny_sweep() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), SWEEP).unwrap();
    let plan = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let text = stdout(&plan);
    assert!(text.contains("baseline-10K-s1-lr3e-3"), "{text}");
    assert!(text.contains("lr tuned on 6 baselines"), "{text}");
    // the teacher is not tuned beside tuned baselines: a design warning with the fix
    assert!(
        text.contains("the baselines' learning rate is tuned but the teachers' is not")
            && text.contains("`[teachers] tune_lr = [1e-4, 3e-3, 1e30]`"),
        "{text}"
    );

    // the overflowing rate fails its two baselines; the students go on, and since nothing
    // else failed, `run` says so and succeeds
    let out = pdsweep(dir.path(), &["run", "s.toml"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("every failed run is a learning-rate candidate")
            && err.contains("`baseline-10K-s1-lr1e30`"),
        "{err}"
    );
    let db = dir.path().join("results/tuned/sweep.db");
    let rows = runs(&db);
    let state = |name: &str| {
        rows.values()
            .find(|r| r.0 == name)
            .map(|r| r.1.clone())
            .unwrap()
    };
    assert_eq!(state("baseline-10K-s1-lr1e30"), "failed");
    assert_eq!(state("baseline-10K-s2-lr1e30"), "failed");

    // the known best, computed here from the baselines' own results: the lowest mean over seeds
    let mut by_peak: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (_, (name, _, peak, loss, _)) in rows.iter().filter(|(_, r)| r.0.starts_with("baseline")) {
        if let (Some(peak), Some(loss)) = (peak, loss) {
            by_peak.entry(peak.to_bits()).or_default().push(*loss);
            assert!(loss.is_finite(), "{name}");
        }
    }
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    let (best_bits, best_losses) = by_peak
        .iter()
        .min_by(|a, b| mean(a.1).total_cmp(&mean(b.1)))
        .unwrap();
    let best = f64::from_bits(*best_bits);
    assert_eq!(best, 3e-3, "{by_peak:?}");
    assert_eq!(best_losses.len(), 2);
    assert!(mean(&by_peak[&1e-4f64.to_bits()]) > mean(best_losses) + 0.05);

    let conn = rusqlite::Connection::open(&db).unwrap();
    for seed in [1, 2] {
        let student = format!("student-10K-from-20K-s{seed}");
        let (id, (_, st, _, loss, extra)) = rows.iter().find(|(_, r)| r.0 == student).unwrap();
        assert_eq!(st, "done");
        let extra: serde_json::Value = serde_json::from_str(extra.as_ref().unwrap()).unwrap();
        assert_eq!(extra["lr"]["peak"], best, "{extra}");
        let baseline_name = format!("baseline-10K-s{seed}-lr3e-3");
        let (baseline_id, baseline) = rows.iter().find(|(_, r)| r.0 == baseline_name).unwrap();
        assert_eq!(extra["lr"]["baseline"], baseline_id.as_str(), "{extra}");
        // it trained at that rate: the schedule's highest logged rate is the tuned peak
        let top: f64 = conn
            .query_row(
                "SELECT max(lr) FROM metrics WHERE run_id = ?1 AND kind = 'train'",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert!(top <= best * (1.0 + 1e-6) && top > best * 0.5, "{top}");
        // and its gain is measured against its seed's tuned baseline
        let (gain_vs, gain): (String, f64) = conn
            .query_row(
                "SELECT baseline_id, gain FROM student_gain WHERE run_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(&gain_vs, baseline_id);
        assert!((gain - (baseline.3.unwrap() - loss.unwrap())).abs() < 1e-9);
    }

    // `fit` reports the tuned rate with every candidate's score, and no edge warning (the
    // winner is inside the candidates)
    let out = pdsweep(dir.path(), &["fit", "s.toml"]);
    let text = stdout(&out);
    assert!(
        text.contains("learning rate of 9.81K on 49.6K tokens: 3e-3"),
        "{text}"
    );
    assert!(!text.contains("the tuned rate is the"), "{text}");
    assert!(text.contains("1e30: failed (diverged)"), "{text}");

    // the report shows the same table, the chosen rate in bold
    let out = pdsweep(dir.path(), &["report", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(dir.path().join("reports/tuned/index.html")).unwrap();
    assert!(page.contains("Learning rate per size"));
    assert!(page.contains("<strong>3e-3: "), "the chosen rate in bold");
    assert!(page.contains("1e30: diverged"));

    // a third seed adds its own runs only: the students of seeds 1 and 2 keep their ids and
    // results (a student's id leaves out the candidates, which list every seed's baselines)
    std::fs::write(
        dir.path().join("s.toml"),
        SWEEP.replace("seed = [1, 2]", "seed = [1, 2, 3]"),
    )
    .unwrap();
    let plan = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    // the seed's three baseline candidates, its logit pass and its student
    assert!(stdout(&plan).contains(": 5 new runs,"), "{}", stdout(&plan));
    let out = pdsweep(dir.path(), &["run", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let after = runs(&db);
    for seed in [1, 2] {
        let student = format!("student-10K-from-20K-s{seed}");
        let before: Vec<_> = rows.iter().filter(|(_, r)| r.0 == student).collect();
        let now: Vec<_> = after.iter().filter(|(_, r)| r.0 == student).collect();
        assert_eq!(before, now, "{student} was trained again");
    }
    let (_, third) = after
        .iter()
        .find(|(_, r)| r.0 == "student-10K-from-20K-s3")
        .unwrap();
    assert_eq!(third.1, "done");
    let extra: serde_json::Value = serde_json::from_str(third.4.as_ref().unwrap()).unwrap();
    assert_eq!(extra["lr"]["peak"], best, "{extra}");
    // chosen over all three seeds' baselines
    let finished = extra["lr"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["finished"].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(finished, 6, "{extra}");
}

#[test]
fn tune_lr_needs_two_distinct_rates_and_baselines() {
    let dir = tempfile::tempdir().unwrap();
    for (edit, needle) in [
        ("tune_lr = [3e-3]", "at least two distinct learning rates"),
        (
            "tune_lr = [3e-3, 3e-3]",
            "at least two distinct learning rates",
        ),
        ("tune_lr = [3e-3, -1.0]", "must be a finite number > 0"),
    ] {
        let sweep = SWEEP.replace("tune_lr = [1e-4, 3e-3, 1e30]", edit);
        std::fs::write(dir.path().join("s.toml"), sweep).unwrap();
        let out = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
        assert_eq!(out.status.code(), Some(2), "{edit}");
        let err = stderr(&out);
        assert!(
            err.contains("tune_lr") && err.contains(needle),
            "{edit}: {err}"
        );
    }
    let sweep = SWEEP.replace("baseline = true", "baseline = false");
    std::fs::write(dir.path().join("s.toml"), sweep).unwrap();
    let out = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("baseline = false"),
        "{}",
        stderr(&out)
    );
}

/// The sweep above with its teacher tuned instead of its students.
fn teacher_tuned_sweep() -> String {
    SWEEP
        .replace("tune_lr = [1e-4, 3e-3, 1e30]\n", "")
        .replace(
            "tokens = [\"64K\"]\n",
            "tokens = [\"64K\"]\ntune_lr = [1e-4, 3e-3, 1e30]\n",
        )
        .replace("seed = [1, 2]\n", "")
}

#[test]
fn a_tuned_teacher_adopts_its_best_candidate_and_no_law_sees_the_candidates() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), teacher_tuned_sweep()).unwrap();
    let plan = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let text = stdout(&plan);
    assert!(text.contains("teacher-20K-lr3e-3"), "{text}");
    assert!(text.contains("lr tuned on 3 candidates"), "{text}");

    // the overflowing candidate fails; the teacher and its student go on
    let out = pdsweep(dir.path(), &["run", "s.toml"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("`teacher-20K-lr1e30`"), "{err}");
    let db = dir.path().join("results/tuned/sweep.db");
    let rows = runs(&db);
    let row = |name: &str| rows.values().find(|r| r.0 == name).cloned().unwrap();
    assert_eq!(row("teacher-20K-lr1e30").1, "failed");

    // the known best, from the candidates' own results
    let (low, good) = (row("teacher-20K-lr1e-4"), row("teacher-20K-lr3e-3"));
    let (low, good) = (low.3.unwrap(), good.3.unwrap());
    assert!(low > good + 0.05, "1e-4: {low}, 3e-3: {good}");
    let teacher = row("teacher-20K");
    assert_eq!(teacher.1, "done");
    let extra: serde_json::Value = serde_json::from_str(teacher.4.as_ref().unwrap()).unwrap();
    assert_eq!(extra["lr"]["peak"], 3e-3, "{extra}");
    // same seed, data and initialisation at the same rate: the teacher adopts its candidate's
    // checkpoint instead of training again, and measures exactly the candidate's loss
    assert_eq!(teacher.3.unwrap(), good);
    let candidate_id = rows
        .iter()
        .find(|(_, r)| r.0 == "teacher-20K-lr3e-3")
        .map(|(id, _)| id.clone())
        .unwrap();
    assert_eq!(extra["adopted_from"], candidate_id.as_str(), "{extra}");
    assert_eq!(row("student-10K-from-20K").1, "done");

    // `fit` names the teacher's rate; the supervised law sees the teacher and the baseline,
    // not the candidates
    let out = pdsweep(dir.path(), &["fit", "s.toml"]);
    let text = stdout(&out);
    assert!(
        text.contains("learning rate of the teacher of 20.6K on 65.5K tokens: 3e-3"),
        "{text}"
    );
    assert!(text.contains("1e30: failed (diverged)"), "{text}");
    assert!(text.contains("2 points for 5 parameters"), "{text}");

    // the report's learning-rate table has the teacher's row, the chosen rate in bold; the
    // candidates are exported with the other runs
    let out = pdsweep(dir.path(), &["report", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(dir.path().join("reports/tuned/index.html")).unwrap();
    let row_start = page
        .find("<tr><td>teacher</td><td>20.6K</td>")
        .expect(&page);
    let teacher_row = &page[row_start..row_start + 200];
    assert!(teacher_row.contains("<strong>3e-3: "), "{teacher_row}");
    assert!(teacher_row.contains("1e30: diverged"), "{teacher_row}");
    // the adopted teacher's training curve is its candidate's (it trained nothing itself)
    let store = pdsweep::store::SweepDb::open(&db).unwrap();
    let data = pdsweep::report::load::gather(&store, None).unwrap();
    let curve = data
        .curves
        .iter()
        .find(|c| c.name == "teacher-20K")
        .expect("teacher curve");
    assert_eq!(curve.points.last().map(|p| p.1), Some(good));
    assert!(
        data.runs.iter().all(|r| !r.name.contains("-lr")),
        "no candidate in the views"
    );
    let out = pdsweep(dir.path(), &["export", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let csv = std::fs::read_to_string(dir.path().join("results/tuned/export/runs.csv")).unwrap();
    assert!(csv.contains("teacher-20K-lr1e-4"), "{csv}");
}

#[test]
fn teacher_tune_lr_is_checked_and_students_cannot_have_one() {
    let dir = tempfile::tempdir().unwrap();
    // baselines and teachers both tuned: no warning about untuned teachers
    let both = SWEEP.replace(
        "tokens = [\"64K\"]\n",
        "tokens = [\"64K\"]\ntune_lr = [1e-3, 3e-3]\n",
    );
    std::fs::write(dir.path().join("s.toml"), both).unwrap();
    let out = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("teacher-20K-s1-lr1e-3"), "{text}");
    assert!(!text.contains("the teachers' is not"), "{text}");
    let sweep = teacher_tuned_sweep().replace("tune_lr = [1e-4, 3e-3, 1e30]", "tune_lr = [1e-3]");
    std::fs::write(dir.path().join("s.toml"), sweep).unwrap();
    let out = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("teachers.tune_lr") && err.contains("at least two distinct"),
        "{err}"
    );
    let sweep = SWEEP.replace("baseline = true", "baseline = true\ntune_lr = [1e-3, 3e-3]");
    std::fs::write(dir.path().join("s.toml"), sweep).unwrap();
    let out = pdsweep(dir.path(), &["plan", "s.toml", "--no-probe"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("students.tune_lr") && err.contains("[train] tune_lr"),
        "{err}"
    );
}
