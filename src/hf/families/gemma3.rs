//! `gemma3_text`: Gemma 3's language models (270M, 1B, and the text half of the larger ones):
//! Gemma 2's block with an RMSNorm (1 + w) on every query and key head instead of attention
//! soft-capping, a head width of its own (256), and five sliding-window layers to each global
//! one, the sliding layers rotating with their own base (`rope_local_base_freq`) and the
//! global ones with `rope_theta` and its scaling. Its config's `attn_logit_softcapping` is read
//! but, as in transformers, not applied.

use super::gemma2::{GEMMA_INERT, GEMMA_KEYS, GEMMA_OFF, gemma, windows};
use super::keys::{self, Rules};
use super::llama::{SHAPE_KEYS, common};
use super::{Obj, ReleasedConfig};
use crate::hf::config::ConfigError;
use crate::model::{Family, Positions, QkNorm, Rope, RopeScaling};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    let honoured: Vec<&str> = SHAPE_KEYS
        .iter()
        .chain(GEMMA_KEYS)
        .copied()
        .chain([
            "rope_local_base_freq",
            "sliding_window_pattern",
            "_sliding_window_pattern",
        ])
        .collect();
    Rules {
        family: Family::Gemma3,
        honoured: &honoured,
        inert: GEMMA_INERT,
        off: GEMMA_OFF,
    }
    .check(obj)?;
    let mut c = common(obj, true, 1e-6)?;
    if keys::positive(obj, "head_dim")?.is_none() {
        c.head_dim = 256; // Gemma's default, whatever the width
    }
    let (global, local) = match keys::rope_by_layer_type(obj)? {
        Some(pair) => pair,
        None => (
            keys::rope(obj, 1_000_000.0)?,
            Rope {
                theta: keys::number(obj, "rope_local_base_freq")?.unwrap_or(10_000.0),
                scaling: RopeScaling::None,
            },
        ),
    };
    let mut arch = c.llama(Family::Gemma3, global);
    gemma(obj, &mut arch, None, None)?;
    // transformers 5 keeps `attn_logit_softcapping` in Gemma 3's config but never applies it
    arch.attn_softcap = None;
    arch.qk_norm = QkNorm::PerHead;
    arch.positions = Positions::Rotary {
        dims: c.head_dim,
        global,
        local: Some(local),
    };
    let sliding = match keys::layer_types(obj, c.layers)? {
        Some(types) => types,
        None => {
            let pattern = match keys::positive(obj, "sliding_window_pattern")? {
                Some(p) => p,
                None => keys::positive(obj, "_sliding_window_pattern")?.unwrap_or(6),
            };
            (0..c.layers).map(|i| (i + 1) % pattern != 0).collect()
        }
    };
    arch.windows = windows(obj, &sliding, 4096)?;
    Ok(c.released(obj, arch))
}
