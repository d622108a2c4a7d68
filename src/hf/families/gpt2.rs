//! `gpt2`: GPT-2: learned positions, LayerNorm with biases before attention and MLP, a GELU MLP
//! (tanh approximation, `gelu_new`), biases everywhere, a head tied to the embedding. Its
//! linear layers are `Conv1D`s stored `[in, out]`, with q, k and v side by side in `c_attn`;
//! released checkpoints name tensors with or without the `transformer.` prefix.

use super::keys::{self, Rules};
use super::{Naming, Obj, ReleasedConfig, TensorRef};
use crate::hf::config::ConfigError;
use crate::model::{
    Activation, Architecture, Family, LayerPart, Mlp, Norm, Part, Placement, Positions, QkNorm,
};

pub(super) fn parse(obj: &Obj) -> Result<ReleasedConfig, ConfigError> {
    Rules {
        family: Family::Gpt2,
        honoured: &[
            "n_embd",
            "n_layer",
            "n_head",
            "n_inner",
            "vocab_size",
            "n_positions",
            "layer_norm_epsilon",
            "activation_function",
            "scale_attn_weights",
            "tie_word_embeddings",
        ],
        inert: &[
            "n_ctx",
            "resid_pdrop",
            "embd_pdrop",
            "attn_pdrop",
            "summary_activation",
            "summary_first_dropout",
            "summary_proj_to_labels",
            "summary_type",
            "summary_use_proj",
            // upcasting changes nothing in f32
            "reorder_and_upcast_attn",
        ],
        off: &[(
            "scale_attn_by_inverse_layer_idx",
            "attention scores scaled by the inverse layer index",
        )],
    }
    .check(obj)?;
    let d = keys::required(obj, "n_embd")?;
    let heads = keys::required(obj, "n_head")?;
    let layers = keys::required(obj, "n_layer")?;
    let head_dim = d / heads;
    if head_dim * heads != d {
        return Err(keys::err(
            "n_head",
            format!("`{heads}` does not divide `n_embd` = {d}"),
        ));
    }
    let act = keys::activation(
        obj,
        "activation_function",
        "gelu_new",
        &[
            ("gelu_new", Activation::GeluTanh),
            ("gelu_pytorch_tanh", Activation::GeluTanh),
            ("gelu", Activation::Gelu),
        ],
    )?;
    let scaled = keys::flag(obj, "scale_attn_weights")?.unwrap_or(true);
    let positions = keys::positive(obj, "n_positions")?.unwrap_or(1024);
    let tie = keys::flag(obj, "tie_word_embeddings")?.unwrap_or(true);
    let arch = Architecture {
        family: Family::Gpt2,
        d_model: d,
        n_layers: layers,
        n_heads: heads,
        n_kv_heads: heads,
        head_dim,
        d_ff: keys::positive(obj, "n_inner")?.unwrap_or(4 * d),
        vocab: keys::required(obj, "vocab_size")?,
        tie_embeddings: tie,
        norm: Norm::Layer,
        norm_eps: keys::number(obj, "layer_norm_epsilon")?.unwrap_or(1e-5),
        placement: Placement::Pre,
        qk_norm: QkNorm::None,
        qkv_bias: true,
        o_bias: true,
        mlp_bias: true,
        mlp: Mlp::Plain(act),
        positions: Positions::Learned { rows: positions },
        attn_scale: if scaled {
            1.0 / (head_dim as f64).sqrt()
        } else {
            1.0
        },
        attn_softcap: None,
        final_softcap: None,
        embed_scale: false,
        windows: vec![None; layers as usize],
    };
    let (bos_token_id, eos_token_ids) = keys::token_ids(obj);
    Ok(ReleasedConfig {
        arch,
        max_positions: positions,
        bos_token_id,
        eos_token_ids,
    })
}

/// GPT-2's tensor names, with the prefix the files use.
pub(super) struct Gpt2Naming {
    prefix: &'static str,
    d: usize,
}

impl Gpt2Naming {
    /// The naming for `arch`, the prefix read off the stored `names`.
    pub(super) fn new(arch: &Architecture, names: &[String]) -> Gpt2Naming {
        let prefixed = names.iter().any(|n| n.starts_with("transformer."));
        Gpt2Naming {
            prefix: if prefixed { "transformer." } else { "" },
            d: arch.d_model as usize,
        }
    }
}

impl Naming for Gpt2Naming {
    fn locate(&self, part: Part, shape: &[usize]) -> TensorRef {
        use LayerPart as P;
        let d = self.d;
        let px = self.prefix;
        let plain = |name: String| TensorRef::plain(name, shape);
        // a Conv1D weight: stored [in, out], the part is [out, in]
        let conv = |name: String| TensorRef {
            stored: vec![shape[1], shape[0]],
            transposed: true,
            ..TensorRef::plain(name, shape)
        };
        let qkv = |l: &dyn Fn(&str) -> String, which: usize, bias: bool| TensorRef {
            name: l(if bias {
                "attn.c_attn.bias"
            } else {
                "attn.c_attn.weight"
            }),
            stored: if bias { vec![3 * d] } else { vec![d, 3 * d] },
            transposed: !bias,
            rows: Some(vec![(which * d, d)]),
            plus_one: false,
        };
        match part {
            Part::Embed => plain(format!("{px}wte.weight")),
            Part::Positions => plain(format!("{px}wpe.weight")),
            Part::FinalNorm(a) => plain(format!("{px}ln_f.{}", a.suffix())),
            Part::Head => plain("lm_head.weight".into()),
            Part::Layer(i, p) => {
                let l = |rest: &str| format!("{px}h.{i}.{rest}");
                match p {
                    P::AttnNorm(a) => plain(l(&format!("ln_1.{}", a.suffix()))),
                    P::MlpNorm(a) => plain(l(&format!("ln_2.{}", a.suffix()))),
                    P::Q => qkv(&l, 0, false),
                    P::K => qkv(&l, 1, false),
                    P::V => qkv(&l, 2, false),
                    P::QBias => qkv(&l, 0, true),
                    P::KBias => qkv(&l, 1, true),
                    P::VBias => qkv(&l, 2, true),
                    P::O => conv(l("attn.c_proj.weight")),
                    P::OBias => plain(l("attn.c_proj.bias")),
                    P::Up => conv(l("mlp.c_fc.weight")),
                    P::UpBias => plain(l("mlp.c_fc.bias")),
                    P::Down => conv(l("mlp.c_proj.weight")),
                    P::DownBias => plain(l("mlp.c_proj.bias")),
                    other => plain(l(&format!("(no {other:?} in gpt2)"))),
                }
            }
        }
    }

    fn is_buffer(&self, name: &str) -> bool {
        // the causal mask buffers of old checkpoints
        name.ends_with("attn.bias") && !name.ends_with("c_attn.bias")
            || name.ends_with("attn.masked_bias")
    }

    fn vocab_tensors(&self) -> Vec<String> {
        vec![
            format!("{}wte.weight", self.prefix),
            "lm_head.weight".into(),
        ]
    }
}
