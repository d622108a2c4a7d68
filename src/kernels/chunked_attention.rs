//! Memory-efficient causal attention for training on every backend: queries in chunks, the
//! softmax's log-normaliser kept instead of its probabilities, and the probabilities
//! recomputed chunk by chunk in the backward pass (FlashAttention's recurrence, composed from
//! burn's primitive ops).
//!
//! Why: under autodiff burn's `attention` takes its fallback, which keeps the `[batch, heads,
//! seq, seq]` scores and probabilities for the backward pass, so activation memory grows with
//! the square of the context. Here the backward pass keeps only `q`, `k`, `v`, the output and
//! a `[batch, heads, seq]` log-normaliser; the largest temporary is one chunk's
//! `[batch, heads, chunk, ≤seq]` scores. Grouped-query heads read their shared key/value head
//! in place (the query heads of a group are stacked as rows), never copied per head.
//!
//! The forward pass is a default trait body, so it runs on flex, the cubecl backends (wgpu,
//! cuda, fused) and anything else burn dispatches to; `Autodiff<B>` adds the hand-written
//! backward step. The flex CPU path keeps its own fused kernel (`super::extension`); this one
//! serves the GPU backends and every dtype the kernel does not take.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::Flex;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata, backend_extension};
use burn::tensor::{FloatDType, Shape, Slice, TensorData};

/// Chunked causal attention as a backend extension.
#[backend_extension(Flex, Cube: cfg(any(feature = "wgpu", feature = "cuda")), Autodiff)]
pub trait ChunkedAttention: Backend {
    /// Causal softmax(q·kᵀ/√hd)·v over `chunk` query positions at a time.
    ///
    /// `q`: `[batch, heads, seq, hd]`; `k`, `v`: `[batch, kv_heads, seq, hd]`, where query head
    /// `h` reads key/value head `h / (heads / kv_heads)`; returns `q`'s shape.
    fn chunked_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        chunk: usize,
    ) -> FloatTensor<Self> {
        forward::<Self>(&q, &k, &v, chunk).out
    }
}

impl ChunkedAttention for Flex {}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl ChunkedAttention for burn::backend::Cube {}

/// The shapes of one call.
#[derive(Debug, Clone, Copy)]
struct Dims {
    batch: usize,
    kv_heads: usize,
    /// Query heads per key/value head.
    groups: usize,
    seq: usize,
    head_dim: usize,
    chunk: usize,
}

impl Dims {
    fn of<B: Backend>(q: &FloatTensor<B>, k: &FloatTensor<B>, chunk: usize) -> Dims {
        let (qs, ks) = (q.shape(), k.shape());
        let (heads, kv_heads) = (qs[1], ks[1]);
        assert!(
            kv_heads > 0 && heads.is_multiple_of(kv_heads) && qs[2] == ks[2] && qs[3] == ks[3],
            "attention shapes do not match: q {qs:?}, k {ks:?}"
        );
        Dims {
            batch: qs[0],
            kv_heads,
            groups: heads / kv_heads,
            seq: qs[2],
            head_dim: qs[3],
            chunk: chunk.clamp(1, qs[2].max(1)),
        }
    }

    fn scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }

    /// The query chunks as `start..end` position ranges.
    fn chunks(&self) -> impl Iterator<Item = (usize, usize)> + use<> {
        let (seq, chunk) = (self.seq, self.chunk);
        (0..seq)
            .step_by(chunk)
            .map(move |s0| (s0, (s0 + chunk).min(seq)))
    }

    /// `[batch, kv_heads, groups, seq, last]`: a query-side tensor with its groups split out.
    fn grouped(&self, last: usize) -> Shape {
        Shape::new([self.batch, self.kv_heads, self.groups, self.seq, last])
    }

    /// `[batch, kv_heads, groups·rows, last]`: one chunk's query rows, groups stacked.
    fn stacked(&self, rows: usize, last: usize) -> Shape {
        Shape::new([self.batch, self.kv_heads, self.groups * rows, last])
    }
}

/// The forward pass's output and what its backward pass needs besides the inputs.
#[derive(Debug, Clone)]
struct Forward<B: Backend> {
    /// `[batch, heads, seq, hd]`.
    out: FloatTensor<B>,
    /// ln Σ exp(scores) per query row, `[batch, kv_heads, groups, seq, 1]`.
    lse: FloatTensor<B>,
}

/// Positions `s0..s1` of a `[batch, kv_heads, groups, seq, last]` tensor, as stacked rows.
fn rows<B: Backend>(t: &FloatTensor<B>, d: &Dims, (s0, s1): (usize, usize)) -> FloatTensor<B> {
    let last = t.shape()[4];
    let part = B::float_slice(
        t.clone(),
        &[all(), all(), all(), Slice::from(s0..s1), all()],
    );
    B::float_reshape(part, d.stacked(s1 - s0, last))
}

fn all() -> Slice {
    Slice::from(..)
}

/// Key/value positions `0..s1` of a `[batch, kv_heads, seq, hd]` tensor.
fn prefix<B: Backend>(t: &FloatTensor<B>, s1: usize) -> FloatTensor<B> {
    B::float_slice(t.clone(), &[all(), all(), Slice::from(0..s1), all()])
}

/// The causal mask of the diagonal block, `[chunk, chunk]`: 0 on and below the diagonal,
/// −∞ above, in `dtype` on `device`. Built once per call and shared by every chunk (the part
/// of a chunk's keys before its first query is never masked).
fn diagonal_mask<B: Backend>(
    chunk: usize,
    dtype: FloatDType,
    device: &B::Device,
) -> FloatTensor<B> {
    let values: Vec<f32> = (0..chunk * chunk)
        .map(|i| {
            if i % chunk > i / chunk {
                f32::NEG_INFINITY
            } else {
                0.0
            }
        })
        .collect();
    let mask = B::float_from_data(TensorData::new(values, [chunk, chunk]), device);
    B::float_cast(mask, dtype)
}

/// One chunk's scaled, masked scores `[batch, kv_heads, groups·c, s1]` for stacked query rows
/// `q` at positions `s0..s1`.
fn scores<B: Backend>(
    q: FloatTensor<B>,
    k: &FloatTensor<B>,
    mask: &FloatTensor<B>,
    d: &Dims,
    (s0, s1): (usize, usize),
) -> FloatTensor<B> {
    let c = s1 - s0;
    let kt = B::float_swap_dims(prefix::<B>(k, s1), 2, 3);
    let s = B::float_mul_scalar(B::float_matmul(q, kt), d.scale().into());
    let diagonal = B::float_slice(mask.clone(), &[Slice::from(0..c), Slice::from(0..c)]);
    let bias = if s0 == 0 {
        diagonal
    } else {
        let dtype = FloatDType::from(diagonal.dtype());
        let open = B::float_zeros(Shape::new([c, s0]), &diagonal.device(), dtype);
        B::float_cat(vec![open, diagonal], 1)
    };
    // The bias depends on the position only: broadcast over batch, heads and groups.
    let grouped = Shape::new([d.batch, d.kv_heads, d.groups, c, s1]);
    let bias = B::float_expand(
        B::float_reshape(bias, Shape::new([1, 1, 1, c, s1])),
        grouped.clone(),
    );
    let s = B::float_add(B::float_reshape(s, grouped), bias);
    B::float_reshape(s, d.stacked(c, s1))
}

/// `t` broadcast along its last dimension to `like`'s shape.
fn widen<B: Backend>(t: FloatTensor<B>, like: &FloatTensor<B>) -> FloatTensor<B> {
    B::float_expand(t, like.shape())
}

/// The forward pass, chunk by chunk.
fn forward<B: Backend>(
    q: &FloatTensor<B>,
    k: &FloatTensor<B>,
    v: &FloatTensor<B>,
    chunk: usize,
) -> Forward<B> {
    let d = Dims::of::<B>(q, k, chunk);
    let q = B::float_reshape(q.clone(), d.grouped(d.head_dim));
    let mask = diagonal_mask::<B>(d.chunk, FloatDType::from(q.dtype()), &q.device());
    let (mut outs, mut lses) = (Vec::new(), Vec::new());
    for span in d.chunks() {
        let c = span.1 - span.0;
        let s = scores::<B>(rows::<B>(&q, &d, span), k, &mask, &d, span);
        let max = B::float_max_dim(s.clone(), 3);
        let p = B::float_exp(B::float_sub(s.clone(), widen::<B>(max.clone(), &s)));
        let sum = B::float_sum_dim(p.clone(), 3);
        let o = B::float_matmul(p, prefix::<B>(v, span.1));
        let o = B::float_div(o.clone(), widen::<B>(sum.clone(), &o));
        let lse = B::float_add(max, B::float_log(sum));
        let grouped =
            |t, last| B::float_reshape(t, Shape::new([d.batch, d.kv_heads, d.groups, c, last]));
        outs.push(grouped(o, d.head_dim));
        lses.push(grouped(lse, 1));
    }
    let out = B::float_cat(outs, 3);
    Forward {
        out: B::float_reshape(
            out,
            Shape::new([d.batch, d.kv_heads * d.groups, d.seq, d.head_dim]),
        ),
        lse: B::float_cat(lses, 3),
    }
}

/// The gradients of `q`, `k` and `v`.
struct Grads<B: Backend> {
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
}

/// Adds `part` (`[batch, kv_heads, s1, hd]`) into positions `0..s1` of `total`.
fn accumulate<B: Backend>(total: FloatTensor<B>, part: FloatTensor<B>) -> FloatTensor<B> {
    let s1 = part.shape()[2];
    let span = [all(), all(), Slice::from(0..s1), all()];
    let sum = B::float_add(B::float_slice(total.clone(), &span), part);
    B::float_slice_assign(total, &span, sum)
}

/// The backward pass: each chunk's probabilities recomputed from its log-normaliser.
fn backward<B: Backend>(state: &State<B>, grad: FloatTensor<B>) -> Grads<B> {
    let State {
        q,
        k,
        v,
        out,
        lse,
        chunk,
    } = state;
    let d = Dims::of::<B>(q, k, *chunk);
    let scale = d.scale();
    let q5 = B::float_reshape(q.clone(), d.grouped(d.head_dim));
    let g5 = B::float_reshape(grad, d.grouped(d.head_dim));
    let o5 = B::float_reshape(out.clone(), d.grouped(d.head_dim));
    // Δ = rowsum(dO ∘ O): the softmax backward's correction, one value per query row.
    let delta = B::float_sum_dim(B::float_mul(g5.clone(), o5), 4);
    let dtype = FloatDType::from(k.dtype());
    let mask = diagonal_mask::<B>(d.chunk, dtype, &k.device());
    let mut dk = B::float_zeros(k.shape(), &k.device(), dtype);
    let mut dv = B::float_zeros(v.shape(), &v.device(), dtype);
    let mut dqs = Vec::new();
    for span in d.chunks() {
        let (c, s1) = (span.1 - span.0, span.1);
        let qc = rows::<B>(&q5, &d, span);
        let gc = rows::<B>(&g5, &d, span);
        let s = scores::<B>(qc.clone(), k, &mask, &d, span);
        let p = B::float_exp(B::float_sub(
            s.clone(),
            widen::<B>(rows::<B>(lse, &d, span), &s),
        ));
        dv = accumulate::<B>(
            dv,
            B::float_matmul(B::float_swap_dims(p.clone(), 2, 3), gc.clone()),
        );
        let dp = B::float_matmul(gc, B::float_swap_dims(prefix::<B>(v, s1), 2, 3));
        let ds = B::float_mul(
            p,
            B::float_sub(dp.clone(), widen::<B>(rows::<B>(&delta, &d, span), &dp)),
        );
        let ds = B::float_mul_scalar(ds, scale.into());
        let dq = B::float_matmul(ds.clone(), prefix::<B>(k, s1));
        dqs.push(B::float_reshape(
            dq,
            Shape::new([d.batch, d.kv_heads, d.groups, c, d.head_dim]),
        ));
        dk = accumulate::<B>(dk, B::float_matmul(B::float_swap_dims(ds, 2, 3), qc));
    }
    let dq = B::float_reshape(
        B::float_cat(dqs, 3),
        Shape::new([d.batch, d.kv_heads * d.groups, d.seq, d.head_dim]),
    );
    Grads {
        q: dq,
        k: dk,
        v: dv,
    }
}

/// What the backward step keeps: the inputs, the output and the log-normaliser, never the
/// probabilities.
#[derive(Debug, Clone)]
struct State<B: Backend> {
    q: FloatTensor<B>,
    k: FloatTensor<B>,
    v: FloatTensor<B>,
    out: FloatTensor<B>,
    lse: FloatTensor<B>,
    chunk: usize,
}

#[derive(Debug)]
struct ChunkedBackward;

impl<B: Backend> Backward<B, 3> for ChunkedBackward {
    type State = State<B>;

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let Grads { q, k, v } = backward(&ops.state, grad);
        for (node, d) in ops.parents.into_iter().zip([q, k, v]) {
            if let Some(node) = node {
                grads.register::<B>(node.id, d);
            }
        }
    }
}

impl<B: ChunkedAttention, C: CheckpointStrategy> ChunkedAttention for Autodiff<B, C> {
    fn chunked_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        chunk: usize,
    ) -> FloatTensor<Self> {
        let (q, q_guard) = q.into_parts();
        let (k, k_guard) = k.into_parts();
        let (v, v_guard) = v.into_parts();
        let Forward { out, lse } = forward::<B>(&q, &k, &v, chunk);
        match ChunkedBackward
            .prepare::<C>([q_guard, k_guard, v_guard])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = State {
                    q,
                    k,
                    v,
                    out: out.clone(),
                    lse,
                    chunk,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}
