//! Benchmark: `pdsweep sample`'s generation (issue 29's goal: 1,000 tokens from a 1M-parameter
//! model in under a second on the 2-core development CPU). A byte-level model of 0.98M
//! parameters (4 layers, d_model 128, 4 heads, SwiGLU 448) generates 1,000 tokens after a
//! one-token prompt: with the key/value cache at context 1024 (no window slides), at context 128
//! (the window slides every 64 tokens), and, for the ratio, recomputing the whole prefix at
//! every step as generation without a cache would. Run with `cargo bench --bench sample`;
//! prints medians of five repeats.

use std::time::{Duration, Instant};

use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::generate::{Sampling, argmax, generate};
use pdsweep::model::{ModelShape, Transformer, TransformerConfig};

const TOKENS: usize = 1000;

fn model(context: usize) -> Transformer {
    let shape = ModelShape {
        n_layers: 4,
        d_model: 128,
        n_heads: 4,
        n_kv_heads: 4,
        d_ff: 448,
        vocab: 256,
        tie_embeddings: true,
    };
    let device = Device::flex();
    device.seed(1);
    TransformerConfig::new(shape, context).init(&device)
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn time(repeats: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm-up
    median(
        (0..repeats)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// Greedy generation recomputing the whole sequence (its last `context` tokens) every step.
fn without_cache(m: &Transformer, tokens: usize, device: &Device) {
    let mut seq: Vec<i64> = vec![10];
    for _ in 0..tokens {
        let start = seq.len().saturating_sub(m.context());
        let window = &seq[start..];
        let input = Tensor::<2, Int>::from_data(
            TensorData::new(window.to_vec(), [1, window.len()]),
            device,
        );
        let logits = m.forward(input);
        let [_, len, vocab] = logits.dims();
        let row = logits
            .narrow(1, len - 1, 1)
            .reshape([vocab])
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        seq.push(i64::from(argmax(&row)));
    }
}

fn main() {
    let device = Device::flex();
    println!("{} parameters", model(128).param_count());
    for context in [1024usize, 128] {
        let m = model(context);
        for (name, how) in [
            ("sampled", Sampling::default()),
            ("greedy", Sampling::greedy()),
        ] {
            let t = time(5, || {
                let g = generate(&m, &[vec![10]], TOKENS, &how, 1, 0, &device).unwrap();
                assert_eq!(g.tokens[0].len(), TOKENS);
            });
            println!(
                "context {context:>4}, {name:>7}, KV cache: {TOKENS} tokens in {:.3} s ({:.0} tokens/s)",
                t.as_secs_f64(),
                TOKENS as f64 / t.as_secs_f64()
            );
        }
        let t = time(1, || without_cache(&m, TOKENS, &device));
        println!(
            "context {context:>4},  greedy, no cache: {TOKENS} tokens in {:.3} s ({:.0} tokens/s)",
            t.as_secs_f64(),
            TOKENS as f64 / t.as_secs_f64()
        );
    }
}
