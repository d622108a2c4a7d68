//! Benchmark: plan a grid of about 100,000 runs (goal: under 1 s) and record it in a real
//! SQLite file. Run with `cargo bench --bench plan_grid`; prints medians of several repeats.

use std::path::Path;
use std::time::{Duration, Instant};

use pdsweep::plan::{Plan, PlanFormat, PlanOptions, render};
use pdsweep::spec::Sweep;
use pdsweep::store::SweepDb;

const SWEEP: &str = r#"
name = "grid-100k"
[teachers]
sizes = ["1M", "2M", "3M", "4M", "6M", "8M", "12M", "16M", "24M", "32M"]
tokens = ["20x"]
[students]
sizes = ["100K", "200K", "300K", "400K", "600K", "800K", "1.2M", "1.6M", "2.4M", "3.2M"]
tokens = ["10M", "20M", "40M", "80M"]
[distill]
loss = ["kl", "ce_soft"]
alpha = [0.5, 0.7, 0.9, 1.0, { schedule = "wsd", max = 0.9 }]
temperature = [0.5, 1.0, 1.5, 2.0, 4.0]
top_k = [8, 16, 32, 64, 128]
[limits]
disk = "900T"
"#;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn time<T>(repeats: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..repeats {
        let start = Instant::now();
        last = Some(f());
        times.push(start.elapsed());
    }
    (median(times), last.expect("at least one repeat"))
}

fn main() {
    let path = Path::new("grid-100k.toml");
    let (parse, sweep) = time(7, || {
        Sweep::parse(path, SWEEP.to_string()).expect("valid sweep")
    });
    let (build, plan) = time(7, || {
        Plan::build(&sweep, &PlanOptions::default()).expect("plans")
    });
    let (json, text) = time(3, || render(&plan, PlanFormat::Json));
    let dir = tempfile::tempdir().expect("temp dir");
    let (write, _) = time(3, || {
        let db_path = dir.path().join(format!("{}.db", rand_suffix()));
        let mut db = SweepDb::open(&db_path).expect("open");
        db.write_plan(&plan, path, SWEEP).expect("write")
    });
    let (replan, _) = time(3, || {
        let mut db = SweepDb::open(&dir.path().join("same.db")).expect("open");
        db.write_plan(&plan, path, SWEEP).expect("write")
    });
    println!(
        "plan_grid: {} runs ({:?})",
        plan.runs.len(),
        plan.totals.by_kind
    );
    println!(
        "  parse sweep file        {:>9.3} ms",
        parse.as_secs_f64() * 1e3
    );
    println!(
        "  expand + ids + costs    {:>9.3} ms   (goal: < 1000 ms)",
        build.as_secs_f64() * 1e3
    );
    println!(
        "  render JSON             {:>9.3} ms   ({} MB)",
        json.as_secs_f64() * 1e3,
        text.len() / 1_000_000
    );
    println!(
        "  write new sweep.db      {:>9.3} ms",
        write.as_secs_f64() * 1e3
    );
    println!(
        "  re-plan into same db    {:>9.3} ms",
        replan.as_secs_f64() * 1e3
    );
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}
