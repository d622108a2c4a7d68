//! `olmo2`: OLMo 2: RMSNorm after attention and after the MLP (none before), an RMSNorm over
//! the whole query and key projections (before RoPE), optional biases (`attention_bias`).

use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Family, Mlp, Placement, QkNorm};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .copied()
        .chain(["hidden_act", "attention_bias"])
        .collect();
    Rules {
        family: Family::Olmo2,
        honoured: &honoured,
        inert: &[],
        off: &[],
    }
    .check(obj)?;
    let c = common(obj, false, 1e-5)?;
    let act = keys::activation(obj, "hidden_act", "silu", &[("silu", Activation::Silu)])?;
    let bias = keys::flag(obj, "attention_bias")?.unwrap_or(false);
    let mut arch = c.llama(Family::Olmo2, keys::rope(obj, 10_000.0)?);
    arch.mlp = Mlp::Gated(act);
    arch.placement = Placement::Post;
    arch.qk_norm = QkNorm::Full;
    arch.qkv_bias = bias;
    arch.o_bias = bias;
    Ok(c.released(obj, arch))
}
