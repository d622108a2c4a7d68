//! `gpt_neox`: GPT-NeoX and Pythia: LayerNorm with biases, attention and MLP side by side on
//! the same input (`use_parallel_residual`, the default) or one after the other, rotary
//! embeddings on the first `rotary_pct` of each head, a GELU MLP, biases everywhere, an untied
//! head (`embed_out`), and q, k and v fused per head in `query_key_value`.

use super::keys::{self, Rules};
use super::{Naming, Obj, ReleasedConfig, TensorRef};
use crate::hf::config::ConfigError;
use crate::model::{
    Activation, Architecture, Family, LayerPart, Mlp, Norm, Part, Placement, Positions, QkNorm,
};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    Rules {
        family: Family::GptNeox,
        honoured: &[
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "vocab_size",
            "tie_word_embeddings",
            "layer_norm_eps",
            "max_position_embeddings",
            "rotary_pct",
            "partial_rotary_factor",
            "rotary_emb_base",
            "rope_theta",
            "rope_parameters",
            "rope_scaling",
            "use_parallel_residual",
            "hidden_act",
            "attention_bias",
        ],
        inert: &[
            "hidden_dropout",
            "classifier_dropout",
            "rotary_emb_base_is_default",
        ],
        off: &[],
    }
    .check(obj)?;
    let d = keys::required(obj, "hidden_size")?;
    let heads = keys::required(obj, "num_attention_heads")?;
    let layers = keys::required(obj, "num_hidden_layers")?;
    let head_dim = d / heads;
    let fraction = match keys::rope_partial_factor(obj)? {
        Some(f) => f,
        None => match keys::number(obj, "partial_rotary_factor")? {
            Some(f) => f,
            None => keys::number(obj, "rotary_pct")?.unwrap_or(0.25),
        },
    };
    if fraction > 1.0 {
        return Err(keys::err("rotary_pct", "must be at most 1"));
    }
    let theta = keys::number(obj, "rotary_emb_base")?.unwrap_or(10_000.0);
    let rope = keys::rope(obj, theta)?;
    let act = keys::activation(
        obj,
        "hidden_act",
        "gelu",
        &[
            ("gelu", Activation::Gelu),
            ("gelu_new", Activation::GeluTanh),
            ("gelu_pytorch_tanh", Activation::GeluTanh),
        ],
    )?;
    let parallel = keys::flag(obj, "use_parallel_residual")?.unwrap_or(true);
    let bias = keys::flag(obj, "attention_bias")?.unwrap_or(true);
    let arch = Architecture {
        family: Family::GptNeox,
        d_model: d,
        n_layers: layers,
        n_heads: heads,
        n_kv_heads: heads,
        head_dim,
        d_ff: keys::required(obj, "intermediate_size")?,
        vocab: keys::required(obj, "vocab_size")?,
        tie_embeddings: keys::flag(obj, "tie_word_embeddings")?.unwrap_or(false),
        norm: Norm::Layer,
        norm_eps: keys::number(obj, "layer_norm_eps")?.unwrap_or(1e-5),
        placement: if parallel {
            Placement::Parallel
        } else {
            Placement::Pre
        },
        qk_norm: QkNorm::None,
        qkv_bias: bias,
        o_bias: bias,
        mlp_bias: true,
        mlp: Mlp::Plain(act),
        positions: Positions::Rotary {
            // transformers: int(head_dim * rotary_pct)
            dims: (head_dim as f64 * fraction) as u64,
            global: rope,
            local: None,
        },
        attn_scale: 1.0 / (head_dim as f64).sqrt(),
        attn_softcap: None,
        final_softcap: None,
        embed_scale: false,
        windows: vec![None; layers as usize],
    };
    let (bos_token_id, eos_token_ids) = keys::token_ids(obj);
    Ok(ReleasedConfig {
        arch,
        max_positions: keys::positive(obj, "max_position_embeddings")?.unwrap_or(2048),
        bos_token_id,
        eos_token_ids,
    })
}

/// NeoX's tensor names; `query_key_value` holds, per head, that head's q, k and v rows.
pub(super) struct NeoxNaming {
    pub head_dim: usize,
    pub heads: usize,
}

impl Naming for NeoxNaming {
    fn locate(&self, part: Part, shape: &[usize]) -> TensorRef {
        use LayerPart as P;
        let (hd, h) = (self.head_dim, self.heads);
        // rows of head i's q (k, v) in the fused tensor: i·3hd + which·hd, hd of them
        let fused = |which: usize, bias: bool| {
            let rows = (0..h).map(|i| (i * 3 * hd + which * hd, hd)).collect();
            let mut stored = vec![3 * h * hd];
            if !bias {
                stored.push(shape[1]);
            }
            (stored, Some(rows))
        };
        let (name, stored, rows) = match part {
            Part::Embed => ("gpt_neox.embed_in.weight".to_string(), shape.to_vec(), None),
            Part::Head => ("embed_out.weight".to_string(), shape.to_vec(), None),
            Part::FinalNorm(a) => (
                format!("gpt_neox.final_layer_norm.{}", a.suffix()),
                shape.to_vec(),
                None,
            ),
            Part::Positions => (
                "gpt_neox.embed_positions.weight".into(),
                shape.to_vec(),
                None,
            ),
            Part::Layer(i, p) => {
                let l = |rest: &str| format!("gpt_neox.layers.{i}.{rest}");
                let (rest, (stored, rows)) = match p {
                    P::AttnNorm(a) => (
                        format!("input_layernorm.{}", a.suffix()),
                        (shape.to_vec(), None),
                    ),
                    P::MlpNorm(a) => (
                        format!("post_attention_layernorm.{}", a.suffix()),
                        (shape.to_vec(), None),
                    ),
                    P::Q => ("attention.query_key_value.weight".into(), fused(0, false)),
                    P::K => ("attention.query_key_value.weight".into(), fused(1, false)),
                    P::V => ("attention.query_key_value.weight".into(), fused(2, false)),
                    P::QBias => ("attention.query_key_value.bias".into(), fused(0, true)),
                    P::KBias => ("attention.query_key_value.bias".into(), fused(1, true)),
                    P::VBias => ("attention.query_key_value.bias".into(), fused(2, true)),
                    P::O => ("attention.dense.weight".into(), (shape.to_vec(), None)),
                    P::OBias => ("attention.dense.bias".into(), (shape.to_vec(), None)),
                    P::Up => ("mlp.dense_h_to_4h.weight".into(), (shape.to_vec(), None)),
                    P::UpBias => ("mlp.dense_h_to_4h.bias".into(), (shape.to_vec(), None)),
                    P::Down => ("mlp.dense_4h_to_h.weight".into(), (shape.to_vec(), None)),
                    P::DownBias => ("mlp.dense_4h_to_h.bias".into(), (shape.to_vec(), None)),
                    other => (
                        format!("(no {other:?} in gpt_neox)"),
                        (shape.to_vec(), None),
                    ),
                };
                (l(&rest), stored, rows)
            }
        };
        TensorRef {
            name,
            stored,
            transposed: false,
            rows,
            plus_one: false,
        }
    }

    fn is_buffer(&self, name: &str) -> bool {
        // old checkpoints carry the causal mask and the rotary frequencies
        name.ends_with("attention.bias")
            || name.ends_with("attention.masked_bias")
            || name.ends_with("rotary_emb.inv_freq")
    }

    fn vocab_tensors(&self) -> Vec<String> {
        vec!["gpt_neox.embed_in.weight".into(), "embed_out.weight".into()]
    }
}
