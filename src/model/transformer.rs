//! The LLaMA-style decoder of `docs/src/science/model.md`: token embedding; per block RMSNorm →
//! causal attention with rotary position embeddings (grouped-query optional) → residual, RMSNorm →
//! SwiGLU MLP → residual; final RMSNorm; a tied or untied output head. No biases, so the parameter
//! count is exactly its shape's (`crate::model::ModelShape::params`).
//!
//! Mixed precision ([`Transformer::forward_in`]): parameters stay f32; every matrix product
//! (projections, attention, SwiGLU, head) runs in the compute dtype on copies cast from the f32
//! weights, while the residual stream, RMSNorm, RoPE tables and the returned logits stay f32,
//! as PyTorch's autocast does. Gradients flow back through the casts into the f32 weights.

use burn::module::Module;
use burn::nn::{
    Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig, RmsNorm, RmsNormConfig,
};
use burn::tensor::{DType, Device, FloatDType, Int, Tensor};

use crate::kernels;
use crate::model::ModelShape;

/// Standard deviation of the normal initialisation of every weight (GPT-2 / LLaMA practice);
/// the projections that write into the residual stream are further scaled by 1/√(2·n_layers).
const INIT_STD: f64 = 0.02;
/// RoPE base frequency θ unless a model says otherwise (LLaMA 1 and 2).
pub(crate) const DEFAULT_ROPE_THETA: f64 = 10_000.0;
/// RMSNorm ε unless a model says otherwise.
pub(crate) const DEFAULT_NORM_EPS: f64 = 1e-5;

/// Everything needed to build a [`Transformer`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransformerConfig {
    /// The shape (from the plan).
    pub shape: ModelShape,
    /// Longest sequence the rotary tables cover.
    pub context: usize,
    /// RoPE base frequency θ: pair j of a head rotates at θ^(−2j/head_dim) per position.
    pub rope_theta: f64,
    /// ε added to the mean square inside every RMSNorm.
    pub norm_eps: f64,
}

impl TransformerConfig {
    /// A model of `shape` over sequences of up to `context` tokens with the default θ and ε.
    pub fn new(shape: ModelShape, context: usize) -> Self {
        TransformerConfig {
            shape,
            context,
            rope_theta: DEFAULT_ROPE_THETA,
            norm_eps: DEFAULT_NORM_EPS,
        }
    }
}

/// The decoder.
#[derive(Module, Debug)]
pub struct Transformer {
    pub(super) embed: Embedding,
    pub(super) blocks: Vec<Block>,
    pub(super) norm: RmsNorm,
    pub(super) head: Option<Linear>,
    /// cos of the rotary angles, `[context, head_dim]` (a constant, not a parameter).
    pub(super) rope_cos: Tensor<2>,
    /// sin of the rotary angles, `[context, head_dim]`.
    pub(super) rope_sin: Tensor<2>,
}

#[derive(Module, Debug)]
pub(super) struct Block {
    pub(super) attn_norm: RmsNorm,
    pub(super) attn: Attention,
    pub(super) mlp_norm: RmsNorm,
    pub(super) mlp: Mlp,
}

#[derive(Module, Debug)]
pub(super) struct Attention {
    pub(super) wq: Linear,
    pub(super) wk: Linear,
    pub(super) wv: Linear,
    pub(super) wo: Linear,
    pub(super) n_heads: usize,
    pub(super) n_kv_heads: usize,
    pub(super) head_dim: usize,
}

#[derive(Module, Debug)]
pub(super) struct Mlp {
    pub(super) gate: Linear,
    pub(super) up: Linear,
    pub(super) down: Linear,
}

fn linear(d_in: usize, d_out: usize, std: f64, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out)
        .with_bias(false)
        .with_initializer(Initializer::Normal { mean: 0.0, std })
        .init(device)
}

fn rms_norm(d: usize, eps: f64, device: &Device) -> RmsNorm {
    RmsNormConfig::new(d).with_epsilon(eps).init(device)
}

impl TransformerConfig {
    /// Builds the model on `device` with fresh weights (seed the device first for
    /// reproducible weights).
    pub fn init(&self, device: &Device) -> Transformer {
        let s = &self.shape;
        let (d, ff, vocab) = (s.d_model as usize, s.d_ff as usize, s.vocab as usize);
        let (n_heads, n_kv_heads) = (s.n_heads as usize, s.n_kv_heads as usize);
        let head_dim = d / n_heads;
        let residual_std = INIT_STD / (2.0 * s.n_layers as f64).sqrt();
        let blocks = (0..s.n_layers)
            .map(|_| Block {
                attn_norm: rms_norm(d, self.norm_eps, device),
                attn: Attention {
                    wq: linear(d, n_heads * head_dim, INIT_STD, device),
                    wk: linear(d, n_kv_heads * head_dim, INIT_STD, device),
                    wv: linear(d, n_kv_heads * head_dim, INIT_STD, device),
                    wo: linear(n_heads * head_dim, d, residual_std, device),
                    n_heads,
                    n_kv_heads,
                    head_dim,
                },
                mlp_norm: rms_norm(d, self.norm_eps, device),
                mlp: Mlp {
                    gate: linear(d, ff, INIT_STD, device),
                    up: linear(d, ff, INIT_STD, device),
                    down: linear(ff, d, residual_std, device),
                },
            })
            .collect();
        let embed = EmbeddingConfig::new(vocab, d)
            .with_initializer(Initializer::Normal {
                mean: 0.0,
                std: INIT_STD,
            })
            .init(device);
        let head = (!s.tie_embeddings).then(|| linear(d, vocab, INIT_STD, device));
        let (rope_cos, rope_sin) = rope_tables(self.context, head_dim, self.rope_theta, device);
        Transformer {
            embed,
            blocks,
            norm: rms_norm(d, self.norm_eps, device),
            head,
            rope_cos,
            rope_sin,
        }
    }
}

/// cos and sin of the rotary angles for positions `0..context`, laid out for the
/// "rotate half" convention: column j and j + head_dim/2 share frequency θ^(−2j/head_dim)
/// (Hugging Face's LLaMA layout).
pub(super) fn rope_tables(
    context: usize,
    head_dim: usize,
    theta: f64,
    device: &Device,
) -> (Tensor<2>, Tensor<2>) {
    let half = head_dim / 2;
    // Rounded as transformers rounds them (inverse frequencies and angles in f32), so long
    // contexts at a large θ give the reference's logits, not merely close ones.
    let inv_freq: Vec<f32> = (0..half)
        .map(|j| 1.0 / (theta as f32).powf((2 * j) as f32 / head_dim as f32))
        .collect();
    let mut cos = Vec::with_capacity(context * head_dim);
    let mut sin = Vec::with_capacity(context * head_dim);
    for pos in 0..context {
        for j in 0..head_dim {
            let angle = f64::from(inv_freq[j % half] * pos as f32);
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    let data = |v: Vec<f32>| burn::tensor::TensorData::new(v, [context, head_dim]);
    (
        Tensor::from_data(data(cos), device),
        Tensor::from_data(data(sin), device),
    )
}

impl Transformer {
    /// Next-token logits, all in f32.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `seq` ≤ the configured context
    /// - returns: `[batch, seq, vocab]`
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        self.forward_in(tokens, FloatDType::F32)
    }

    /// Next-token logits (f32) with the matrix products in `compute` (see the module doc).
    /// With `FloatDType::F32` no cast is made at all: this is [`Transformer::forward`] (and on
    /// the CPU every op runs its fused kernel, which only f32 has).
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `seq` ≤ the configured context
    /// - returns: `[batch, seq, vocab]`, f32
    pub fn forward_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        let x = self.hidden_in(tokens, compute);
        let head = self.head_weight(compute);
        let w = if head.tied {
            head.weight.transpose()
        } else {
            head.weight
        };
        to(kernels::linear(x, w), FloatDType::F32)
    }

    /// The final hidden state (after the last RMSNorm, cast to `compute`): what the output
    /// head multiplies. With [`Transformer::head_weight`] it is what the fused head and loss
    /// (`crate::kernels::head_loss`) take instead of the logits.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `seq` ≤ the configured context
    /// - returns: `[batch, seq, d_model]` in `compute`
    pub fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        let [_, seq] = tokens.dims();
        let mut x = self.embed.forward(tokens);
        let cos = to(self.rope_cos.clone().narrow(0, 0, seq), compute);
        let sin = to(self.rope_sin.clone().narrow(0, 0, seq), compute);
        for block in &self.blocks {
            x = block.forward(x, &cos, &sin, compute);
        }
        to(norm(&self.norm, x), compute)
    }

    /// The output head's weight in `compute`: the untied head's `[d_model, vocab]`, or the
    /// token embedding's `[vocab, d_model]` when tied.
    pub fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        match &self.head {
            Some(head) => kernels::HeadWeight {
                weight: to(head.weight.val(), compute),
                tied: false,
                softcap: None,
            },
            None => kernels::HeadWeight {
                weight: to(self.embed.weight.val(), compute),
                tied: true,
                softcap: None,
            },
        }
    }

    /// The vocabulary (rows of the token embedding).
    pub fn vocab(&self) -> usize {
        self.embed.weight.dims()[0]
    }

    /// Number of trainable parameters (equals the plan's total count).
    pub fn param_count(&self) -> usize {
        self.num_params()
    }
}

/// `t` in `dtype`; no operation at all when it already is.
fn to<const D: usize>(t: Tensor<D>, dtype: FloatDType) -> Tensor<D> {
    if t.dtype() == DType::from(dtype) {
        t
    } else {
        t.cast(dtype)
    }
}

/// `l` (no bias) on every position, as one matrix product over the whole batch, with its f32
/// weight cast to `compute` (the dtype of `x`).
fn project(l: &Linear, x: Tensor<3>, compute: FloatDType) -> Tensor<3> {
    kernels::linear(x, to(l.weight.val(), compute))
}

/// RMSNorm through the fused kernel (same parameters and maths as burn's `RmsNorm::forward`),
/// on the f32 residual stream.
fn norm(n: &RmsNorm, x: Tensor<3>) -> Tensor<3> {
    kernels::rms_norm(x, n.gamma.val(), n.epsilon)
}

impl Block {
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]`, f32 (the residual stream); `cos`, `sin`: `[seq,
    ///   head_dim]` in `dt`; returns `x`'s shape, f32
    fn forward(&self, x: Tensor<3>, cos: &Tensor<2>, sin: &Tensor<2>, dt: FloatDType) -> Tensor<3> {
        let h = to(norm(&self.attn_norm, x.clone()), dt);
        let x = x + to(self.attn.forward(h, cos, sin, dt), FloatDType::F32);
        let h = to(norm(&self.mlp_norm, x.clone()), dt);
        x + to(self.mlp.forward(h, dt), FloatDType::F32)
    }
}

impl Attention {
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` in `dt`; `cos`, `sin`: `[seq, head_dim]` in `dt`
    fn forward(&self, x: Tensor<3>, cos: &Tensor<2>, sin: &Tensor<2>, dt: FloatDType) -> Tensor<3> {
        let out = kernels::causal_attention(
            project(&self.wq, x.clone(), dt),
            project(&self.wk, x.clone(), dt),
            project(&self.wv, x, dt),
            cos.clone(),
            sin.clone(),
            self.n_heads,
            self.n_kv_heads,
        );
        project(&self.wo, out, dt)
    }
}

impl Mlp {
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]` in `dt`; returns the same
    fn forward(&self, x: Tensor<3>, dt: FloatDType) -> Tensor<3> {
        let hidden = kernels::swiglu(project(&self.gate, x.clone(), dt), project(&self.up, x, dt));
        project(&self.down, hidden, dt)
    }
}
