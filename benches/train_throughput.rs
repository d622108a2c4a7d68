//! Benchmark: training throughput (tokens/s) of the reference shape on every CPU backend built
//! in — d_model 128, 4 layers, 4 heads, context 128, byte vocabulary, batch 16, AdamW — with
//! the same code path as `pdsweep run`. `benches/compare_cpu.sh` runs it next to the PyTorch
//! reference (`benches/torch_reference.py`) so both are measured in one go.
//!
//! `cargo bench --bench train_throughput [-- --steps N --d-model D --layers L --context T
//! --batch B --vocab V --backend flex|ndarray|cuda|wgpu]`

use std::time::Instant;

use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::model::ModelShape;
use pdsweep::model::TransformerConfig;
use pdsweep::train::cross_entropy;

struct Args {
    steps: usize,
    d_model: u64,
    layers: u64,
    heads: u64,
    context: usize,
    batch: usize,
    vocab: u64,
    backends: Vec<String>,
}

fn parse_args() -> Args {
    let mut a = Args {
        steps: 30,
        d_model: 128,
        layers: 4,
        heads: 4,
        context: 128,
        batch: 16,
        vocab: 256,
        backends: Vec::new(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let value = argv.get(i + 1).cloned().unwrap_or_default();
        let number = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{} needs a number", argv[i]))
        };
        match argv[i].as_str() {
            "--steps" => a.steps = number() as usize,
            "--d-model" => a.d_model = number(),
            "--layers" => a.layers = number(),
            "--heads" => a.heads = number(),
            "--context" => a.context = number() as usize,
            "--batch" => a.batch = number() as usize,
            "--vocab" => a.vocab = number(),
            "--backend" => a.backends.push(value.clone()),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    if a.backends.is_empty() {
        a.backends.push("flex".into());
        if cfg!(feature = "ndarray") {
            a.backends.push("ndarray".into());
        }
    }
    a
}

fn device(name: &str) -> Option<Device> {
    match name {
        "flex" => Some(Device::flex()),
        #[cfg(feature = "ndarray")]
        #[allow(deprecated)]
        "ndarray" => Some(Device::ndarray()),
        #[cfg(feature = "cuda")]
        "cuda" => Some(Device::cuda(0)),
        #[cfg(feature = "wgpu")]
        "wgpu" => Some(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
        _ => None,
    }
}

fn main() {
    pdsweep::alloc::tune_for_training();
    let a = parse_args();
    let shape = ModelShape {
        d_model: a.d_model,
        n_layers: a.layers,
        n_heads: a.heads,
        n_kv_heads: a.heads,
        d_ff: (8 * a.d_model / 3).div_ceil(32) * 32,
        vocab: a.vocab,
        tie_embeddings: true,
    };
    let params = shape.params();
    println!(
        "train_throughput: d_model {} x {} layers ({} params, {} non-embedding), context {}, batch {}, vocab {}, {} steps",
        a.d_model,
        a.layers,
        params.total,
        params.non_embedding,
        a.context,
        a.batch,
        a.vocab,
        a.steps
    );
    for name in &a.backends {
        let Some(base) = device(name) else {
            println!("  {name:<8} not built in (enable its cargo feature)");
            continue;
        };
        let (tps, step_ms) = measure(&base, shape, &a);
        let flops = 6.0 * params.non_embedding as f64 * tps;
        println!(
            "  {name:<8} {tps:>10.0} tokens/s   median step {step_ms:.1} ms   {:.2} GFLOP/s (6·N·D)",
            flops / 1e9
        );
    }
}

/// Trains for `steps` steps after 3 warm-up steps; returns (tokens/s, median step ms).
fn measure(base: &Device, shape: ModelShape, a: &Args) -> (f64, f64) {
    base.seed(0);
    let dev = base.clone().autodiff();
    let mut model = TransformerConfig::new(shape, a.context).init(&dev);
    let mut optim = AdamWConfig::new().with_weight_decay(0.1).init();
    let n = a.batch * a.context;
    let mut state = 12345u64;
    let mut times = Vec::new();
    for step in 0..a.steps + 3 {
        let tokens: Vec<i64> = (0..n + a.batch)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 33) % a.vocab) as i64
            })
            .collect();
        let inputs: Vec<i64> = tokens
            .chunks(a.context + 1)
            .flat_map(|c| c[..a.context].to_vec())
            .take(n)
            .collect();
        let targets: Vec<i64> = tokens
            .chunks(a.context + 1)
            .flat_map(|c| c[1..].to_vec())
            .take(n)
            .collect();
        let start = Instant::now();
        let x = Tensor::<2, Int>::from_data(TensorData::new(inputs, [a.batch, a.context]), &dev);
        let y = Tensor::<2, Int>::from_data(TensorData::new(targets, [a.batch, a.context]), &dev);
        let loss = cross_entropy(model.forward(x), y).mean();
        let _value = loss.clone().into_scalar::<f32>();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
        if step >= 3 {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    let total: f64 = times.iter().sum();
    times.sort_by(f64::total_cmp);
    ((a.steps * n) as f64 / total, times[times.len() / 2] * 1e3)
}
