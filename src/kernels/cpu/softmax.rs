//! Row kernels over the vocabulary: the fused log-softmax + cross-entropy of the language-model
//! loss, and the sparse distillation losses of `crate::distill::loss` (kl, ce_soft,
//! reverse_kl, mse at temperature τ over the teacher's kept support), forward and backward.
//!
//! Forward passes keep only the log-normaliser of each row (`lse`); backward passes recompute
//! the probabilities from it in one vectorised pass, so no `[rows, vocab]` temporary is kept.

use super::rows::{block_rows, for_blocks, for_blocks2};
use super::simd::{LANES, exp, load, map, max, multiversion, store, sum_exp};
use crate::spec::LossKind;

/// ln Σ_v e^{z_v} of one row, stable.
#[inline(always)]
pub(super) fn log_sum_exp(z: &[f32]) -> f32 {
    let m = max(z);
    if m == f32::NEG_INFINITY {
        return m;
    }
    m + sum_exp(z, m).ln()
}

multiversion! {
    fn ce_forward_block(logits: &[f32], vocab: usize, targets: &[u32], loss: &mut [f32], lse: &mut [f32]) {
        for (r, z) in logits.chunks_exact(vocab).enumerate() {
            let l = log_sum_exp(z);
            lse[r] = l;
            loss[r] = l - z[targets[r] as usize];
        }
    }
}

/// Per-row negative log-likelihood of `targets` under softmax(`logits`), and each row's
/// log-normaliser (for [`cross_entropy_backward`]).
///
/// # Shapes
/// - `logits`: `[rows, vocab]` row-major; `targets`: `[rows]`, each `< vocab`
/// - returns: (`loss [rows]`, `lse [rows]`)
pub fn cross_entropy_forward(
    logits: &[f32],
    vocab: usize,
    targets: &[u32],
) -> (Vec<f32>, Vec<f32>) {
    let rows = targets.len();
    let (mut loss, mut lse) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    let block = block_rows(rows, 2 * vocab);
    for_blocks2(&mut loss, 1, &mut lse, 1, block, |first, loss, lse| {
        let n = loss.len();
        ce_forward_block(
            &logits[first * vocab..(first + n) * vocab],
            vocab,
            &targets[first..first + n],
            loss,
            lse,
        );
    });
    (loss, lse)
}

multiversion! {
    fn ce_backward_block(logits: &[f32], vocab: usize, targets: &[u32], lse: &[f32], grad: &[f32], out: &mut [f32]) {
        for (r, (z, o)) in logits.chunks_exact(vocab).zip(out.chunks_exact_mut(vocab)).enumerate() {
            let (shift, g) = (lse[r], grad[r]);
            let mut at = 0;
            while at < vocab {
                let p = exp(map(load(z, at, 0.0), |v| v - shift));
                store(o, at, &map(p, |p| p * g));
                at += LANES;
            }
            o[targets[r] as usize] -= g;
        }
    }
}

/// Gradient of Σ_r grad_r · loss_r with respect to the logits: grad_r · (softmax − onehot).
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `targets`, `lse`, `grad`: `[rows]`
/// - returns: `[rows, vocab]`
pub fn cross_entropy_backward(
    logits: &[f32],
    vocab: usize,
    targets: &[u32],
    lse: &[f32],
    grad: &[f32],
) -> Vec<f32> {
    let rows = targets.len();
    let mut out = vec![0.0f32; rows * vocab];
    for_blocks(&mut out, vocab, block_rows(rows, vocab), |first, out| {
        let n = out.len() / vocab;
        let range = first..first + n;
        ce_backward_block(
            &logits[first * vocab..(first + n) * vocab],
            vocab,
            &targets[range.clone()],
            &lse[range.clone()],
            &grad[range],
            out,
        );
    });
    out
}

/// The teacher's kept support for a batch of rows, padded to a common width.
///
/// # Shapes
/// `ids`, `log_probs`, `mask`: `[rows, width]`; a padding entry has mask 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Support<'a> {
    /// Kept token ids (each `< vocab`).
    pub ids: &'a [u32],
    /// The teacher's log-probabilities at τ = 1.
    pub log_probs: &'a [f32],
    /// 1 for a real entry, 0 for padding, [`TAIL`] for the tail bucket (its log-probability
    /// is that of the teacher's mass outside the row's real entries).
    pub mask: &'a [f32],
    /// Entries per row.
    pub width: usize,
}

impl<'a> Support<'a> {
    /// Rows `first..first + n`.
    #[inline(always)]
    pub fn rows(&self, first: usize, n: usize) -> Support<'a> {
        let e = first * self.width..(first + n) * self.width;
        Support {
            ids: &self.ids[e.clone()],
            log_probs: &self.log_probs[e.clone()],
            mask: &self.mask[e],
            width: self.width,
        }
    }

    /// Row `r`.
    #[inline(always)]
    fn row(&self, r: usize) -> Support<'a> {
        self.rows(r, 1)
    }
}

/// A distillation loss at a temperature.
#[derive(Debug, Clone, Copy)]
pub struct Distill {
    /// Which loss.
    pub kind: LossKind,
    /// Temperature τ.
    pub tau: f32,
}

/// The mask of a row's tail-bucket entry (`missing = "bucket"`): one extra outcome, the
/// teacher's mass outside the real entries against the student's, 1 − Σ of its real entries.
pub const TAIL: f32 = -1.0;

/// The least student tail mass used (f32 cannot resolve 1 − Σ much closer to 0).
const TAIL_FLOOR: f32 = 1e-6;

/// The widest support handled without allocating.
pub(super) const MAX_WIDTH: usize = 256;

/// Per-entry quantities of one row: the student's s_i and the teacher's ln q_i, and the loss.
#[inline(always)]
pub(super) fn row_terms(
    z: &[f32],
    lse: f32,
    d: Distill,
    row: Support,
    s: &mut [f32],
    log_q: &mut [f32],
) -> f32 {
    let (ids, lp, mask) = (row.ids, row.log_probs, row.mask);
    let inv_tau = 1.0 / d.tau;
    // the teacher renormalised over its kept ids at τ
    let mut t_max = f32::NEG_INFINITY;
    for j in 0..ids.len() {
        if mask[j] != 0.0 {
            t_max = t_max.max(lp[j] * inv_tau);
        }
    }
    let mut t_sum = 0.0f32;
    for j in 0..ids.len() {
        if mask[j] != 0.0 {
            t_sum += super::simd::exp1(lp[j] * inv_tau - t_max);
        }
    }
    let t_lse = t_max + t_sum.ln();
    let tau2 = d.tau * d.tau;
    let (mut head, mut tail) = (0.0f32, None);
    for j in 0..ids.len() {
        s[j] = z[ids[j] as usize] * inv_tau - lse;
        log_q[j] = lp[j] * inv_tau - t_lse;
        if mask[j] == TAIL {
            tail = Some(j);
        } else if mask[j] != 0.0 {
            head += super::simd::exp1(s[j]);
        }
    }
    if let Some(t) = tail {
        s[t] = (1.0 - head).max(TAIL_FLOOR).ln();
    }
    let mut loss = 0.0f32;
    for j in 0..ids.len() {
        if mask[j] == 0.0 {
            continue;
        }
        let q = super::simd::exp1(log_q[j]);
        loss += match d.kind {
            LossKind::Kl => tau2 * q * (log_q[j] - s[j]),
            LossKind::CeSoft => -tau2 * q * s[j],
            LossKind::ReverseKl => tau2 * super::simd::exp1(s[j]) * (s[j] - log_q[j]),
            LossKind::Mse => {
                let e = super::simd::exp1(s[j]) - q;
                e * e
            }
        };
    }
    loss
}

/// ln Σ_v e^{z_v / τ} of one row.
#[inline(always)]
pub(super) fn scaled_lse(z: &[f32], inv_tau: f32) -> f32 {
    if inv_tau == 1.0 {
        return log_sum_exp(z);
    }
    let m = max(z) * inv_tau; // τ > 0, so the maximum commutes with the scaling
    if m == f32::NEG_INFINITY {
        return m;
    }
    let mut acc = [0.0f32; LANES];
    let mut at = 0;
    while at < z.len() {
        let fill = if at + LANES <= z.len() {
            0.0
        } else {
            f32::NEG_INFINITY
        };
        let e = exp(map(load(z, at, fill), |v| v.mul_add(inv_tau, -m)));
        for i in 0..LANES {
            acc[i] += e[i];
        }
        at += LANES;
    }
    m + super::simd::hsum(acc).ln()
}

multiversion! {
    fn distill_forward_block(logits: &[f32], vocab: usize, support: Support, d: Distill, loss: &mut [f32], lse: &mut [f32]) {
        let w = support.width;
        let (mut s, mut log_q) = ([0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH]);
        for (r, z) in logits.chunks_exact(vocab).enumerate() {
            let l = scaled_lse(z, 1.0 / d.tau);
            lse[r] = l;
            loss[r] = row_terms(z, l, d, support.row(r), &mut s[..w], &mut log_q[..w]);
        }
    }
}

/// Per-row distillation loss `d` of the student `logits` against the teacher's `support` (the
/// sparse semantics of `crate::distill::loss`: the student's log-softmax over the full
/// vocabulary at τ, gathered at the kept ids), and each row's log-normaliser at τ.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `support`: `[rows, width]`, width ≤ 256
/// - returns: (`loss [rows]`, `lse [rows]`)
pub fn distill_forward(
    logits: &[f32],
    vocab: usize,
    support: Support,
    d: Distill,
) -> (Vec<f32>, Vec<f32>) {
    assert!(support.width <= MAX_WIDTH, "support wider than {MAX_WIDTH}");
    let rows = logits.len() / vocab.max(1);
    let (mut loss, mut lse) = (vec![0.0f32; rows], vec![0.0f32; rows]);
    let block = block_rows(rows, 2 * vocab);
    for_blocks2(&mut loss, 1, &mut lse, 1, block, |first, loss, lse| {
        let n = loss.len();
        distill_forward_block(
            &logits[first * vocab..(first + n) * vocab],
            vocab,
            support.rows(first, n),
            d,
            loss,
            lse,
        );
    });
    (loss, lse)
}

/// ∂loss/∂s_j for every kept entry j (0 for padding) into `c`, and their sum: the gradient of a
/// distillation loss with respect to the student's log-probabilities s at τ (its τ² included).
///
/// A tail entry's s_t = ln(1 − Σ_j e^{s_j}) is a function of the real entries', so its coefficient
/// is passed on to them (∂s_t/∂s_j = −e^{s_j − s_t}) and is 0 itself.
#[inline(always)]
pub(super) fn support_coefficients(
    kind: LossKind,
    mask: &[f32],
    s: &[f32],
    log_q: &[f32],
    c: &mut [f32],
    tau2: f32,
) -> f32 {
    let mut tail = None;
    for j in 0..c.len() {
        if mask[j] == TAIL {
            tail = Some(j);
        }
        c[j] = if mask[j] == 0.0 {
            0.0
        } else {
            match kind {
                LossKind::Kl | LossKind::CeSoft => -tau2 * super::simd::exp1(log_q[j]),
                LossKind::ReverseKl => tau2 * super::simd::exp1(s[j]) * (s[j] - log_q[j] + 1.0),
                LossKind::Mse => {
                    let p = super::simd::exp1(s[j]);
                    2.0 * (p - super::simd::exp1(log_q[j])) * p
                }
            }
        };
    }
    if let Some(t) = tail {
        let through = c[t];
        c[t] = 0.0;
        for j in 0..c.len() {
            if mask[j] != 0.0 && j != t {
                c[j] -= through * super::simd::exp1(s[j] - s[t]);
            }
        }
    }
    c.iter().sum()
}

multiversion! {
    fn distill_backward_block(logits: &[f32], vocab: usize, support: Support, d: Distill, lse: &[f32], grad: &[f32], out: &mut [f32]) {
        let w = support.width;
        let inv_tau = 1.0 / d.tau;
        let (mut s, mut log_q, mut c) = ([0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH]);
        for (r, (z, o)) in logits.chunks_exact(vocab).zip(out.chunks_exact_mut(vocab)).enumerate() {
            let row = support.row(r);
            let (ids, mask) = (row.ids, row.mask);
            row_terms(z, lse[r], d, row, &mut s[..w], &mut log_q[..w]);
            // c_j = dL/ds_j; dL/dz_v = (g/τ)·(Σ_j c_j [v = id_j] − (Σ_j c_j)·p_v)
            let total = support_coefficients(d.kind, mask, &s[..w], &log_q[..w], &mut c[..w], d.tau * d.tau);
            let g = grad[r] * inv_tau;
            let (shift, k) = (lse[r], -g * total);
            let mut at = 0;
            while at < vocab {
                let p = exp(map(load(z, at, 0.0), |v| v.mul_add(inv_tau, -shift)));
                store(o, at, &map(p, |p| p * k));
                at += LANES;
            }
            for j in 0..w {
                o[ids[j] as usize] += g * c[j];
            }
        }
    }
}

/// Gradient of Σ_r grad_r · loss_r (from [`distill_forward`]) with respect to the logits.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `support`: `[rows, width]`; `lse`, `grad`: `[rows]`
/// - returns: `[rows, vocab]`
pub fn distill_backward(
    logits: &[f32],
    vocab: usize,
    support: Support,
    d: Distill,
    lse: &[f32],
    grad: &[f32],
) -> Vec<f32> {
    let rows = lse.len();
    let mut out = vec![0.0f32; rows * vocab];
    for_blocks(&mut out, vocab, block_rows(rows, vocab), |first, out| {
        let n = out.len() / vocab;
        distill_backward_block(
            &logits[first * vocab..(first + n) * vocab],
            vocab,
            support.rows(first, n),
            d,
            &lse[first..first + n],
            &grad[first..first + n],
            out,
        );
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits(rows: usize, vocab: usize) -> Vec<f32> {
        (0..rows * vocab)
            .map(|i| ((i as f32) * 0.731).sin() * 4.0)
            .collect()
    }

    fn lse64(z: &[f32], tau: f64) -> f64 {
        let m = z.iter().map(|&v| v as f64 / tau).fold(f64::MIN, f64::max);
        m + z
            .iter()
            .map(|&v| (v as f64 / tau - m).exp())
            .sum::<f64>()
            .ln()
    }

    #[test]
    fn cross_entropy_matches_f64_and_finite_differences() {
        let (rows, vocab) = (23, 37); // odd sizes: vector tails
        let z = logits(rows, vocab);
        let targets: Vec<u32> = (0..rows).map(|r| (r * 7 % vocab) as u32).collect();
        let grad: Vec<f32> = (0..rows).map(|r| 0.5 + r as f32 * 0.1).collect();
        let (loss, lse) = cross_entropy_forward(&z, vocab, &targets);
        for r in 0..rows {
            let row = &z[r * vocab..(r + 1) * vocab];
            let want = lse64(row, 1.0) - row[targets[r] as usize] as f64;
            assert!((loss[r] as f64 - want).abs() < 1e-5, "row {r}");
        }
        let d = cross_entropy_backward(&z, vocab, &targets, &lse, &grad);
        let objective = |z: &[f32]| -> f64 {
            (0..rows)
                .map(|r| {
                    let row = &z[r * vocab..(r + 1) * vocab];
                    grad[r] as f64 * (lse64(row, 1.0) - row[targets[r] as usize] as f64)
                })
                .sum()
        };
        for i in (0..rows * vocab).step_by(13) {
            let (mut up, mut down) = (z.clone(), z.clone());
            up[i] += 1e-2;
            down[i] -= 1e-2;
            let num = (objective(&up) - objective(&down)) / 2e-2;
            assert!((d[i] as f64 - num).abs() < 2e-4, "[{i}] {} vs {num}", d[i]);
        }
    }

    #[test]
    fn every_distillation_loss_has_the_gradient_of_its_value() {
        let (rows, vocab, width) = (5, 19, 4);
        let z = logits(rows, vocab);
        let ids: Vec<u32> = (0..rows * width).map(|i| (i * 5 % vocab) as u32).collect();
        let lp: Vec<f32> = (0..rows * width)
            .map(|i| -0.3 - (i % width) as f32)
            .collect();
        let mask: Vec<f32> = (0..rows * width)
            .map(|i| {
                if i % width == 3 && i / width % 2 == 0 {
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
        let grad: Vec<f32> = (0..rows).map(|r| 1.0 - r as f32 * 0.1).collect();
        for kind in [
            LossKind::Kl,
            LossKind::CeSoft,
            LossKind::ReverseKl,
            LossKind::Mse,
        ] {
            for tau in [0.5f32, 1.0, 2.0] {
                let d = Distill { kind, tau };
                let (_, lse) = distill_forward(&z, vocab, support, d);
                let g = distill_backward(&z, vocab, support, d, &lse, &grad);
                let objective = |z: &[f32]| -> f64 {
                    let (loss, _) = distill_forward(z, vocab, support, d);
                    loss.iter()
                        .zip(&grad)
                        .map(|(l, g)| (*l as f64) * (*g as f64))
                        .sum()
                };
                for i in (0..rows * vocab).step_by(3) {
                    let (mut up, mut down) = (z.clone(), z.clone());
                    up[i] += 1e-2;
                    down[i] -= 1e-2;
                    let num = (objective(&up) - objective(&down)) / 2e-2;
                    assert!(
                        (g[i] as f64 - num).abs() < 2e-3 * num.abs().max(1.0),
                        "{kind:?} τ={tau} [{i}]: {} vs {num}",
                        g[i]
                    );
                }
            }
        }
    }
}
