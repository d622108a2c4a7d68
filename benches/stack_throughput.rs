//! Benchmark: training throughput of a stack of K same-shape runs against the same K runs
//! trained one after the other, through the real training loops (`train::train` and
//! `train::stack::train_stack`: data, AdamW, clipping, a held-out evaluation and the final
//! checkpoint included), interleaved rep by rep so machine noise hits both sides alike.
//! Prints, per shape and K, the median tokens/s of each side and their ratio (stacked / one
//! at a time); `run --stack auto` follows what this measures (see `run::stacks`).
//!
//! `cargo bench --bench stack_throughput [-- --shapes 16x5,32x2,48x2 --members 4,8,16
//! --steps 10 --reps 3 --batch-tokens 8192 --context 128 --backend flex|wgpu|cuda]`

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use burn::tensor::Device;
use pdsweep::data::{Prepared, prepare};
use pdsweep::model::ModelShape;
use pdsweep::plan::{Plan, PlanOptions, RunConfig, RunKind};
use pdsweep::spec::{Backend, Sweep};
use pdsweep::train::stack::{StackMember, train_stack};
use pdsweep::train::{NextToken, Objective, TrainJob, device_for, train};

struct Args {
    shapes: Vec<(u64, u64)>,
    members: Vec<usize>,
    steps: u64,
    reps: usize,
    batch_tokens: u64,
    context: u64,
    backend: String,
}

fn list<T: std::str::FromStr>(value: &str) -> Vec<T> {
    value
        .split(',')
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("cannot read `{v}`"))
        })
        .collect()
}

fn parse_args() -> Args {
    let mut a = Args {
        shapes: vec![(16, 5), (32, 2), (48, 2)],
        members: vec![4, 8, 16],
        steps: 10,
        reps: 3,
        batch_tokens: 8192,
        context: 128,
        backend: "flex".into(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--shapes" => {
                a.shapes = value
                    .split(',')
                    .map(|s| {
                        let (d, l) = s.split_once('x').expect("shapes as DxL, e.g. 32x2");
                        (d.parse().expect("d_model"), l.parse().expect("layers"))
                    })
                    .collect()
            }
            "--members" => a.members = list(&value),
            "--steps" => a.steps = list(&value)[0],
            "--reps" => a.reps = list(&value)[0],
            "--batch-tokens" => a.batch_tokens = list(&value)[0],
            "--context" => a.context = list(&value)[0],
            "--backend" => a.backend = value.clone(),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    a
}

/// The backend named on the command line (`flex` is the CPU) and its first device, as
/// `pdsweep run` chooses it.
fn device(name: &str) -> (Backend, Device) {
    let backend = match name {
        "flex" | "cpu" => Backend::Cpu,
        "wgpu" => Backend::Wgpu,
        "cuda" => Backend::Cuda,
        other => panic!("unknown backend `{other}` (flex, wgpu or cuda)"),
    };
    let device = device_for(backend, 0).unwrap_or_else(|e| panic!("{e}"));
    (backend, device)
}

/// A baseline run of the quick-start family's shape rule at width `d` and `layers` layers.
fn config(d: u64, layers: u64, args: &Args) -> RunConfig {
    let text = "name = \"b\"\n[corpus]\nval_tokens = \"8K\"\n[model]\ncontext = 128\n\
                [teachers]\nsizes = [\"20K\"]\ntokens = [\"64K\"]\n\
                [students]\nsizes = [\"10K\"]\ntokens = [\"32K\"]\n";
    let sweep = Sweep::parse(Path::new("b.toml"), text.into()).expect("sweep");
    let plan = Plan::build(&sweep, &PlanOptions::default()).expect("plan");
    let mut c = plan
        .runs
        .iter()
        .find(|r| r.kind() == RunKind::Baseline)
        .expect("a baseline")
        .config
        .clone();
    let heads = (d / 16).max(1);
    c.model.shape = ModelShape {
        d_model: d,
        n_layers: layers,
        n_heads: heads,
        n_kv_heads: heads,
        d_ff: (d * 8 / 3).div_ceil(16) * 16,
        vocab: 256,
        tie_embeddings: true,
    };
    c.data.context = args.context;
    c.data.batch_seqs = args.batch_tokens / args.context;
    c.tokens = args.steps * args.batch_tokens;
    let train = c.train.as_mut().expect("training settings");
    train.steps = args.steps;
    train.evals = 1;
    train.log_every = args.steps;
    train.checkpoint_every = args.steps;
    c
}

fn job<'a>(
    config: &'a RunConfig,
    data: &'a Prepared,
    (backend, device): (Backend, &'a Device),
    checkpoint: &'a Path,
    stop: &'a AtomicBool,
) -> TrainJob<'a> {
    TrainJob {
        run_id: "b",
        model: config.transformer(),
        data_config: &config.data,
        train: config.train.as_ref().expect("training settings"),
        data,
        device,
        backend,
        checkpoint,
        stop,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = parse_args();
    let (backend, device) = device(&args.backend);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let stop = AtomicBool::new(false);
    println!(
        "backend {}, {} steps of {} tokens per run, median of {} interleaved reps",
        args.backend, args.steps, args.batch_tokens, args.reps
    );
    println!(
        "| shape | K | one at a time (tokens/s) | stacked (tokens/s) | stacked / one at a time |"
    );
    println!("|---|---|---|---|---|");
    for &(d, layers) in &args.shapes {
        for &k in &args.members {
            let configs: Vec<RunConfig> = (0..k)
                .map(|m| {
                    let mut c = config(d, layers, &args);
                    c.data.seed = 1 + m as u64;
                    c
                })
                .collect();
            let data: Vec<Prepared> = configs
                .iter()
                .map(|c| prepare(&c.data, dir.path(), dir.path(), c.tokens).expect("data"))
                .collect();
            let tokens = (k as u64 * args.steps * args.batch_tokens) as f64;
            let (mut alone, mut stacked) = (Vec::new(), Vec::new());
            for rep in 0..args.reps {
                let paths = |tag: &str| -> Vec<PathBuf> {
                    (0..k)
                        .map(|m| dir.path().join(format!("{d}x{layers}-{k}-{rep}-{m}.{tag}")))
                        .collect()
                };
                let (solo_paths, stack_paths) = (paths("solo"), paths("stack"));
                let start = Instant::now();
                for (m, path) in solo_paths.iter().enumerate() {
                    train(
                        &job(&configs[m], &data[m], (backend, &device), path, &stop),
                        &mut NextToken,
                        &mut |_| {},
                    )
                    .expect("a solo run");
                }
                alone.push(tokens / start.elapsed().as_secs_f64());
                let mut objectives = vec![NextToken; k];
                let members = objectives
                    .iter_mut()
                    .enumerate()
                    .map(|(m, o)| StackMember {
                        job: job(
                            &configs[m],
                            &data[m],
                            (backend, &device),
                            &stack_paths[m],
                            &stop,
                        ),
                        objective: o as &mut dyn Objective,
                    })
                    .collect();
                let start = Instant::now();
                for outcome in train_stack(members, &mut |_, _| {}) {
                    outcome.expect("a stacked run");
                }
                stacked.push(tokens / start.elapsed().as_secs_f64());
            }
            let (a, s) = (median(alone), median(stacked));
            println!(
                "| d{d} × {layers} | {k} | {:.0} | {:.0} | {:.2}× |",
                a,
                s,
                s / a
            );
        }
    }
}
