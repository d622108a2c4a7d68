//! The output head fused with its losses: logits = h · W, the language-model cross-entropy and
//! an optional sparse distillation loss over them, and (for training) the gradients of the
//! weighted loss with respect to h and W — computed over chunks of positions, so the
//! `[positions, vocab]` logits and their gradient never exist for the whole batch at once (the
//! approach of Liger Kernel's fused linear cross-entropy and of Cut Cross-Entropy).
//!
//! The loss is a fixed weighted sum, Σ_r a_ce·CE_r + a_kd·KD_r, so its gradient is known in the
//! forward pass: each chunk's logits are made once (one product), turned into their gradient in
//! place (one pass over the chunk, sharing the row's log-normaliser between the two terms at
//! τ = 1), and multiplied back into dh (one product) and dW (one accumulating product). That is
//! the three head products an unfused step makes, with a chunk-sized buffer instead of two
//! batch-sized ones; the autodiff step only scales the stored gradients by the incoming one.

use super::matmul::{View, product_into};
use rayon::prelude::*;

use super::rows::block_rows;
use super::simd::{LANES, exp, load, map, multiversion, store};
use super::softmax::{
    Distill, MAX_WIDTH, Support, log_sum_exp, row_terms, scaled_lse, support_coefficients,
};

/// How the head's weight is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `[d, vocab]`: an untied head (a linear layer's `[d_in, d_out]`).
    InOut,
    /// `[vocab, d]`: tied to the token embedding.
    OutIn,
}

/// Sizes of one head product.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    /// Positions.
    pub rows: usize,
    /// Width of the hidden state.
    pub d: usize,
    /// Vocabulary.
    pub vocab: usize,
}

/// What the head is scored against and how the two terms are weighed.
#[derive(Debug, Clone, Copy)]
pub struct Terms<'a> {
    /// The next token at every position (each `< vocab`).
    pub targets: &'a [u32],
    /// The teacher's kept support and the distillation loss, if any.
    pub distill: Option<(Support<'a>, Distill)>,
    /// a_ce: the weight of every position's cross-entropy in the loss.
    pub ce_weight: f32,
    /// a_kd: the weight of every position's distillation loss.
    pub kd_weight: f32,
}

/// The head's losses and, when asked for, the gradients of Σ_r a_ce·CE_r + a_kd·KD_r.
#[derive(Debug, Clone)]
pub struct HeadOut {
    /// CE_r at every position.
    pub ce: Vec<f32>,
    /// KD_r at every position (empty without distillation).
    pub kd: Vec<f32>,
    /// ∂loss/∂h, `[rows, d]`.
    pub dh: Option<Vec<f32>>,
    /// ∂loss/∂W in the weight's own layout.
    pub dw: Option<Vec<f32>>,
}

impl HeadOut {
    /// Σ_r a_ce·CE_r + a_kd·KD_r, summed in f64.
    pub fn loss(&self, (ce_weight, kd_weight): (f32, f32)) -> f64 {
        let ce: f64 = self.ce.iter().map(|&v| f64::from(v)).sum();
        let kd: f64 = self.kd.iter().map(|&v| f64::from(v)).sum();
        f64::from(ce_weight) * ce + f64::from(kd_weight) * kd
    }

    /// Zero losses for `rows` positions (`kd`: whether there is a distillation term), with
    /// zeroed gradients when `grads` is set.
    pub fn zeros(Dims { rows, d, vocab }: Dims, kd: bool, grads: bool) -> HeadOut {
        HeadOut {
            ce: vec![0.0; rows],
            kd: vec![0.0; if kd { rows } else { 0 }],
            dh: grads.then(|| vec![0.0; rows * d]),
            dw: grads.then(|| vec![0.0; d * vocab]),
        }
    }
}

/// Positions per chunk that keep a chunk's logits within 2^24 values (64 MiB) at `vocab`, and
/// at least 128: ∂W accumulates one product per chunk summing over the chunk's positions, and
/// fewer made the head 1.8× slower at V = 152,064 (27 positions against 110,
/// `benches/large_vocab.rs`).
pub fn default_chunk(vocab: usize) -> usize {
    ((1usize << 24) / vocab.max(1)).clamp(128, 4096)
}

/// The head's losses over `h` (`[rows, d]`) and `w` (in `layout`), `chunk` positions at a time,
/// with the gradients when `grads` is set.
pub fn head_loss(
    h: &[f32],
    w: &[f32],
    layout: Layout,
    dims: Dims,
    terms: Terms,
    chunk: usize,
    grads: bool,
) -> HeadOut {
    let rows = dims.rows;
    assert_eq!(terms.targets.len(), rows, "one target per position");
    if let Some((s, _)) = terms.distill {
        assert!(s.width <= MAX_WIDTH, "support wider than {MAX_WIDTH}");
        assert_eq!(s.ids.len(), rows * s.width, "one support row per position");
    }
    let chunk = chunk.clamp(1, rows.max(1));
    let mut out = HeadOut::zeros(dims, terms.distill.is_some(), grads);
    let bounds = (0..rows)
        .step_by(chunk)
        .map(|first| (first, chunk.min(rows - first)));
    over_chunks(h, w, layout, dims, bounds, &mut out, |z, first, out| {
        rows_pass(z, dims.vocab, first, &terms, grads, out)
    });
    out
}

/// The chunk loop every fused head shares: for each chunk `(first, n)` of `bounds` (in order,
/// covering the rows), its logits h · W into one buffer, `pass` turning them into their
/// gradient in place (and writing the chunk's losses into `out`), then ∂h and ∂W from them
/// when `out` has gradients.
pub(super) fn over_chunks(
    h: &[f32],
    w: &[f32],
    layout: Layout,
    dims: Dims,
    bounds: impl Iterator<Item = (usize, usize)> + Clone,
    out: &mut HeadOut,
    mut pass: impl FnMut(&mut [f32], usize, &mut HeadOut),
) {
    let Dims { rows, d, vocab } = dims;
    assert_eq!(h.len(), rows * d, "hidden state of {rows} × {d}");
    assert_eq!(w.len(), d * vocab, "head weight of {d} × {vocab}");
    let longest = bounds.clone().map(|(_, n)| n).max().unwrap_or(0);
    let mut z = vec![0.0f32; longest * vocab];
    for (first, n) in bounds {
        let z = &mut z[..n * vocab];
        let hc = View::of(h, first * d, n, d, d, 1);
        product_into(z, false, (n, vocab, d), hc, weight(w, layout, dims));
        pass(z, first, out);
        if let (Some(dh), Some(dw)) = (out.dh.as_mut(), out.dw.as_mut()) {
            backward_products(z, h, w, layout, dims, (first, n), dh, dw);
        }
    }
}

/// The logits h · W of every row (no loss, no gradient), as one product reading W in place.
pub fn logits(h: &[f32], w: &[f32], layout: Layout, dims: Dims) -> Vec<f32> {
    let Dims { rows, d, vocab } = dims;
    assert_eq!(h.len(), rows * d, "hidden state of {rows} × {d}");
    assert_eq!(w.len(), d * vocab, "head weight of {d} × {vocab}");
    super::matmul::product(
        (rows, vocab, d),
        View::rows(h, rows, d),
        weight(w, layout, dims),
    )
}

/// W as a `d × vocab` view.
pub(super) fn weight(w: &[f32], layout: Layout, Dims { d, vocab, .. }: Dims) -> View {
    match layout {
        Layout::InOut => View::rows(w, d, vocab),
        Layout::OutIn => View::transposed(w, vocab, d),
    }
}

/// dh[first..first + n] = dZ · Wᵀ and dW += hᵀ · dZ (in W's layout) for one chunk.
#[allow(clippy::too_many_arguments)]
pub(super) fn backward_products(
    dz: &[f32],
    h: &[f32],
    w: &[f32],
    layout: Layout,
    dims: Dims,
    (first, n): (usize, usize),
    dh: &mut [f32],
    dw: &mut [f32],
) {
    let Dims { d, vocab, .. } = dims;
    let wt = match layout {
        Layout::InOut => View::transposed(w, d, vocab),
        Layout::OutIn => View::rows(w, vocab, d),
    };
    let dz_view = View::rows(dz, n, vocab);
    product_into(
        &mut dh[first * d..(first + n) * d],
        false,
        (n, d, vocab),
        dz_view,
        wt,
    );
    let acc = first > 0;
    match layout {
        Layout::InOut => product_into(
            dw,
            acc,
            (d, vocab, n),
            View::of(h, first * d, d, n, 1, d),
            dz_view,
        ),
        Layout::OutIn => product_into(
            dw,
            acc,
            (vocab, d, n),
            View::transposed(dz, n, vocab),
            View::of(h, first * d, n, d, d, 1),
        ),
    }
}

/// One block of a chunk: its logits, and its rows' cross-entropy and distillation loss.
type RowBlock<'a> = ((&'a mut [f32], &'a mut [f32]), &'a mut [f32]);

/// Every row of one chunk: its losses into `out`, and (with `grads`) its logits replaced by
/// their gradient. Blocks of rows in parallel.
fn rows_pass(
    z: &mut [f32],
    vocab: usize,
    first: usize,
    terms: &Terms,
    grads: bool,
    out: &mut HeadOut,
) {
    let n = z.len() / vocab;
    let block = block_rows(n, 3 * vocab);
    let ce = &mut out.ce[first..first + n];
    let mut none = Vec::new();
    let kd = if out.kd.is_empty() {
        none.resize(n, 0.0);
        &mut none[..]
    } else {
        &mut out.kd[first..first + n]
    };
    let work = |(b, ((zb, ceb), kdb)): (usize, RowBlock)| {
        chunk_rows(zb, vocab, first + b * block, terms, grads, ceb, kdb)
    };
    let blocks = z
        .chunks_mut(block * vocab)
        .zip(ce.chunks_mut(block))
        .zip(kd.chunks_mut(block));
    if n <= block || rayon::current_num_threads() == 1 {
        blocks.enumerate().for_each(work);
    } else {
        z.par_chunks_mut(block * vocab)
            .zip(ce.par_chunks_mut(block))
            .zip(kd.par_chunks_mut(block))
            .enumerate()
            .for_each(work);
    }
}

multiversion! {
    fn chunk_rows(z: &mut [f32], vocab: usize, first: usize, terms: &Terms, grads: bool, ce_out: &mut [f32], kd_out: &mut [f32]) {
        let (mut s, mut log_q, mut c) = ([0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH]);
        for (r, row) in z.chunks_exact_mut(vocab).enumerate() {
            let at = first + r;
            let target = terms.targets[at] as usize;
            let lse = log_sum_exp(row);
            let ce = lse - row[target];
            let Some((support, dist)) = terms.distill else {
                ce_out[r] = ce;
                if grads {
                    softmax_times(row, lse, 1.0, terms.ce_weight);
                    row[target] -= terms.ce_weight;
                }
                continue;
            };
            let w = support.width;
            let sup = support.rows(at, 1);
            let inv_tau = 1.0 / dist.tau;
            let lse_t = if inv_tau == 1.0 { lse } else { scaled_lse(row, inv_tau) };
            let kd = row_terms(row, lse_t, dist, sup, &mut s[..w], &mut log_q[..w]);
            ce_out[r] = ce;
            kd_out[r] = kd;
            if !grads {
                continue;
            }
            let total = support_coefficients(dist.kind, sup.mask, &s[..w], &log_q[..w], &mut c[..w], dist.tau * dist.tau);
            let g = terms.kd_weight * inv_tau;
            let k = -g * total;
            if inv_tau == 1.0 {
                softmax_times(row, lse, 1.0, terms.ce_weight + k);
            } else {
                softmax_pair(row, lse, (inv_tau, lse_t), terms.ce_weight, k);
            }
            row[target] -= terms.ce_weight;
            for j in 0..w {
                row[sup.ids[j] as usize] += g * c[j];
            }
        }
    }
}

/// z ← k · e^{z·scale − shift}, in place.
#[inline(always)]
pub(super) fn softmax_times(z: &mut [f32], shift: f32, scale: f32, k: f32) {
    let mut at = 0;
    while at < z.len() {
        let p = exp(map(load(z, at, 0.0), |v| v.mul_add(scale, -shift)));
        store(z, at, &map(p, |p| p * k));
        at += LANES;
    }
}

/// z ← a · e^{z − lse} + b · e^{z/τ − lse_τ}, in place.
#[inline(always)]
pub(super) fn softmax_pair(z: &mut [f32], lse: f32, (inv_tau, lse_t): (f32, f32), a: f32, b: f32) {
    let mut at = 0;
    while at < z.len() {
        let v = load(z, at, 0.0);
        let p = exp(map(v, |v| v - lse));
        let pt = exp(map(v, |v| v.mul_add(inv_tau, -lse_t)));
        let mut o = [0.0f32; LANES];
        for i in 0..LANES {
            o[i] = a * p[i] + b * pt[i];
        }
        store(z, at, &o);
        at += LANES;
    }
}

#[cfg(test)]
mod tests {
    use super::super::softmax::{
        cross_entropy_backward, cross_entropy_forward, distill_backward, distill_forward,
    };
    use super::*;
    use crate::spec::LossKind;

    fn values(n: usize, k: f32, scale: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * k).sin() * scale).collect()
    }

    fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| x[(i % rows) * cols + i / rows])
            .collect()
    }

    /// The unfused path: logits = h · W, then the row kernels' losses and gradients, then
    /// the two products of the linear layer's backward.
    fn unfused(
        h: &[f32],
        w: &[f32],
        dims: Dims,
        terms: &Terms,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let Dims { rows, d, vocab } = dims;
        let z = super::super::linear::forward(h, w, rows, d, vocab);
        let (ce, lse) = cross_entropy_forward(&z, vocab, terms.targets);
        let mut dz =
            cross_entropy_backward(&z, vocab, terms.targets, &lse, &vec![terms.ce_weight; rows]);
        let mut kd = vec![];
        if let Some((support, dist)) = terms.distill {
            let (loss, lse_t) = distill_forward(&z, vocab, support, dist);
            let g = distill_backward(
                &z,
                vocab,
                support,
                dist,
                &lse_t,
                &vec![terms.kd_weight; rows],
            );
            for (a, b) in dz.iter_mut().zip(g) {
                *a += b;
            }
            kd = loss;
        }
        let (dh, dw) = super::super::linear::backward(h, w, &dz, (rows, d, vocab), (true, true));
        (ce, kd, dh.unwrap_or_default(), dw.unwrap_or_default())
    }

    fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    }

    #[test]
    fn chunked_head_equals_the_unfused_path_for_every_loss_layout_and_chunk() {
        let (rows, d, vocab, width) = (23, 7, 41, 5); // odd sizes: vector tails, ragged chunks
        let dims = Dims { rows, d, vocab };
        let h = values(rows * d, 0.37, 1.0);
        let w = values(d * vocab, 0.11, 0.8);
        let targets: Vec<u32> = (0..rows).map(|r| (r * 7 % vocab) as u32).collect();
        let ids: Vec<u32> = (0..rows * width).map(|i| (i * 5 % vocab) as u32).collect();
        let lp: Vec<f32> = (0..rows * width)
            .map(|i| -0.3 - (i % width) as f32)
            .collect();
        let mask: Vec<f32> = (0..rows * width)
            .map(|i| {
                if i % width == 4 && i / width % 3 == 0 {
                    0.0
                } else {
                    1.0
                }
            })
            .collect();
        let support = Support {
            ids: &ids,
            log_probs: &lp,
            mask: &mask,
            width,
        };
        for kind in [
            LossKind::Kl,
            LossKind::CeSoft,
            LossKind::ReverseKl,
            LossKind::Mse,
        ] {
            for tau in [1.0f32, 2.0] {
                for distill in [None, Some((support, Distill { kind, tau }))] {
                    let terms = Terms {
                        targets: &targets,
                        distill,
                        ce_weight: 0.3,
                        kd_weight: 0.7,
                    };
                    let (ce, kd, dh, dw) = unfused(&h, &w, dims, &terms);
                    for chunk in [1, 4, 23, 100] {
                        let got = head_loss(&h, &w, Layout::InOut, dims, terms, chunk, true);
                        let what =
                            format!("{kind:?} τ={tau} chunk {chunk} kd {}", distill.is_some());
                        close(&got.ce, &ce, 1e-5, &format!("{what} ce"));
                        close(&got.kd, &kd, 1e-5, &format!("{what} kd"));
                        close(
                            got.dh.as_deref().unwrap_or_default(),
                            &dh,
                            1e-5,
                            &format!("{what} dh"),
                        );
                        close(
                            got.dw.as_deref().unwrap_or_default(),
                            &dw,
                            1e-5,
                            &format!("{what} dw"),
                        );
                        // the tied layout: the same weight stored [vocab, d]
                        let wt = transpose(&w, d, vocab);
                        let tied = head_loss(&h, &wt, Layout::OutIn, dims, terms, chunk, true);
                        close(&tied.ce, &ce, 1e-5, &format!("{what} tied ce"));
                        let dw_t = transpose(&dw, d, vocab);
                        close(
                            tied.dw.as_deref().unwrap_or_default(),
                            &dw_t,
                            1e-5,
                            &format!("{what} tied dw"),
                        );
                        let plain = head_loss(&h, &w, Layout::InOut, dims, terms, chunk, false);
                        assert!(plain.dh.is_none() && plain.dw.is_none());
                        close(&plain.kd, &kd, 1e-5, &format!("{what} forward-only kd"));
                    }
                }
            }
        }
    }

    #[test]
    fn gradients_match_finite_differences_of_the_loss() {
        let (rows, d, vocab, width) = (6, 5, 19, 3);
        let dims = Dims { rows, d, vocab };
        let h = values(rows * d, 0.53, 1.0);
        let w = values(d * vocab, 0.29, 0.9);
        let targets: Vec<u32> = (0..rows).map(|r| (r * 3 % vocab) as u32).collect();
        let ids: Vec<u32> = (0..rows * width).map(|i| (i * 7 % vocab) as u32).collect();
        let lp: Vec<f32> = (0..rows * width)
            .map(|i| -0.5 - (i % width) as f32 * 0.7)
            .collect();
        let mask = vec![1.0f32; rows * width];
        let support = Support {
            ids: &ids,
            log_probs: &lp,
            mask: &mask,
            width,
        };
        for kind in [LossKind::Kl, LossKind::ReverseKl, LossKind::Mse] {
            let terms = Terms {
                targets: &targets,
                distill: Some((support, Distill { kind, tau: 1.5 })),
                ce_weight: 0.4,
                kd_weight: 0.6,
            };
            let got = head_loss(&h, &w, Layout::InOut, dims, terms, 4, true);
            let loss = |h: &[f32], w: &[f32]| {
                head_loss(h, w, Layout::InOut, dims, terms, 4, false)
                    .loss((terms.ce_weight, terms.kd_weight))
            };
            let eps = 1e-2;
            for i in (0..h.len()).step_by(3) {
                let (mut up, mut down) = (h.clone(), h.clone());
                up[i] += eps;
                down[i] -= eps;
                let num = (loss(&up, &w) - loss(&down, &w)) / (2.0 * eps as f64);
                let an = got.dh.as_ref().map_or(f32::NAN, |g| g[i]) as f64;
                assert!((an - num).abs() < 2e-3, "{kind:?} dh[{i}] {an} vs {num}");
            }
            for i in (0..w.len()).step_by(5) {
                let (mut up, mut down) = (w.clone(), w.clone());
                up[i] += eps;
                down[i] -= eps;
                let num = (loss(&h, &up) - loss(&h, &down)) / (2.0 * eps as f64);
                let an = got.dw.as_ref().map_or(f32::NAN, |g| g[i]) as f64;
                assert!((an - num).abs() < 2e-3, "{kind:?} dw[{i}] {an} vs {num}");
            }
        }
    }
}
