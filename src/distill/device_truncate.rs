//! Teacher truncation where the logits are: the same top-p-then-top-k rule as
//! [`super::truncate`], written with tensor operations, so on a GPU the full `[positions, vocab]`
//! logits do not cross to the host. An online student uses the result as it is (it stays on the
//! device); a logit pass downloads only the kept `positions × width` ids and log-probabilities.
//!
//! The most probable tokens are taken in passes of at most [`PASS_K`] (burn's `topk` on the
//! GPU backends, cubek-reduce 0.3.1's TopK reduction, returned wrong entries past the first
//! for k ≥ 64 at vocabularies of 8K and more, and for k = the vocabulary, on Mesa's lavapipe:
//! measured here; 32 was right on every shape tried), each pass masking out what the earlier
//! ones took, until every row's nucleus is complete or [`DEVICE_WIDTH`] tokens are taken. A row
//! whose support is wider than that (top-k "all" with a flat distribution, or top-p 1 with a
//! k above 256) is truncated on the host from its own downloaded logits, so the result is
//! always the host rule's.
//!
//! Two differences from the host version remain, both confined to ties: the nucleus mass is
//! accumulated in f32 (the host uses f64), so a position whose cumulative mass lands within
//! about 1e-7 of `top_p` may keep one token more or fewer; and equal logits are ordered by the
//! backend's top-k (the GPU backends' gives the lower id first, as the host does; flex's does
//! not promise it), which can only swap tokens of the same probability.

use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorData};

use super::loss::SparseTargets;
use super::truncate::{Kept, truncate};
use crate::spec::TopK;

/// The most tokens one `topk` pass takes (see the module doc for why not more).
pub const PASS_K: usize = 32;
/// The most tokens per position kept on the device (8 passes); a wider support goes through
/// the host. Also the widest support the CPU's fused distillation kernel takes.
pub const DEVICE_WIDTH: usize = 256;

/// The truncated teacher distribution of every row: the device part, and the rows whose
/// support was wider than it, truncated on the host.
pub struct Truncated {
    /// Every row's kept tokens, most probable first, at most [`DEVICE_WIDTH`] wide; entries
    /// past a row's nucleus are masked out (they keep their real ids and values).
    pub targets: SparseTargets,
    /// The rows (by index) whose support is wider than `targets` holds, with that support.
    /// Empty unless the top-k is above [`DEVICE_WIDTH`].
    pub wide_rows: Vec<(usize, Kept)>,
}

/// Truncates every row of `logits` to its top-p nucleus, then to at most `top_k` tokens; the
/// kept log-probabilities are under the full vocabulary at τ = 1, as [`super::truncate`] gives.
///
/// # Shapes
/// - `logits`: `[positions, vocab]`, f32
/// - returns: [`Truncated`] whose targets are `[positions, width]`, width ≤ min(top_k, vocab,
///   [`DEVICE_WIDTH`])
pub fn truncate_on_device(logits: Tensor<2>, top_p: f64, top_k: TopK) -> Truncated {
    let [rows, vocab] = logits.dims();
    let k = (top_k.kept(vocab as u64) as usize).clamp(1, vocab.max(1));
    // Top-p 1 with more than DEVICE_WIDTH tokens sends every row through the host: one pass
    // of one token stands in for the device part, instead of eight that would be thrown away.
    let width = if top_p >= 1.0 && k > DEVICE_WIDTH {
        1
    } else {
        k.min(DEVICE_WIDTH)
    };
    let threshold = nucleus_threshold(top_p);
    // Ordered by the logits themselves, as on the host: log-probabilities in f32 would merge
    // logits closer than their rounding into ties.
    let log_norm = log_sum_exp(logits.clone());
    let mut rest = logits.clone();
    let (mut values, mut ids) = (Vec::new(), Vec::new());
    let (mut taken, mut closed) = (0, false);
    let mut mass: Option<Tensor<1>> = None; // per row, of the tokens taken so far
    loop {
        let n = PASS_K.min(width - taken);
        let (z, i): (Tensor<2>, Tensor<2, Int>) = rest.clone().topk_with_indices(n, 1);
        let v = z.clone() - log_norm.clone();
        taken += n;
        values.push(v.clone());
        ids.push(i.clone());
        if taken == width {
            break;
        }
        if top_p < 1.0 {
            let pass = v.clone().exp().sum_dim(1).reshape([rows]);
            let total = mass.map_or(pass.clone(), |m| m + pass);
            // one scalar read back per pass: has every row's nucleus closed?
            if total.clone().min().into_scalar::<f32>() as f64 >= threshold {
                closed = true;
                break;
            }
            mass = Some(total);
        }
        // what this pass took can never be taken again
        rest = rest.scatter(1, i, z.full_like(f32::NEG_INFINITY), IndexingUpdateOp::Add);
    }
    let values = Tensor::cat(values, 1);
    let ids = Tensor::cat(ids, 1);
    let mask = if top_p < 1.0 {
        // Keep a token while the mass of the tokens before it is still short of top_p: the
        // token that crosses top_p is kept, as on the host.
        let probs = values.clone().exp();
        let before = probs.clone().cumsum(1) - probs;
        before.lower_elem(threshold).float()
    } else {
        values.ones_like()
    };
    let wide_rows = if k > taken && !closed {
        wide(logits, &values, threshold, top_p, top_k)
    } else {
        Vec::new()
    };
    Truncated {
        targets: SparseTargets {
            ids,
            log_probs: values,
            mask,
        },
        wide_rows,
    }
}

/// ln Σ exp(z) of every row, from its maximum.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; returns `[rows, 1]`
fn log_sum_exp(logits: Tensor<2>) -> Tensor<2> {
    let max = logits.clone().max_dim(1);
    (logits - max.clone()).exp().sum_dim(1).log() + max
}

/// The cumulative mass at which a nucleus closes: `top_p` less the host's 1e-12, and above 0
/// so that the first token is always kept (as on the host) even for a vanishing `top_p`.
fn nucleus_threshold(top_p: f64) -> f64 {
    (top_p - 1e-12).max(1e-30)
}

/// The rows whose support does not fit in `values` (all of them at top-p 1; else those whose
/// taken mass is short of the nucleus), truncated on the host from their own logits.
fn wide(
    logits: Tensor<2>,
    values: &Tensor<2>,
    threshold: f64,
    top_p: f64,
    top_k: TopK,
) -> Vec<(usize, Kept)> {
    let [rows, vocab] = logits.dims();
    let open: Vec<usize> = if top_p < 1.0 {
        let mass: Vec<f32> = values
            .clone()
            .exp()
            .sum_dim(1)
            .into_data()
            .try_into_vec_as::<f32>()
            .unwrap_or_default();
        (0..rows)
            .filter(|&r| mass.get(r).is_none_or(|&m| (m as f64) < threshold))
            .collect()
    } else {
        (0..rows).collect()
    };
    if open.is_empty() {
        return Vec::new();
    }
    let device = logits.device();
    let index = Tensor::<1, Int>::from_data(
        TensorData::new(open.iter().map(|&r| r as i64).collect(), [open.len()]),
        &device,
    );
    let z: Vec<f32> = logits
        .select(0, index)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap_or_default();
    open.iter()
        .zip(z.chunks(vocab.max(1)))
        .map(|(&r, row)| (r, truncate(row, top_p, top_k)))
        .collect()
}

impl Truncated {
    /// Whether every row's support is in [`Truncated::targets`] (no row went through the host).
    pub fn on_device(&self) -> bool {
        self.wide_rows.is_empty()
    }
}

/// Copies the kept entries to the host, one [`Kept`] per row (the masked-out tail dropped):
/// `positions × width` ids and values, not the full logits.
///
/// Empty if the device could not be read (the caller checks the count and fails the run).
pub fn download(truncated: Truncated) -> Vec<Kept> {
    let Truncated { targets, wide_rows } = truncated;
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
        return Vec::new();
    }
    let mut kept: Vec<Kept> = (0..positions)
        .map(|row| {
            let n = (counts[row].round() as usize).clamp(1, width);
            let at = row * width;
            Kept::new(
                ids[at..at + n].iter().map(|&i| i as u32).collect(),
                values[at..at + n].to_vec(),
            )
        })
        .collect();
    for (row, support) in wide_rows {
        kept[row] = support;
    }
    kept
}
