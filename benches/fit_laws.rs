//! Benchmark: fit the Chinchilla law to 300 synthetic points with the full start grid (4,500
//! L-BFGS runs) and 1,000 bootstrap resamples. Writes the points and the resample counts to
//! `target/fit_bench/` for `benches/fit_reference.py` (SciPy), prints median times and the
//! optimum as one JSON line. Run with `cargo bench --bench fit_laws [-- --repeats N]`, or
//! `benches/compare_fit.sh` for both side by side.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use pdsweep::fit::{
    Chinchilla, DataPoint, FitOptions, LawKind, Optimiser, fit, minimize_grid, resample_counts,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};

const POINTS: usize = 300;
const RESAMPLES: usize = 1000;
const SEED: u64 = 0;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// 300 points from Hoffmann et al.'s law with 2% log-normal noise, N from 70M to 16B and
/// 5 to 200 tokens per parameter.
fn synthetic() -> Vec<DataPoint> {
    let truth = Chinchilla {
        E: 1.69,
        A: 406.4,
        B: 410.7,
        alpha: 0.34,
        beta: 0.28,
    };
    let mut rng = StdRng::seed_from_u64(1);
    let noise = Normal::new(0.0, 0.02).expect("valid normal");
    (0..POINTS)
        .map(|_| {
            let n = rng.random_range(7e7f64.ln()..1.6e10f64.ln()).exp();
            let d = n * rng.random_range(5f64.ln()..200f64.ln()).exp();
            let eps: f64 = noise.sample(&mut rng);
            let loss = truth.predict(n, d) * eps.exp();
            DataPoint::supervised(n.round(), d.round(), loss)
        })
        .collect()
}

fn write_inputs(dir: &Path, points: &[DataPoint]) {
    std::fs::create_dir_all(dir).expect("bench folder");
    let mut csv = String::from("params,tokens,loss\n");
    for p in points {
        writeln!(csv, "{},{},{:.17e}", p.params, p.tokens, p.loss).expect("write");
    }
    std::fs::write(dir.join("points.csv"), csv).expect("points.csv");
    let mut counts = String::new();
    for i in 0..RESAMPLES {
        let row: Vec<String> = resample_counts(points.len(), SEED, i)
            .iter()
            .map(u32::to_string)
            .collect();
        writeln!(counts, "{}", row.join(",")).expect("write");
    }
    std::fs::write(dir.join("resamples.csv"), counts).expect("resamples.csv");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let repeats = args
        .iter()
        .position(|a| a == "--repeats")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(3usize);
    let points = synthetic();
    write_inputs(Path::new("target/fit_bench"), &points);
    let opts = FitOptions {
        bootstrap: RESAMPLES,
        seed: SEED,
        ..FitOptions::default()
    };
    let pts: Vec<_> = points.iter().map(DataPoint::to_point).collect();
    let grid = LawKind::Chinchilla.default_grid();
    let (mut grid_s, mut total_s) = (Vec::new(), Vec::new());
    let mut result = None;
    for _ in 0..repeats {
        let t = Instant::now();
        let g = minimize_grid::<Chinchilla>(&pts, &grid, &Optimiser::default(), 5);
        grid_s.push(t.elapsed().as_secs_f64());
        assert!(g.is_some(), "grid fit");
        let t = Instant::now();
        result = Some(fit(LawKind::Chinchilla, "synthetic", &points, &opts).expect("fits"));
        total_s.push(t.elapsed().as_secs_f64());
    }
    let fit = result.expect("at least one repeat");
    let (g, t) = (median(grid_s), median(total_s));
    let line = serde_json::json!({
        "impl": "pdsweep",
        "threads": rayon::current_num_threads(),
        "grid_s": g,
        "bootstrap_s": t - g,
        "total_s": t,
        "starts": fit.starts,
        "resamples": fit.bootstrap,
        "objective": fit.objective,
        "params": fit.params,
        "ci": { "alpha": fit.ci["alpha"], "beta": fit.ci["beta"] },
    });
    eprintln!(
        "fit_laws: {POINTS} points, {} starts, {RESAMPLES} resamples, {} threads: grid {g:.3} s, total {t:.3} s (median of {repeats})",
        fit.starts,
        rayon::current_num_threads()
    );
    println!("{line}");
}
