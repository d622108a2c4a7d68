//! `pdsweep report` and `pdsweep export` on the quick-start sweep's real database (a SQL dump in
//! `tests/fixtures/quickstart.sql`): figures are non-blank PNGs of the stated size and valid
//! SVGs, the page is self-contained and opens in headless Chromium without console errors,
//! missing pieces are named, the fit-based figures draw from hand-made fits, and the exported
//! tables hold what they promise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{pdsweep, root, stderr, stdout};
use pdsweep::report::data::{
    CapacityGapView, Estimate, GapPoint, GapVerdict, LawView, OptimalPoint, OptimalTeacherView,
    RecommendationView, ReportData, TrendForm, TrendView,
};

/// A results folder holding the quick-start database, in a fresh temporary folder.
fn quickstart(tmp: &Path) -> PathBuf {
    let results = tmp.join("results");
    let dir = results.join("quickstart");
    std::fs::create_dir_all(&dir).expect("results folder");
    let sql =
        std::fs::read_to_string(root().join("tests/fixtures/quickstart.sql")).expect("fixture");
    let conn = rusqlite::Connection::open(dir.join("sweep.db")).expect("db");
    conn.execute_batch(&sql).expect("load the fixture");
    results
}

fn sweep_file() -> String {
    root().join("sweeps/quickstart.toml").display().to_string()
}

/// Decodes a PNG: (width, height, RGB(A) pixels, channels).
fn decode_png(path: &Path) -> (u32, u32, Vec<u8>, usize) {
    let file = std::fs::File::open(path).expect("png exists");
    let decoder = png::Decoder::new(std::io::BufReader::new(file));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("png size")];
    let info = reader.next_frame(&mut buf).expect("png pixels");
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf, info.color_type.samples())
}

/// Checks a figure's PNG (size, not blank, ink in more than a sliver) and SVG (well-formed XML
/// with an `svg` root and the embedded font).
fn check_figure(dir: &Path, name: &str) {
    let (w, h, pixels, channels) = decode_png(&dir.join(format!("{name}.png")));
    assert!(w >= 1800 && h >= 1000, "{name}: {w}×{h} is not 300 dpi");
    let grey: Vec<f64> = pixels
        .chunks(channels)
        .map(|p| (p[0] as f64 + p[1] as f64 + p[2] as f64) / 3.0)
        .collect();
    let mean = grey.iter().sum::<f64>() / grey.len() as f64;
    let var = grey.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / grey.len() as f64;
    assert!(var > 100.0, "{name}.png looks blank (variance {var})");
    let inked = grey.iter().filter(|g| **g < 200.0).count() as f64 / grey.len() as f64;
    assert!(
        (0.005..0.5).contains(&inked),
        "{name}.png: {:.1}% dark pixels",
        100.0 * inked
    );
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).expect("svg exists");
    assert!(svg.contains("@font-face"), "{name}.svg embeds its font");
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut root = None;
    let mut texts = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e)) => {
                let tag = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if tag == "text" {
                    texts += 1;
                }
                root.get_or_insert(tag);
            }
            Ok(_) => {}
            Err(e) => panic!("{name}.svg is not well-formed XML: {e}"),
        }
    }
    assert_eq!(root.as_deref(), Some("svg"), "{name}.svg");
    assert!(texts > 5, "{name}.svg has its labels as text");
}

#[test]
fn report_of_the_quickstart_sweep_draws_every_figure_and_a_self_contained_page() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let out_dir = tmp.path().join("reports/quickstart");
    let out = pdsweep(
        tmp.path(),
        &[
            "report",
            &sweep_file(),
            "--results",
            &results.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("14 of 14 runs done"), "{text}");
    assert!(
        text.contains("no fits: with 2 teacher size(s)")
            && text.contains("too small for scaling laws"),
        "the terminal says what is missing, and why fitting cannot supply it: {text}"
    );
    for name in [
        "training_curves",
        "supervised_fits",
        "capacity_gap",
        "optimal_teacher",
        "distill_gain",
        "agreement",
        "isoflop",
    ] {
        check_figure(&out_dir, name);
    }
    let html = std::fs::read_to_string(out_dir.join("index.html")).expect("index.html");
    assert!(
        !html.contains("http://") || !html.contains("src=\"http"),
        "nothing fetched"
    );
    for forbidden in ["<script", "<link", "src=\"http", "url(http", "@import"] {
        assert!(
            !html.contains(forbidden),
            "index.html contains `{forbidden}`"
        );
    }
    for expected in [
        "student-60K-from-400K-offline",
        "too small for scaling laws",
        "SHA-256",
        "git commit",
        "[teachers]",
        "<svg",
        "@font-face",
    ] {
        assert!(html.contains(expected), "index.html lacks `{expected}`");
    }
    if let Some(shot) = chromium_screenshot(&out_dir.join("index.html"), tmp.path()) {
        let (w, h, pixels, channels) = decode_png(&shot);
        assert_eq!((w, h), (1400, 4000));
        assert!(
            pixels.chunks(channels).any(|p| p[0] < 100),
            "the screenshot shows something"
        );
        if let Ok(keep) = std::env::var("PDSWEEP_REPORT_KEEP") {
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::copy(&shot, Path::new(&keep).join("screenshot.png"));
        }
    }
    keep(&out_dir);
}

/// Copies a report to `$PDSWEEP_REPORT_KEEP` (if set) for a person to look at.
fn keep(dir: &Path) {
    let Ok(keep) = std::env::var("PDSWEEP_REPORT_KEEP") else {
        return;
    };
    let target = Path::new(&keep).join(dir.file_name().unwrap_or_default());
    let _ = std::fs::create_dir_all(&target);
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let _ = std::fs::copy(entry.path(), target.join(entry.file_name()));
    }
}

/// Opens `page` in headless Chromium: asserts no console errors and returns the screenshot,
/// or `None` (with the reason printed) where Chromium is not installed.
fn chromium_screenshot(page: &Path, tmp: &Path) -> Option<PathBuf> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    let Some(browser) = browser else {
        println!("skipped the browser check: no chromium on PATH (`apt-get install chromium`)");
        return None;
    };
    let profile = tempfile::tempdir_in(tmp).expect("profile folder");
    let shot = tmp.join("screenshot.png");
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,4000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    let console: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("ERR_FILE_NOT_FOUND")
        })
        .collect();
    assert!(console.is_empty(), "console errors: {console:#?}");
    assert!(out.status.success(), "chromium failed: {log}");
    assert!(shot.is_file(), "no screenshot: {log}");
    Some(shot)
}

#[test]
fn report_with_failed_runs_and_no_students_says_what_is_missing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let conn = rusqlite::Connection::open(results.join("quickstart/sweep.db")).expect("db");
    conn.execute_batch(
        "DELETE FROM results WHERE run_id IN (SELECT id FROM runs WHERE kind = 'student');
         UPDATE runs SET state = 'failed', error = 'loss is NaN at step 3' WHERE kind = 'student';
         UPDATE runs SET state = 'planned' WHERE name = 'baseline-60K';
         DELETE FROM results WHERE run_id = (SELECT id FROM runs WHERE name = 'baseline-60K');",
    )
    .expect("break the sweep");
    drop(conn);
    let out_dir = tmp.path().join("out");
    // By name, without the sweep file.
    let out = pdsweep(
        tmp.path(),
        &[
            "report",
            "quickstart",
            "--results",
            &results.display().to_string(),
            "--out",
            &out_dir.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for expected in [
        "8 run(s) failed",
        "1 of 14 runs have not finished",
        "no student has finished",
        "not drawn: capacity_gap",
        "no fits",
    ] {
        assert!(
            text.contains(expected),
            "terminal lacks `{expected}`: {text}"
        );
    }
    check_figure(&out_dir, "training_curves");
    check_figure(&out_dir, "supervised_fits");
    assert!(!out_dir.join("capacity_gap.png").exists());
    let html = std::fs::read_to_string(out_dir.join("index.html")).expect("index.html");
    for expected in [
        "8 run(s) failed",
        "loss is NaN at step 3",
        "Figures not drawn",
        "Missing from this report",
    ] {
        assert!(html.contains(expected), "index.html lacks `{expected}`");
    }
}

#[test]
fn report_without_a_database_points_to_pdsweep_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = pdsweep(tmp.path(), &["report", &sweep_file()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("hint: run `pdsweep run"),
        "{}",
        stderr(&out)
    );
}

fn params(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Hand-made fits in every fit-based field, as `pdsweep fit` will provide them.
fn with_fits(mut data: ReportData) -> ReportData {
    let f = &mut data.fits;
    f.source = Some("hand-made fits (test)".into());
    f.supervised.law = Some(LawView {
        law: "chinchilla".into(),
        params: params(&[
            ("E", 3.7),
            ("A", 20.0),
            ("alpha", 0.5),
            ("B", 2.5e5),
            ("beta", 1.0),
        ]),
        ci: [("E".to_string(), (3.0, 3.4))].into_iter().collect(),
        extrapolation_error: Some(0.012),
        ..LawView::default()
    });
    for g in &mut f.capacity_gap {
        let base = g
            .points
            .iter()
            .map(|p| p.student_loss)
            .fold(f64::INFINITY, f64::min);
        let t0 = g.student_n * 5.0;
        g.fitted = Some(
            (0..40)
                .map(|i| {
                    let t = 5e4 * (1e6f64 / 5e4).powf(i as f64 / 39.0);
                    (t, base + 0.02 * (t / t0).ln().powi(2))
                })
                .collect(),
        );
        g.t_star = Some(Estimate {
            value: t0,
            lo: t0 * 0.7,
            hi: t0 * 1.5,
        });
    }
    let linear = TrendView {
        form: TrendForm::Linear { a: 5.0, b: 0.0 },
        ci: [("a".to_string(), (4.0, 6.0))].into_iter().collect(),
        r2: Some(0.99),
        band: (0..20)
            .map(|i| {
                let s = 2e4 * 5f64.powf(i as f64 / 19.0);
                (s, 4.0 * s, 6.0 * s)
            })
            .collect(),
    };
    let power = TrendView {
        form: TrendForm::Power { c: 9.0, k: 0.95 },
        ci: BTreeMap::new(),
        r2: Some(0.98),
        band: Vec::new(),
    };
    f.optimal_teacher = OptimalTeacherView {
        points: f
            .capacity_gap
            .iter()
            .filter_map(|g| {
                let t = g.t_star?;
                Some(OptimalPoint {
                    student_n: g.student_n,
                    label: g.student.clone(),
                    t_star: t.value,
                    ci: Some((t.lo, t.hi)),
                    fitted: true,
                    at_edge: false,
                    edge: None,
                })
            })
            .collect(),
        linear: Some(linear),
        power: Some(power),
        better: Some("linear".into()),
        ..OptimalTeacherView::default()
    };
    f.recommendation = Some(RecommendationView {
        student_n: 1.9e9,
        tokens: Some(1e11),
        teacher_n: Estimate {
            value: 9.5e9,
            lo: 7e9,
            hi: 1.2e10,
        },
        predicted_loss: Some(2.1),
        predicted_gain: Some(0.05),
        teacher_cost_flops: Some(5.7e21),
        extrapolation: true,
        note: "from the linear T*(S) fit".into(),
    });
    data
}

#[test]
fn fit_based_figures_draw_from_hand_made_fits() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let db = pdsweep::store::SweepDb::open(&results.join("quickstart/sweep.db")).expect("db");
    let data = with_fits(pdsweep::report::load::gather(&db, None).expect("gather"));
    assert!(data.fits.any_fit());
    assert_eq!(data.fits.capacity_gap.len(), 4, "2 students × 2 modes");
    let report = pdsweep::report::build(&data).expect("draw");
    // every figure draws but the similarity one, which needs `pdsweep fit`'s measurements
    // (these fits are hand-made)
    assert!(
        report
            .skipped
            .iter()
            .all(|s| s.name == "similarity" && s.reason.contains("pdsweep fit")),
        "{:?}",
        report.skipped
    );
    assert!(
        !report.missing.iter().any(|m| m.contains("no fits")),
        "{:?}",
        report.missing
    );
    let dir = tmp.path().join("fitted");
    report.write(&dir).expect("write");
    for name in ["supervised_fits", "capacity_gap", "optimal_teacher"] {
        check_figure(&dir, name);
    }
    let html = &report.html;
    for expected in [
        "Supervised law (chinchilla)",
        "T* = 5.00·S + 0.000",
        "an extrapolation",
        "hand-made fits",
    ] {
        assert!(html.contains(expected), "index.html lacks `{expected}`");
    }
    keep(&dir);
}

#[test]
fn capacity_gap_points_and_baselines_come_from_the_database() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let db = pdsweep::store::SweepDb::open(&results.join("quickstart/sweep.db")).expect("db");
    let data = pdsweep::report::load::gather(&db, None).expect("gather");
    let gap: &CapacityGapView = data
        .fits
        .capacity_gap
        .iter()
        .find(|g| g.student == "30K" && g.config == "offline")
        .expect("the 30K offline series");
    let losses: Vec<&GapPoint> = gap.points.iter().collect();
    assert_eq!(losses.len(), 2);
    assert!((losses[0].student_loss - 4.59201552581787).abs() < 1e-9);
    assert!((gap.baseline_loss.unwrap_or(0.0) - 4.643032371521).abs() < 1e-9);
    assert!(gap.fitted.is_none() && gap.t_star.is_none());
    assert_eq!(
        gap.grid_best().map(|b| b.2),
        Some(true),
        "two teachers: the edge"
    );
}

#[test]
fn export_writes_runs_metrics_and_fits_in_every_format() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let results_arg = results.display().to_string();
    for format in ["csv", "parquet", "json"] {
        let out = pdsweep(
            tmp.path(),
            &[
                "export",
                &sweep_file(),
                "--results",
                &results_arg,
                "--format",
                format,
            ],
        );
        assert!(out.status.success(), "{format}: {}", stderr(&out));
    }
    let dir = results.join("quickstart/export");
    // CSV: the runs table with the promised columns, students with a gain.
    let mut csv = csv::Reader::from_path(dir.join("runs.csv")).expect("runs.csv");
    let header: Vec<String> = csv
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    for col in [
        "id",
        "kind",
        "name",
        "state",
        "params_total",
        "params_non_embedding",
        "tokens",
        "teacher",
        "val_loss",
        "val_bpb",
        "tokens_per_s",
        "wall_s",
        "agreement",
        "kl_teacher_student",
        "gain",
    ] {
        assert!(
            header.iter().any(|h| h == col),
            "runs.csv lacks `{col}`: {header:?}"
        );
    }
    let rows: Vec<csv::StringRecord> = csv.records().collect::<Result<_, _>>().expect("rows");
    assert_eq!(rows.len(), 14);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or(usize::MAX);
    let student = rows
        .iter()
        .find(|r| &r[col("name")] == "student-30K-from-400K-offline")
        .expect("a student row");
    assert_eq!(&student[col("teacher")], "teacher-400K");
    let gain: f64 = student[col("gain")].parse().expect("a gain");
    assert!((gain - 0.0781166877746582).abs() < 1e-9, "{gain}");
    let metrics = csv::Reader::from_path(dir.join("metrics.csv"))
        .expect("metrics.csv")
        .records()
        .count();
    assert_eq!(metrics, 120);
    assert!(dir.join("fits.csv").is_file(), "an empty fits table");
    // Parquet reads back with the same rows.
    use polars::prelude::{ParquetReader, SerReader};
    let file = std::fs::File::open(dir.join("runs.parquet")).expect("runs.parquet");
    let df = ParquetReader::new(file).finish().expect("read parquet");
    assert_eq!(df.height(), 14);
    assert!(df.column("gain").is_ok());
    let file = std::fs::File::open(dir.join("metrics.parquet")).expect("metrics.parquet");
    assert_eq!(
        ParquetReader::new(file).finish().expect("read").height(),
        120
    );
    // JSON: {"runs": [...], "fits": [...]}.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("export.json")).expect("export.json"))
            .expect("valid JSON");
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(14));
    assert_eq!(json["fits"].as_array().map(Vec::len), Some(0));
    let teacher = json["runs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["name"] == "teacher-100K"))
        .expect("teacher row");
    assert_eq!(teacher["params_non_embedding"], 106816);
    assert!(teacher["gain"].is_null());
}

#[test]
fn export_includes_a_fits_table_once_one_exists() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let db_path = results.join("quickstart/sweep.db");
    drop(pdsweep::store::SweepDb::open(&db_path).expect("migrated: the fits table exists"));
    let conn = rusqlite::Connection::open(&db_path).expect("db");
    let params = serde_json::json!({"E": 1.5});
    insert_fit(&conn, "chinchilla", "supervised", "", params.clone());
    insert_fit(&conn, "busbridge", "supervised", "", params);
    drop(conn);
    let out_dir = tmp.path().join("x");
    let out = pdsweep(
        tmp.path(),
        &[
            "export",
            "--results",
            &results.display().to_string(),
            "--format",
            "json",
            "--out",
            &out_dir.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("export.json")).expect("json"))
            .expect("valid JSON");
    let fits = json["fits"].as_array().expect("fits array");
    assert_eq!(fits.len(), 2);
    assert_eq!(fits[0]["law"], "chinchilla");
    assert_eq!(fits[1]["law"], "busbridge");
    assert_eq!(fits[0]["scope"], "supervised");
}

/// Inserts a row into the `fits` table (as `pdsweep fit` writes it).
fn insert_fit(
    conn: &rusqlite::Connection,
    law: &str,
    scope: &str,
    key: &str,
    result: serde_json::Value,
) {
    conn.execute(
        "INSERT INTO fits (law, scope, key, params_json, ci_json, n_points, points_json, bootstrap, seed, result_json)
         VALUES (?1, ?2, ?3, '{}', '{}', 2, '[]', 0, 0, ?4)",
        rusqlite::params![law, scope, key, result.to_string()],
    )
    .expect("insert a fit");
}

#[test]
fn stored_fits_fill_the_views_and_stale_ones_are_named() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let db_path = results.join("quickstart/sweep.db");
    drop(pdsweep::store::SweepDb::open(&db_path).expect("migrated: the fits table exists"));
    let conn = rusqlite::Connection::open(&db_path).expect("db");
    let config = "loss=kl alpha=0.9 tau=1.0 top_p=0.95 top_k=32 mode=offline";
    // A capacity-gap fit of the 30K offline students as an older pdsweep wrote it: an interior
    // optimum from two teachers, which the report must not show as T* (issue 16, item 8).
    let points = serde_json::json!([
        {"teacher_params": 106816.0, "teacher_loss": 4.120517421722412, "student_loss": 4.592015525817871},
        {"teacher_params": 443232.0, "teacher_loss": 4.000206634521485, "student_loss": 4.564915683746338}
    ]);
    let samples: Vec<[f64; 2]> = (0..50)
        .map(|i| {
            let t = 106816.0 * (443232.0f64 / 106816.0).powf(i as f64 / 49.0);
            [t, 4.56 + 0.01 * (t / 250000.0f64).ln().powi(2)]
        })
        .collect();
    let gap = serde_json::json!({
        "student_params": 27792.0, "student_tokens": 306432.0, "config": config,
        "baseline_loss": 4.643032371520996, "points": points,
        "by_teacher_params": {"variable": "teacher_params", "fit": {"coef": [1.0, 0.1, 0.01], "rmse": 0.001},
            "samples": samples,
            "optimum": {"kind": "interior", "at": 250000.0, "student_loss": 4.56, "ci": [180000.0, 330000.0], "interior_fraction": 0.9}},
        "by_teacher_loss": {"variable": "teacher_loss", "fit": null, "samples": [], "optimum": {"kind": "too_few_points"}},
        "from_law": null
    });
    insert_fit(
        &conn,
        "quadratic",
        "capacity_gap",
        &format!("S=27792 D=306432 {config}"),
        gap,
    );
    // A fit of runs that are not the finished ones (stale).
    let stale = serde_json::json!({
        "student_params": 55536.0, "student_tokens": 306432.0, "config": config,
        "points": [{"teacher_params": 1.0, "teacher_loss": 5.0, "student_loss": 5.0}],
        "by_teacher_params": {"variable": "teacher_params", "samples": [], "optimum": {"kind": "too_few_points"}}
    });
    insert_fit(
        &conn,
        "quadratic",
        "capacity_gap",
        &format!("S=55536 D=306432 {config}"),
        stale,
    );
    insert_fit(
        &conn,
        "chinchilla",
        "supervised",
        "",
        serde_json::json!({"law": "chinchilla", "params": {"E": 3.7, "A": 20.0, "B": 2.5e5, "alpha": 0.5, "beta": 1.0},
            "ci": {"E": [3.5, 3.9], "alpha": [0.4, 0.6]}, "extrapolation": {"mean_abs_rel_error": 0.02}}),
    );
    insert_fit(
        &conn,
        "tstar",
        "tstar",
        &format!("D=306432 {config}"),
        serde_json::json!({"student_tokens": 306432.0, "config": config,
            "points": [[27792.0, 250000.0], [55536.0, 480000.0]],
            "linear": {"form": "linear", "params": [8.3, 20000.0], "ci": [[7.0, 9.5], [1000.0, 40000.0]], "rmse_log": 0.01},
            "power": {"form": "power", "params": [30.0, 0.92], "ci": null, "rmse_log": 0.02},
            "better": "linear"}),
    );
    drop(conn);
    let db = pdsweep::store::SweepDb::open(&db_path).expect("db");
    let data = pdsweep::report::load::gather(&db, None).expect("gather");
    let f = &data.fits;
    assert!(f.source.is_some() && f.any_fit());
    assert_eq!(
        f.supervised.law.as_ref().map(|l| l.law.as_str()),
        Some("chinchilla")
    );
    let fitted: Vec<&CapacityGapView> = f
        .capacity_gap
        .iter()
        .filter(|g| g.fitted.is_some())
        .collect();
    assert_eq!(fitted.len(), 1, "only the matching group is fitted");
    assert_eq!(
        (fitted[0].student.as_str(), fitted[0].config.as_str()),
        ("30K", "offline")
    );
    assert_eq!(fitted[0].t_star, None, "two teachers locate no optimum");
    assert!(
        matches!(&fitted[0].verdict, Some(GapVerdict::Unsupported { reason, .. }) if reason.contains("fewer than 3 teachers")),
        "{:?}",
        fitted[0].verdict
    );
    assert!(
        f.notes
            .iter()
            .any(|n| n.contains("1 stored capacity-gap fit(s) are of other runs")),
        "{:?}",
        f.notes
    );
    assert!(
        !f.optimal_teacher.points.iter().any(|p| p.fitted),
        "no fitted T* from two teachers"
    );
    assert_eq!(f.optimal_teacher.better.as_deref(), Some("linear"));
    assert!(matches!(
        f.optimal_teacher.linear.as_ref().map(|t| t.form),
        Some(TrendForm::Linear { a, .. }) if a == 8.3
    ));
    let report = pdsweep::report::build(&data).expect("draw");
    assert!(
        !report.missing.iter().any(|m| m.contains("no fits")),
        "{:?}",
        report.missing
    );
    let dir = tmp.path().join("stored");
    report.write(&dir).expect("write");
    for name in ["supervised_fits", "capacity_gap", "optimal_teacher"] {
        check_figure(&dir, name);
    }
    assert!(report.html.contains("pdsweep recommend"));
    keep(&dir);

    // Once a `fit` call ends (its summary row), a later call's rows are the current answer: a
    // group the later call no longer fits (say a budget dropped from the sweep file) is
    // history, neither shown nor called stale, and `recommend` does not read it either.
    let conn = rusqlite::Connection::open(&db_path).expect("db");
    let gap_key = format!("S=27792 D=306432 {config}");
    let (_, gap): (String, String) = conn
        .query_row(
            "SELECT key, result_json FROM fits WHERE key = ?1",
            [&gap_key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the first call's gap");
    let summary = serde_json::json!({"runs": 14, "skipped": []});
    insert_fit(&conn, "summary", "summary", "", summary.clone());
    insert_fit(
        &conn,
        "quadratic",
        "capacity_gap",
        &gap_key,
        serde_json::from_str(&gap).expect("json"),
    );
    insert_fit(&conn, "summary", "summary", "", summary);
    drop(conn);
    let db = pdsweep::store::SweepDb::open(&db_path).expect("db");
    let data = pdsweep::report::load::gather(&db, None).expect("gather");
    let f = &data.fits;
    assert!(
        !f.notes.iter().any(|n| n.contains("other runs")),
        "{:?}",
        f.notes
    );
    assert_eq!(
        f.capacity_gap.iter().filter(|g| g.fitted.is_some()).count(),
        1
    );
    assert!(f.supervised.law.is_none(), "the second call fitted no law");
    let keys: Vec<String> = pdsweep::fit::stored_fits(&db)
        .expect("stored")
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(keys, vec![gap_key, String::new()], "{keys:?}");
}

/// The texts of an SVG file, in drawing order.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).expect("svg");
    let mut reader = quick_xml::Reader::from_str(&svg);
    let mut out = Vec::new();
    let mut in_text = false;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(e)) => in_text = e.name().as_ref() == b"text",
            Ok(quick_xml::events::Event::End(_)) => in_text = false,
            Ok(quick_xml::events::Event::Text(t)) if in_text => out.push(
                t.xml10_content()
                    .map(|c| c.trim().to_string())
                    .unwrap_or_default(),
            ),
            Ok(_) => {}
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    out
}

/// The gap16 fixture (4 teachers × 2 students × 2 seeds), fitted and reported into `out/`.
fn gap16_report(tmp: &Path) -> (PathBuf, String) {
    let results = crate::common::load_fixture(tmp, "gap16");
    let db = results.join("gap16/sweep.db").display().to_string();
    let fit = pdsweep(tmp, &["fit", "--db", &db, "--bootstrap", "50"]);
    assert!(fit.status.success(), "{}", stderr(&fit));
    let out_dir = tmp.join("out");
    let out = pdsweep(
        tmp,
        &[
            "report",
            "gap16",
            "--results",
            &results.display().to_string(),
            "--out",
            &out_dir.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(out_dir.join("index.html")).expect("page");
    keep(&out_dir);
    (out_dir, html)
}

#[test]
fn training_curves_legend_was_in_string_order_and_seeds_were_not_told_apart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (dir, _) = gap16_report(tmp.path());
    let texts = svg_texts(&dir.join("training_curves.svg"));
    // The first student panel's legend: teachers by size (5K, 20K, 60K, 200K), not by string
    // (200K, 20K, 5K, 60K), each line the mean of its 2 seeds.
    let pos = |label: &str| {
        texts
            .iter()
            .position(|t| t == label)
            .unwrap_or_else(|| panic!("no `{label}` in {texts:?}"))
    };
    let order: Vec<usize> = ["5K", "20K", "60K", "200K"]
        .iter()
        .map(|t| pos(&format!("teacher {t} (2 seeds)")))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert!(
        texts.iter().any(|t| t.starts_with("Students of 10K"))
            && texts.iter().any(|t| t.starts_with("Students of 30K")),
        "one panel per student size: {texts:?}"
    );
    assert!(!texts.iter().any(|t| t.contains("more")), "{texts:?}");
    let gap = svg_texts(&dir.join("capacity_gap.svg"));
    assert!(
        gap.iter().any(|t| t == "single seeds") && gap.iter().any(|t| t == "distilled (seed mean)"),
        "{gap:?}"
    );
    // The grey band (the baselines' range over seeds) is named in the legend.
    assert!(gap.iter().any(|t| t == "baseline seed range"), "{gap:?}");
}

#[test]
fn isoflop_repeated_legend_entries_and_overlapped_its_compute_labels() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (dir, _) = gap16_report(tmp.path());
    let texts = svg_texts(&dir.join("isoflop.svg"));
    let models: Vec<&String> = texts
        .iter()
        .filter(|t| t.contains(" teacher") || t.contains(" baseline"))
        .collect();
    assert_eq!(
        models.len(),
        6,
        "4 teachers and 2 baseline sizes: {models:?}"
    );
    let mut unique = models.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        models.len(),
        "no repeated entries: {models:?}"
    );
    assert!(models.iter().any(|m| m.ends_with("baseline, 2 seeds")));
    // Compute budgets are named once each, in the legend (ending "FLOPs"), never beside points.
    let budgets: Vec<&String> = texts.iter().filter(|t| t.starts_with("C = ")).collect();
    assert!(!budgets.is_empty());
    assert!(budgets.iter().all(|b| b.ends_with(" FLOPs")), "{budgets:?}");
}

#[test]
fn more_series_than_a_legend_carries_are_split_across_panels() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = crate::common::load_fixture(tmp.path(), "gap16");
    let db = pdsweep::store::SweepDb::open(&results.join("gap16/sweep.db")).expect("db");
    let mut data = pdsweep::report::load::gather(&db, None).expect("gather");
    // 24 more students of the 30K size, each from its own teacher size (a wide teacher grid).
    let template = data
        .curves
        .iter()
        .find(|c| c.kind == pdsweep::plan::RunKind::Student && c.label == "30K")
        .expect("a 30K student")
        .clone();
    for i in 0..24 {
        let mut c = template.clone();
        let t = 1e3 * 1.3f64.powi(i);
        c.run_id = pdsweep::plan::RunId::from_stored(format!("extra{i}"));
        c.teacher = Some((format!("T{i}"), t));
        c.points = c
            .points
            .iter()
            .map(|&(x, y)| (x, y + 0.01 * i as f64))
            .collect();
        data.curves.push(c);
    }
    let report = pdsweep::report::build(&data).expect("draw");
    let out = tmp.path().join("many");
    report.write(&out).expect("write");
    let texts = svg_texts(&out.join("training_curves.svg"));
    let panels: Vec<&String> = texts
        .iter()
        .filter(|t| t.starts_with("Students of 30K"))
        .collect();
    assert_eq!(
        panels.len(),
        3,
        "28 lines in panels of at most 10: {panels:?}"
    );
    assert!(panels[0].ends_with("(1/3)"), "{panels:?}");
    assert!(
        !texts.iter().any(|t| t.contains("more")),
        "nothing summarised away"
    );
    check_figure(&out, "training_curves");
    keep(&out);
}

#[test]
fn html_headline_had_no_caveats_and_config_column_was_empty() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (_, html) = gap16_report(tmp.path());
    let answer = &html[html.find("id=\"answer\"").expect("answer")
        ..html.find("id=\"figures\"").expect("figures")];
    for expected in [
        "Before you rely on this",
        "UNDER-DETERMINED",
        "noise floor",
        "not fitted: distillation law",
        "edge of grid: extend the grid toward larger teachers",
        "4 teachers × 2 seeds",
        "every teacher from 55.5K to 222K is within the noise of the best",
    ] {
        assert!(
            answer.contains(expected),
            "the headline lacks `{expected}`: {answer}"
        );
    }
    // One distillation config: named once, no empty config column.
    assert!(
        html.contains("Every student: offline, kl loss, α=0.9, τ=1.0, top-0.95-16."),
        "settings named once"
    );
    let table = &html[html.find("Optimal teacher per student").expect("T* table")..];
    let table = &table[..table.find("</table>").expect("table end")];
    assert!(
        !table.contains("<td class=\"l\"></td>"),
        "an empty cell: {table}"
    );
    assert!(!table.contains(">config<"), "no config column: {table}");
}

#[test]
fn html_had_no_distillation_law_parameters() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = crate::common::load_fixture(tmp.path(), "gap16");
    let db_path = results.join("gap16/sweep.db");
    drop(pdsweep::store::SweepDb::open(&db_path).expect("migrated"));
    let conn = rusqlite::Connection::open(&db_path).expect("db");
    let config = "loss=kl alpha=0.9 tau=1.0 top_p=0.95 top_k=16 mode=offline";
    insert_fit(
        &conn,
        "distill",
        "distill",
        config,
        serde_json::json!({"law": "distill",
            "params": {"A": 2243.0, "B": 24181.0, "alpha": 0.321, "beta": 0.637, "gamma": 0.764,
                       "c0": 2.549, "c1": 522.6, "f1": 0.09, "d1": 1.315},
            "ci": {"A": [2000.0, 2500.0], "c1": [1e-5, 1e83]},
            "warnings": ["not identified by these data (95% interval spans more than a factor 1000): c1"],
            "unidentified": ["c1"],
            "support": {"runs": 16, "distinct": 8, "sizes": 2, "budgets": 1, "teacher_losses": 4, "params": 9}}),
    );
    drop(conn);
    let db = pdsweep::store::SweepDb::open(&db_path).expect("db");
    let data = pdsweep::report::load::gather(&db, None).expect("gather");
    let html = pdsweep::report::build(&data).expect("draw").html;
    for expected in [
        "Distillation law (Busbridge et al. 2025, Eq. 8)",
        "<td class=\"l\">c1</td><td>523</td><td class=\"ni\">not identified</td>",
        "<td class=\"l\">d1</td>",
        "8 distinct points (16 runs",
        "under-determined",
    ] {
        assert!(html.contains(expected), "the page lacks `{expected}`");
    }
    assert!(
        !html.contains("1.00e83"),
        "the meaningless interval is not printed"
    );
}

#[test]
fn html_had_no_corpus_section() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = crate::common::load_fixture(tmp.path(), "gap16");
    let db_path = results.join("gap16/sweep.db");
    // Facts as the corpus checks record them (new fields), on one teacher's result.
    let conn = rusqlite::Connection::open(&db_path).expect("db");
    conn.execute(
        "UPDATE results SET corpus_json = json_set(corpus_json,
            '$.files', 42, '$.documents', 42, '$.train_bytes', 5017282,
            '$.duplicate_groups', json('[[\"texts/hamlet.txt\", \"texts/hamlet copy.txt\"]]'),
            '$.val_split', 'the last 40K tokens of the last file, which appears nowhere else')
         WHERE run_id = (SELECT id FROM runs WHERE name = 'teacher-200K-s1')",
        [],
    )
    .expect("update");
    drop(conn);
    let db = pdsweep::store::SweepDb::open(&db_path).expect("db");
    let data = pdsweep::report::load::gather(&db, None).expect("gather");
    assert_eq!(data.corpus.len(), 1, "one corpus, its fullest record");
    let html = pdsweep::report::build(&data).expect("draw").html;
    let corpus =
        &html[html.find("id=\"corpus\"").expect("corpus")..html.find("id=\"runs\"").expect("runs")];
    for expected in [
        "training tokens",
        "held-out tokens",
        "<dt>files</dt><dd>42</dd>",
        "1 group(s) of byte-identical files",
        "texts/hamlet copy.txt",
        "the last 40K tokens of the last file",
    ] {
        assert!(
            corpus.contains(expected),
            "the corpus section lacks `{expected}`: {corpus}"
        );
    }
    // Epochs over the training data, per run (the teachers read 403K of 5.02M tokens).
    assert!(html.contains("<th>epochs</th>"));
    assert!(html.contains("<td>0.08</td>"), "teacher epochs");
}

#[test]
fn svgs_embedded_the_whole_font_and_figures_were_not_the_documented_size() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (dir, html) = gap16_report(tmp.path());
    let whole = std::fs::metadata(root().join("assets/fonts/DejaVuSans.ttf"))
        .expect("font")
        .len();
    for name in [
        "training_curves",
        "supervised_fits",
        "capacity_gap",
        "optimal_teacher",
        "distill_gain",
        "agreement",
        "isoflop",
    ] {
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).expect("svg");
        assert!(
            (svg.len() as u64) < whole / 4,
            "{name}.svg is {} bytes; the whole font alone is {whole}",
            svg.len()
        );
        let (w, h, _, _) = decode_png(&dir.join(format!("{name}.png")));
        assert_eq!(w, 2100, "{name}: every figure is 7 in wide at 300 dpi");
        assert!(h >= 1080, "{name}: {h}");
        check_figure(&dir, name);
    }
    assert!(
        (html.len() as u64) < whole,
        "the page embeds a subset: {}",
        html.len()
    );
    // Browsers accept the subset fonts (Chromium's font sanitiser logs any it rejects to the
    // console, which fails the check): the page's and a standalone figure's.
    let _ = chromium_screenshot(&dir.join("index.html"), tmp.path());
    let _ = chromium_screenshot(&dir.join("capacity_gap.svg"), tmp.path());
    let guide = std::fs::read_to_string(root().join("docs/src/guide/reports.md")).expect("guide");
    assert!(
        guide.contains("7 in wide (2100 px)"),
        "the report chapter states the real size"
    );
}

#[test]
fn empty_fits_parquet_had_every_column_typed_int64() {
    use polars::prelude::{DataType, ParquetReader, SerReader};
    let tmp = tempfile::tempdir().expect("tmp");
    let results = quickstart(tmp.path());
    let schema_of = |dir: &Path| {
        let file = std::fs::File::open(dir.join("fits.parquet")).expect("fits.parquet");
        let df = ParquetReader::new(file).finish().expect("read parquet");
        df.columns()
            .iter()
            .map(|c| (c.name().to_string(), c.dtype().clone()))
            .collect::<Vec<_>>()
    };
    let export = |out: &Path| {
        let o = pdsweep(
            tmp.path(),
            &[
                "export",
                "quickstart",
                "--results",
                &results.display().to_string(),
                "--format",
                "parquet",
                "--out",
                &out.display().to_string(),
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let empty_dir = tmp.path().join("empty");
    export(&empty_dir);
    let empty = schema_of(&empty_dir);
    let typed = |name: &str| {
        empty
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no column `{name}`"))
    };
    assert_eq!(typed("law"), DataType::String);
    assert_eq!(typed("objective"), DataType::Float64);
    assert_eq!(typed("n_points"), DataType::Int64);
    assert_eq!(typed("result_json"), DataType::String);
    // The same schema once the table has a row.
    let conn = rusqlite::Connection::open(results.join("quickstart/sweep.db")).expect("db");
    insert_fit(
        &conn,
        "chinchilla",
        "supervised",
        "",
        serde_json::json!({"E": 1.5}),
    );
    drop(conn);
    let full_dir = tmp.path().join("full");
    export(&full_dir);
    assert_eq!(schema_of(&full_dir), empty);
}

/// A baseline of five optimiser steps ends at the unigram plateau; its teacher of 200 steps
/// does not: `report` names the baseline (and only it) on the terminal and in the page.
#[test]
fn report_flags_runs_that_ended_near_the_unigram_entropy() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = r#"
name = "plateau"
[corpus]
val_tokens = "8K"
[model]
context = 64
[teachers]
sizes = ["20K"]
tokens = ["400K"]
[students]
sizes = ["10K"]
tokens = ["10K"]
baseline = true
[train]
batch_tokens = "2K"
lr = 3e-3
evals = 1
"#;
    std::fs::write(dir.path().join("s.toml"), sweep).unwrap();
    let out = pdsweep(dir.path(), &["run", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = pdsweep(dir.path(), &["report", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("ended near the unigram entropy"), "{err}");
    assert!(err.contains("`baseline-10K`"), "{err}");
    assert!(!err.contains("`teacher-20K`"), "{err}");
    let page = std::fs::read_to_string(dir.path().join("reports/plateau/index.html")).unwrap();
    assert!(page.contains("ended near the unigram entropy"));
    assert!(page.contains("<code>baseline-10K</code>"));
}
