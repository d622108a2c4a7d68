//! Reading a `config.json`'s keys: typed values with errors that name the key, the keys every
//! family accepts as inert, the check that refuses a key a family does not know, and the RoPE
//! parameters in both of transformers' layouts (4: `rope_theta` + `rope_scaling`; 5:
//! `rope_parameters`).

use serde_json::Value;

use super::Obj;
use crate::hf::config::ConfigError;
use crate::model::{Family, Rope, RopeScaling};

/// Keys that do not change what any model computes at inference: bookkeeping, token ids,
/// generation defaults, training-only settings.
pub(crate) const COMMON_INERT: &[&str] = &[
    "_attn_implementation",
    "_commit_hash",
    "_model_name_or_path",
    "_name_or_path",
    "architectures",
    "attention_dropout",
    "bad_words_ids",
    "begin_suppress_tokens",
    "bos_token_id",
    "chunk_size_feed_forward",
    "cls_token_id",
    "decoder_start_token_id",
    "diversity_penalty",
    "do_sample",
    "dtype",
    "early_stopping",
    "encoder_no_repeat_ngram_size",
    "eos_token_id",
    "exponential_decay_length_penalty",
    "finetuning_task",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "id2label",
    "initializer_range",
    "is_decoder",
    "label2id",
    "length_penalty",
    "mask_token_id",
    "max_length",
    "min_length",
    "model_type",
    "no_repeat_ngram_size",
    "num_beam_groups",
    "num_beams",
    "num_return_sequences",
    "output_attentions",
    "output_hidden_states",
    "output_scores",
    "pad_token_id",
    "prefix",
    "pretraining_tp",
    "problem_type",
    "remove_invalid_values",
    "repetition_penalty",
    "return_dict",
    "return_dict_in_generate",
    "sep_token_id",
    "suppress_tokens",
    "task_specific_params",
    "temperature",
    "tf_legacy_loss",
    "tokenizer_class",
    "top_k",
    "top_p",
    "torch_dtype",
    "torchscript",
    "transformers_version",
    "typical_p",
    "unk_token_id",
    "use_bfloat16",
    "use_cache",
];

/// Keys whose value must be "off" (false, null, empty) in every family.
const ALWAYS_OFF: &[(&str, &str)] = &[
    ("is_encoder_decoder", "an encoder-decoder model"),
    ("add_cross_attention", "cross-attention"),
    ("cross_attention_hidden_size", "cross-attention"),
    ("tie_encoder_decoder", "an encoder-decoder model"),
    ("pruned_heads", "pruned attention heads"),
    ("quantization_config", "quantised weights"),
    ("auto_map", "custom modelling code"),
];

/// A family's keys: those it reads (honoured), those it accepts without reading (inert), and
/// those it reads only to refuse unless off.
pub struct Rules<'a> {
    /// The family (named in messages).
    pub family: Family,
    /// Keys whose values the family's reader honours.
    pub honoured: &'a [&'a str],
    /// Keys of this family that do not change its forward pass.
    pub inert: &'a [&'a str],
    /// Keys that must be off, with what they would turn on.
    pub off: &'a [(&'a str, &'a str)],
}

impl Rules<'_> {
    /// Refuses every key that is neither honoured nor inert, and every "off" key that is on.
    pub fn check(&self, obj: &Obj) -> Result<(), ConfigError> {
        for (key, value) in obj {
            let off = self.off.iter().chain(ALWAYS_OFF).find(|(k, _)| k == key);
            if let Some((_, what)) = off {
                if !is_off(value) {
                    return Err(err(
                        key,
                        format!("is `{value}`: pdsweep's `{}` has no {what}", self.family),
                    ));
                }
            } else if !self.honoured.contains(&key.as_str())
                && !self.inert.contains(&key.as_str())
                && !COMMON_INERT.contains(&key.as_str())
            {
                return Err(err(
                    key,
                    format!(
                        "is not a key pdsweep knows for `{}` models, so it may change what the model computes",
                        self.family
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Whether a value means "off".
pub fn is_off(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// An error at `key`.
pub fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

/// `architectures`, when given, names the family's causal-LM class.
pub fn check_architectures(obj: &Obj, family: Family) -> Result<(), ConfigError> {
    let expected: &[&str] = match family {
        Family::Llama => &["LlamaForCausalLM"],
        Family::Qwen2 => &["Qwen2ForCausalLM"],
        Family::Qwen3 => &["Qwen3ForCausalLM"],
        Family::Mistral => &["MistralForCausalLM"],
        Family::Gemma2 => &["Gemma2ForCausalLM"],
        Family::Gemma3 => &["Gemma3ForCausalLM"],
        Family::GptNeox => &["GPTNeoXForCausalLM"],
        Family::Gpt2 => &["GPT2LMHeadModel"],
        Family::Olmo2 => &["Olmo2ForCausalLM"],
    };
    let Some(arch) = obj.get("architectures").filter(|v| !v.is_null()) else {
        return Ok(());
    };
    let ok = arch.as_array().is_some_and(|a| {
        a.iter()
            .all(|v| v.as_str().is_some_and(|s| expected.contains(&s)))
    });
    if ok {
        Ok(())
    } else {
        Err(err(
            "architectures",
            format!(
                "is `{arch}`: a `{family}` model loads as `{}`",
                expected.join("` or `")
            ),
        ))
    }
}

/// A positive whole number, if present.
pub fn positive(obj: &Obj, key: &str) -> Result<Option<u64>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(err(
                key,
                format!("must be a positive whole number, not `{v}`"),
            )),
        },
    }
}

/// A positive whole number that must be present.
pub fn required(obj: &Obj, key: &str) -> Result<u64, ConfigError> {
    positive(obj, key)?.ok_or_else(|| err(key, "is missing"))
}

/// A positive finite number, if present.
pub fn number(obj: &Obj, key: &str) -> Result<Option<f64>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
            _ => Err(err(key, format!("must be a positive number, not `{v}`"))),
        },
    }
}

/// A boolean, if present.
pub fn flag(obj: &Obj, key: &str) -> Result<Option<bool>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(err(key, format!("must be true or false, not `{v}`"))),
    }
}

/// A string, if present.
pub fn text<'a>(obj: &'a Obj, key: &str) -> Result<Option<&'a str>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(err(key, format!("must be a string, not `{v}`"))),
    }
}

/// The activation named by `key` (default `default`), which must be one of `allowed`.
pub fn activation(
    obj: &Obj,
    key: &str,
    default: &str,
    allowed: &[(&str, crate::model::Activation)],
) -> Result<crate::model::Activation, ConfigError> {
    let name = text(obj, key)?.unwrap_or(default);
    allowed
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, a)| *a)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            err(
                key,
                format!("is `{name}`: pdsweep computes {}", names.join(", ")),
            )
        })
}

/// `bos_token_id` and `eos_token_id` (a number or a list).
pub fn token_ids(obj: &Obj) -> (Option<u32>, Vec<u32>) {
    let id = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
    let bos = obj.get("bos_token_id").and_then(id);
    let eos = match obj.get("eos_token_id") {
        Some(Value::Array(a)) => a.iter().filter_map(id).collect(),
        Some(v) => id(v).into_iter().collect(),
        None => Vec::new(),
    };
    (bos, eos)
}

/// RoPE parameters of a table `params` (a `rope_parameters` or `rope_scaling` entry, or one
/// layer type's entry), `key` naming it in errors; `theta` is the θ found outside it.
fn rope_entry(params: &Obj, key: &str, theta: Option<f64>) -> Result<Rope, ConfigError> {
    let sub = |k: &str| format!("{key}.{k}");
    let known = [
        "rope_theta",
        "rope_type",
        "type",
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
        "partial_rotary_factor",
    ];
    if let Some(k) = params.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(err(
            &sub(k),
            "changes the rotary embeddings in a way pdsweep does not compute",
        ));
    }
    let kind = match (params.get("rope_type"), params.get("type")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.as_str(),
        (None, None) => "default",
        (Some(v), _) | (_, Some(v)) => {
            return Err(err(
                &sub("rope_type"),
                format!("must be a string, not `{v}`"),
            ));
        }
    };
    let theta_here = number(params, "rope_theta").map_err(|e| err(&sub(&e.key), e.message))?;
    let theta = theta_here.or(theta).unwrap_or(10_000.0);
    let need = |k: &str| {
        number(params, k)
            .map_err(|e| err(&sub(&e.key), e.message))?
            .ok_or_else(|| err(&sub(k), "is missing"))
    };
    let scaling = match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear {
            factor: need("factor")?,
        },
        "llama3" => RopeScaling::Llama3 {
            factor: need("factor")?,
            low_freq_factor: need("low_freq_factor")?,
            high_freq_factor: need("high_freq_factor")?,
            original: need("original_max_position_embeddings")?,
        },
        other => {
            return Err(err(
                &sub("rope_type"),
                format!(
                    "is `{other}`: pdsweep computes RoPE of type `default`, `linear` and `llama3`"
                ),
            ));
        }
    };
    if let RopeScaling::Llama3 {
        low_freq_factor,
        high_freq_factor,
        ..
    } = scaling
        && high_freq_factor <= low_freq_factor
    {
        return Err(err(
            &sub("high_freq_factor"),
            "must be larger than `low_freq_factor`",
        ));
    }
    Ok(Rope { theta, scaling })
}

/// The RoPE of a config: `rope_parameters` (transformers 5), else `rope_scaling` with `rope_theta`
/// (transformers 4), else θ = `default_theta`; a top-level `original_max_position_embeddings`
/// overrides the table's, as in transformers.
///
/// A `rope_parameters` table keyed by layer type (Gemma 3) is read by [`rope_by_layer_type`]
/// instead.
pub fn rope(obj: &Obj, default_theta: f64) -> Result<Rope, ConfigError> {
    let mut rope = rope_tables(obj, default_theta)?;
    if let (RopeScaling::Llama3 { original, .. }, Some(top)) = (
        &mut rope.scaling,
        number(obj, "original_max_position_embeddings")?,
    ) {
        *original = top;
    }
    Ok(rope)
}

fn rope_tables(obj: &Obj, default_theta: f64) -> Result<Rope, ConfigError> {
    let legacy = number(obj, "rope_theta")?;
    for key in ["rope_parameters", "rope_scaling"] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(params)) => {
                let rope = rope_entry(params, key, legacy.or(Some(default_theta)))?;
                if let Some(b) = legacy
                    && key == "rope_parameters"
                    && b != rope.theta
                {
                    return Err(err(
                        "rope_theta",
                        format!(
                            "is `{b}` but `rope_parameters.rope_theta` is `{}`",
                            rope.theta
                        ),
                    ));
                }
                return Ok(rope);
            }
            Some(v) => return Err(err(key, format!("must be a table, not `{v}`"))),
        }
    }
    Ok(Rope {
        theta: legacy.unwrap_or(default_theta),
        scaling: RopeScaling::None,
    })
}

/// Per-layer-type RoPE (Gemma 3 in transformers 5): `rope_parameters.full_attention` and
/// `rope_parameters.sliding_attention`, if the table is keyed so.
pub fn rope_by_layer_type(obj: &Obj) -> Result<Option<(Rope, Rope)>, ConfigError> {
    let Some(Value::Object(params)) = obj.get("rope_parameters") else {
        return Ok(None);
    };
    let (Some(full), Some(sliding)) = (
        params.get("full_attention"),
        params.get("sliding_attention"),
    ) else {
        return Ok(None);
    };
    if let Some(k) = params
        .keys()
        .find(|k| *k != "full_attention" && *k != "sliding_attention")
    {
        return Err(err(
            &format!("rope_parameters.{k}"),
            "is not a layer type pdsweep knows (`full_attention`, `sliding_attention`)",
        ));
    }
    let table = |v: &Value, k: &str| match v {
        Value::Object(o) => rope_entry(o, &format!("rope_parameters.{k}"), None),
        other => Err(err(
            &format!("rope_parameters.{k}"),
            format!("must be a table, not `{other}`"),
        )),
    };
    Ok(Some((
        table(full, "full_attention")?,
        table(sliding, "sliding_attention")?,
    )))
}

/// A `partial_rotary_factor` given inside `rope_parameters` (transformers 5), if any.
pub fn rope_partial_factor(obj: &Obj) -> Result<Option<f64>, ConfigError> {
    match obj.get("rope_parameters") {
        Some(Value::Object(p)) => number(p, "partial_rotary_factor")
            .map_err(|e| err(&format!("rope_parameters.{}", e.key), e.message)),
        _ => Ok(None),
    }
}

/// `layer_types` (`"full_attention"` / `"sliding_attention"` per layer), if given: true for a
/// sliding layer.
pub fn layer_types(obj: &Obj, layers: u64) -> Result<Option<Vec<bool>>, ConfigError> {
    let Some(v) = obj.get("layer_types").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(list) = v.as_array() else {
        return Err(err("layer_types", format!("must be a list, not `{v}`")));
    };
    if list.len() as u64 != layers {
        return Err(err(
            "layer_types",
            format!(
                "lists {} layers, but `num_hidden_layers` is {layers}",
                list.len()
            ),
        ));
    }
    list.iter()
        .map(|t| match t.as_str() {
            Some("full_attention") => Ok(false),
            Some("sliding_attention") => Ok(true),
            _ => Err(err(
                "layer_types",
                format!("has `{t}`: pdsweep knows `full_attention` and `sliding_attention`"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
