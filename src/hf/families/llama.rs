//! `llama`: LLaMA 1–3, SmolLM and SmolLM2, TinyLlama: RMSNorm before attention and MLP,
//! SwiGLU, RoPE (default, `linear` or `llama3` scaling), optional biases (`attention_bias`,
//! `mlp_bias`) and head width (`head_dim`). Its tensor names (`model.layers.N.self_attn.q_proj`,
//! ...) are shared by every family derived from it.

use super::keys::{self, Rules};
use super::{Naming, Obj, ReleasedConfig, TensorRef};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Architecture, Family, LayerPart, Mlp, Part};

/// Keys every LLaMA-derived family reads the same way.
pub(super) const SHAPE_KEYS: &[&str] = &[
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
    "rms_norm_eps",
    "max_position_embeddings",
    "head_dim",
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "original_max_position_embeddings",
];

/// The shape keys of a LLaMA-derived config.
pub(super) struct Common {
    pub d: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub ff: u64,
    pub vocab: u64,
    pub tie: bool,
    pub eps: f64,
    pub max_positions: u64,
}

/// Reads the shape keys; `tie` and `eps` are the family's defaults.
pub(super) fn common(obj: &Obj, tie: bool, eps: f64) -> Result<Common, ConfigError> {
    let d = keys::required(obj, "hidden_size")?;
    let heads = keys::required(obj, "num_attention_heads")?;
    Ok(Common {
        d,
        layers: keys::required(obj, "num_hidden_layers")?,
        heads,
        kv_heads: keys::positive(obj, "num_key_value_heads")?.unwrap_or(heads),
        head_dim: keys::positive(obj, "head_dim")?.unwrap_or(d / heads),
        ff: keys::required(obj, "intermediate_size")?,
        vocab: keys::required(obj, "vocab_size")?,
        tie: keys::flag(obj, "tie_word_embeddings")?.unwrap_or(tie),
        eps: keys::number(obj, "rms_norm_eps")?.unwrap_or(eps),
        max_positions: keys::positive(obj, "max_position_embeddings")?.unwrap_or(2048),
    })
}

impl Common {
    /// A LLaMA architecture of this shape (pre-norm RMSNorm, SwiGLU, full-width default RoPE
    /// of θ `theta`, no biases), for a family to adjust.
    pub fn llama(&self, family: Family, rope: crate::model::Rope) -> Architecture {
        let shape = crate::model::ModelShape {
            d_model: self.d,
            n_layers: self.layers,
            n_heads: self.heads,
            n_kv_heads: self.kv_heads,
            d_ff: self.ff,
            vocab: self.vocab,
            tie_embeddings: self.tie,
        };
        Architecture::plain_llama(family, shape, self.head_dim, self.eps, rope)
    }

    /// The released config of `arch`.
    pub fn released(&self, obj: &Obj, arch: Architecture) -> ReleasedConfig {
        let (bos_token_id, eos_token_ids) = keys::token_ids(obj);
        ReleasedConfig {
            arch,
            max_positions: self.max_positions,
            bos_token_id,
            eos_token_ids,
        }
    }
}

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .copied()
        .chain(["hidden_act", "attention_bias", "mlp_bias"])
        .collect();
    Rules {
        family: Family::Llama,
        honoured: &honoured,
        // SmolLM2's config carries two keys of the nanotron trainer that transformers ignores
        inert: &["is_llama_config", "rope_interleaved"],
        off: &[],
    }
    .check(obj)?;
    let c = common(obj, false, 1e-6)?;
    let act = keys::activation(obj, "hidden_act", "silu", &[("silu", Activation::Silu)])?;
    let bias = keys::flag(obj, "attention_bias")?.unwrap_or(false);
    let mut arch = c.llama(Family::Llama, keys::rope(obj, 10_000.0)?);
    arch.mlp = Mlp::Gated(act);
    arch.qkv_bias = bias;
    arch.o_bias = bias;
    arch.mlp_bias = keys::flag(obj, "mlp_bias")?.unwrap_or(false);
    Ok(c.released(obj, arch))
}

/// LLaMA's tensor names, shared by Qwen, Mistral, Gemma and OLMo 2.
pub(super) struct LlamaNaming;

impl Naming for LlamaNaming {
    fn locate(&self, part: Part, shape: &[usize]) -> TensorRef {
        TensorRef::plain(llama_name(part), shape)
    }

    fn vocab_tensors(&self) -> Vec<String> {
        vec!["model.embed_tokens.weight".into(), "lm_head.weight".into()]
    }
}

/// The LLaMA-style name of `part`.
fn llama_name(part: Part) -> String {
    use LayerPart as P;
    match part {
        Part::Embed => "model.embed_tokens.weight".into(),
        Part::Positions => "model.embed_positions.weight".into(),
        Part::FinalNorm(a) => format!("model.norm.{}", a.suffix()),
        Part::Head => "lm_head.weight".into(),
        Part::Layer(i, p) => {
            let rest = match p {
                P::AttnNorm(a) => format!("input_layernorm.{}", a.suffix()),
                P::PostAttnNorm(a) => format!("post_attention_layernorm.{}", a.suffix()),
                // LLaMA names the pre-MLP norm "post attention"; Gemma's sandwich has both
                P::MlpNorm(a) => format!("post_attention_layernorm.{}", a.suffix()),
                P::PostMlpNorm(a) => format!("post_feedforward_layernorm.{}", a.suffix()),
                P::QNorm => "self_attn.q_norm.weight".into(),
                P::KNorm => "self_attn.k_norm.weight".into(),
                P::Q => "self_attn.q_proj.weight".into(),
                P::K => "self_attn.k_proj.weight".into(),
                P::V => "self_attn.v_proj.weight".into(),
                P::O => "self_attn.o_proj.weight".into(),
                P::QBias => "self_attn.q_proj.bias".into(),
                P::KBias => "self_attn.k_proj.bias".into(),
                P::VBias => "self_attn.v_proj.bias".into(),
                P::OBias => "self_attn.o_proj.bias".into(),
                P::Gate => "mlp.gate_proj.weight".into(),
                P::Up => "mlp.up_proj.weight".into(),
                P::Down => "mlp.down_proj.weight".into(),
                P::GateBias => "mlp.gate_proj.bias".into(),
                P::UpBias => "mlp.up_proj.bias".into(),
                P::DownBias => "mlp.down_proj.bias".into(),
            };
            format!("model.layers.{i}.{rest}")
        }
    }
}

/// Gemma's sandwich names its four norms differently from LLaMA's two.
pub(super) struct GemmaNaming;

impl Naming for GemmaNaming {
    fn locate(&self, part: Part, shape: &[usize]) -> TensorRef {
        let name = match part {
            Part::Layer(i, LayerPart::MlpNorm(_)) => {
                format!("model.layers.{i}.pre_feedforward_layernorm.weight")
            }
            other => llama_name(other),
        };
        let norm = matches!(
            part,
            Part::FinalNorm(_)
                | Part::Layer(
                    _,
                    LayerPart::AttnNorm(_)
                        | LayerPart::PostAttnNorm(_)
                        | LayerPart::MlpNorm(_)
                        | LayerPart::PostMlpNorm(_)
                        | LayerPart::QNorm
                        | LayerPart::KNorm
                )
        );
        TensorRef {
            plus_one: norm,
            ..TensorRef::plain(name, shape)
        }
    }

    fn vocab_tensors(&self) -> Vec<String> {
        LlamaNaming.vocab_tensors()
    }
}
