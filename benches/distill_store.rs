//! Benchmark: the logit store — bytes per token and per kept logit, encode and decode speed, and
//! what the 8-bit values cost: the distillation loss computed from stored (quantised) teacher
//! targets against the exact ones. `cargo bench --bench distill_store`.

use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use pdsweep::distill::store::{Layout, decode_block, encode_block};
use pdsweep::distill::{Kept, distill_loss, refine, sparse_targets, truncate};
use pdsweep::spec::{LossKind, TopK};

/// Teacher-like logits: a few strong candidates over a Zipf-ish background, seeded.
fn logits(positions: usize, vocab: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) as f32
    };
    (0..positions)
        .map(|_| {
            (0..vocab)
                .map(|i| 6.0 * next() - 2.0 * ((i + 1) as f32).ln() * next())
                .collect()
        })
        .collect()
}

fn main() {
    let (vocab, k, positions) = (256usize, 32u64, 8192usize);
    let z = logits(positions, vocab, 7);
    let kept: Vec<Kept> = z.iter().map(|z| truncate(z, 1.0, TopK::Keep(k))).collect();
    let start = Instant::now();
    let mut bytes = Vec::new();
    for _ in 0..5 {
        bytes = encode_block(&kept, &Layout::top_k(vocab as u64, k));
    }
    let encode = start.elapsed().as_secs_f64() / 5.0;
    let start = Instant::now();
    let mut decoded = Vec::new();
    for _ in 0..5 {
        decoded =
            decode_block(&bytes, positions, &Layout::top_k(vocab as u64, k)).expect("decodes");
    }
    let decode = start.elapsed().as_secs_f64() / 5.0;
    println!("distill_store: vocab {vocab}, top-k {k}, {positions} positions");
    println!(
        "  bytes per token          {:.3}",
        bytes.len() as f64 / positions as f64
    );
    println!(
        "  bytes per kept logit     {:.3}   (goal ≤ 2.0; DistillKit ≈ 2.3)",
        bytes.len() as f64 / (positions as f64 * k as f64)
    );
    println!(
        "  encode                   {:.2} M positions/s",
        positions as f64 / encode / 1e6
    );
    println!(
        "  decode                   {:.2} M positions/s",
        positions as f64 / decode / 1e6
    );

    let device = Device::flex();
    let student: Vec<f32> = logits(positions, vocab, 99).into_iter().flatten().collect();
    for (top_p, top_k) in [
        (1.0, TopK::Keep(32)),
        (0.95, TopK::Keep(32)),
        (0.95, TopK::Keep(8)),
    ] {
        for tau in [1.0, 2.0] {
            let narrow = |set: &[Kept]| -> Vec<Kept> {
                set.iter()
                    .map(|k| {
                        let n = refine(k, top_p, top_k);
                        Kept::new(k.ids[..n].to_vec(), k.log_probs[..n].to_vec())
                    })
                    .collect()
            };
            let loss = |targets: &[Kept]| {
                let logits = Tensor::<2>::from_data(
                    TensorData::new(student.clone(), [positions, vocab]),
                    &device,
                );
                distill_loss(LossKind::Kl, logits, &sparse_targets(targets, &device), tau)
                    .into_scalar::<f32>() as f64
            };
            let (exact, stored) = (loss(&narrow(&kept)), loss(&narrow(&decoded)));
            println!(
                "  KL loss, top-p {top_p} top-k {top_k} τ {tau}: exact {exact:.5}, from the store {stored:.5} (relative change {:+.2e})",
                (stored - exact) / exact
            );
        }
    }
}
