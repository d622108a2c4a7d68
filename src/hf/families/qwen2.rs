//! `qwen2`: Qwen2 and Qwen2.5: LLaMA with biases on the q, k and v projections (always), and an
//! optional sliding window on the layers from `max_window_layers` on (`use_sliding_window`,
//! off in every released model).

use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Activation, Family, Mlp};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .copied()
        .chain(sliding::KEYS.iter().copied())
        .chain(["hidden_act"])
        .collect();
    Rules {
        family: Family::Qwen2,
        honoured: &honoured,
        inert: &[],
        off: &[("use_mrope", "multimodal rotary embeddings")],
    }
    .check(obj)?;
    let c = common(obj, false, 1e-6)?;
    let act = keys::activation(obj, "hidden_act", "silu", &[("silu", Activation::Silu)])?;
    let mut arch = c.llama(Family::Qwen2, keys::rope(obj, 10_000.0)?);
    arch.mlp = Mlp::Gated(act);
    arch.qkv_bias = true;
    arch.windows = sliding::windows(obj, c.layers)?;
    Ok(c.released(obj, arch))
}

/// Qwen's sliding-window keys, shared by Qwen2 and Qwen3.
pub(super) mod sliding {
    use super::super::Obj;
    use super::super::keys;
    use crate::hf::config::ConfigError;

    /// The keys read.
    pub const KEYS: &[&str] = &[
        "use_sliding_window",
        "sliding_window",
        "max_window_layers",
        "layer_types",
    ];

    /// Per layer, the window: `layer_types` when given, else the layers from
    /// `max_window_layers` on when `use_sliding_window`; a window only where both a sliding
    /// layer and `use_sliding_window` say so (transformers' Qwen attention masks by
    /// `sliding_window` only then).
    pub fn windows(obj: &Obj, layers: u64) -> Result<Vec<Option<u64>>, ConfigError> {
        let on = keys::flag(obj, "use_sliding_window")?.unwrap_or(false);
        let window = keys::positive(obj, "sliding_window")?;
        let from = keys::positive(obj, "max_window_layers")?.unwrap_or(layers);
        let sliding = match keys::layer_types(obj, layers)? {
            Some(types) => types,
            None => (0..layers).map(|i| on && i >= from).collect(),
        };
        sliding
            .into_iter()
            .map(|s| match (s && on, window) {
                (true, Some(w)) => Ok(Some(w)),
                (true, None) => Err(keys::err(
                    "sliding_window",
                    "is missing, but a layer uses sliding-window attention",
                )),
                (false, _) => Ok(None),
            })
            .collect()
    }
}
