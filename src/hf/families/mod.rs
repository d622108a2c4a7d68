//! The released model families pdsweep loads as teachers, one file each, every one owning its
//! `config.json`: which keys change the maths (honoured, or refused naming family and key),
//! which are inert (accepted), and how its weights are named. A key no family knows stays
//! refused, since it may change what the model computes.
//!
//! Each family reads its config into the shared `Architecture` that
//! [`crate::model::Decoder`] runs; a plain LLaMA also reads into a `LlamaConfig`, which
//! pdsweep's own [`crate::model::Transformer`] runs exactly as before.

mod gemma2;
mod gemma3;
mod gpt2;
mod gpt_neox;
mod keys;
mod llama;
mod mistral;
mod olmo2;
mod qwen2;
mod qwen3;
mod weights;

use serde_json::{Map, Value};

pub(crate) use weights::FamilyWeights;

use super::config::{ConfigError, LlamaConfig};
use crate::model::{Architecture, Family, ModelShape, ParamCount, Part};

/// What a released model's `config.json` says, read by its family.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleasedConfig {
    /// The architecture the decoder runs.
    pub arch: Architecture,
    /// `max_position_embeddings` (or the family's name for it): the longest context it was
    /// built for.
    pub max_positions: u64,
    /// `bos_token_id`, when given.
    pub bos_token_id: Option<u32>,
    /// `eos_token_id` (a list for some families), when given.
    pub eos_token_ids: Vec<u32>,
}

impl ReleasedConfig {
    /// The family.
    pub fn family(&self) -> Family {
        self.arch.family
    }

    /// The plain LLaMA pdsweep's own transformer computes exactly (RMSNorm, default RoPE over
    /// the whole head, SwiGLU, no biases, head width d/h), or `None` when it is another
    /// architecture (the released decoder runs it).
    pub fn as_llama(&self) -> Option<LlamaConfig> {
        use crate::model::{Activation, Mlp, Norm, Placement, Positions, QkNorm, RopeScaling};
        let a = &self.arch;
        let Positions::Rotary {
            dims,
            global,
            local: None,
        } = a.positions
        else {
            return None;
        };
        let plain = a.family == Family::Llama
            && a.norm == Norm::Rms
            && a.placement == Placement::Pre
            && a.qk_norm == QkNorm::None
            && !(a.qkv_bias || a.o_bias || a.mlp_bias)
            && a.mlp == Mlp::Gated(Activation::Silu)
            && a.head_dim * a.n_heads == a.d_model
            && dims == a.head_dim
            && global.scaling == RopeScaling::None
            && a.attn_softcap.is_none()
            && a.final_softcap.is_none()
            && !a.embed_scale
            && a.attn_scale == 1.0 / (a.head_dim as f64).sqrt()
            && a.windows.iter().all(Option::is_none);
        plain.then_some(LlamaConfig {
            d_model: a.d_model,
            n_layers: a.n_layers,
            n_heads: a.n_heads,
            n_kv_heads: a.n_kv_heads,
            d_ff: a.d_ff,
            vocab: a.vocab,
            tie_embeddings: a.tie_embeddings,
            rope_theta: global.theta,
            norm_eps: a.norm_eps,
            max_positions: self.max_positions,
        })
    }

    /// The LLaMA shape nearest it (exact for a plain LLaMA).
    pub fn shape(&self) -> ModelShape {
        self.arch.nearest_shape()
    }

    /// Exact parameter counts.
    pub fn params(&self) -> ParamCount {
        self.arch.params()
    }
}

/// Reads the text of a `config.json` of any family pdsweep knows.
pub fn parse(text: &str) -> Result<ReleasedConfig, ConfigError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| keys::err("(document)", format!("is not valid JSON: {e}")))?;
    let Some(obj) = value.as_object() else {
        return Err(keys::err("(document)", "is not a JSON object"));
    };
    let model_type = obj
        .get("model_type")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            keys::err(
                "model_type",
                format!("is missing (expected one of {})", known()),
            )
        })?;
    let family = Family::ALL
        .into_iter()
        .find(|f| f.model_type() == model_type)
        .ok_or_else(|| {
            keys::err(
                "model_type",
                format!("is `{model_type}`: pdsweep loads {}", known()),
            )
        })?;
    keys::check_architectures(obj, family)?;
    let config = match family {
        Family::Llama => llama::parse(obj),
        Family::Qwen2 => qwen2::parse(obj),
        Family::Qwen3 => qwen3::parse(obj),
        Family::Mistral => mistral::parse(obj),
        Family::Gemma2 => gemma2::parse(obj),
        Family::Gemma3 => gemma3::parse(obj),
        Family::GptNeox => gpt_neox::parse(obj),
        Family::Gpt2 => gpt2::parse(obj),
        Family::Olmo2 => olmo2::parse(obj),
    }?;
    config
        .arch
        .validate()
        .map_err(|m| keys::err("(architecture)", m))?;
    Ok(config)
}

/// The `model_type`s pdsweep loads, for messages.
fn known() -> String {
    Family::ALL
        .iter()
        .map(|f| format!("`{}`", f.model_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where a family stores one part of its weights.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorRef {
    /// The tensor's name in the safetensors files.
    pub name: String,
    /// Its shape as stored.
    pub stored: Vec<usize>,
    /// Stored `[in, out]` (GPT-2's Conv1D) rather than `[out, in]`.
    pub transposed: bool,
    /// For a fused tensor: the rows (after any transpose) that make the part, as ranges
    /// `(first, count)` concatenated in order.
    pub rows: Option<Vec<(usize, usize)>>,
    /// A norm's γ stored as γ − 1 (Gemma computes x̂ · (1 + w)).
    pub plus_one: bool,
}

impl TensorRef {
    /// A tensor stored as the part is.
    pub fn plain(name: impl Into<String>, shape: &[usize]) -> TensorRef {
        TensorRef {
            name: name.into(),
            stored: shape.to_vec(),
            transposed: false,
            rows: None,
            plus_one: false,
        }
    }
}

/// A family's naming of its weights.
pub trait Naming {
    /// Where `part` (of PyTorch shape `shape`) is stored.
    fn locate(&self, part: Part, shape: &[usize]) -> TensorRef;

    /// Stored tensors that are buffers, not parameters (causal masks, cached frequencies),
    /// ignored when checking that every tensor was used.
    fn is_buffer(&self, name: &str) -> bool {
        name.ends_with("rotary_emb.inv_freq")
    }

    /// Names of the tensors with one row per token (cut to the tokenizer's vocabulary).
    fn vocab_tensors(&self) -> Vec<String>;
}

/// The naming of `arch`'s family (and its stored prefix where a family has two).
pub fn naming(arch: &Architecture, names: &[String]) -> Box<dyn Naming> {
    match arch.family {
        Family::Llama | Family::Qwen2 | Family::Qwen3 | Family::Mistral | Family::Olmo2 => {
            Box::new(llama::LlamaNaming)
        }
        Family::Gemma2 | Family::Gemma3 => Box::new(llama::GemmaNaming),
        Family::GptNeox => Box::new(gpt_neox::NeoxNaming {
            head_dim: arch.head_dim as usize,
            heads: arch.n_heads as usize,
        }),
        Family::Gpt2 => Box::new(gpt2::Gpt2Naming::new(arch, names)),
    }
}

/// The object's keys, for the families' checks.
type Obj = Map<String, Value>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fixtures() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf_configs")
    }

    /// The configs as published (tests/fixtures/hf_configs, with their sources) are read by
    /// their family without refusal, and count exactly the parameters transformers counts.
    #[test]
    fn published_configs_read_with_their_exact_parameter_counts() {
        let table: Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures().join("params.json")).unwrap())
                .unwrap();
        let table = table.as_object().unwrap();
        assert_eq!(table.len(), 10);
        for (stem, row) in table {
            let text = std::fs::read_to_string(fixtures().join(format!("{stem}.json"))).unwrap();
            let config = parse(&text).unwrap_or_else(|e| panic!("{stem}: {e:?}"));
            assert_eq!(
                config.family().model_type(),
                row["model_type"].as_str().unwrap(),
                "{stem}"
            );
            assert_eq!(
                config.params().total,
                row["params"].as_u64().unwrap(),
                "{stem}: {}",
                config.arch.summary()
            );
        }
    }

    fn fixture(stem: &str) -> ReleasedConfig {
        parse(&std::fs::read_to_string(fixtures().join(format!("{stem}.json"))).unwrap()).unwrap()
    }

    #[test]
    fn each_family_reads_what_changes_its_maths() {
        use crate::model::{Activation, Mlp, Placement, Positions, QkNorm, RopeScaling};
        // SmolLM2-135M is a plain LLaMA: pdsweep's own transformer runs it
        let smol = fixture("smollm2-135m");
        let llama = smol.as_llama().expect("plain LLaMA");
        assert_eq!(
            (llama.n_heads, llama.n_kv_heads, llama.rope_theta),
            (9, 3, 100_000.0)
        );
        // Llama 3.2: llama3 RoPE scaling, so the decoder runs it
        let l32 = fixture("llama-3.2-1b");
        assert!(l32.as_llama().is_none());
        let Positions::Rotary { global, .. } = l32.arch.positions else {
            panic!()
        };
        assert_eq!(
            global.scaling,
            RopeScaling::Llama3 {
                factor: 32.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original: 8192.0
            }
        );
        let qwen = fixture("qwen2.5-0.5b");
        assert!(qwen.arch.qkv_bias && !qwen.arch.o_bias && qwen.arch.tie_embeddings);
        assert!(
            qwen.arch.windows.iter().all(Option::is_none),
            "use_sliding_window is false"
        );
        let qwen3 = fixture("qwen3-0.6b");
        assert_eq!(
            (qwen3.arch.head_dim, qwen3.arch.qk_norm),
            (128, QkNorm::PerHead)
        );
        let gemma = fixture("gemma-3-270m");
        let a = &gemma.arch;
        assert_eq!(
            (a.head_dim, a.n_kv_heads, a.placement),
            (256, 1, Placement::Sandwich)
        );
        assert!(a.embed_scale && a.tie_embeddings && a.final_softcap.is_none());
        let globals: Vec<usize> = (0..18).filter(|&i| a.windows[i].is_none()).collect();
        assert_eq!(globals, vec![5, 11, 17]);
        assert_eq!(a.windows[0], Some(512));
        let Positions::Rotary { global, local, .. } = a.positions else {
            panic!()
        };
        assert_eq!(
            (global.theta, local.map(|l| l.theta)),
            (1e6, Some(10_000.0))
        );
        let pythia = fixture("pythia-160m");
        assert_eq!(pythia.arch.placement, Placement::Parallel);
        assert_eq!(pythia.arch.mlp, Mlp::Plain(Activation::Gelu));
        let Positions::Rotary { dims, .. } = pythia.arch.positions else {
            panic!()
        };
        assert_eq!(dims, 16);
        let gpt2 = fixture("gpt2");
        assert_eq!(gpt2.arch.positions, Positions::Learned { rows: 1024 });
        assert_eq!(gpt2.arch.mlp, Mlp::Plain(Activation::GeluTanh));
        let olmo = fixture("olmo-2-0425-1b");
        assert_eq!(
            (olmo.arch.placement, olmo.arch.qk_norm),
            (Placement::Post, QkNorm::Full)
        );
    }

    fn refused(stem: &str, key: &str, value: Value) -> ConfigError {
        let text = std::fs::read_to_string(fixtures().join(format!("{stem}.json"))).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let obj = v.as_object_mut().unwrap();
        match key.split_once('.') {
            Some((outer, inner)) => {
                obj[outer]
                    .as_object_mut()
                    .unwrap()
                    .insert(inner.into(), value);
            }
            None => {
                obj.insert(key.into(), value);
            }
        }
        parse(&v.to_string()).unwrap_err()
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_naming_family_and_key() {
        let cases: Vec<(&str, &str, Value, &str)> = vec![
            ("smollm2-135m", "model_type", json!("falcon"), "model_type"),
            (
                "smollm2-135m",
                "architectures",
                json!(["MistralForCausalLM"]),
                "architectures",
            ),
            ("smollm2-135m", "hidden_act", json!("gelu"), "hidden_act"),
            ("smollm2-135m", "num_experts", json!(8), "num_experts"),
            ("smollm2-135m", "hidden_size", json!("big"), "hidden_size"),
            (
                "smollm2-135m",
                "quantization_config",
                json!({"bits": 4}),
                "quantization_config",
            ),
            (
                "llama-3.2-1b",
                "rope_scaling.rope_type",
                json!("yarn"),
                "rope_scaling.rope_type",
            ),
            (
                "llama-3.2-1b",
                "rope_scaling.beta_fast",
                json!(32),
                "rope_scaling.beta_fast",
            ),
            ("qwen2.5-0.5b", "use_mrope", json!(true), "use_mrope"),
            (
                "gpt2",
                "scale_attn_by_inverse_layer_idx",
                json!(true),
                "scale_attn_by_inverse_layer_idx",
            ),
            (
                "gemma-3-270m",
                "use_bidirectional_attention",
                json!(true),
                "use_bidirectional_attention",
            ),
            (
                "gemma-3-270m",
                "layer_types",
                json!(["full_attention"]),
                "layer_types",
            ),
            ("pythia-160m", "rotary_pct", json!(2.0), "rotary_pct"),
            ("olmo-2-0425-1b", "hidden_act", json!("relu"), "hidden_act"),
        ];
        for (stem, key, value, expected) in cases {
            let e = refused(stem, key, value);
            assert_eq!(e.key, expected, "{stem} {key}: {e:?}");
        }
        let e = refused("gemma-3-270m", "num_experts", json!(8));
        assert!(
            e.message.contains("`gemma3_text`"),
            "the family is named: {e:?}"
        );
    }

    #[test]
    fn inert_keys_are_accepted() {
        let text = std::fs::read_to_string(fixtures().join("smollm2-135m.json")).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let obj = v.as_object_mut().unwrap();
        // what transformers writes for a model converted from a GGUF file (benches/smollm2.py)
        obj.insert(
            "_model_name_or_path".into(),
            json!("Smollm2 135M 8k Lc100K Mix1 Ep2"),
        );
        obj.insert("unk_token_id".into(), json!(0));
        obj.insert("attention_bias".into(), json!(false));
        assert!(parse(&v.to_string()).unwrap().as_llama().is_some());
    }
}
