//! `gemma2`: Gemma 2: embeddings scaled by √d, RMSNorm of the form x̂ · (1 + w) before and
//! after attention and MLP, GeGLU with tanh-GELU, queries scaled by
//! `query_pre_attn_scalar`^−½, attention and final-logit soft-capping, sliding-window and
//! global layers alternating (`layer_types`, the first sliding).

use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Architecture, Family, Mlp, Placement};

/// The keys Gemma 2 and 3 share beyond LLaMA's.
pub(super) const GEMMA_KEYS: &[&str] = &[
    "hidden_act",
    "hidden_activation",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "sliding_window",
    "layer_types",
    "attention_bias",
];

/// Inert keys of the Gemma configs.
pub(super) const GEMMA_INERT: &[&str] = &["cache_implementation", "sliding_window_size"];

/// Keys of the Gemma configs that must be off.
pub(super) const GEMMA_OFF: &[(&str, &str)] = &[(
    "use_bidirectional_attention",
    "bidirectional attention (a causal model is needed)",
)];

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS.iter().chain(GEMMA_KEYS).copied().collect();
    Rules {
        family: Family::Gemma2,
        honoured: &honoured,
        inert: GEMMA_INERT,
        off: GEMMA_OFF,
    }
    .check(obj)?;
    let mut c = common(obj, true, 1e-6)?;
    if keys::positive(obj, "head_dim")?.is_none() {
        c.head_dim = 256; // Gemma's default, whatever the width
    }
    let mut arch = c.llama(Family::Gemma2, keys::rope(obj, 10_000.0)?);
    gemma(obj, &mut arch, Some(50.0), Some(30.0))?;
    let sliding = match keys::layer_types(obj, c.layers)? {
        Some(types) => types,
        None => (0..c.layers).map(|i| (i + 1) % 2 == 1).collect(),
    };
    arch.windows = windows(obj, &sliding, 4096)?;
    Ok(c.released(obj, arch))
}

/// What Gemma 2 and 3 share: scaled embeddings, the sandwich of norms, GeGLU, the query scale,
/// soft-caps (defaults `attn_cap`, `final_cap`), optional biases.
pub(super) fn gemma(
    obj: &Obj,
    arch: &mut Architecture,
    attn_cap: Option<f64>,
    final_cap: Option<f64>,
) -> Result<(), ConfigError> {
    let tanh = [
        ("gelu_pytorch_tanh", Activation::GeluTanh),
        ("gelu_new", Activation::GeluTanh),
    ];
    let act = if obj.get("hidden_activation").is_some_and(|v| !v.is_null()) {
        keys::activation(obj, "hidden_activation", "gelu_pytorch_tanh", &tanh)?
    } else {
        keys::activation(obj, "hidden_act", "gelu_pytorch_tanh", &tanh)?
    };
    arch.mlp = Mlp::Gated(act);
    arch.placement = Placement::Sandwich;
    arch.embed_scale = true;
    let bias = keys::flag(obj, "attention_bias")?.unwrap_or(false);
    arch.qkv_bias = bias;
    arch.o_bias = bias;
    let scalar = keys::number(obj, "query_pre_attn_scalar")?.unwrap_or(arch.head_dim as f64);
    arch.attn_scale = scalar.powf(-0.5);
    let cap = |key: &str, default: Option<f64>| match obj.get(key) {
        None => Ok(default),
        Some(_) => keys::number(obj, key),
    };
    arch.attn_softcap = cap("attn_logit_softcapping", attn_cap)?;
    arch.final_softcap = cap("final_logit_softcapping", final_cap)?;
    Ok(())
}

/// Per layer, `sliding_window` (default `default`) on sliding layers.
pub(super) fn windows(
    obj: &Obj,
    sliding: &[bool],
    default: u64,
) -> Result<Vec<Option<u64>>, ConfigError> {
    let w = keys::positive(obj, "sliding_window")?.unwrap_or(default);
    Ok(sliding.iter().map(|&s| s.then_some(w)).collect())
}
