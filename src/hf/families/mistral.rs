//! `mistral`: LLaMA with an explicit head width and a sliding window on every layer
//! (`sliding_window`, null from Mistral 7B v0.2 on).

use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Family, Mlp};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .copied()
        .chain(["hidden_act", "sliding_window"])
        .collect();
    Rules {
        family: Family::Mistral,
        honoured: &honoured,
        inert: &[],
        off: &[],
    }
    .check(obj)?;
    let c = common(obj, false, 1e-6)?;
    let act = keys::activation(obj, "hidden_act", "silu", &[("silu", Activation::Silu)])?;
    let mut arch = c.llama(Family::Mistral, keys::rope(obj, 10_000.0)?);
    arch.mlp = Mlp::Gated(act);
    // an absent key is MistralConfig's default of 4096; null turns the window off
    let window = match obj.get("sliding_window") {
        None => Some(4096),
        Some(_) => keys::positive(obj, "sliding_window")?,
    };
    arch.windows = vec![window; c.layers as usize];
    Ok(c.released(obj, arch))
}
