//! A released model's forward pass: the [`Architecture`] of any family pdsweep loads, run with
//! burn's tensor ops and pdsweep's kernels, unchanged on every backend. Teachers only run
//! forward, so the weights are plain tensors, not trainable parameters.
//!
//! Where an attention layer needs nothing the fused causal attention lacks (full rotary width
//! or none, no soft-capping, a window no shorter than the sequence) it goes through
//! [`kernels::causal_attention`] (the CPU kernel on flex in f32); otherwise through burn's
//! `attention` with an explicit mask, scale and soft-cap, which every backend has.
//!
//! Weights come through a [`Layout`]: the family's naming of each [`Part`] (see
//! `crate::hf::families`), always handed over in PyTorch's layout (`[out, in]` for matrices).

use burn::tensor::activation::{gelu, gelu_approximate, silu};
use burn::tensor::module::{attention, embedding};
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, DType, Device, FloatDType, Int, Tensor, TensorData};

use std::collections::HashMap;

use super::arch::{
    Activation, Architecture, Mlp, Norm, Placement, Positions, QkNorm, Rope, RopeScaling,
};
use super::{NamedTensor, Transformer, TransformerConfig};
use crate::kernels;

/// One parameter of a decoder, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The token embedding, `[vocab, d]`.
    Embed,
    /// Learned positions, `[rows, d]`.
    Positions,
    /// The final norm's γ (and β for LayerNorm).
    FinalNorm(Affine),
    /// The untied output head, `[vocab, d]`.
    Head,
    /// A parameter of block `usize`.
    Layer(usize, LayerPart),
}

/// A norm's scale (γ) or shift (β).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affine {
    /// γ.
    Weight,
    /// β (LayerNorm only).
    Bias,
}

impl Affine {
    /// The tensor-name suffix every family uses for it: `weight` or `bias`.
    pub fn suffix(self) -> &'static str {
        match self {
            Affine::Weight => "weight",
            Affine::Bias => "bias",
        }
    }
}

/// A parameter of one block.
///
/// Norms: `AttnNorm` before attention and `MlpNorm` before the MLP (LLaMA's `input_layernorm` and
/// `post_attention_layernorm`), `PostAttnNorm` and `PostMlpNorm` on the outputs (Gemma's sandwich,
/// OLMo 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerPart {
    /// Norm before attention.
    AttnNorm(Affine),
    /// Norm of the attention's output.
    PostAttnNorm(Affine),
    /// Norm before the MLP.
    MlpNorm(Affine),
    /// Norm of the MLP's output.
    PostMlpNorm(Affine),
    /// The query norm's γ.
    QNorm,
    /// The key norm's γ.
    KNorm,
    /// Query projection `[heads·hd, d]`.
    Q,
    /// Key projection `[kv·hd, d]`.
    K,
    /// Value projection `[kv·hd, d]`.
    V,
    /// Output projection `[d, heads·hd]`.
    O,
    /// Biases of the projections above.
    QBias,
    /// See [`LayerPart::QBias`].
    KBias,
    /// See [`LayerPart::QBias`].
    VBias,
    /// See [`LayerPart::QBias`].
    OBias,
    /// The gated MLP's gate `[ff, d]`.
    Gate,
    /// The MLP's input (`up`, or a plain MLP's `fc_in`) `[ff, d]`.
    Up,
    /// The MLP's output `[d, ff]`.
    Down,
    /// Biases of the MLP's projections.
    GateBias,
    /// See [`LayerPart::GateBias`].
    UpBias,
    /// See [`LayerPart::GateBias`].
    DownBias,
}

/// Where a [`Decoder`] gets its weights: the values of `part` in PyTorch's layout, of shape
/// `shape` (the layout says which file and tensor when it cannot).
pub trait Layout {
    /// Row-major values of `part`.
    fn fetch(&mut self, part: Part, shape: &[usize]) -> Result<Vec<f32>, String>;
}

/// A norm's weights (γ already includes Gemma's `1 +`).
#[derive(Debug, Clone)]
struct NormWeights {
    gamma: Tensor<1>,
    beta: Option<Tensor<1>>,
}

/// A linear layer, weight `[in, out]` (burn's layout), optional bias.
#[derive(Debug, Clone)]
struct Linear {
    weight: Tensor<2>,
    bias: Option<Tensor<1>>,
}

#[derive(Debug, Clone)]
struct Layer {
    attn_norm: Option<NormWeights>,
    post_attn_norm: Option<NormWeights>,
    mlp_norm: Option<NormWeights>,
    post_mlp_norm: Option<NormWeights>,
    q_norm: Option<NormWeights>,
    k_norm: Option<NormWeights>,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    gate: Option<Linear>,
    up: Linear,
    down: Linear,
    window: Option<usize>,
    /// Uses the local rotary tables.
    local: bool,
}

/// A released model, forward only (see the module doc).
#[derive(Debug, Clone)]
pub struct Decoder {
    arch: Architecture,
    embed: Tensor<2>,
    positions: Option<Tensor<2>>,
    layers: Vec<Layer>,
    final_norm: NormWeights,
    /// `[d, vocab]` when untied.
    head: Option<Tensor<2>>,
    /// cos and sin of the global (and the local) rotary angles, `[context, rotary dims]`.
    rope: Option<RopeTables>,
    context: usize,
}

#[derive(Debug, Clone)]
struct RopeTables {
    global: (Tensor<2>, Tensor<2>),
    local: Option<(Tensor<2>, Tensor<2>)>,
}

/// Inverse frequencies of `rope` for `dims` rotated values, in f32 as transformers computes
/// them (`_compute_default_rope_parameters`, `_compute_linear_scaling_rope_parameters`,
/// `_compute_llama3_parameters`).
pub(crate) fn inverse_frequencies(rope: &Rope, dims: usize) -> Vec<f32> {
    let base = rope.theta as f32;
    let inv: Vec<f32> = (0..dims / 2)
        .map(|j| 1.0 / base.powf((2 * j) as f32 / dims as f32))
        .collect();
    match rope.scaling {
        RopeScaling::None => inv,
        RopeScaling::Linear { factor } => inv.iter().map(|f| f / factor as f32).collect(),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original,
        } => {
            let (factor, low, high, old) = (
                factor as f32,
                low_freq_factor as f32,
                high_freq_factor as f32,
                original as f32,
            );
            let low_wavelen = old / low;
            let high_wavelen = old / high;
            inv.iter()
                .map(|&f| {
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    let scaled = if wavelen > low_wavelen { f / factor } else { f };
                    // between the two wavelengths, both included (transformers' !(<) && !(>))
                    let medium = (high_wavelen..=low_wavelen).contains(&wavelen);
                    if medium {
                        let smooth = (old / wavelen - low) / (high - low);
                        (1.0 - smooth) * scaled / factor + smooth * scaled
                    } else {
                        scaled
                    }
                })
                .collect()
        }
    }
}

/// cos and sin tables `[context, dims]` of `rope` ("rotate half": column j and j + dims/2 share
/// frequency j), angles in f32 as transformers forms them.
fn rope_tables(
    context: usize,
    dims: usize,
    rope: &Rope,
    device: &Device,
) -> (Tensor<2>, Tensor<2>) {
    let inv = inverse_frequencies(rope, dims);
    let half = dims / 2;
    let mut cos = Vec::with_capacity(context * dims);
    let mut sin = Vec::with_capacity(context * dims);
    for pos in 0..context {
        for j in 0..dims {
            let angle = inv[j % half] * pos as f32;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    let data = |v: Vec<f32>| TensorData::new(v, [context, dims]);
    (
        Tensor::from_data(data(cos), device),
        Tensor::from_data(data(sin), device),
    )
}

/// Reads the parts of a decoder in a fixed order.
struct Reader<'a> {
    layout: &'a mut dyn Layout,
    device: &'a Device,
}

impl Reader<'_> {
    fn vector(&mut self, part: Part, len: usize) -> Result<Tensor<1>, String> {
        let data = self.layout.fetch(part, &[len])?;
        Ok(Tensor::from_data(TensorData::new(data, [len]), self.device))
    }

    /// `[out, in]` as stored, kept `[in, out]`.
    fn matrix(&mut self, part: Part, d_out: usize, d_in: usize) -> Result<Tensor<2>, String> {
        let data = self.layout.fetch(part, &[d_out, d_in])?;
        Ok(Tensor::from_data(TensorData::new(data, [d_out, d_in]), self.device).transpose())
    }

    fn linear(
        &mut self,
        layer: usize,
        (w, b): (LayerPart, LayerPart),
        d_out: usize,
        d_in: usize,
        bias: bool,
    ) -> Result<Linear, String> {
        let weight = self.matrix(Part::Layer(layer, w), d_out, d_in)?;
        let bias = if bias {
            Some(self.vector(Part::Layer(layer, b), d_out)?)
        } else {
            None
        };
        Ok(Linear { weight, bias })
    }

    fn norm(
        &mut self,
        arch: &Architecture,
        part: impl Fn(Affine) -> Part,
        width: usize,
    ) -> Result<NormWeights, String> {
        let gamma = self.vector(part(Affine::Weight), width)?;
        let beta = match arch.norm {
            Norm::Layer => Some(self.vector(part(Affine::Bias), width)?),
            Norm::Rms => None,
        };
        Ok(NormWeights { gamma, beta })
    }
}

impl Decoder {
    /// Builds the model of `arch` over sequences of up to `context` tokens on `device` from the
    /// weights `layout` gives.
    pub fn from_weights(
        arch: &Architecture,
        context: usize,
        layout: &mut dyn Layout,
        device: &Device,
    ) -> Result<Decoder, String> {
        arch.validate()?;
        let d = arch.d_model as usize;
        let (vocab, ff) = (arch.vocab as usize, arch.d_ff as usize);
        let hd = arch.head_dim as usize;
        let (q, kv) = (arch.n_heads as usize * hd, arch.n_kv_heads as usize * hd);
        let mut r = Reader { layout, device };
        let embed_data = r.layout.fetch(Part::Embed, &[vocab, d])?;
        let embed = Tensor::from_data(TensorData::new(embed_data, [vocab, d]), device);
        let positions = match arch.positions {
            Positions::Learned { rows } => {
                let rows = rows as usize;
                let data = r.layout.fetch(Part::Positions, &[rows, d])?;
                Some(Tensor::from_data(TensorData::new(data, [rows, d]), device))
            }
            Positions::Rotary { .. } => None,
        };
        let mut layers = Vec::with_capacity(arch.n_layers as usize);
        for (i, window) in arch.windows.iter().enumerate() {
            layers.push(read_layer(&mut r, arch, i, *window, (d, q, kv, ff))?);
        }
        let final_norm = r.norm(arch, Part::FinalNorm, d)?;
        let head = if arch.tie_embeddings {
            None
        } else {
            Some(r.matrix(Part::Head, vocab, d)?)
        };
        let rope = match &arch.positions {
            Positions::Rotary {
                dims,
                global,
                local,
            } => Some(RopeTables {
                global: rope_tables(context, *dims as usize, global, device),
                local: local.map(|l| rope_tables(context, *dims as usize, &l, device)),
            }),
            Positions::Learned { .. } => None,
        };
        Ok(Decoder {
            arch: arch.clone(),
            embed,
            positions,
            layers,
            final_norm,
            head,
            rope,
            context,
        })
    }

    /// The architecture it runs.
    pub fn arch(&self) -> &Architecture {
        &self.arch
    }

    /// Longest sequence its position tables cover.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Rows of the token embedding.
    pub fn vocab(&self) -> usize {
        self.embed.dims()[0]
    }

    /// The final hidden state (after the final norm) in `compute`.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `seq` ≤ [`Decoder::context`]; returns `[batch, seq, d]`
    pub fn hidden_in(&self, tokens: Tensor<2, Int>, compute: FloatDType) -> Tensor<3> {
        let [_, seq] = tokens.dims();
        let mut x = to(embedding(self.embed.clone(), tokens), FloatDType::F32);
        if self.arch.embed_scale {
            // transformers rounds √d to the activations' dtype before multiplying
            let scale = (self.arch.d_model as f64).sqrt() as f32;
            x = x.mul_scalar(scale);
        }
        if let Some(p) = &self.positions {
            x = x + p.clone().narrow(0, 0, seq).unsqueeze::<3>();
        }
        let tables = self.rope.as_ref().map(|t| {
            let cut = |(c, s): &(Tensor<2>, Tensor<2>)| {
                (
                    to(c.clone().narrow(0, 0, seq), compute),
                    to(s.clone().narrow(0, 0, seq), compute),
                )
            };
            (cut(&t.global), t.local.as_ref().map(cut))
        });
        for layer in &self.layers {
            let rope = tables.as_ref().map(|(g, l)| match (layer.local, l) {
                (true, Some(l)) => l,
                _ => g,
            });
            x = self.block(layer, x, rope, compute);
        }
        to(self.norm(&self.final_norm, x), compute)
    }

    /// The output head in `compute`: `[d, vocab]` untied, the embedding `[vocab, d]` when tied,
    /// with the family's final soft-cap.
    pub fn head_weight(&self, compute: FloatDType) -> kernels::HeadWeight {
        let (weight, tied) = match &self.head {
            Some(h) => (h.clone(), false),
            None => (self.embed.clone(), true),
        };
        // a bf16 head is read as stored (the kernels round h, or cast it where they cannot)
        let weight = if weight.dtype() == DType::BF16 {
            weight
        } else {
            to(weight, compute)
        };
        kernels::HeadWeight {
            weight,
            tied,
            softcap: self.arch.final_softcap,
        }
    }

    /// Next-token logits in f32.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]`; returns `[batch, seq, vocab]`
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [b, s] = tokens.dims();
        let h = self.hidden_in(tokens, FloatDType::F32);
        let d = h.dims()[2];
        let logits =
            kernels::head_logits(h.reshape([b * s, d]), &self.head_weight(FloatDType::F32));
        let v = logits.dims()[1];
        logits.reshape([b, s, v])
    }

    fn norm(&self, n: &NormWeights, x: Tensor<3>) -> Tensor<3> {
        norm_any(self.arch.norm, self.arch.norm_eps, n, x)
    }

    /// One block on the f32 residual stream `x`.
    fn block(
        &self,
        layer: &Layer,
        x: Tensor<3>,
        rope: Option<&(Tensor<2>, Tensor<2>)>,
        dt: FloatDType,
    ) -> Tensor<3> {
        let pre = |n: &Option<NormWeights>, x: Tensor<3>| match n {
            Some(n) => self.norm(n, x),
            None => x,
        };
        match self.arch.placement {
            Placement::Parallel => {
                let a = self.attention(layer, to(pre(&layer.attn_norm, x.clone()), dt), rope, dt);
                let m = self.mlp(layer, to(pre(&layer.mlp_norm, x.clone()), dt), dt);
                x + to(a, FloatDType::F32) + to(m, FloatDType::F32)
            }
            _ => {
                let a = self.attention(layer, to(pre(&layer.attn_norm, x.clone()), dt), rope, dt);
                let x = x + pre(&layer.post_attn_norm, to(a, FloatDType::F32));
                let m = self.mlp(layer, to(pre(&layer.mlp_norm, x.clone()), dt), dt);
                x + pre(&layer.post_mlp_norm, to(m, FloatDType::F32))
            }
        }
    }

    fn attention(
        &self,
        layer: &Layer,
        x: Tensor<3>,
        rope: Option<&(Tensor<2>, Tensor<2>)>,
        dt: FloatDType,
    ) -> Tensor<3> {
        let a = &self.arch;
        let [b, s, _] = x.dims();
        let (h, kv, hd) = (
            a.n_heads as usize,
            a.n_kv_heads as usize,
            a.head_dim as usize,
        );
        let mut q = linear(&layer.q, x.clone(), dt);
        let mut k = linear(&layer.k, x.clone(), dt);
        let v = linear(&layer.v, x, dt);
        match a.qk_norm {
            QkNorm::None => {}
            QkNorm::PerHead => {
                let per_head = |t: Tensor<3>, n: usize, w: &Option<NormWeights>| match w {
                    Some(w) => {
                        let t = to(t.reshape([b, s * n, hd]), FloatDType::F32);
                        to(self.norm(w, t), dt).reshape([b, s, n * hd])
                    }
                    None => t,
                };
                q = per_head(q, h, &layer.q_norm);
                k = per_head(k, kv, &layer.k_norm);
            }
            QkNorm::Full => {
                if let Some(w) = &layer.q_norm {
                    q = to(self.norm(w, to(q, FloatDType::F32)), dt);
                }
                if let Some(w) = &layer.k_norm {
                    k = to(self.norm(w, to(k, FloatDType::F32)), dt);
                }
            }
        }
        let rot = match a.positions {
            Positions::Rotary { dims, .. } => dims as usize,
            Positions::Learned { .. } => 0,
        };
        let default_scale = 1.0 / (hd as f64).sqrt();
        let windowed = layer.window.is_some_and(|w| w < s);
        let fused = a.attn_softcap.is_none() && !windowed;
        let out = if fused {
            if a.attn_scale != default_scale {
                q = q.mul_scalar(a.attn_scale / default_scale);
            }
            let (cos, sin) = match rope {
                Some((c, s)) if rot == hd => (c.clone(), s.clone()),
                _ => {
                    if let Some(tables) = rope {
                        q = rotate_partial(q, h, hd, rot, tables);
                        k = rotate_partial(k, kv, hd, rot, tables);
                    }
                    let device = q.device();
                    (
                        to(Tensor::ones([s, hd], &device), dt),
                        to(Tensor::zeros([s, hd], &device), dt),
                    )
                }
            };
            kernels::causal_attention(q, k, v, cos, sin, h, kv)
        } else {
            if let Some(tables) = rope {
                q = rotate_partial(q, h, hd, rot, tables);
                k = rotate_partial(k, kv, hd, rot, tables);
            }
            masked_attention(q, k, v, (h, kv, hd), layer.window, a)
        };
        linear(&layer.o, out, dt)
    }

    fn mlp(&self, layer: &Layer, x: Tensor<3>, dt: FloatDType) -> Tensor<3> {
        let hidden = match (self.arch.mlp, &layer.gate) {
            (Mlp::Gated(act), Some(gate)) => {
                let g = linear(gate, x.clone(), dt);
                let u = linear(&layer.up, x, dt);
                match act {
                    Activation::Silu => kernels::swiglu(g, u),
                    other => activate(other, g) * u,
                }
            }
            (Mlp::Plain(act), _) | (Mlp::Gated(act), None) => {
                activate(act, linear(&layer.up, x, dt))
            }
        };
        linear(&layer.down, hidden, dt)
    }
}

/// Reads block `i`'s weights.
fn read_layer(
    r: &mut Reader<'_>,
    arch: &Architecture,
    i: usize,
    window: Option<u64>,
    (d, q, kv, ff): (usize, usize, usize, usize),
) -> Result<Layer, String> {
    use LayerPart as P;
    let hd = arch.head_dim as usize;
    let wants = |p: Placement| -> (bool, bool, bool, bool) {
        match p {
            Placement::Pre | Placement::Parallel => (true, false, true, false),
            Placement::Sandwich => (true, true, true, true),
            Placement::Post => (false, true, false, true),
        }
    };
    let (pre_a, post_a, pre_m, post_m) = wants(arch.placement);
    let norm_if = |r: &mut Reader<'_>, on: bool, f: fn(Affine) -> LayerPart| {
        if on {
            r.norm(arch, |a| Part::Layer(i, f(a)), d).map(Some)
        } else {
            Ok(None)
        }
    };
    let attn_norm = norm_if(r, pre_a, P::AttnNorm)?;
    let (q_width, k_width) = match arch.qk_norm {
        QkNorm::None => (0, 0),
        QkNorm::PerHead => (hd, hd),
        QkNorm::Full => (q, kv),
    };
    let qk = |r: &mut Reader<'_>, part: P, width: usize| {
        if width == 0 {
            return Ok(None);
        }
        let gamma = r.vector(Part::Layer(i, part), width)?;
        Ok::<_, String>(Some(NormWeights { gamma, beta: None }))
    };
    let q_lin = r.linear(i, (P::Q, P::QBias), q, d, arch.qkv_bias)?;
    let k_lin = r.linear(i, (P::K, P::KBias), kv, d, arch.qkv_bias)?;
    let v_lin = r.linear(i, (P::V, P::VBias), kv, d, arch.qkv_bias)?;
    let q_norm = qk(r, P::QNorm, q_width)?;
    let k_norm = qk(r, P::KNorm, k_width)?;
    let o = r.linear(i, (P::O, P::OBias), d, q, arch.o_bias)?;
    let post_attn_norm = norm_if(r, post_a, P::PostAttnNorm)?;
    let mlp_norm = norm_if(r, pre_m, P::MlpNorm)?;
    let gate = match arch.mlp {
        Mlp::Gated(_) => Some(r.linear(i, (P::Gate, P::GateBias), ff, d, arch.mlp_bias)?),
        Mlp::Plain(_) => None,
    };
    let up = r.linear(i, (P::Up, P::UpBias), ff, d, arch.mlp_bias)?;
    let down = r.linear(i, (P::Down, P::DownBias), d, ff, arch.mlp_bias)?;
    let post_mlp_norm = norm_if(r, post_m, P::PostMlpNorm)?;
    let local =
        matches!(arch.positions, Positions::Rotary { local: Some(_), .. }) && window.is_some();
    Ok(Layer {
        attn_norm,
        post_attn_norm,
        mlp_norm,
        post_mlp_norm,
        q_norm,
        k_norm,
        q: q_lin,
        k: k_lin,
        v: v_lin,
        o,
        gate,
        up,
        down,
        window: window.map(|w| w as usize),
        local,
    })
}

/// A plain LLaMA's weights by role, from pdsweep's own transformer's named weights.
struct OwnWeights(HashMap<String, NamedTensor>);

impl Layout for OwnWeights {
    fn fetch(&mut self, part: Part, shape: &[usize]) -> Result<Vec<f32>, String> {
        use LayerPart as P;
        let name = match part {
            Part::Embed => "model.embed_tokens.weight".to_string(),
            Part::FinalNorm(_) => "model.norm.weight".into(),
            Part::Head => "lm_head.weight".into(),
            Part::Positions => return Err("no positions".into()),
            Part::Layer(i, p) => {
                let rest = match p {
                    P::AttnNorm(_) => "input_layernorm.weight",
                    P::MlpNorm(_) => "post_attention_layernorm.weight",
                    P::Q => "self_attn.q_proj.weight",
                    P::K => "self_attn.k_proj.weight",
                    P::V => "self_attn.v_proj.weight",
                    P::O => "self_attn.o_proj.weight",
                    P::Gate => "mlp.gate_proj.weight",
                    P::Up => "mlp.up_proj.weight",
                    P::Down => "mlp.down_proj.weight",
                    other => return Err(format!("no {other:?}")),
                };
                format!("model.layers.{i}.{rest}")
            }
        };
        let t = self.0.remove(&name).ok_or_else(|| format!("no `{name}`"))?;
        if t.shape != shape {
            return Err(format!("`{name}` is {:?}, not {shape:?}", t.shape));
        }
        Ok(t.data)
    }
}

impl Decoder {
    /// pdsweep's own transformer of `config` as a decoder (the same function: a teacher
    /// trained here, run in bf16 by [`Decoder::with_bf16_weights`]).
    pub fn from_transformer(
        model: &Transformer,
        config: &TransformerConfig,
        device: &Device,
    ) -> Result<Decoder, String> {
        let arch = Architecture::of_transformer(config);
        let mut weights = OwnWeights(
            model
                .named_weights()
                .into_iter()
                .map(|t| (t.name.clone(), t))
                .collect(),
        );
        Decoder::from_weights(&arch, config.context, &mut weights, device)
    }

    /// The same model with its matrices (embedding, projections, head) stored in bf16; norms,
    /// biases and position tables stay f32.
    ///
    /// On flex every product then rounds its f32 activations to bf16 and sums in f32
    /// (`crate::kernels::cpu::bf16`); elsewhere products run in the dtype [`Decoder::hidden_in`] is
    /// asked for.
    pub fn with_bf16_weights(mut self) -> Decoder {
        let half = |t: Tensor<2>| t.cast(FloatDType::BF16);
        self.embed = half(self.embed);
        self.head = self.head.map(half);
        for layer in &mut self.layers {
            let lins = [
                &mut layer.q,
                &mut layer.k,
                &mut layer.v,
                &mut layer.o,
                &mut layer.up,
                &mut layer.down,
            ];
            for l in lins.into_iter().chain(layer.gate.as_mut()) {
                l.weight = half(l.weight.clone());
            }
        }
        self
    }

    /// Whether its matrices are stored in bf16.
    pub fn bf16_weights(&self) -> bool {
        self.embed.dtype() == DType::BF16
    }
}

/// `t` in `dtype`; no operation when it already is.
fn to<const D: usize>(t: Tensor<D>, dtype: FloatDType) -> Tensor<D> {
    if t.dtype() == DType::from(dtype) {
        t
    } else {
        t.cast(dtype)
    }
}

/// x · W + b in x's dtype (`dt`); a bf16 weight is read as stored (see
/// [`kernels::linear`]).
fn linear(l: &Linear, x: Tensor<3>, dt: FloatDType) -> Tensor<3> {
    let y = kernels::linear(x, l.weight.clone());
    match &l.bias {
        Some(b) => y + to(b.clone(), dt).unsqueeze::<3>(),
        None => y,
    }
}

/// RMSNorm (fused kernel) or LayerNorm (burn's ops) over the last dimension, in f32.
fn norm_any(kind: Norm, eps: f64, n: &NormWeights, x: Tensor<3>) -> Tensor<3> {
    match kind {
        Norm::Rms => kernels::rms_norm(x, n.gamma.clone(), eps),
        Norm::Layer => {
            let mean = x.clone().mean_dim(2);
            let centred = x - mean;
            let var = centred.clone().square().mean_dim(2);
            let y = centred / (var + eps).sqrt();
            let y = y * n.gamma.clone().unsqueeze::<3>();
            match &n.beta {
                Some(b) => y + b.clone().unsqueeze::<3>(),
                None => y,
            }
        }
    }
}

fn activate(act: Activation, x: Tensor<3>) -> Tensor<3> {
    match act {
        Activation::Silu => silu(x),
        Activation::Gelu => gelu(x),
        Activation::GeluTanh => gelu_approximate(x),
    }
}

/// Rotates the first `rot` values of each of the `n` heads of `x` (`[b, s, n·hd]`) by the
/// tables (`[s, rot]`), "rotate half" within those values; the rest pass unchanged.
fn rotate_partial(
    x: Tensor<3>,
    n: usize,
    hd: usize,
    rot: usize,
    (cos, sin): &(Tensor<2>, Tensor<2>),
) -> Tensor<3> {
    let [b, s, _] = x.dims();
    let heads = x.reshape([b, s, n, hd]);
    let (cos, sin) = (
        cos.clone().reshape([1, s, 1, rot]),
        sin.clone().reshape([1, s, 1, rot]),
    );
    let rotated = if rot == hd {
        rotate4(heads, &cos, &sin)
    } else {
        let part = rotate4(heads.clone().narrow(3, 0, rot), &cos, &sin);
        Tensor::cat(vec![part, heads.narrow(3, rot, hd - rot)], 3)
    };
    rotated.reshape([b, s, n * hd])
}

/// x·cos + rotate_half(x)·sin on the last dimension.
fn rotate4(x: Tensor<4>, cos: &Tensor<4>, sin: &Tensor<4>) -> Tensor<4> {
    let half = x.dims()[3] / 2;
    let x1 = x.clone().narrow(3, 0, half);
    let x2 = x.clone().narrow(3, half, half);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    x * cos.clone() + rotated * sin.clone()
}

/// Attention through burn's `attention`: causal, a sliding window as a mask, the family's scale
/// and soft-cap. `q`, `k` already rotated.
fn masked_attention(
    q: Tensor<3>,
    k: Tensor<3>,
    v: Tensor<3>,
    (h, kv, hd): (usize, usize, usize),
    window: Option<usize>,
    arch: &Architecture,
) -> Tensor<3> {
    let [b, s, _] = q.dims();
    let split = |t: Tensor<3>, n: usize| t.reshape([b, s, n, hd]).swap_dims(1, 2);
    let groups = h / kv;
    let q = split(q, h);
    let k = kernels::composite::repeat_kv(split(k, kv), groups);
    let v = kernels::composite::repeat_kv(split(v, kv), groups);
    let mask = window.filter(|&w| w < s).map(|w| {
        // true where a key is masked: in the future, or w or more positions back
        let data: Vec<bool> = (0..s)
            .flat_map(|i| (0..s).map(move |j| j > i || j + w <= i))
            .collect();
        Tensor::<2, Bool>::from_data(TensorData::new(data, [s, s]), &q.device())
            .unsqueeze::<4>()
            .expand([b, h, s, s])
    });
    let options = AttentionModuleOptions {
        scale: Some(arch.attn_scale),
        softcap: arch.attn_softcap,
        is_causal: mask.is_none(),
    };
    attention(q, k, v, mask, None, options)
        .swap_dims(1, 2)
        .reshape([b, s, h * hd])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelShape;

    /// The decoder running a plain LLaMA's architecture computes what pdsweep's own
    /// transformer computes from the same weights (the families' shared path, checked without
    /// Python; `tests/it/families.rs` checks every family against transformers).
    #[test]
    fn a_plain_llama_gives_the_transformers_logits() {
        let device = Device::flex();
        let shape = ModelShape {
            d_model: 32,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            d_ff: 48,
            vocab: 50,
            tie_embeddings: false,
        };
        let config = TransformerConfig {
            rope_theta: 500_000.0,
            norm_eps: 1e-6,
            ..TransformerConfig::new(shape, 16)
        };
        device.seed(3);
        let model = config.init(&device);
        let arch = Architecture::of_transformer(&config);
        assert_eq!(arch.params(), shape.params());
        let named = || {
            OwnWeights(
                model
                    .named_weights()
                    .into_iter()
                    .map(|t| (t.name.clone(), t))
                    .collect(),
            )
        };
        let decoder = Decoder::from_weights(&arch, 16, &mut named(), &device).unwrap();
        let tokens = Tensor::<2, Int>::from_data(
            TensorData::new((0..24i64).map(|i| i * 7 % 50).collect::<Vec<_>>(), [2, 12]),
            &device,
        );
        let values = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().unwrap();
        let ours = values(decoder.forward(tokens.clone()));
        let theirs = values(model.forward(tokens.clone()));
        let diff = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-5, "max |Δ| = {diff}");
        // the same window through the masked path (a window of the whole sequence changes
        // nothing) and through a window that bites (it must change the logits)
        let mut wide = arch.clone();
        wide.windows = vec![Some(11), Some(11)];
        let windowed = Decoder::from_weights(&wide, 16, &mut named(), &device).unwrap();
        let w = values(windowed.forward(tokens));
        let last_rows_differ = w
            .chunks(50)
            .zip(theirs.chunks(50))
            .enumerate()
            .map(|(r, (a, b))| {
                (
                    r % 12,
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| (x - y).abs())
                        .fold(0.0f32, f32::max),
                )
            })
            .collect::<Vec<_>>();
        for (position, d) in last_rows_differ {
            if position < 11 {
                assert!(d < 1e-5, "position {position} sees its whole prefix: {d}");
            } else {
                assert!(d > 1e-4, "position {position} lost its first token: {d}");
            }
        }
    }

    /// A transformer of pdsweep's as a decoder gives its logits in f32; with bf16 weights it
    /// stays within bf16's rounding of them (and is not the f32 model).
    #[test]
    fn an_own_transformer_runs_as_a_decoder_in_f32_and_bf16() {
        let device = Device::flex();
        let shape = ModelShape {
            d_model: 64,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            d_ff: 96,
            vocab: 70,
            tie_embeddings: true,
        };
        let config = TransformerConfig::new(shape, 16);
        device.seed(5);
        let model = config.init(&device);
        let tokens = Tensor::<2, Int>::from_data(
            TensorData::new((0..32i64).map(|i| i * 11 % 70).collect::<Vec<_>>(), [2, 16]),
            &device,
        );
        let values = |t: Tensor<3>| t.into_data().try_to_vec::<f32>().unwrap();
        let theirs = values(model.forward(tokens.clone()));
        let decoder = Decoder::from_transformer(&model, &config, &device).unwrap();
        assert!(!decoder.bf16_weights());
        let max_diff = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max)
        };
        let ours = values(decoder.forward(tokens.clone()));
        assert!(max_diff(&ours, &theirs) < 1e-5);
        let half = decoder.with_bf16_weights();
        assert!(half.bf16_weights());
        let low = values(half.forward(tokens));
        let spread = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = max_diff(&low, &theirs);
        assert!(
            d > 0.0 && d < 0.02 * spread.max(1.0),
            "bf16 |Δ| = {d} (logits up to {spread})"
        );
    }
}
