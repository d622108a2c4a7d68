//! `qwen3`: Qwen3's dense models: LLaMA with an RMSNorm on every query and key head (before
//! RoPE), an explicit head width, optional biases (`attention_bias`) and Qwen's sliding-window
//! keys.

use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::qwen2::sliding;
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Family, Mlp, QkNorm};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .copied()
        .chain(sliding::KEYS.iter().copied())
        .chain(["hidden_act", "attention_bias"])
        .collect();
    Rules {
        family: Family::Qwen3,
        honoured: &honoured,
        inert: &[],
        off: &[],
    }
    .check(obj)?;
    let mut c = common(obj, false, 1e-6)?;
    if keys::positive(obj, "head_dim")?.is_none() {
        c.head_dim = 128; // Qwen3Config's default, whatever the width
    }
    let act = keys::activation(obj, "hidden_act", "silu", &[("silu", Activation::Silu)])?;
    let bias = keys::flag(obj, "attention_bias")?.unwrap_or(false);
    let mut arch = c.llama(Family::Qwen3, keys::rope(obj, 10_000.0)?);
    arch.mlp = Mlp::Gated(act);
    arch.qk_norm = QkNorm::PerHead;
    arch.qkv_bias = bias;
    arch.o_bias = bias;
    arch.windows = sliding::windows(obj, c.layers)?;
    Ok(c.released(obj, arch))
}
