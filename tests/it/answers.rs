//! What `fit`, `recommend` and the report answer (issue 16, items 6–8) on a sweep shaped like a
//! researcher's first one — 4 teacher sizes × 2 student sizes × 2 seeds with baselines, real
//! runs on Shakespeare (`tests/fixtures/gap16.sql`) — and on fits stored into it that show the
//! pathologies the researcher met. Each test is named after what broke.

use std::path::{Path, PathBuf};

use crate::common::{load_fixture, pdsweep, stderr, stdout};
use pdsweep::fit::{
    Chinchilla, DataPoint, DistillLaw, FitOptions, FitRecord, LawKind, SCOPE_DISTILL,
    SCOPE_SUPERVISED, TStarFit, TStarScaling, fit, save_fits,
};
use pdsweep::store::SweepDb;

fn db_of(results: &Path, name: &str) -> PathBuf {
    results.join(name).join("sweep.db")
}

/// `pdsweep fit` on the fixture (a light bootstrap to stay fast); returns its output.
fn fit_gap16(tmp: &Path) -> (PathBuf, String) {
    let results = load_fixture(tmp, "gap16");
    let db = db_of(&results, "gap16");
    let out = pdsweep(
        tmp,
        &[
            "fit",
            "--db",
            &db.display().to_string(),
            "--bootstrap",
            "100",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    (results, stdout(&out))
}

#[test]
fn fit_counted_8_teachers_for_4_teachers_times_2_seeds() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, out) = fit_gap16(tmp.path());
    assert_eq!(
        out.matches("4 teacher(s) × 2 seeds (8 students)").count(),
        2,
        "{out}"
    );
    assert!(!out.contains("8 teachers"), "{out}");
}

#[test]
fn fit_printed_the_seed_1_baseline_instead_of_the_seed_mean() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (results, out) = fit_gap16(tmp.path());
    let conn = rusqlite::Connection::open(db_of(&results, "gap16")).expect("db");
    let losses: Vec<f64> = conn
        .prepare(
            "SELECT s.val_loss FROM runs r JOIN results s ON s.run_id = r.id
             WHERE r.kind = 'baseline' AND r.params_non_embedding = 27792 ORDER BY r.name",
        )
        .expect("query")
        .query_map([], |r| r.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("losses");
    assert_eq!(losses.len(), 2, "two seeds of the baseline");
    let mean = (losses[0] + losses[1]) / 2.0;
    assert!(
        (losses[0] - mean).abs() > 5e-5,
        "the seeds differ, so the test can tell them apart"
    );
    assert!(
        out.contains(&format!("baseline loss {mean:.4} (mean of 2 seeds)")),
        "{out}"
    );
}

#[test]
fn fit_fitted_the_9_parameter_law_to_8_distinct_points() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, out) = fit_gap16(tmp.path());
    assert!(
        out.contains("not fitted: distillation law")
            && out.contains("8 distinct points (16 runs")
            && out.contains("for 9 parameters"),
        "{out}"
    );
    assert!(!out.contains("distillation law (loss="), "{out}");
}

#[test]
fn fit_called_a_two_point_tstar_line_the_better_fit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, out) = fit_gap16(tmp.path());
    assert!(!out.contains("better:"), "{out}");
    assert!(
        out.contains("not fitted: T*(S)") && out.contains("needs at least 3"),
        "{out}"
    );
}

#[test]
fn fit_printed_intervals_up_to_1e83_without_a_mark() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, out) = fit_gap16(tmp.path());
    // 6 distinct points (8 runs) for the 5 supervised parameters: marked, and the parameters
    // the points cannot pin down say so instead of printing their interval.
    assert!(
        out.contains("UNDER-DETERMINED FIT: 6 distinct points (8 runs"),
        "{out}"
    );
    assert!(out.contains("not identified"), "{out}");
    for token in out.split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace()) {
        if let Ok(v) = token.parse::<f64>() {
            assert!(v.abs() < 1e7, "an interval bound of {v} is printed: {out}");
        }
    }
}

#[test]
fn capacity_gap_vertex_inside_the_grid_when_the_best_teacher_was_at_its_edge() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (results, out) = fit_gap16(tmp.path());
    // On this sweep the largest teacher is the best for both students (means over seeds).
    let edge = "edge of grid: extend the grid toward larger teachers";
    assert_eq!(out.matches(edge).count(), 2, "{out}");
    assert!(
        out.lines()
            .filter(|l| l.contains("by teacher size:"))
            .all(|l| !l.contains("CI")),
        "no interior T* is claimed: {out}"
    );
    // recommend says the same, on the line that explains why it cannot answer.
    let db = db_of(&results, "gap16").display().to_string();
    let rec = pdsweep(tmp.path(), &["recommend", "--db", &db, "--student", "30K"]);
    assert_eq!(rec.status.code(), Some(2), "{}", stderr(&rec));
    assert!(stderr(&rec).contains(edge), "{}", stderr(&rec));
    // ... and the page.
    let report = pdsweep(
        tmp.path(),
        &[
            "report",
            "gap16",
            "--results",
            &results.display().to_string(),
            "--out",
            &tmp.path().join("out").display().to_string(),
        ],
    );
    assert!(report.status.success(), "{}", stderr(&report));
    let html = std::fs::read_to_string(tmp.path().join("out/index.html")).expect("page");
    assert!(
        html.contains(edge),
        "the page says where to extend the grid"
    );
    assert!(!html.contains("T* and interval"), "no T* band is drawn");
}

#[test]
fn recommend_after_fit_on_the_quickstart_asked_to_run_fit_first() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "quickstart");
    let db = db_of(&results, "quickstart").display().to_string();
    let out = pdsweep(tmp.path(), &["fit", "--db", &db, "--bootstrap", "20"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rec = pdsweep(tmp.path(), &["recommend", "--db", &db, "--student", "30K"]);
    assert_eq!(rec.status.code(), Some(2));
    let err = stderr(&rec);
    assert!(
        err.contains("`pdsweep fit` could not fit the supervised law")
            && err.contains("points for 5 parameters"),
        "{err}"
    );
    assert!(
        !err.contains("run `pdsweep fit` on the sweep first"),
        "{err}"
    );
}

/// The supervised law every stored-fit test uses, at the scale of the fixture's tiny models
/// (about 3.9 nats for a 28K model on 200K tokens, below ln 256 = 5.55).
const SUP: Chinchilla = Chinchilla {
    E: 1.5,
    A: 30.0,
    B: 40.0,
    alpha: 0.3,
    beta: 0.3,
};

fn quick(law: LawKind, grid: &str) -> FitOptions {
    FitOptions {
        grid: Some(law.default_grid().with_overrides(grid).expect("grid")),
        bootstrap: 40,
        seed: 3,
        ..FitOptions::default()
    }
}

/// Stores into the fixture's database a supervised law fitted to 18 synthetic runs and a
/// distillation law fitted to students of `student_sizes` (exact N) taught by six teachers.
fn store_laws(db: &Path, student_sizes: &[f64], tstar: Option<TStarScaling>) {
    let sup_points: Vec<DataPoint> = [4e3, 2e4, 6e4, 2e5, 8272.0, 27792.0]
        .iter()
        .flat_map(|&n| [2e5, 4e5, 8e5].map(move |d| DataPoint::supervised(n, d, SUP.predict(n, d))))
        .collect();
    let supervised = fit(
        LawKind::Chinchilla,
        "the sweep's teachers and baselines",
        &sup_points,
        &quick(LawKind::Chinchilla, "a=5;b=5;e=0;alpha=0.5;beta=0.5"),
    )
    .expect("supervised fit");
    let law = DistillLaw {
        c1: 30.0,
        f1: 0.3,
        ..DistillLaw::PUBLISHED
    };
    let teachers: Vec<(f64, f64)> = [4e3, 2e4, 6e4, 2e5, 6e5, 2e6]
        .iter()
        .map(|&n| (n, SUP.predict(n, 4e5)))
        .collect();
    let mut points = Vec::new();
    for &n in student_sizes {
        let lsup = SUP.predict(n, 2e5);
        for &(nt, lt) in &teachers {
            let mut p = DataPoint::distill(n, 2e5, lt, lsup, law.predict(n, 2e5, lt, lsup));
            p.teacher_params = Some(nt);
            p.teacher_tokens = Some(4e5);
            points.push(p);
        }
    }
    let config = "loss=kl alpha=0.9 tau=1.0 top_p=0.95 top_k=16 mode=offline";
    let distill = fit(
        LawKind::Distill,
        &format!("students ({config})"),
        &points,
        &quick(
            LawKind::Distill,
            "a=5,8;b=5,10;alpha=0.5;beta=0.5;gamma=1;c0=2;ln_c1=3;ln_f1=-1;ln_d1=0.3",
        ),
    )
    .expect("distillation fit");
    let mut records = vec![
        FitRecord::Law {
            scope: SCOPE_SUPERVISED.into(),
            key: String::new(),
            fit: Box::new(supervised),
        },
        FitRecord::Law {
            scope: SCOPE_DISTILL.into(),
            key: config.into(),
            fit: Box::new(distill),
        },
    ];
    if let Some(mut t) = tstar {
        t.config = config.into();
        records.push(FitRecord::TStar(Box::new(t)));
    }
    let mut db = SweepDb::open(db).expect("db");
    save_fits(&mut db, &records).expect("store fits");
}

fn recommend(tmp: &Path, db: &Path, args: &[&str]) -> (i32, String, String) {
    let db = db.display().to_string();
    let mut all = vec!["recommend", "--db", &db];
    all.extend_from_slice(args);
    let out = pdsweep(tmp, &all);
    // Shown with `--nocapture`, to read the answers as a user would.
    println!(
        "$ pdsweep {}\n{}{}",
        args.join(" "),
        stdout(&out),
        stderr(&out)
    );
    (out.status.code().unwrap_or(-1), stdout(&out), stderr(&out))
}

/// The line of `text` that starts (after indentation) with `prefix`, without the indentation.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line `{prefix}` in:\n{text}"))
}

#[test]
fn recommend_compared_size_targets_instead_of_real_n() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let db = db_of(&results, "gap16");
    // The students measured are the exact N of the sweep's models: 8,272 and 27,792 (the
    // shapes derived for "10K" and "30K"), and one in between.
    store_laws(&db, &[8272.0, 15000.0, 27792.0], None);
    let (code, out, err) = recommend(tmp.path(), &db, &["--student", "30K"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("the sweep's `30K` model: N = 27,792"),
        "30K is resolved to the model's real N: {out}"
    );
    assert!(
        !out.contains("EXTRAPOLATION: the student size"),
        "30K (N = 27,792) is inside the measured 8,272–27,792: {out}"
    );
    assert!(!out.contains("NOT MONOTONE"), "{out}");
    let (code, out, _) = recommend(tmp.path(), &db, &["--student", "40K"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("N = 40,000 non-embedding parameters (not a size the sweep planned)")
            && out.contains("EXTRAPOLATION: the student size N = 40K"),
        "{out}"
    );
}

#[test]
fn recommend_printed_a_student_loss_above_ln_v() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let db = db_of(&results, "gap16");
    store_laws(&db, &[8272.0, 15000.0, 27792.0], None);
    let (code, out, err) = recommend(tmp.path(), &db, &["--student", "100"]);
    assert_eq!(code, 0, "{err}");
    let sup = line(&out, "supervised student loss");
    assert!(
        sup.contains("REFUSED") && sup.contains("above ln V = 5.5452"),
        "the reason is on the same line: {sup}"
    );
    let student = line(&out, "distilled student loss");
    assert!(
        student.contains("REFUSED") || student.contains("none: depends on L̃_S"),
        "{student}"
    );
    let size = line(&out, "optimal teacher size");
    assert!(
        size.contains("REFUSED") || size.contains("none:"),
        "a teacher size from an out-of-bounds L_T* is refused too: {size}"
    );
    // EXTRAPOLATION comes before the numbers.
    let first = out.lines().nth(1).unwrap_or("");
    assert!(first.contains("EXTRAPOLATION"), "{out}");
}

#[test]
fn recommend_hinted_at_teacher_tokens_when_they_were_given() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let db = db_of(&results, "gap16");
    store_laws(&db, &[8272.0, 15000.0, 27792.0], None);
    // On 100 tokens no teacher reaches L_T*: say so, not "give --teacher-tokens".
    let (code, out, err) = recommend(
        tmp.path(),
        &db,
        &["--student", "30K", "--teacher-tokens", "100"],
    );
    assert_eq!(code, 0, "{err}");
    let size = line(&out, "optimal teacher size");
    assert!(
        size.contains("no teacher size reaches L_T*") && size.contains("on 100 tokens"),
        "{size}"
    );
    assert!(!out.contains("give --teacher-tokens"), "{out}");
}

#[test]
fn recommend_printed_a_negative_teacher_size_and_answers_not_monotone_in_size() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let db = db_of(&results, "gap16");
    // Two student sizes: the distillation law is under-determined (12 distinct points for 9
    // parameters), so the answer comes from T*(S) — here a line that falls with S, as three
    // noisy optima can give.
    let fitted = |form: &str, params: [f64; 2]| TStarFit {
        form: form.into(),
        params,
        ci: None,
        rmse_log: 0.1,
    };
    let tstar = TStarScaling {
        student_tokens: 2e5,
        teacher_tokens: None,
        config: String::new(),
        points: vec![[8272.0, 2.0e5], [15000.0, 1.9e5], [27792.0, 1.5e5]],
        linear: fitted("linear", [-2.5, 2.2e5]),
        power: fitted("power", [3.0e6, -0.3]),
        better: "linear".into(),
        warnings: Vec::new(),
        largest_held_out: None,
    };
    store_laws(&db, &[8272.0, 27792.0], Some(tstar));
    let (code, out, err) = recommend(
        tmp.path(),
        &db,
        &["--student", "1B", "--teacher-tokens", "400K"],
    );
    assert_eq!(code, 0, "{err}");
    let size = line(&out, "optimal teacher size");
    assert!(
        size.starts_with("optimal teacher size N_T*:") && size.contains("none:"),
        "{size}"
    );
    assert!(
        size.contains("gives -") || size.contains("not a possible model size"),
        "the reason is on the same line: {size}"
    );
    assert!(out.contains("answer from: linear T*(S) fit"), "{out}");
    assert!(out.contains("NOT MONOTONE"), "{out}");
    assert!(
        out.lines().nth(1).unwrap_or("").contains("EXTRAPOLATION"),
        "{out}"
    );
}

#[test]
fn fit_named_only_the_fitted_optimum_where_several_teachers_tie_within_the_noise() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, out) = fit_gap16(tmp.path());
    // Two seeds per teacher give a replicate spread, so each student's curve names the
    // teachers these seeds cannot tell from the best.
    assert_eq!(
        out.matches("  within the noise of the best: every teacher from 55.5K to 222K")
            .count(),
        2,
        "{out}"
    );
}

/// `fit --seeds` (a split-half check): the students and baselines of those seeds only, every
/// teacher; printed, never stored, so the sweep's answer (what the report and `recommend`
/// read) stays the full fit. A seed no run has is refused, naming it.
#[test]
fn fit_on_a_subset_of_seeds_is_printed_and_not_stored() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (results, full) = fit_gap16(tmp.path());
    let db = db_of(&results, "gap16");
    let rows = |db: &Path| -> i64 {
        rusqlite::Connection::open(db)
            .expect("db")
            .query_row("SELECT count(*) FROM fits", [], |r| r.get(0))
            .expect("count")
    };
    let before = rows(&db);
    let db_arg = db.display().to_string();
    let out = pdsweep(
        tmp.path(),
        &["fit", "--db", &db_arg, "--bootstrap", "50", "--seeds", "1"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("not stored"), "{text}");
    assert_eq!(
        text.matches("4 teacher(s), baseline loss").count(),
        2,
        "{text}"
    );
    assert!(full.contains("× 2 seeds"), "{full}");
    assert_eq!(rows(&db), before, "a subset fit stores nothing");
    let out = pdsweep(tmp.path(), &["fit", "--db", &db_arg, "--seeds", "1,7"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("seed 7"), "{}", stderr(&out));
}

/// `triage` ranks the fixture's four trained teachers for a student by their distance from an
/// optimal teacher in bits per byte, checks the ranking against the gains the sweep measured,
/// says why when the sweep's own fits locate no optimum, and refuses by name a teacher that
/// cannot be scored by bytes.
#[test]
fn triage_ranks_teachers_by_distance_from_the_optimal_teacher() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (results, _) = fit_gap16(tmp.path());
    let db = db_of(&results, "gap16").display().to_string();
    let base = ["triage", "--db", db.as_str(), "--student", "10K"];
    let out = pdsweep(
        tmp.path(),
        &[&base[..], &["--optimal-bpb", "3.0:2.9:3.1"]].concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|w| w.starts_with("teacher-"))
        .collect();
    // bits per byte 3.70 (200K), 4.08 (60K), 4.48 (5K), 4.50 (20K): nearest 3.0 first.
    assert_eq!(
        order,
        [
            "teacher-200K-s1",
            "teacher-60K-s1",
            "teacher-5K-s1",
            "teacher-20K-s1"
        ],
        "{text}"
    );
    assert!(
        text.contains("Spearman ρ = 0.80") && text.contains("over 4 teachers and 2 seed(s)"),
        "{text}"
    );
    // The fixture's optimum in teacher loss is at the edge of its grid (the strongest teacher):
    // the target from its fits is one-sided, every teacher as strong or stronger at distance 0.
    let out = pdsweep(tmp.path(), &base);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("or stronger") && text.contains("there or at stronger teachers"),
        "{text}"
    );
    let first = text
        .lines()
        .find(|l| l.contains("teacher-200K-s1"))
        .expect("the strongest teacher is ranked");
    assert!(first.contains("   0.0000"), "{first}");
    // Before `fit` has stored anything, there is no target: the error says what to do.
    let bare = tempfile::tempdir().expect("tmp");
    let results = load_fixture(bare.path(), "gap16");
    let db = db_of(&results, "gap16").display().to_string();
    let out = pdsweep(bare.path(), &["triage", "--db", &db, "--student", "10K"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no capacity-gap fit that locates an optimal teacher loss")
            && stderr(&out).contains("--optimal-bpb"),
        "{}",
        stderr(&out)
    );
    let results = tmp.path().join("results");
    // A teacher without bits per byte is refused by name.
    let conn = rusqlite::Connection::open(db_of(&results, "gap16")).expect("db");
    conn.execute(
        "UPDATE results SET val_bpb = 0 WHERE run_id = (SELECT id FROM runs WHERE name = 'teacher-60K-s1')",
        [],
    )
    .expect("update");
    let out = pdsweep(tmp.path(), &[&base[..], &["--optimal-bpb", "3.0"]].concat());
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("teacher `teacher-60K-s1` cannot be scored by bytes"),
        "{}",
        stderr(&out)
    );
}

/// Once the sweep's own fit has located an optimal teacher loss for a student, `plan` brackets
/// the teacher grid around it (teachers' losses predicted by the sweep's supervised law) rather
/// than around the rule of thumb T* ≈ 2.5·S, and names the side the grid misses.
#[test]
fn plan_brackets_the_teacher_grid_around_a_fitted_optimal_teacher_loss() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (results, _) = fit_gap16(tmp.path());
    if crate::common::shakespeare_plays(
        tmp.path(),
        &["tempest_gut.txt", "hamlet_gut.txt", "macbeth_gut.txt"],
    )
    .is_none()
    {
        return;
    }
    // the fit of the 10K student (8,272 parameters when the fixture was made, 9,808 as shapes are
    // derived today) as if it had located L_T* = 1.50 [1.45, 1.55], below what any of the
    // grid's teachers reaches
    let conn = rusqlite::Connection::open(db_of(&results, "gap16")).expect("db");
    let changed = conn
        .execute(
            r#"UPDATE fits SET result_json = json_set(result_json, '$.by_teacher_loss.optimum',
                 json('{"kind": "interior", "at": 1.5, "student_loss": 3.0, "ci": [1.45, 1.55], "interior_fraction": 1.0}'))
               WHERE scope = 'capacity_gap' AND key LIKE 'S=8272 %'"#,
            [],
        )
        .expect("update");
    assert!(changed >= 1);
    let toml = std::fs::read_to_string(crate::common::root().join("tests/fixtures/gap16.toml"))
        .expect("fixture")
        .replace("../../../shared/data/shakespeare", "books");
    std::fs::write(tmp.path().join("gap16.toml"), toml).expect("write");
    let r = results.display().to_string();
    let out = pdsweep(tmp.path(), &["plan", "gap16.toml", "--results", &r]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("students of size `10K` (9808 parameters): their teachers are predicted")
            && text.contains("do not bracket the optimal teacher loss 1.500 [1.450, 1.550]")
            && text.contains("add a stronger teacher (predicted loss at most 1.450"),
        "{text}"
    );
    // the other student has no fitted optimum in loss: the check in size applies to it (and
    // passes)
    assert!(!text.contains("`30K`"), "{text}");
}
