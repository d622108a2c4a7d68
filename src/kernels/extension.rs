//! The bridge between burn and the CPU kernels: a backend extension ([`FusedOps`], burn's
//! `#[backend_extension]`) implemented for the `flex` backend (forward only) and for
//! `Autodiff<Flex>` (forward plus a hand-written backward step per op). Everything here sees
//! flex's tensor primitive; the kernels themselves (`super::cpu`) see plain slices.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::flex::{Flex, FlexTensor};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{Backend, DType, TensorMetadata, backend_extension};
use burn::tensor::{Shape, TensorData};

use super::cpu::attention::{self, Dims, Rope};
use super::cpu::softmax::{self, Distill, Support};
use super::cpu::{bf16, cross, head, linear, rms_norm, swiglu};
use crate::spec::{CrossTokenizer, LossKind};

/// Fused operations with their own CPU kernels. Tensors are row-major; see each kernel in
/// `super::cpu` for the maths.
#[backend_extension(Flex, Autodiff)]
pub trait FusedOps: Backend {
    /// Per-row −ln softmax(logits)[target]. `logits`: `[rows, vocab]`, `targets`: `[rows]`.
    fn fused_cross_entropy(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self>;

    /// Per-row sparse distillation loss (`crate::distill::loss`). `logits`: `[rows, vocab]`;
    /// `ids`, `log_probs`, `mask`: `[rows, width]`; `kind`: [`loss_code`].
    fn fused_sparse_distill(
        logits: FloatTensor<Self>,
        ids: IntTensor<Self>,
        log_probs: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        kind: u8,
        tau: f32,
    ) -> FloatTensor<Self>;

    /// The output head with its losses, in chunks of `chunk` positions (`super::cpu::head`): Σ_r
    /// ce_weight·CE_r + kd_weight·KD_r as a `[1]` tensor.
    ///
    /// `h`: `[rows, d]`; `w`: `[d, vocab]` (`layout` 0) or `[vocab, d]` (1, tied); `targets`:
    /// `[rows]`; `ids`, `log_probs`, `mask`: `[rows, width]`, read only when `kind` is a
    /// [`loss_code`] (not [`NO_DISTILL`]).
    #[allow(clippy::too_many_arguments)]
    fn fused_head_loss(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        targets: IntTensor<Self>,
        ids: IntTensor<Self>,
        log_probs: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        layout: u8,
        kind: u8,
        tau: f32,
        ce_weight: f32,
        kd_weight: f32,
        chunk: usize,
    ) -> FloatTensor<Self>;

    /// The output head with the cross-tokenizer distillation term, in chunks of about `chunk`
    /// positions that never split a unit (`super::cpu::cross`): Σ_r weights[0]·CE_r +
    /// weights[1]·Σ_u L_u as a `[1]` tensor.
    ///
    /// `h`, `w`, `targets`, `layout` as in [`FusedOps::fused_head_loss`]; `span`: `[rows]`;
    /// `log_t`, `matched`, `mask`: `[rows, width]`; `student_matched`: `[vocab]`; `kind`:
    /// [`cross_code`]; `gold_weights`: (w_m, w_u).
    #[allow(clippy::too_many_arguments)]
    fn fused_cross_head_loss(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        targets: IntTensor<Self>,
        span: IntTensor<Self>,
        log_t: FloatTensor<Self>,
        matched: IntTensor<Self>,
        mask: FloatTensor<Self>,
        student_matched: FloatTensor<Self>,
        layout: u8,
        kind: u8,
        tau: f32,
        top_k: usize,
        gold_weights: [f32; 2],
        weights: [f32; 2],
        chunk: usize,
    ) -> FloatTensor<Self>;

    /// The head's logits h · W without a gradient (a logit pass): `h`: `[rows, d]`; `w` as
    /// in [`FusedOps::fused_head_loss`]; returns `[rows, vocab]`.
    fn fused_head_logits(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        layout: u8,
    ) -> FloatTensor<Self>;

    /// x · W without bias. `x`: `[.., d_in]`, `w`: `[d_in, d_out]`; returns `[.., d_out]`.
    fn fused_linear(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self>;

    /// silu(gate) · up, element-wise (same shapes).
    fn fused_swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self>;

    /// RMSNorm over the last dimension. `x`: `[.., d]`, `gamma`: `[d]`.
    fn fused_rms_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self>;

    /// Causal attention with rotary embeddings. `q`: `[batch, seq, heads·hd]`, `k`, `v`:
    /// `[batch, seq, kv_heads·hd]`, `cos`, `sin`: `[seq, hd]`; returns `q`'s shape.
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        heads: usize,
        kv_heads: usize,
    ) -> FloatTensor<Self>;
}

/// The `u8` code of a loss kind across the extension boundary.
pub fn loss_code(kind: LossKind) -> u8 {
    match kind {
        LossKind::Kl => 0,
        LossKind::CeSoft => 1,
        LossKind::ReverseKl => 2,
        LossKind::Mse => 3,
    }
}

/// The `kind` of [`FusedOps::fused_head_loss`] without a distillation term.
pub const NO_DISTILL: u8 = u8::MAX;

/// The `u8` code of a cross-tokenizer loss across the extension boundary.
pub fn cross_code(kind: CrossTokenizer) -> u8 {
    match kind {
        CrossTokenizer::Uld => 0,
        CrossTokenizer::Gold => 1,
    }
}

fn loss_kind(code: u8) -> LossKind {
    match code {
        0 => LossKind::Kl,
        1 => LossKind::CeSoft,
        2 => LossKind::ReverseKl,
        _ => LossKind::Mse,
    }
}

/// `t` with its elements contiguous in memory (a copy only when it is a strided view).
fn contiguous(t: FlexTensor) -> FlexTensor {
    if t.is_contiguous() {
        t
    } else {
        t.to_contiguous()
    }
}

/// The f32 elements of a contiguous tensor.
fn floats(t: &FlexTensor) -> &[f32] {
    t.as_slice::<f32>()
        .expect("fused kernels take contiguous f32 tensors")
}

/// The bf16 elements of a contiguous tensor (a teacher's weight stored in bf16).
fn halves(t: &FlexTensor) -> &[half::bf16] {
    t.as_slice::<half::bf16>()
        .expect("bf16 kernels take contiguous bf16 weights")
}

/// Token ids as u32, each checked against `bound`.
fn ids(t: &FlexTensor, bound: usize) -> Vec<u32> {
    signed(t, 0, bound).into_iter().map(|v| v as u32).collect()
}

/// Integers, each checked to lie in `low..bound`.
fn signed(t: &FlexTensor, low: i64, bound: usize) -> Vec<i32> {
    let t = contiguous(t.clone());
    let values: Vec<i64> = match t.dtype() {
        DType::I64 => t.as_slice::<i64>().map(<[i64]>::to_vec),
        DType::I32 => t
            .as_slice::<i32>()
            .map(|s| s.iter().map(|&v| v as i64).collect()),
        DType::U32 => t
            .as_slice::<u32>()
            .map(|s| s.iter().map(|&v| v as i64).collect()),
        other => panic!("token ids of type {other:?} are not supported"),
    }
    .expect("contiguous ids");
    values
        .into_iter()
        .map(|v| {
            assert!(
                v >= low && v < bound as i64,
                "token id {v} is outside the vocabulary of {bound}"
            );
            v as i32
        })
        .collect()
}

fn tensor(values: Vec<f32>, shape: impl Into<Shape>) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape.into()))
}

fn dims2(t: &FlexTensor) -> (usize, usize) {
    let shape = t.shape();
    let last = shape[shape.num_dims() - 1];
    (shape.num_elements() / last.max(1), last)
}

// ---- forward computations shared by both implementations -------------------------------

struct CeForward {
    logits: FlexTensor,
    targets: Vec<u32>,
    loss: FlexTensor,
    lse: Vec<f32>,
}

fn ce_forward(logits: FlexTensor, targets: &FlexTensor) -> CeForward {
    let logits = contiguous(logits);
    let (rows, vocab) = dims2(&logits);
    let targets = ids(targets, vocab);
    assert_eq!(targets.len(), rows, "one target per row");
    let (loss, lse) = softmax::cross_entropy_forward(floats(&logits), vocab, &targets);
    CeForward {
        loss: tensor(loss, [rows]),
        logits,
        targets,
        lse,
    }
}

struct KdForward {
    logits: FlexTensor,
    support: KdSupport,
    loss: FlexTensor,
    lse: Vec<f32>,
}

#[derive(Debug, Clone)]
struct KdSupport {
    ids: Vec<u32>,
    log_probs: FlexTensor,
    mask: FlexTensor,
    width: usize,
    distill: (u8, f32),
}

impl KdSupport {
    fn view(&self) -> Support<'_> {
        Support {
            ids: &self.ids,
            log_probs: floats(&self.log_probs),
            mask: floats(&self.mask),
            width: self.width,
        }
    }

    fn distill(&self) -> Distill {
        Distill {
            kind: loss_kind(self.distill.0),
            tau: self.distill.1,
        }
    }
}

fn kd_forward(
    logits: FlexTensor,
    ids_t: &FlexTensor,
    log_probs: FlexTensor,
    mask: FlexTensor,
    kind: u8,
    tau: f32,
) -> KdForward {
    let logits = contiguous(logits);
    let (rows, vocab) = dims2(&logits);
    let (id_rows, width) = dims2(ids_t);
    assert_eq!(id_rows, rows, "one support row per logit row");
    let support = KdSupport {
        ids: ids(ids_t, vocab),
        log_probs: contiguous(log_probs),
        mask: contiguous(mask),
        width,
        distill: (kind, tau),
    };
    let (loss, lse) =
        softmax::distill_forward(floats(&logits), vocab, support.view(), support.distill());
    KdForward {
        loss: tensor(loss, [rows]),
        logits,
        support,
        lse,
    }
}

/// A fused head's hidden states, weight and targets, contiguous, with the targets checked
/// against the vocabulary.
#[derive(Debug)]
struct HeadCore {
    h: FlexTensor,
    w: FlexTensor,
    layout: head::Layout,
    dims: head::Dims,
    targets: Vec<u32>,
}

impl HeadCore {
    fn new(h: FlexTensor, w: FlexTensor, targets: &FlexTensor, layout: u8) -> HeadCore {
        let (h, w) = (contiguous(h), contiguous(w));
        let (rows, d) = dims2(&h);
        let ws = w.shape();
        assert_eq!(ws.num_dims(), 2, "head weight of rank 2");
        let (layout, vocab) = if layout == 0 {
            (head::Layout::InOut, ws[1])
        } else {
            (head::Layout::OutIn, ws[0])
        };
        assert_eq!(
            ws.num_elements(),
            d * vocab,
            "head weight {ws:?} does not take width {d}"
        );
        let targets = ids(targets, vocab);
        assert_eq!(targets.len(), rows, "one target per position");
        HeadCore {
            h,
            w,
            layout,
            dims: head::Dims { rows, d, vocab },
            targets,
        }
    }

    /// The loss of `out` under `weights` as a `[1]` tensor, with `out`.
    fn finish(weights: [f32; 2], out: head::HeadOut) -> (FlexTensor, head::HeadOut) {
        let loss = out.loss((weights[0], weights[1])) as f32;
        (tensor(vec![loss], [1]), out)
    }
}

/// The inputs of a fused head, contiguous, with the targets checked against the vocabulary.
#[derive(Debug)]
struct HeadInputs {
    core: HeadCore,
    support: Option<KdSupport>,
    weights: [f32; 2],
    chunk: usize,
}

impl HeadInputs {
    #[allow(clippy::too_many_arguments)]
    fn new(
        h: FlexTensor,
        w: FlexTensor,
        targets: &FlexTensor,
        [ids_t, log_probs, mask]: [FlexTensor; 3],
        layout: u8,
        (kind, tau): (u8, f32),
        weights: [f32; 2],
        chunk: usize,
    ) -> HeadInputs {
        let core = HeadCore::new(h, w, targets, layout);
        let head::Dims { rows, vocab, .. } = core.dims;
        let support = (kind != NO_DISTILL).then(|| {
            let (id_rows, width) = dims2(&ids_t);
            assert_eq!(id_rows, rows, "one support row per position");
            KdSupport {
                ids: ids(&ids_t, vocab),
                log_probs: contiguous(log_probs),
                mask: contiguous(mask),
                width,
                distill: (kind, tau),
            }
        });
        HeadInputs {
            core,
            support,
            weights,
            chunk,
        }
    }

    fn run(&self, grads: bool) -> (FlexTensor, head::HeadOut) {
        let c = &self.core;
        let terms = head::Terms {
            targets: &c.targets,
            distill: self.support.as_ref().map(|s| (s.view(), s.distill())),
            ce_weight: self.weights[0],
            kd_weight: self.weights[1],
        };
        let out = head::head_loss(
            floats(&c.h),
            floats(&c.w),
            c.layout,
            c.dims,
            terms,
            self.chunk,
            grads,
        );
        HeadCore::finish(self.weights, out)
    }
}

/// The inputs of a fused cross-tokenizer head, contiguous, checked.
#[derive(Debug)]
struct CrossInputs {
    core: HeadCore,
    units: Vec<cross::Unit>,
    log_t: FlexTensor,
    matched: Vec<i32>,
    mask: FlexTensor,
    width: usize,
    student_matched: FlexTensor,
    kind: CrossTokenizer,
    tau: f32,
    top_k: usize,
    gold_weights: [f32; 2],
    weights: [f32; 2],
    chunk: usize,
}

impl CrossInputs {
    #[allow(clippy::too_many_arguments)]
    fn new(
        [h, w]: [FlexTensor; 2],
        targets: &FlexTensor,
        span: &FlexTensor,
        [log_t, mask, student_matched]: [FlexTensor; 3],
        matched: &FlexTensor,
        layout: u8,
        (kind, tau, top_k): (u8, f32, usize),
        gold_weights: [f32; 2],
        weights: [f32; 2],
        chunk: usize,
    ) -> CrossInputs {
        let core = HeadCore::new(h, w, targets, layout);
        let head::Dims { rows, vocab, .. } = core.dims;
        let span = signed(span, -1, i32::MAX as usize);
        assert_eq!(span.len(), rows, "one span per position");
        let units = cross::units(&span).unwrap_or_else(|e| panic!("{e}"));
        let (t_rows, width) = dims2(&log_t);
        assert_eq!(t_rows, rows, "one teacher row per position");
        let student_matched = contiguous(student_matched);
        assert_eq!(
            floats(&student_matched).len(),
            vocab,
            "one flag per student id"
        );
        CrossInputs {
            core,
            units,
            log_t: contiguous(log_t),
            matched: signed(matched, -1, vocab),
            mask: contiguous(mask),
            width,
            student_matched,
            kind: if kind == cross_code(CrossTokenizer::Gold) {
                CrossTokenizer::Gold
            } else {
                CrossTokenizer::Uld
            },
            tau,
            top_k,
            gold_weights,
            weights,
            chunk,
        }
    }

    fn run(&self, grads: bool) -> (FlexTensor, head::HeadOut) {
        let c = &self.core;
        let terms = cross::Terms {
            targets: &c.targets,
            cross: cross::Cross {
                units: &self.units,
                log_t: floats(&self.log_t),
                matched: &self.matched,
                mask: floats(&self.mask),
                width: self.width,
                student_matched: floats(&self.student_matched),
                kind: self.kind,
                tau: self.tau,
                top_k: self.top_k,
                gold_weights: (self.gold_weights[0], self.gold_weights[1]),
            },
            ce_weight: self.weights[0],
            kd_weight: self.weights[1],
        };
        let out = cross::head_loss(
            floats(&c.h),
            floats(&c.w),
            c.layout,
            c.dims,
            terms,
            self.chunk,
            grads,
        );
        HeadCore::finish(self.weights, out)
    }
}

/// h · W for a weight in `layout` (0: `[d, vocab]`, 1: `[vocab, d]`), read in place.
fn head_logits_forward(h: FlexTensor, w: FlexTensor, layout: u8) -> FlexTensor {
    let (h, w) = (contiguous(h), contiguous(w));
    let (rows, d) = dims2(&h);
    let ws = w.shape();
    let (layout, vocab) = if layout == 0 {
        (head::Layout::InOut, ws[1])
    } else {
        (head::Layout::OutIn, ws[0])
    };
    assert_eq!(
        ws.num_elements(),
        d * vocab,
        "head weight {ws:?} does not take width {d}"
    );
    if w.dtype() == DType::BF16 {
        let w = halves(&w);
        let view = match layout {
            head::Layout::InOut => bf16::BView::rows(w, d, vocab),
            head::Layout::OutIn => bf16::BView::transposed(w, vocab, d),
        };
        return tensor(
            bf16::product((rows, vocab, d), floats(&h), view),
            [rows, vocab],
        );
    }
    let dims = head::Dims { rows, d, vocab };
    tensor(
        head::logits(floats(&h), floats(&w), layout, dims),
        [rows, vocab],
    )
}

/// (rows, d_in, d_out) of a linear layer's input and weight.
fn linear_dims(x: &FlexTensor, w: &FlexTensor) -> (usize, usize, usize) {
    let (rows, d_in) = dims2(x);
    let ws = w.shape();
    assert!(
        ws.num_dims() == 2 && ws[0] == d_in,
        "linear: weight {ws:?} does not take inputs of width {d_in}"
    );
    (rows, d_in, ws[1])
}

fn linear_forward(x: &FlexTensor, w: &FlexTensor) -> FlexTensor {
    let (rows, d_in, d_out) = linear_dims(x, w);
    let mut shape = x.shape();
    let last = shape.num_dims() - 1;
    shape[last] = d_out;
    if w.dtype() == DType::BF16 {
        // a teacher's bf16 weight: forward only (teachers are never differentiated)
        let view = bf16::BView::rows(halves(w), d_in, d_out);
        return tensor(bf16::product((rows, d_out, d_in), floats(x), view), shape);
    }
    tensor(
        linear::forward(floats(x), floats(w), rows, d_in, d_out),
        shape,
    )
}

fn swiglu_forward(gate: &FlexTensor, up: &FlexTensor) -> FlexTensor {
    assert_eq!(gate.shape(), up.shape(), "gate and up shapes differ");
    tensor(swiglu::forward(floats(gate), floats(up)), gate.shape())
}

fn rms_forward(x: &FlexTensor, gamma: &FlexTensor, eps: f32) -> (FlexTensor, Vec<f32>) {
    let (y, inv) = rms_norm::forward(floats(x), floats(gamma), eps);
    (tensor(y, x.shape()), inv)
}

#[derive(Debug, Clone)]
struct AttnInputs {
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    cos: FlexTensor,
    sin: FlexTensor,
    dims: Dims,
}

impl AttnInputs {
    fn new([q, k, v, cos, sin]: [FlexTensor; 5], heads: usize, kv_heads: usize) -> AttnInputs {
        let shape = q.shape();
        let (batch, seq, width) = (shape[0], shape[1], shape[2]);
        assert!(
            heads > 0
                && kv_heads > 0
                && heads.is_multiple_of(kv_heads)
                && width.is_multiple_of(heads),
            "attention heads do not divide the width"
        );
        let dims = Dims {
            batch,
            seq,
            heads,
            kv_heads,
            head_dim: width / heads,
        };
        AttnInputs {
            q: contiguous(q),
            k: contiguous(k),
            v: contiguous(v),
            cos: contiguous(cos),
            sin: contiguous(sin),
            dims,
        }
    }

    fn rope(&self) -> Rope<'_> {
        let n = self.dims.seq * self.dims.head_dim;
        Rope {
            cos: &floats(&self.cos)[..n],
            sin: &floats(&self.sin)[..n],
        }
    }

    fn forward(&self) -> (FlexTensor, Vec<f32>) {
        let (out, lse) = attention::forward(
            self.dims,
            self.rope(),
            floats(&self.q),
            floats(&self.k),
            floats(&self.v),
        );
        (tensor(out, self.q.shape()), lse)
    }
}

// ---- flex: forward only -----------------------------------------------------------------

impl FusedOps for Flex {
    fn fused_cross_entropy(logits: FlexTensor, targets: FlexTensor) -> FlexTensor {
        ce_forward(logits, &targets).loss
    }

    fn fused_sparse_distill(
        logits: FlexTensor,
        ids: FlexTensor,
        log_probs: FlexTensor,
        mask: FlexTensor,
        kind: u8,
        tau: f32,
    ) -> FlexTensor {
        kd_forward(logits, &ids, log_probs, mask, kind, tau).loss
    }

    fn fused_head_loss(
        h: FlexTensor,
        w: FlexTensor,
        targets: FlexTensor,
        ids: FlexTensor,
        log_probs: FlexTensor,
        mask: FlexTensor,
        layout: u8,
        kind: u8,
        tau: f32,
        ce_weight: f32,
        kd_weight: f32,
        chunk: usize,
    ) -> FlexTensor {
        let support = [ids, log_probs, mask];
        HeadInputs::new(
            h,
            w,
            &targets,
            support,
            layout,
            (kind, tau),
            [ce_weight, kd_weight],
            chunk,
        )
        .run(false)
        .0
    }

    fn fused_cross_head_loss(
        h: FlexTensor,
        w: FlexTensor,
        targets: FlexTensor,
        span: FlexTensor,
        log_t: FlexTensor,
        matched: FlexTensor,
        mask: FlexTensor,
        student_matched: FlexTensor,
        layout: u8,
        kind: u8,
        tau: f32,
        top_k: usize,
        gold_weights: [f32; 2],
        weights: [f32; 2],
        chunk: usize,
    ) -> FlexTensor {
        CrossInputs::new(
            [h, w],
            &targets,
            &span,
            [log_t, mask, student_matched],
            &matched,
            layout,
            (kind, tau, top_k),
            gold_weights,
            weights,
            chunk,
        )
        .run(false)
        .0
    }

    fn fused_head_logits(h: FlexTensor, w: FlexTensor, layout: u8) -> FlexTensor {
        head_logits_forward(h, w, layout)
    }

    fn fused_linear(x: FlexTensor, w: FlexTensor) -> FlexTensor {
        linear_forward(&contiguous(x), &contiguous(w))
    }

    fn fused_swiglu(gate: FlexTensor, up: FlexTensor) -> FlexTensor {
        swiglu_forward(&contiguous(gate), &contiguous(up))
    }

    fn fused_rms_norm(x: FlexTensor, gamma: FlexTensor, eps: f32) -> FlexTensor {
        rms_forward(&contiguous(x), &contiguous(gamma), eps).0
    }

    fn fused_attention(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        cos: FlexTensor,
        sin: FlexTensor,
        heads: usize,
        kv_heads: usize,
    ) -> FlexTensor {
        AttnInputs::new([q, k, v, cos, sin], heads, kv_heads)
            .forward()
            .0
    }
}

// ---- Autodiff<flex>: forward and backward ----------------------------------------------

type Ad<C> = Autodiff<Flex, C>;

/// The incoming gradient of an op's output as a contiguous tensor.
fn incoming(grads: &mut Gradients, ops: &Ops<impl Sized, 1>) -> FlexTensor {
    contiguous(grads.consume::<Flex>(&ops.node))
}

#[derive(Debug)]
struct CeBackward;

impl Backward<Flex, 1> for CeBackward {
    type State = (FlexTensor, Vec<u32>, Vec<f32>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = incoming(grads, &ops);
        let [parent] = ops.parents;
        let (logits, targets, lse) = ops.state;
        if let Some(node) = parent {
            let (_, vocab) = dims2(&logits);
            let d = softmax::cross_entropy_backward(
                floats(&logits),
                vocab,
                &targets,
                &lse,
                floats(&grad),
            );
            grads.register::<Flex>(node.id, tensor(d, logits.shape()));
        }
    }
}

#[derive(Debug)]
struct KdBackward;

impl Backward<Flex, 1> for KdBackward {
    type State = (FlexTensor, KdSupport, Vec<f32>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = incoming(grads, &ops);
        let [parent] = ops.parents;
        let (logits, support, lse) = ops.state;
        if let Some(node) = parent {
            let (_, vocab) = dims2(&logits);
            let d = softmax::distill_backward(
                floats(&logits),
                vocab,
                support.view(),
                support.distill(),
                &lse,
                floats(&grad),
            );
            grads.register::<Flex>(node.id, tensor(d, logits.shape()));
        }
    }
}

#[derive(Debug)]
struct HeadBackward;

impl Backward<Flex, 2> for HeadBackward {
    /// ∂loss/∂h and ∂loss/∂W, computed in the forward pass, with their shapes.
    type State = (Vec<f32>, Shape, Vec<f32>, Shape);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = contiguous(grads.consume::<Flex>(&ops.node));
        let g = floats(&grad).first().copied().unwrap_or(1.0);
        let [h_node, w_node] = ops.parents;
        let (dh, h_shape, dw, w_shape) = ops.state;
        let scaled = |mut v: Vec<f32>| {
            if g != 1.0 {
                v.iter_mut().for_each(|x| *x *= g);
            }
            v
        };
        if let Some(node) = h_node {
            grads.register::<Flex>(node.id, tensor(scaled(dh), h_shape));
        }
        if let Some(node) = w_node {
            grads.register::<Flex>(node.id, tensor(scaled(dw), w_shape));
        }
    }
}

/// A fused head on `Autodiff<Flex>`: with a tracked h or W, `run(true)` computes the loss and
/// ∂h, ∂W at once and [`HeadBackward`] keeps them; else `run(false)`, the loss alone.
fn head_op<C: CheckpointStrategy>(
    guards: [NodeGuard; 2],
    core: &HeadCore,
    run: impl Fn(bool) -> (FlexTensor, head::HeadOut),
) -> FloatTensor<Ad<C>> {
    match HeadBackward.prepare::<C>(guards).compute_bound().stateful() {
        OpsKind::Tracked(prep) => {
            let (loss, out) = run(true);
            let state = (
                out.dh.unwrap_or_default(),
                core.h.shape(),
                out.dw.unwrap_or_default(),
                core.w.shape(),
            );
            prep.finish(state, loss)
        }
        OpsKind::UnTracked(prep) => prep.finish(run(false).0),
    }
}

#[derive(Debug)]
struct LinearBackward;

impl Backward<Flex, 2> for LinearBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = contiguous(grads.consume::<Flex>(&ops.node));
        let [x_node, w_node] = ops.parents;
        let (x, w) = ops.state;
        let dims = linear_dims(&x, &w);
        let (dx, dw) = linear::backward(
            floats(&x),
            floats(&w),
            floats(&grad),
            dims,
            (x_node.is_some(), w_node.is_some()),
        );
        if let (Some(node), Some(dx)) = (x_node, dx) {
            grads.register::<Flex>(node.id, tensor(dx, x.shape()));
        }
        if let (Some(node), Some(dw)) = (w_node, dw) {
            grads.register::<Flex>(node.id, tensor(dw, w.shape()));
        }
    }
}

#[derive(Debug)]
struct SwigluBackward;

impl Backward<Flex, 2> for SwigluBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = contiguous(grads.consume::<Flex>(&ops.node));
        let [gate_node, up_node] = ops.parents;
        let (gate, up) = ops.state;
        let (dg, du) = swiglu::backward(floats(&gate), floats(&up), floats(&grad));
        if let Some(node) = gate_node {
            grads.register::<Flex>(node.id, tensor(dg, gate.shape()));
        }
        if let Some(node) = up_node {
            grads.register::<Flex>(node.id, tensor(du, up.shape()));
        }
    }
}

#[derive(Debug)]
struct RmsBackward;

impl Backward<Flex, 2> for RmsBackward {
    type State = (FlexTensor, FlexTensor, Vec<f32>);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = contiguous(grads.consume::<Flex>(&ops.node));
        let [x_node, gamma_node] = ops.parents;
        let (x, gamma, inv) = ops.state;
        let (dx, dg) = rms_norm::backward(floats(&x), floats(&gamma), &inv, floats(&grad));
        if let Some(node) = x_node {
            grads.register::<Flex>(node.id, tensor(dx, x.shape()));
        }
        if let Some(node) = gamma_node {
            grads.register::<Flex>(node.id, tensor(dg, gamma.shape()));
        }
    }
}

#[derive(Debug)]
struct AttnBackward;

impl Backward<Flex, 3> for AttnBackward {
    type State = (AttnInputs, FlexTensor, Vec<f32>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = contiguous(grads.consume::<Flex>(&ops.node));
        let (x, out, lse) = ops.state;
        let (dq, dk, dv) = attention::backward(
            x.dims,
            x.rope(),
            floats(&x.q),
            floats(&x.k),
            floats(&x.v),
            floats(&out),
            &lse,
            floats(&grad),
        );
        let shapes = [x.q.shape(), x.k.shape(), x.v.shape()];
        for ((node, d), shape) in ops.parents.into_iter().zip([dq, dk, dv]).zip(shapes) {
            if let Some(node) = node {
                grads.register::<Flex>(node.id, tensor(d, shape));
            }
        }
    }
}

impl<C: CheckpointStrategy> FusedOps for Ad<C> {
    fn fused_cross_entropy(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let (logits, guard) = logits.into_parts();
        match CeBackward.prepare::<C>([guard]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let f = ce_forward(logits, &targets);
                prep.finish((f.logits, f.targets, f.lse), f.loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(ce_forward(logits, &targets).loss),
        }
    }

    fn fused_sparse_distill(
        logits: FloatTensor<Self>,
        ids: IntTensor<Self>,
        log_probs: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        kind: u8,
        tau: f32,
    ) -> FloatTensor<Self> {
        // the teacher's side is data: only the student's logits get a gradient
        let (log_probs, mask) = (log_probs.into_primitive(), mask.into_primitive());
        let (logits, guard) = logits.into_parts();
        match KdBackward.prepare::<C>([guard]).compute_bound().stateful() {
            OpsKind::Tracked(prep) => {
                let f = kd_forward(logits, &ids, log_probs, mask, kind, tau);
                prep.finish((f.logits, f.support, f.lse), f.loss)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(kd_forward(logits, &ids, log_probs, mask, kind, tau).loss)
            }
        }
    }

    fn fused_head_loss(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        targets: IntTensor<Self>,
        ids: IntTensor<Self>,
        log_probs: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        layout: u8,
        kind: u8,
        tau: f32,
        ce_weight: f32,
        kd_weight: f32,
        chunk: usize,
    ) -> FloatTensor<Self> {
        let (h, h_guard) = h.into_parts();
        let (w, w_guard) = w.into_parts();
        let support = [ids, log_probs.into_primitive(), mask.into_primitive()];
        let inputs = HeadInputs::new(
            h,
            w,
            &targets,
            support,
            layout,
            (kind, tau),
            [ce_weight, kd_weight],
            chunk,
        );
        head_op::<C>([h_guard, w_guard], &inputs.core, |grads| inputs.run(grads))
    }

    fn fused_cross_head_loss(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        targets: IntTensor<Self>,
        span: IntTensor<Self>,
        log_t: FloatTensor<Self>,
        matched: IntTensor<Self>,
        mask: FloatTensor<Self>,
        student_matched: FloatTensor<Self>,
        layout: u8,
        kind: u8,
        tau: f32,
        top_k: usize,
        gold_weights: [f32; 2],
        weights: [f32; 2],
        chunk: usize,
    ) -> FloatTensor<Self> {
        // the teacher's side is data: only h and W get a gradient
        let (h, h_guard) = h.into_parts();
        let (w, w_guard) = w.into_parts();
        let teacher = [
            log_t.into_primitive(),
            mask.into_primitive(),
            student_matched.into_primitive(),
        ];
        let inputs = CrossInputs::new(
            [h, w],
            &targets,
            &span,
            teacher,
            &matched,
            layout,
            (kind, tau, top_k),
            gold_weights,
            weights,
            chunk,
        );
        head_op::<C>([h_guard, w_guard], &inputs.core, |grads| inputs.run(grads))
    }

    fn fused_head_logits(
        h: FloatTensor<Self>,
        w: FloatTensor<Self>,
        layout: u8,
    ) -> FloatTensor<Self> {
        // no gradient: the result is a constant of any graph it meets
        let out = head_logits_forward(h.into_primitive(), w.into_primitive(), layout);
        <Self as burn::backend::AutodiffBackend>::from_inner(out)
    }

    fn fused_linear(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        let (x, x_guard) = x.into_parts();
        let (w, w_guard) = w.into_parts();
        let (x, w) = (contiguous(x), contiguous(w));
        let out = linear_forward(&x, &w);
        match LinearBackward
            .prepare::<C>([x_guard, w_guard])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x, w), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn fused_swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        let (gate, g_guard) = gate.into_parts();
        let (up, u_guard) = up.into_parts();
        let (gate, up) = (contiguous(gate), contiguous(up));
        let out = swiglu_forward(&gate, &up);
        match SwigluBackward
            .prepare::<C>([g_guard, u_guard])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((gate, up), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn fused_rms_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let (x, x_guard) = x.into_parts();
        let (gamma, g_guard) = gamma.into_parts();
        let (x, gamma) = (contiguous(x), contiguous(gamma));
        let (y, inv) = rms_forward(&x, &gamma, eps);
        match RmsBackward
            .prepare::<C>([x_guard, g_guard])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x, gamma, inv), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        heads: usize,
        kv_heads: usize,
    ) -> FloatTensor<Self> {
        let (q, q_guard) = q.into_parts();
        let (k, k_guard) = k.into_parts();
        let (v, v_guard) = v.into_parts();
        let (cos, sin) = (cos.into_primitive(), sin.into_primitive());
        let inputs = AttnInputs::new([q, k, v, cos, sin], heads, kv_heads);
        let (out, lse) = inputs.forward();
        match AttnBackward
            .prepare::<C>([q_guard, k_guard, v_guard])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((inputs, out.clone(), lse), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}
