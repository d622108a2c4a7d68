//! Scaling-law fits: synthetic data from known laws is recovered within the bootstrap
//! intervals; `recommend --law busbridge2025` matches a brute-force scan of the published law;
//! sweep fits are stored and read back; bad data gives one clear error and exit code 2.

use std::io::Write;
use std::process::Command;

use pdsweep::fit::{
    Busbridge, Chinchilla, DataPoint, DistillLaw, FinishedRun, Fit, FitOptions, FitRecord, Law,
    LawKind, Optimum, RecommendQuery, SCOPE_DISTILL, SCOPE_SUPERVISED, StartGrid, SweepFitOptions,
    fit, fit_sweep, recommend_from_fits, recommend_published, save_fits, stored_fits, value,
};
use pdsweep::store::SweepDb;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

fn noise(rng: &mut StdRng, sigma: f64) -> f64 {
    let e: f64 = Normal::new(0.0, sigma).unwrap().sample(rng);
    e.exp()
}

fn options(grid: StartGrid, bootstrap: usize) -> FitOptions {
    FitOptions {
        grid: Some(grid),
        bootstrap,
        seed: 3,
        ..FitOptions::default()
    }
}

fn assert_within_ci(fit: &Fit, truth: &[f64]) {
    for (name, t) in fit.law.param_names().iter().zip(truth) {
        let [lo, hi] = fit.ci[*name];
        assert!(
            lo <= *t && *t <= hi,
            "{} {name}: truth {t} outside [{lo}, {hi}] (fit {})",
            fit.law,
            fit.param(name)
        );
    }
}

fn supervised_points(law: impl Fn(f64, f64) -> f64, seed: u64) -> Vec<DataPoint> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..120)
        .map(|_| {
            let n = rng.random_range(1e7f64.ln()..1e10f64.ln()).exp();
            let d = n * rng.random_range(5f64.ln()..200f64.ln()).exp();
            DataPoint::supervised(n, d, law(n, d) * noise(&mut rng, 0.005))
        })
        .collect()
}

#[test]
fn chinchilla_recovers_known_parameters_within_their_intervals() {
    let truth = Chinchilla {
        E: 1.69,
        A: 406.4,
        B: 410.7,
        alpha: 0.34,
        beta: 0.28,
    };
    let pts = supervised_points(|n, d| truth.predict(n, d), 1);
    let grid = LawKind::Chinchilla
        .default_grid()
        .with_overrides("a=0,5,10;b=0,5,10;alpha=0.5;beta=0.5")
        .unwrap();
    let f = fit(LawKind::Chinchilla, "synthetic", &pts, &options(grid, 300)).unwrap();
    assert_within_ci(&f, &truth.natural());
    assert!((f.param("E") / 1.69 - 1.0).abs() < 0.03, "{:?}", f.params);
    assert!((f.param("alpha") - 0.34).abs() < 0.03, "{:?}", f.params);
    assert!(f.extrapolation.as_ref().unwrap().mean_abs_rel_error < 0.02);
}

#[test]
fn busbridge_supervised_recovers_known_parameters_within_their_intervals() {
    let truth = Busbridge::PUBLISHED;
    let pts = supervised_points(|n, d| truth.predict(n, d), 2);
    let grid = LawKind::Busbridge
        .default_grid()
        .with_overrides("a=5,10;b=5,10;e=0;alpha=0.5;beta=0.5;gamma=0.5,1")
        .unwrap();
    let f = fit(LawKind::Busbridge, "synthetic", &pts, &options(grid, 300)).unwrap();
    assert_within_ci(&f, &truth.natural());
    assert!((f.param("E") / 1.22 - 1.0).abs() < 0.08, "{:?}", f.params);
}

#[test]
fn distillation_law_recovers_known_parameters_within_their_intervals() {
    // The published B′/D^β′ term is negligible at these budgets and the published transition
    // (c1 = 522.6, f1 = 0.09) so sharp that c1 is barely identified; a larger data term and a
    // smoother transition make every coefficient matter.
    let truth = DistillLaw {
        B: 2e5,
        beta: 0.5,
        c1: 20.0,
        f1: 0.3,
        ..DistillLaw::PUBLISHED
    };
    let sup = Busbridge::PUBLISHED;
    let mut rng = StdRng::seed_from_u64(4);
    let mut pts = Vec::new();
    for n in [1.5e8, 4e8, 1e9, 3e9, 8e9] {
        for d in [1e9, 1e10, 1e11] {
            let lsup = sup.predict(n, d);
            // Teacher losses on both sides of the transition at L_T / L̃_S = d1.
            for ratio in [0.6, 0.75, 0.9, 1.05, 1.2, 1.3, 1.4, 1.6] {
                let lt = ratio * lsup;
                let ls = truth.predict(n, d, lt, lsup) * noise(&mut rng, 0.002);
                pts.push(DataPoint::distill(n, d, lt, lsup, ls));
            }
        }
    }
    let grid = LawKind::Distill
        .default_grid()
        .with_overrides(
            "a=5,8;b=5,10;alpha=0.5;beta=0.5;gamma=1;c0=2;ln_c1=2,4;ln_f1=-2,-1;ln_d1=0.3",
        )
        .unwrap();
    let f = fit(LawKind::Distill, "synthetic", &pts, &options(grid, 200)).unwrap();
    assert_within_ci(&f, &truth.natural());
    // Nine parameters trade off against each other (d1 with c0, c1, f1): the point estimate
    // need not be near the truth, but the optimiser must do at least as well as the truth.
    let pts: Vec<_> = pts.iter().map(DataPoint::to_point).collect();
    let at_truth = value::<DistillLaw>(&truth.theta(), &pts, 1e-3);
    assert!(
        f.objective <= at_truth * (1.0 + 1e-9),
        "{} > {at_truth}",
        f.objective
    );
    assert!(f.rmse_log < 0.004, "{}", f.rmse_log);
}

/// Eq. 8 written out directly, independent of the library's log-space form.
fn eq8(d: &DistillLaw, n: f64, dd: f64, lt: f64, lsup: f64) -> f64 {
    lt + lt.powf(-d.c0)
        * (1.0 + (lt / (lsup * d.d1)).powf(1.0 / d.f1)).powf(-d.c1 * d.f1)
        * (d.A / n.powf(d.alpha) + d.B / dd.powf(d.beta)).powf(d.gamma)
}

#[test]
fn recommend_busbridge2025_matches_a_brute_force_scan() {
    let (d, s) = (DistillLaw::PUBLISHED, Busbridge::PUBLISHED);
    for (n, dd) in [(1.9e9, 1e11), (1.5e8, 2e10), (8e9, 1e12)] {
        let lsup = s.E + (s.A / f64::powf(n, s.alpha) + s.B / f64::powf(dd, s.beta)).powf(s.gamma);
        let (mut best_lt, mut best) = (0.0, f64::INFINITY);
        for i in 0..=400_000 {
            let lt = 1.0 + 4.0 * i as f64 / 400_000.0;
            let v = eq8(&d, n, dd, lt, lsup);
            if v < best {
                (best_lt, best) = (lt, v);
            }
        }
        let r = recommend_published(n, dd, None).unwrap();
        assert!((r.supervised_loss - lsup).abs() < 1e-9);
        assert!(
            (r.teacher_loss - best_lt).abs() < 2e-4,
            "{} vs {best_lt}",
            r.teacher_loss
        );
        assert!(
            (r.student_loss - best).abs() < 1e-8,
            "{} vs {best}",
            r.student_loss
        );
        // The refined minimum is at most the scan's best.
        assert!(r.student_loss <= best + 1e-12);
        assert!((r.gain - (lsup - best)).abs() < 1e-8);
    }
}

/// A synthetic sweep: 5 teachers, baselines, and students of 3 sizes taught by every teacher.
fn synthetic_sweep() -> Vec<FinishedRun> {
    let sup = Chinchilla {
        E: 1.8,
        A: 400.0,
        B: 1200.0,
        alpha: 0.34,
        beta: 0.33,
    };
    let law = DistillLaw {
        c1: 30.0,
        f1: 0.3,
        ..DistillLaw::PUBLISHED
    };
    let mut rng = StdRng::seed_from_u64(5);
    let mut runs = Vec::new();
    let mut add = |kind: &str,
                   params: f64,
                   tokens: f64,
                   loss: f64,
                   teacher: Option<String>,
                   baseline: Option<f64>| {
        let id = format!("{kind}{}", runs.len());
        runs.push(FinishedRun {
            id: id.clone(),
            kind: pdsweep::fit::Role::parse(kind).unwrap(),
            params,
            tokens,
            loss,
            teacher,
            config: (kind == "student").then(|| "loss=kl".to_string()),
            baseline_loss: baseline,
            seed: 1,
            lr_peak: None,
            bpb: None,
            tokenizer: String::new(),
        });
        id
    };
    let teachers: Vec<(String, f64)> = [3e7, 1e8, 3e8, 1e9, 3e9]
        .iter()
        .map(|&n| {
            let l = sup.predict(n, 2e10) * noise(&mut rng, 0.003);
            (add("teacher", n, 2e10, l, None, None), l)
        })
        .collect();
    for n in [1e7, 3e7, 1e8] {
        for d in [1e9, 3e9] {
            let lsup = sup.predict(n, d);
            let base = lsup * noise(&mut rng, 0.003);
            add("baseline", n, d, base, None, None);
            for (t, lt) in &teachers {
                let ls = law.predict(n, d, *lt, lsup) * noise(&mut rng, 0.002);
                add("student", n, d, ls, Some(t.clone()), Some(base));
            }
        }
    }
    runs
}

#[test]
fn sweep_fits_are_stored_and_recommend_reads_them() {
    let runs = synthetic_sweep();
    let small = |law: LawKind, spec: &str| law.default_grid().with_overrides(spec).unwrap();
    let mut opts = SweepFitOptions {
        fit: options(
            small(LawKind::Chinchilla, "a=0,5;b=0,5;e=0;alpha=0.5;beta=0.5"),
            60,
        ),
        supervised_law: LawKind::Chinchilla,
    };
    let fits = fit_sweep(&runs, &opts);
    assert!(fits.supervised.is_some(), "{:?}", fits.skipped);
    // The distillation law needs its own grid; fit it directly as the sweep would.
    opts.fit.grid = Some(small(
        LawKind::Distill,
        "a=5,8;b=5,10;alpha=0.5;beta=0.5;gamma=1;c0=2;ln_c1=3;ln_f1=-1;ln_d1=0.3",
    ));
    let fits_d = fit_sweep(&runs, &opts);
    let distill = fits_d
        .distill
        .get("loss=kl")
        .expect("distillation law fitted")
        .clone();
    assert_eq!(fits.capacity_gaps.len(), 6);
    assert!(
        fits.capacity_gaps
            .iter()
            .all(|g| g.points.len() == 5 && g.by_teacher_params.fit.is_some())
    );
    assert!(
        fits.capacity_gaps
            .iter()
            .any(|g| !matches!(g.by_teacher_loss.optimum, Optimum::TooFewPoints))
    );

    let dir = tempfile::tempdir().unwrap();
    let mut db = SweepDb::open(&dir.path().join("sweep.db")).unwrap();
    let mut records = vec![
        FitRecord::Law {
            scope: SCOPE_SUPERVISED.into(),
            key: String::new(),
            fit: Box::new(fits.supervised.clone().unwrap()),
        },
        FitRecord::Law {
            scope: SCOPE_DISTILL.into(),
            key: "loss=kl".into(),
            fit: Box::new(distill.clone()),
        },
    ];
    records.extend(
        fits.capacity_gaps
            .iter()
            .map(|g| FitRecord::Gap(Box::new(g.clone()))),
    );
    save_fits(&mut db, &records).unwrap();
    let stored = stored_fits(&db).unwrap();
    assert_eq!(stored.len(), 8);
    let back = stored
        .iter()
        .find(|s| s.scope == SCOPE_DISTILL)
        .unwrap()
        .as_fit()
        .unwrap();
    assert_eq!(back.params, distill.params);
    assert_eq!(back.samples.len(), distill.samples.len());
    assert!(
        stored
            .iter()
            .filter(|s| s.scope == "capacity_gap")
            .all(|s| s.as_gap().is_some())
    );

    let query = |n: f64| RecommendQuery {
        source: "test".into(),
        student_params: n,
        student_tokens: Some(3e9),
        teacher_tokens: Some(2e10),
        ..RecommendQuery::default()
    };
    let r = recommend_from_fits(&stored, &query(3e7)).unwrap();
    // L_T* may lie beyond the teachers measured (then it says so), but the student is inside.
    assert!(
        !r.extrapolation.iter().any(|e| e.contains("student")),
        "{:?}",
        r.extrapolation
    );
    assert_eq!(r.teacher_params.is_some(), r.teacher_flops.is_some());
    assert!(
        r.teacher_params.is_some()
            || r.problems
                .get("teacher_params")
                .is_some_and(|p| p.contains("no teacher size")),
        "{r:?}"
    );
    let far = recommend_from_fits(&stored, &query(1e9)).unwrap();
    assert!(
        far.extrapolation.iter().any(|e| e.contains("student size")),
        "{:?}",
        far.extrapolation
    );
}

fn pdsweep(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn csv_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path.display().to_string()
}

#[test]
fn fit_cli_prints_json_with_mapped_columns() {
    let truth = Chinchilla {
        E: 1.8,
        A: 480.0,
        B: 2000.0,
        alpha: 0.35,
        beta: 0.36,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("Model Size,Training Tokens,loss\n");
    for p in supervised_points(|n, d| truth.predict(n, d), 6)
        .iter()
        .take(40)
    {
        text += &format!("{},{},{}\n", p.params, p.tokens, p.loss);
    }
    let path = csv_file(&dir, "data.csv", &text);
    let (code, out, err) = pdsweep(&[
        "fit",
        "--data",
        &path,
        "--law",
        "chinchilla",
        "--columns",
        "params=Model Size,tokens=Training Tokens,loss=loss",
        "--bootstrap",
        "50",
        "--grid",
        "a=0,5;b=0,5;e=0;alpha=0.5;beta=0.5",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["law"], "chinchilla");
    assert_eq!(v["n_points"], 40);
    for k in ["E", "A", "B", "alpha", "beta"] {
        assert!(v["params"][k].is_f64() && v["ci"][k].is_array(), "{k}: {v}");
    }
    assert!(v["objective"].is_f64() && v["residuals"].is_array());
}

#[test]
fn recommend_cli_with_published_law_needs_no_sweep() {
    let (code, out, err) = pdsweep(&[
        "recommend",
        "--law",
        "busbridge2025",
        "--student",
        "1.9B",
        "--tokens",
        "100B",
        "--teacher-tokens",
        "1T",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = recommend_published(1.9e9, 1e11, Some(1e12)).unwrap();
    assert!((v["teacher_loss"].as_f64().unwrap() - r.teacher_loss).abs() < 1e-12);
    assert!(v["teacher_params"].as_f64().unwrap() > 1.9e9);
}

#[test]
fn degenerate_data_gives_one_clear_error_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let good_rows: String = (1..=8)
        .map(|i| {
            format!(
                "{},{},{}\n",
                1e6 * i as f64,
                1e9 * (i % 3 + 1) as f64,
                3.0 - 0.1 * i as f64
            )
        })
        .collect();
    let cases = [
        (
            "nan.csv",
            format!("params,tokens,loss\n{good_rows}1e6,1e9,NaN\n"),
            "line 10, column `loss`: `NaN` is not a finite number",
        ),
        (
            "neg.csv",
            format!("params,tokens,loss\n{good_rows}1e6,1e9,-2\n"),
            "column `loss`: `-2` must be positive",
        ),
        (
            "empty.csv",
            format!("params,tokens,loss\n{good_rows}1e6,,2\n"),
            "column `tokens`: `` is empty",
        ),
        (
            "nocol.csv",
            "params,tokens,los\n1,1,1\n".into(),
            "has no column `loss`",
        ),
        (
            "few.csv",
            "params,tokens,loss\n1e6,1e9,3\n2e6,1e9,2.9\n3e6,2e9,2.8\n".into(),
            "3 points for 5 parameters",
        ),
        (
            "onesize.csv",
            (0..8).fold("params,tokens,loss\n".to_string(), |s, i| {
                s + &format!("1e6,{},3\n", 1e9 * (i + 1) as f64)
            }),
            "same model size",
        ),
    ];
    for (name, text, want) in cases {
        let path = csv_file(&dir, name, &text);
        let (code, _, err) = pdsweep(&[
            "fit",
            "--data",
            &path,
            "--bootstrap",
            "0",
            "--grid",
            "a=0;b=0;e=0;alpha=0.5;beta=0.5",
        ]);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(
            err.contains(name) && !err.contains("panicked"),
            "{name}: {err}"
        );
    }
    let path = csv_file(&dir, "ok.csv", &format!("params,tokens,loss\n{good_rows}"));
    let (code, _, err) = pdsweep(&["fit", "--data", &path, "--columns", "parms=x"]);
    assert_eq!(code, 2);
    assert!(err.contains("`parms` is not a column role"), "{err}");
    let (code, _, err) = pdsweep(&["fit", "--data", &path, "--law", "distill"]);
    assert_eq!(code, 2);
    assert!(err.contains("no column `student_params`"), "{err}");
}
