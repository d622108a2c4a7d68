//! The fused operations composed from burn's own tensor ops: what every backend other than
//! flex runs (wgpu, cuda), and the reference the fused CPU kernels are tested against. Autodiff
//! differentiates these through burn.

use burn::tensor::activation::{log_softmax, silu, softmax};
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{DType, Int, Tensor};

use super::cpu::cross::{Unit, chunk_bounds, units};
use super::head::{CrossDistillation, Distillation, HeadWeight};

use crate::spec::{CrossTokenizer, LossKind};

/// A large negative log-probability given to padding so it gets no teacher mass.
const PAD_LOG_PROB: f64 = -1e4;

/// The least student tail mass used (as `super::cpu::softmax`'s kernel).
const TAIL_FLOOR: f64 = 1e-6;

/// The log-probability that stands for an entry left out (its e^ is exactly 0 in f32, and
/// products with it stay finite).
const LEFT_OUT: f64 = -1e30;

/// Subtracted from the selection key of the student ids Gold's ULD part leaves out, so any
/// other id ranks first.
const EXCLUDED: f64 = 1e9;

/// Per-row −ln softmax(logits)`target`.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`, `targets`: `[rows]`; returns `[rows]`
pub fn cross_entropy(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    let [rows, _] = logits.dims();
    log_softmax(logits, 1)
        .gather(1, targets.reshape([rows, 1]))
        .reshape([rows])
        .neg()
}

/// Per-row sparse distillation loss (see `crate::distill::loss` for the semantics).
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `ids`, `log_probs`, `mask`: `[rows, width]`; returns `[rows]`
pub fn sparse_distill(
    logits: Tensor<2>,
    ids: Tensor<2, Int>,
    log_probs: Tensor<2>,
    mask: Tensor<2>,
    kind: LossKind,
    tau: f64,
) -> Tensor<1> {
    let [rows, width] = ids.dims();
    // real entries (mask 1), the tail bucket (mask −1, `super::TAIL_MASK`) and both
    let real = mask.clone().clamp_min(0.0);
    let tail = mask.neg().clamp_min(0.0);
    let mask = real.clone() + tail.clone();
    let pad = mask.clone().neg().add_scalar(1.0).mul_scalar(PAD_LOG_PROB);
    let scaled = log_probs.div_scalar(tau) * mask.clone() + pad;
    let log_q = log_softmax(scaled.clone(), 1);
    let q = softmax(scaled, 1) * mask.clone();
    let s_kept = log_softmax(logits.div_scalar(tau), 1).gather(1, ids);
    // the student's tail: 1 − its mass on the real entries (floored, as the CPU kernel does)
    let head = (s_kept.clone().exp() * real).sum_dim(1);
    let s_tail = head
        .neg()
        .add_scalar(1.0)
        .clamp_min(TAIL_FLOOR)
        .log()
        .repeat_dim(1, width);
    let s = s_kept * tail.clone().neg().add_scalar(1.0) + s_tail * tail;
    let per_row = match kind {
        LossKind::Kl => (q * (log_q * mask.clone() - s.clone() * mask))
            .sum_dim(1)
            .mul_scalar(tau * tau),
        LossKind::CeSoft => (q * s).sum_dim(1).neg().mul_scalar(tau * tau),
        LossKind::ReverseKl => {
            let p = s.clone().exp() * mask.clone();
            (p * (s - log_q) * mask).sum_dim(1).mul_scalar(tau * tau)
        }
        LossKind::Mse => ((s.exp() - q) * mask).square().sum_dim(1),
    };
    per_row.reshape([rows])
}

/// [`super::ops::head_loss`] from burn's ops, `chunk` positions at a time, each chunk's logits
/// made, scored and (for gradients) differentiated on a graph of their own, so that memory
/// stays one chunk's logits on every backend (see `chunked`).
///
/// # Shapes
/// - `h`: `[rows, d]`; `targets`: `[rows]`; returns `[1]` (f32)
pub fn head_loss(
    h: Tensor<2>,
    head: &HeadWeight,
    targets: Tensor<1, Int>,
    distill: Option<&Distillation>,
    weights: (f64, f64),
    chunk: usize,
) -> Tensor<1> {
    let [rows, _] = h.dims();
    let chunk = chunk.clamp(1, rows.max(1));
    let bounds: Vec<(usize, usize)> = (0..rows)
        .step_by(chunk)
        .map(|first| (first, chunk.min(rows - first)))
        .collect();
    chunked(h, head, &bounds, |first, z| {
        let n = z.dims()[0];
        let mut loss = cross_entropy(z.clone(), targets.clone().narrow(0, first, n))
            .sum()
            .mul_scalar(weights.0);
        if let Some(d) = distill {
            let kd = sparse_distill(
                z,
                d.ids.clone().narrow(0, first, n),
                d.log_probs.clone().narrow(0, first, n),
                d.mask.clone().narrow(0, first, n),
                d.kind,
                d.tau,
            );
            loss = loss + kd.sum().mul_scalar(weights.1);
        }
        loss
    })
}

/// [`super::ops::cross_head_loss`] from burn's ops, over the chunks of
/// `super::cpu::cross::chunk_bounds` (a unit is never split), each scored and differentiated
/// as [`head_loss`]'s are. Per chunk: log-softmax(z/τ); ln P_r`y_r` by a gather; ln M_u by
/// selecting each unit's later rows from that column; the base rows' log-probabilities; the
/// student's top k chosen on a detached copy (Gold's matched ids pushed last) and read back by
/// a gather on the tracked tensor, so the gradient flows through the chosen entries only. Only
/// the `[rows]` spans come to the host.
///
/// # Shapes
/// - `h`: `[rows, d]`; `targets`: `[rows]`; returns `[1]` (f32)
pub fn cross_head_loss(
    h: Tensor<2>,
    head: &HeadWeight,
    targets: Tensor<1, Int>,
    cross: &CrossDistillation,
    weights: (f64, f64),
    chunk: usize,
) -> Tensor<1> {
    let span: Vec<i32> = cross
        .span
        .clone()
        .into_data()
        .try_into_vec_as::<i64>()
        .unwrap_or_else(|e| panic!("the spans could not be read: {e:?}"))
        .into_iter()
        .map(|v| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
        .collect();
    let all = units(&span).unwrap_or_else(|e| panic!("{e}"));
    chunked(h, head, &chunk_bounds(&span, chunk), |first, z| {
        let n = z.dims()[0];
        let y = targets.clone().narrow(0, first, n);
        let ce = cross_entropy(z.clone(), y.clone())
            .sum()
            .mul_scalar(weights.0);
        let lo = all.partition_point(|u| u.base < first);
        let hi = all.partition_point(|u| u.base < first + n);
        if lo == hi {
            return ce;
        }
        ce + unit_losses(z, y, first, &all[lo..hi], cross).mul_scalar(weights.1)
    })
}

/// Σ_u L_u over `units` (all inside the chunk of `z`, whose first row is `first`).
///
/// # Shapes
/// - `z`: `[n, vocab]` (f32); `targets`: `[n]`; returns `[1]`
fn unit_losses(
    z: Tensor<2>,
    targets: Tensor<1, Int>,
    first: usize,
    units: &[Unit],
    cross: &CrossDistillation,
) -> Tensor<1> {
    let device = z.device();
    let [n, vocab] = z.dims();
    let width = cross.log_t.dims()[1];
    let count = units.len();
    let index = |v: Vec<i64>| {
        let len = v.len();
        Tensor::<1, Int>::from_data(burn::tensor::TensorData::new(v, [len]), &device)
    };
    let lp = log_softmax(z.div_scalar(cross.tau), 1);
    // ln M_u: the later rows' ln P_r[y_r], gathered from that column with a 0 appended for
    // units shorter than the longest
    let longest = units.iter().map(|u| u.rows - 1).max().unwrap_or(0);
    let ln_m = if longest == 0 {
        Tensor::<2>::zeros([count, 1], &device)
    } else {
        let at_target = lp.clone().gather(1, targets.reshape([n, 1])).reshape([n]);
        let padded = Tensor::cat(vec![at_target, Tensor::zeros([1], &device)], 0);
        let later: Vec<i64> = units
            .iter()
            .flat_map(|u| {
                let b = (u.base - first) as i64;
                (1..=longest as i64).map(move |i| if i < u.rows as i64 { b + i } else { n as i64 })
            })
            .collect();
        padded
            .select(0, index(later))
            .reshape([count, longest])
            .sum_dim(1)
    };
    let base_local = index(units.iter().map(|u| (u.base - first) as i64).collect());
    let base_rows = index(units.iter().map(|u| u.base as i64).collect());
    let lp_b = lp.select(0, base_local);
    let log_t = cross.log_t.clone().select(0, base_rows.clone());
    let matched = cross.matched.clone().select(0, base_rows.clone());
    let valid = cross.mask.clone().select(0, base_rows).not_equal_elem(0.0);
    let gold = cross.kind == CrossTokenizer::Gold;
    let k = cross.top_k;
    let pad = |t: Tensor<2>| {
        let have = t.dims()[1];
        if have >= k {
            return t;
        }
        Tensor::cat(vec![t, Tensor::zeros([count, k - have], &device)], 1)
    };
    // ULD: the teacher's entries and the student's top k, each sorted and padded to k
    let mut uld = Tensor::<2>::zeros([count, 1], &device);
    if k > 0 {
        let entries = if gold {
            valid.clone().bool_and(matched.clone().equal_elem(-1))
        } else {
            valid.clone()
        };
        let t = if width > 0 {
            let t = log_t.clone().mask_fill(entries.bool_not(), LEFT_OUT).exp();
            pad(t.topk(k.min(width), 1))
        } else {
            Tensor::zeros([count, k], &device)
        };
        let key = lp_b.clone().detach();
        let excluded = cross.student_matched.clone();
        let key = if gold {
            key - excluded.clone().reshape([1, vocab]).mul_scalar(EXCLUDED)
        } else {
            key
        };
        let kk = k.min(vocab);
        let (_, chosen) = key.topk_with_indices(kk, 1);
        let mut q = (lp_b.clone().gather(1, chosen.clone()) + ln_m.clone()).exp();
        if gold {
            let flags = excluded.select(0, chosen.reshape([count * kk]));
            q = q * flags.reshape([count, kk]).neg().add_scalar(1.0);
        }
        uld = (pad(q) - t).abs().sum_dim(1);
    }
    let per_unit = if gold {
        // KL over the matched entries
        let (w_m, w_u) = cross.gold_weights;
        let kept = valid.bool_and(matched.clone().greater_equal_elem(0));
        let log_t = log_t.mask_fill(kept.bool_not(), LEFT_OUT);
        let ln_q = lp_b.gather(1, matched.clamp_min(0)) + ln_m;
        let kl = (log_t.clone().exp() * (log_t - ln_q)).sum_dim(1);
        kl.mul_scalar(w_m) + uld.mul_scalar(w_u)
    } else {
        uld
    };
    per_unit.sum()
}

/// The chunk loop of [`head_loss`] and [`cross_head_loss`]: `score(first, z)` is one chunk's loss
/// from its logits z = h · W (f32), for the chunks `(first, n)` of `bounds`.
///
/// Without gradients each chunk's logits are scored and dropped. With them, each chunk's loss is
/// differentiated on its own (a graph of one chunk) and its logits' gradient multiplied into ∂/∂h
/// and ∂/∂W at once, and the result carries those gradients through a surrogate, Σ h·∂h + Σ W·∂W,
/// whose value is replaced by the loss: memory stays one chunk's logits on every backend.
fn chunked(
    h: Tensor<2>,
    head: &HeadWeight,
    bounds: &[(usize, usize)],
    score: impl Fn(usize, Tensor<2>) -> Tensor<1>,
) -> Tensor<1> {
    let w = if head.tied {
        head.weight.clone().transpose()
    } else {
        head.weight.clone()
    };
    let score = |first: usize, z: Tensor<2>| {
        let z = if z.dtype() == DType::F32 {
            z
        } else {
            z.cast(burn::tensor::FloatDType::F32)
        };
        score(first, head.cap(z))
    };
    if !(h.is_tracked() || w.is_tracked()) {
        let mut total = Tensor::<1>::zeros([1], &h.device());
        for &(first, n) in bounds {
            total = total + score(first, h.clone().narrow(0, first, n).matmul(w.clone()));
        }
        return total;
    }
    // the values without their graph: each chunk's own graph starts from them
    let (hi, wi) = (h.clone().inner(), w.clone().inner());
    let mut total = Tensor::<1>::zeros([1], &hi.device());
    let mut dh = Vec::new();
    let mut dw: Option<Tensor<2>> = None;
    for &(first, n) in bounds {
        // a leaf of its own: the chunk's graph starts at its logits
        let z =
            Tensor::from_inner(hi.clone().narrow(0, first, n).matmul(wi.clone())).require_grad();
        let loss = score(first, z.clone());
        let grads = loss.backward();
        total = total + loss.inner();
        let Some(dz) = z.grad(&grads) else { continue };
        let dz = dz.cast(hi.dtype());
        let hc = hi.clone().narrow(0, first, n);
        dh.push(dz.clone().matmul(wi.clone().transpose()));
        let part = hc.transpose().matmul(dz);
        dw = Some(match dw {
            Some(acc) => acc + part,
            None => part,
        });
    }
    let dh = Tensor::from_inner(Tensor::cat(dh, 0));
    let dw = dw.map_or_else(|| w.clone().detach().zeros_like(), Tensor::from_inner);
    let surrogate = ((h * dh).sum() + (w * dw).sum()).cast(burn::tensor::FloatDType::F32);
    surrogate.clone() - surrogate.detach() + Tensor::from_inner(total)
}

/// x · W over every row of `x` as one 2-D matmul (burn's `Linear::forward` on a 3-D input may
/// run one small matmul per sequence and sum the weight's gradient over them afterwards).
pub fn linear<const D: usize>(x: Tensor<D>, w: Tensor<2>) -> Tensor<D> {
    let dims = x.dims();
    let [d_in, d_out] = w.dims();
    let rows = dims[..D - 1].iter().product();
    let mut out = dims;
    out[D - 1] = d_out;
    x.reshape([rows, d_in]).matmul(w).reshape(out)
}

/// silu(gate) · up.
pub fn swiglu<const D: usize>(gate: Tensor<D>, up: Tensor<D>) -> Tensor<D> {
    silu(gate) * up
}

/// x · γ / √(mean(x²) + ε) over the last dimension (burn's `RmsNorm`).
pub fn rms_norm<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, eps: f64) -> Tensor<D> {
    let rms = (x.clone().square().mean_dim(D - 1) + eps).sqrt();
    (x / rms) * gamma.unsqueeze()
}

/// Causal attention with rotary embeddings and grouped-query heads, through burn's
/// `attention`.
///
/// # Shapes
/// - `q`: `[batch, seq, heads·hd]`; `k`, `v`: `[batch, seq, kv_heads·hd]`; `cos`, `sin`:
///   `[seq, hd]`; returns `[batch, seq, heads·hd]`
pub fn causal_attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    cos: Tensor<2>,
    sin: Tensor<2>,
    heads: usize,
    kv_heads: usize,
) -> Tensor<3> {
    let [batch, seq, width] = q.dims();
    let [q, k, v] = rotated_heads([q, k, v], &cos, &sin, heads, kv_heads);
    let k = repeat_kv(k, heads / kv_heads);
    let v = repeat_kv(v, heads / kv_heads);
    let options = AttentionModuleOptions {
        scale: None,
        softcap: None,
        is_causal: true,
    };
    attention(q, k, v, None, None, options)
        .swap_dims(1, 2)
        .reshape([batch, seq, width])
}

/// The projections `[q, k, v]` (`[batch, seq, n·hd]`) split into heads (`[batch, n, seq, hd]`),
/// q and k rotated: what every attention of this crate starts from.
pub(crate) fn rotated_heads(
    [q, k, v]: [Tensor<3>; 3],
    cos: &Tensor<2>,
    sin: &Tensor<2>,
    heads: usize,
    kv_heads: usize,
) -> [Tensor<4>; 3] {
    let [batch, seq, width] = q.dims();
    let head_dim = width / heads;
    let split = |t: Tensor<3>, n: usize| t.reshape([batch, seq, n, head_dim]).swap_dims(1, 2);
    let (cos, sin) = (cos.clone().unsqueeze::<4>(), sin.clone().unsqueeze::<4>());
    [
        rotate(split(q, heads), &cos, &sin),
        rotate(split(k, kv_heads), &cos, &sin),
        split(v, kv_heads),
    ]
}

/// Repeats each key/value head for the `groups` query heads that share it.
pub(crate) fn repeat_kv(t: Tensor<4>, groups: usize) -> Tensor<4> {
    if groups == 1 {
        return t;
    }
    let [batch, kv, seq, hd] = t.dims();
    t.unsqueeze_dim::<5>(2)
        .expand([batch, kv, groups, seq, hd])
        .reshape([batch, kv * groups, seq, hd])
}

/// Rotary embeddings ("rotate half" convention): x·cos + rotate_half(x)·sin.
pub(crate) fn rotate(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let half = x.dims()[3] / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.clone().narrow(3, half, half);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    x * cos.clone() + rotated * sin.clone()
}
