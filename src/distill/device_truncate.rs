//! Teacher truncation where the logits are: the same top-p-then-top-k rule as
//! [`super::truncate`], written with tensor operations, so on a GPU the full `[positions, vocab]`
//! logits never cross to the host. An online student uses the result as it is (it stays on the
//! device); a logit pass downloads only the kept `positions × k` ids and log-probabilities.
//!
//! Differences from the host version, both confined to ties at a boundary: the nucleus mass is
//! accumulated in f32 (the host uses f64), so a position whose cumulative mass lands within
//! about 1e-7 of `top_p` may keep one token more or fewer; and equal logits may be ordered
//! differently (the host breaks ties by the lower id).

use burn::tensor::activation::log_softmax;
use burn::tensor::{Int, Tensor};

use super::loss::SparseTargets;
use super::truncate::Kept;
use crate::spec::TopK;

/// Truncates every row of `logits` to its top-p nucleus, then to at most `top_k` tokens; the
/// kept log-probabilities are under the full vocabulary at τ = 1, as [`super::truncate`] gives.
///
/// # Shapes
/// - `logits`: `[positions, vocab]`, f32
/// - returns: [`SparseTargets`] of width min(top_k, vocab); entries past a row's nucleus are
///   masked out (they keep their real ids and values)
pub fn truncate_on_device(logits: Tensor<2>, top_p: f64, top_k: TopK) -> SparseTargets {
    let [_, vocab] = logits.dims();
    let k = (top_k.kept(vocab as u64) as usize).clamp(1, vocab.max(1));
    let log_probs = log_softmax(logits, 1);
    let (values, ids): (Tensor<2>, Tensor<2, Int>) = log_probs.topk_with_indices(k, 1);
    let mask = if top_p < 1.0 {
        // Keep a token while the mass of the tokens before it is still short of top_p: the
        // token that crosses top_p is kept, as on the host.
        let probs = values.clone().exp();
        let before = probs.clone().cumsum(1) - probs;
        before.lower_elem(top_p - 1e-12).float()
    } else {
        values.ones_like()
    };
    SparseTargets {
        ids,
        log_probs: values,
        mask,
    }
}

/// Copies the kept entries of `targets` to the host, one [`Kept`] per row (its masked-out tail
/// dropped): `positions × width` ids and values, not the full logits.
pub fn download(targets: SparseTargets) -> Vec<Kept> {
    let [positions, width] = targets.ids.dims();
    let counts: Vec<f32> = targets
        .mask
        .sum_dim(1)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap_or_default();
    let ids: Vec<i64> = targets
        .ids
        .into_data()
        .try_into_vec_as::<i64>()
        .unwrap_or_default();
    let values: Vec<f32> = targets
        .log_probs
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap_or_default();
    if counts.len() != positions || ids.len() != positions * width || values.len() != ids.len() {
        return Vec::new(); // the caller checks the count and fails the run
    }
    (0..positions)
        .map(|row| {
            let n = (counts[row].round() as usize).clamp(1, width);
            let at = row * width;
            Kept {
                ids: ids[at..at + n].iter().map(|&i| i as u32).collect(),
                log_probs: values[at..at + n].to_vec(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distill::truncate::truncate;
    use burn::tensor::{Device, TensorData};

    fn random_logits(rows: usize, vocab: usize, seed: u64) -> Vec<f32> {
        // A small LCG: peaked and flat rows alike, no exact ties.
        let mut state = seed;
        (0..rows * vocab)
            .map(|i| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                let sharp = if (i / vocab).is_multiple_of(3) { 8.0 } else { 2.0 };
                (u * sharp) as f32 + (i % vocab) as f32 * 1e-4
            })
            .collect()
    }

    /// The device rule keeps the same ids and log-probabilities as the host rule, on the CPU
    /// backend (the wgpu tests repeat this on the software Vulkan driver).
    #[test]
    fn matches_the_host_truncation() {
        let device = Device::flex();
        let (rows, vocab) = (64, 97);
        let z = random_logits(rows, vocab, 7);
        for (p, k) in [
            (1.0, TopK::Keep(16)),
            (0.9, TopK::Keep(32)),
            (0.5, TopK::All),
            (0.95, TopK::Keep(5)),
        ] {
            let t = Tensor::<2>::from_data(TensorData::new(z.clone(), [rows, vocab]), &device);
            let got = download(truncate_on_device(t, p, k));
            assert_eq!(got.len(), rows);
            for (row, kept) in got.iter().enumerate() {
                let want = truncate(&z[row * vocab..(row + 1) * vocab], p, k);
                assert_eq!(kept.ids, want.ids, "p={p} k={k:?} row {row}");
                for (a, b) in kept.log_probs.iter().zip(&want.log_probs) {
                    assert!((a - b).abs() < 1e-5, "p={p} row {row}: {a} vs {b}");
                }
            }
        }
    }
}
