//! The fused operations as tensor functions, the only way the rest of pdsweep calls them. On
//! the flex backend with f32 tensors each one runs its CPU kernel (through `FusedOps`); on
//! any other backend or dtype it runs the same maths composed from burn's ops
//! ([`super::composite`]), so model code is the same everywhere.
//!
//! `PDSWEEP_KERNELS=composite` in the environment (read once) turns the kernels off, for
//! before/after measurements; [`composite_only`] does it for one closure on this thread.

use std::cell::Cell;
use std::sync::OnceLock;

use burn::backend::{DType, Dispatch, DispatchDevice};
use burn::tensor::{FloatDType, Int, Tensor};

use super::chunked_attention::ChunkedAttention;
use super::composite;
use super::extension::{FusedOps, NO_DISTILL, cross_code, loss_code};
use super::head::{CrossDistillation, Distillation, HeadWeight};
use crate::spec::LossKind;

thread_local! {
    static COMPOSITE_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with the fused kernels off on this thread (every op composed from burn's ops).
pub fn composite_only<R>(f: impl FnOnce() -> R) -> R {
    let before = COMPOSITE_HERE.with(|c| c.replace(true));
    let out = f();
    COMPOSITE_HERE.with(|c| c.set(before));
    out
}

/// Whether the fused kernels are on (not turned off by `PDSWEEP_KERNELS=composite` or
/// [`composite_only`]).
pub(crate) fn kernels_enabled() -> bool {
    static ENV: OnceLock<bool> = OnceLock::new();
    let env = *ENV.get_or_init(|| std::env::var("PDSWEEP_KERNELS").as_deref() != Ok("composite"));
    env && !COMPOSITE_HERE.with(Cell::get)
}

/// Whether `t` lives on flex (with or without autodiff) as f32, and the kernels are on.
fn fused<const D: usize>(t: &Tensor<D>) -> bool {
    kernels_enabled()
        && t.dtype() == DType::F32
        && matches!(t.device().inner().as_dispatch(), DispatchDevice::Flex(_))
}

/// Whether the CPU kernels read weight `w` as stored: f32, or bf16 (a teacher run in bf16:
/// its products round the f32 activations to bf16 and sum in f32, `super::cpu::bf16`).
fn kernel_weight(w: &Tensor<2>) -> bool {
    matches!(w.dtype(), DType::F32 | DType::BF16)
}

/// `w` in `dtype` (a float dtype), for composed products whose operands must agree.
fn like(w: Tensor<2>, dtype: DType) -> Tensor<2> {
    let target = match dtype {
        DType::F64 => FloatDType::F64,
        DType::F16 => FloatDType::F16,
        DType::BF16 => FloatDType::BF16,
        _ => FloatDType::F32,
    };
    if w.dtype() == dtype {
        w
    } else {
        w.cast(target)
    }
}

/// Per-row negative log-likelihood of `targets` under softmax(`logits`), in nats.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`, `targets`: `[rows]`; returns `[rows]`
pub fn cross_entropy(logits: Tensor<2>, targets: Tensor<1, Int>) -> Tensor<1> {
    if !fused(&logits) {
        return composite::cross_entropy(logits, targets);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_cross_entropy(
        logits.into_dispatch(),
        targets.into_dispatch(),
    ))
}

/// Per-row sparse distillation loss `kind` at temperature `tau` of the student `logits`
/// against the teacher's kept support (semantics in `crate::distill::loss`). Only the logits
/// get a gradient.
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `ids`, `log_probs`, `mask`: `[rows, width]` (width ≤ 256 on
///   the CPU kernel); returns `[rows]`
pub fn sparse_distill(
    logits: Tensor<2>,
    ids: Tensor<2, Int>,
    log_probs: Tensor<2>,
    mask: Tensor<2>,
    kind: LossKind,
    tau: f64,
) -> Tensor<1> {
    if !fused(&logits) || ids.dims()[1] > 256 {
        return composite::sparse_distill(logits, ids, log_probs, mask, kind, tau);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_sparse_distill(
        logits.into_dispatch(),
        ids.into_dispatch(),
        log_probs.into_dispatch(),
        mask.into_dispatch(),
        loss_code(kind),
        tau as f32,
    ))
}

/// The output head fused with its losses: Σ_r ce_weight·CE_r + kd_weight·KD_r over the
/// positions of `h`, where CE_r is the next-token cross-entropy of `targets` under
/// softmax(h_r · W) and KD_r the sparse distillation loss against `distill` (when given),
/// computed `chunk` positions at a time so the `[rows, vocab]` logits and their gradient never
/// exist whole. Differentiable with respect to `h` and the weight. On flex with f32 it is one
/// CPU kernel (`super::cpu::head`); elsewhere [`composite::head_loss`] chunks the same way.
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
    let narrow = distill.is_some_and(|d| d.ids.dims()[1] > 256);
    if !fused(&h) || head.weight.dtype() != DType::F32 || narrow || head.softcap.is_some() {
        return composite::head_loss(h, head, targets, distill, weights, chunk);
    }
    let device = h.device();
    let (ids, log_probs, mask, kind, tau) = match distill {
        Some(d) => (
            d.ids.clone(),
            d.log_probs.clone(),
            d.mask.clone(),
            loss_code(d.kind),
            d.tau as f32,
        ),
        None => (
            Tensor::<2, Int>::zeros([1, 1], &device),
            Tensor::<2>::zeros([1, 1], &device),
            Tensor::<2>::zeros([1, 1], &device),
            NO_DISTILL,
            1.0,
        ),
    };
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_head_loss(
        h.into_dispatch(),
        head.weight.clone().into_dispatch(),
        targets.into_dispatch(),
        ids.into_dispatch(),
        log_probs.into_dispatch(),
        mask.into_dispatch(),
        u8::from(head.tied),
        kind,
        tau,
        weights.0 as f32,
        weights.1 as f32,
        chunk.max(1),
    ))
}

/// The output head fused with the cross-tokenizer distillation losses (ULD, or GOLD's hybrid;
/// the maths in `super::cpu::cross`): Σ_r ce_weight·CE_r + kd_weight·Σ_u L_u over the rows of
/// `h` and the units of `cross`, computed about `chunk` rows at a time (a chunk never splits a
/// unit). Differentiable with respect to `h` and the weight. On flex with f32 (teacher width
/// and k up to 256) it is one CPU kernel; elsewhere [`composite::cross_head_loss`].
///
/// Panics when `cross.span` does not describe units ([`super::units`] says why).
///
/// # Shapes
/// - `h`: `[rows, d]`; `targets`: `[rows]`; `cross` as [`CrossDistillation`]; returns `[1]`
///   (f32)
pub fn cross_head_loss(
    h: Tensor<2>,
    head: &HeadWeight,
    targets: Tensor<1, Int>,
    cross: &CrossDistillation,
    weights: (f64, f64),
    chunk: usize,
) -> Tensor<1> {
    let narrow = cross.log_t.dims()[1] <= 256 && cross.top_k <= 256;
    if !fused(&h) || head.weight.dtype() != DType::F32 || !narrow || head.softcap.is_some() {
        return composite::cross_head_loss(h, head, targets, cross, weights, chunk);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_cross_head_loss(
        h.into_dispatch(),
        head.weight.clone().into_dispatch(),
        targets.into_dispatch(),
        cross.span.clone().into_dispatch(),
        cross.log_t.clone().into_dispatch(),
        cross.matched.clone().into_dispatch(),
        cross.mask.clone().into_dispatch(),
        cross.student_matched.clone().into_dispatch(),
        u8::from(head.tied),
        cross_code(cross.kind),
        cross.tau as f32,
        cross.top_k,
        [cross.gold_weights.0 as f32, cross.gold_weights.1 as f32],
        [weights.0 as f32, weights.1 as f32],
        chunk.max(1),
    ))
}

/// The head's logits h · W (no gradient: for a logit pass or an online teacher), the weight
/// read in its own layout (a tied head's embedding is not transposed into a copy).
///
/// # Shapes
/// - `h`: `[rows, d]`; returns `[rows, vocab]` in `h`'s dtype
pub fn head_logits(h: Tensor<2>, head: &HeadWeight) -> Tensor<2> {
    if !fused(&h) || !kernel_weight(&head.weight) {
        let w = like(head.weight.clone(), h.dtype());
        return head.cap(h.matmul(if head.tied { w.transpose() } else { w }));
    }
    head.cap(Tensor::from_dispatch(
        <Dispatch as FusedOps>::fused_head_logits(
            h.into_dispatch(),
            head.weight.clone().into_dispatch(),
            u8::from(head.tied),
        ),
    ))
}

/// Positions per chunk of [`head_loss`] that keep one chunk's logits within 2^24 values
/// (64 MiB in f32) at `vocab`, and at least 128.
pub fn default_head_chunk(vocab: usize) -> usize {
    super::cpu::head::default_chunk(vocab)
}

/// x · W (a linear layer without bias) over every row of `x` as one matrix product. `w` may be
/// stored in bf16 (a teacher run in bf16): on flex the kernel rounds `x` to bf16 and sums in
/// f32, returning f32; elsewhere `w` is cast to `x`'s dtype.
///
/// # Shapes
/// - `x`: `[.., d_in]`, `w`: `[d_in, d_out]`; returns `[.., d_out]`
pub fn linear<const D: usize>(x: Tensor<D>, w: Tensor<2>) -> Tensor<D> {
    if !fused(&x) || !kernel_weight(&w) {
        let w = like(w, x.dtype());
        return composite::linear(x, w);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_linear(
        x.into_dispatch(),
        w.into_dispatch(),
    ))
}

/// silu(gate) · up, element-wise.
pub fn swiglu<const D: usize>(gate: Tensor<D>, up: Tensor<D>) -> Tensor<D> {
    if !fused(&gate) {
        return composite::swiglu(gate, up);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_swiglu(
        gate.into_dispatch(),
        up.into_dispatch(),
    ))
}

/// RMSNorm over the last dimension: x · γ / √(mean(x²) + ε).
///
/// # Shapes
/// - `x`: `[.., d]`, `gamma`: `[d]`; returns `x`'s shape
pub fn rms_norm<const D: usize>(x: Tensor<D>, gamma: Tensor<1>, eps: f64) -> Tensor<D> {
    if !fused(&x) {
        return composite::rms_norm(x, gamma, eps);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rms_norm(
        x.into_dispatch(),
        gamma.into_dispatch(),
        eps as f32,
    ))
}

/// Causal self-attention with rotary embeddings ("rotate half") and grouped-query heads,
/// scaled by 1/√head_dim, straight from the projections' layout.
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
    if !fused(&q) {
        // Under autodiff (training on a GPU backend, or a dtype the CPU kernel does not take),
        // burn's `attention` would keep [batch, heads, seq, seq] scores for the backward pass.
        if kernels_enabled() && [&q, &k, &v].iter().any(|t| t.is_tracked()) {
            let chunk = attention_chunk(q.dims()[0], heads, q.dims()[1]);
            return chunked_causal_attention(q, k, v, cos, sin, heads, kv_heads, chunk);
        }
        return composite::causal_attention(q, k, v, cos, sin, heads, kv_heads);
    }
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        cos.into_dispatch(),
        sin.into_dispatch(),
        heads,
        kv_heads,
    ))
}

/// Score elements of one query chunk (`batch · heads · chunk · seq`) that
/// [`chunked_causal_attention`] aims for: 2^24, 64 MiB in f32.
const CHUNK_SCORES: usize = 1 << 24;

/// Query positions per chunk for `batch · heads` attention rows over `seq` positions: as many
/// as keep a chunk's scores near [`CHUNK_SCORES`], at least 16 (or the whole sequence).
pub(crate) fn attention_chunk(batch: usize, heads: usize, seq: usize) -> usize {
    let per_position = (batch * heads * seq).max(1);
    (CHUNK_SCORES / per_position).clamp(16, seq.max(16))
}

/// [`causal_attention`] through the chunked, memory-efficient extension
/// (`super::chunked_attention`), `chunk` query positions at a time.
///
/// Rotary embeddings are applied here, key/value heads are shared by their query heads without
/// copies, and no `[batch, heads, seq, seq]` tensor is kept for the backward pass. What the GPU
/// backends train with ([`causal_attention`] picks the chunk).
///
/// # Shapes
/// - as [`causal_attention`]
#[allow(clippy::too_many_arguments)]
pub fn chunked_causal_attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    cos: Tensor<2>,
    sin: Tensor<2>,
    heads: usize,
    kv_heads: usize,
    chunk: usize,
) -> Tensor<3> {
    let [batch, seq, width] = q.dims();
    let [q, k, v] = composite::rotated_heads([q, k, v], &cos, &sin, heads, kv_heads);
    let out = Tensor::<4>::from_dispatch(<Dispatch as ChunkedAttention>::chunked_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        chunk,
    ));
    out.swap_dims(1, 2).reshape([batch, seq, width])
}
