//! The LLaMA-style decoder of DESIGN.md §3: token embedding; per block RMSNorm → causal
//! attention with rotary position embeddings (grouped-query optional) → residual, RMSNorm →
//! SwiGLU MLP → residual; final RMSNorm; a tied or untied output head. No biases, so the
//! parameter count is exactly the plan's (`crate::plan::ModelShape::params`).

use burn::module::Module;
use burn::nn::{
    Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig, RmsNorm, RmsNormConfig,
};
use burn::tensor::{Device, Int, Tensor};

use crate::kernels;
use crate::plan::ModelShape;

/// Standard deviation of the normal initialisation of every weight (GPT-2 / LLaMA practice);
/// the projections that write into the residual stream are further scaled by 1/√(2·n_layers).
const INIT_STD: f64 = 0.02;
/// RoPE base frequency θ unless a model says otherwise (LLaMA 1 and 2).
pub const DEFAULT_ROPE_THETA: f64 = 10_000.0;
/// RMSNorm ε unless a model says otherwise.
pub const DEFAULT_NORM_EPS: f64 = 1e-5;

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
    /// Next-token logits.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `seq` ≤ the configured context
    /// - returns: `[batch, seq, vocab]`
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [_, seq] = tokens.dims();
        let mut x = self.embed.forward(tokens);
        let cos = self.rope_cos.clone().narrow(0, 0, seq);
        let sin = self.rope_sin.clone().narrow(0, 0, seq);
        for block in &self.blocks {
            x = block.forward(x, &cos, &sin);
        }
        let x = norm(&self.norm, x);
        match &self.head {
            Some(head) => project(head, x),
            None => kernels::linear(x, self.embed.weight.val().transpose()),
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

/// `l` (no bias) on every position, as one matrix product over the whole batch.
fn project(l: &Linear, x: Tensor<3>) -> Tensor<3> {
    kernels::linear(x, l.weight.val())
}

/// RMSNorm through the fused kernel (same parameters and maths as burn's `RmsNorm::forward`).
fn norm(n: &RmsNorm, x: Tensor<3>) -> Tensor<3> {
    kernels::rms_norm(x, n.gamma.val(), n.epsilon)
}

impl Block {
    fn forward(&self, x: Tensor<3>, cos: &Tensor<2>, sin: &Tensor<2>) -> Tensor<3> {
        let x = x.clone() + self.attn.forward(norm(&self.attn_norm, x), cos, sin);
        x.clone() + self.mlp.forward(norm(&self.mlp_norm, x))
    }
}

impl Attention {
    /// # Shapes
    /// - `x`: `[batch, seq, d_model]`; `cos`, `sin`: `[seq, head_dim]`
    fn forward(&self, x: Tensor<3>, cos: &Tensor<2>, sin: &Tensor<2>) -> Tensor<3> {
        let out = kernels::causal_attention(
            project(&self.wq, x.clone()),
            project(&self.wk, x.clone()),
            project(&self.wv, x),
            cos.clone(),
            sin.clone(),
            self.n_heads,
            self.n_kv_heads,
        );
        project(&self.wo, out)
    }
}

impl Mlp {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let hidden = kernels::swiglu(project(&self.gate, x.clone()), project(&self.up, x));
        project(&self.down, hidden)
    }
}
