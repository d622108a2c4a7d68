//! A Hugging Face LLaMA `config.json`: read into what pdsweep's model honours (shape, RoPE θ,
//! RMSNorm ε, tied embeddings, longest context), refusing by name every key that would make the
//! model compute something else; and written for exported models. Both the transformers 4
//! layout (`rope_theta`, `rope_scaling`) and the transformers 5 layout (`rope_parameters`) are
//! read; both are written.

use serde_json::{Map, Value, json};

/// The architecture a LLaMA `config.json` describes, as pdsweep's model runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `hidden_size`.
    pub d_model: u64,
    /// `num_hidden_layers`.
    pub n_layers: u64,
    /// `num_attention_heads`.
    pub n_heads: u64,
    /// `num_key_value_heads` (default `num_attention_heads`).
    pub n_kv_heads: u64,
    /// `intermediate_size`.
    pub d_ff: u64,
    /// `vocab_size`.
    pub vocab: u64,
    /// `tie_word_embeddings` (default false, as in transformers' `LlamaConfig`).
    pub tie_embeddings: bool,
    /// RoPE θ: `rope_parameters.rope_theta` or `rope_theta` (default 10000).
    pub rope_theta: f64,
    /// `rms_norm_eps` (default 1e-6, as in transformers' `LlamaConfig`).
    pub norm_eps: f64,
    /// `max_position_embeddings` (default 2048): the longest context the model was built for.
    pub max_positions: u64,
}

/// A key of `config.json` that pdsweep cannot honour, or a value of the wrong type.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The key (`rope_parameters.rope_type` for a nested one).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// Keys that do not change what the model computes at inference (bookkeeping, token ids,
/// generation defaults, training-only settings).
const INERT: &[&str] = &[
    "_attn_implementation",
    "_commit_hash",
    "_model_name_or_path",
    "_name_or_path",
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

/// Keys whose value must be "off" (false, null, empty) for the model to be plain LLaMA.
const MUST_BE_OFF: &[(&str, &str)] = &[
    ("attention_bias", "biases on the attention projections"),
    ("mlp_bias", "biases on the MLP projections"),
    ("rope_scaling", "RoPE scaling"),
    ("sliding_window", "sliding-window attention"),
    ("use_sliding_window", "sliding-window attention"),
    ("is_encoder_decoder", "an encoder-decoder model"),
    ("add_cross_attention", "cross-attention"),
    ("cross_attention_hidden_size", "cross-attention"),
    ("tie_encoder_decoder", "an encoder-decoder model"),
    ("pruned_heads", "pruned attention heads"),
    ("quantization_config", "quantised weights"),
    ("auto_map", "custom modelling code"),
];

fn is_off(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

fn positive(obj: &Map<String, Value>, key: &str) -> Result<Option<u64>, ConfigError> {
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

fn required(obj: &Map<String, Value>, key: &str) -> Result<u64, ConfigError> {
    positive(obj, key)?.ok_or_else(|| err(key, "is missing"))
}

fn number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
            _ => Err(err(key, format!("must be a positive number, not `{v}`"))),
        },
    }
}

fn flag(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(err(key, format!("must be true or false, not `{v}`"))),
    }
}

/// RoPE θ from `rope_parameters` (transformers 5) or `rope_theta` (transformers 4).
fn rope_theta(obj: &Map<String, Value>) -> Result<f64, ConfigError> {
    let legacy = number(obj, "rope_theta")?;
    let Some(params) = obj.get("rope_parameters").filter(|v| !v.is_null()) else {
        return Ok(legacy.unwrap_or(10_000.0));
    };
    let Some(params) = params.as_object() else {
        return Err(err("rope_parameters", "must be a table"));
    };
    for (key, value) in params {
        let full = format!("rope_parameters.{key}");
        match key.as_str() {
            "rope_theta" => {}
            "rope_type" if value.as_str() == Some("default") => {}
            "rope_type" => {
                return Err(err(
                    &full,
                    format!("is `{value}`: RoPE scaling is not supported, only `\"default\"`"),
                ));
            }
            _ => {
                return Err(err(
                    &full,
                    "changes the rotary embeddings (RoPE scaling is not supported)",
                ));
            }
        }
    }
    let theta = number(params, "rope_theta")
        .map_err(|e| err(&format!("rope_parameters.{}", e.key), e.message))?;
    match (theta, legacy) {
        (Some(a), Some(b)) if a != b => Err(err(
            "rope_theta",
            format!("is `{b}` but `rope_parameters.rope_theta` is `{a}`"),
        )),
        (Some(a), _) => Ok(a),
        (None, b) => Ok(b.unwrap_or(10_000.0)),
    }
}

/// Refuses every key that is neither honoured nor known to be inert.
fn check_keys(obj: &Map<String, Value>) -> Result<(), ConfigError> {
    const HONOURED: &[&str] = &[
        "architectures",
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "intermediate_size",
        "vocab_size",
        "tie_word_embeddings",
        "rope_theta",
        "rope_parameters",
        "rms_norm_eps",
        "max_position_embeddings",
        "head_dim",
        "hidden_act",
    ];
    for (key, value) in obj {
        if let Some((_, what)) = MUST_BE_OFF.iter().find(|(k, _)| k == key) {
            if !is_off(value) {
                return Err(err(
                    key,
                    format!("is `{value}`: pdsweep's LLaMA has no {what}"),
                ));
            }
        } else if !HONOURED.contains(&key.as_str()) && !INERT.contains(&key.as_str()) {
            return Err(err(
                key,
                "is not a key of the LLaMA architecture pdsweep runs, so it may change what the model computes",
            ));
        }
    }
    Ok(())
}

impl LlamaConfig {
    /// Reads the text of a `config.json`.
    pub fn parse(text: &str) -> Result<LlamaConfig, ConfigError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| err("(document)", format!("is not valid JSON: {e}")))?;
        let Some(obj) = value.as_object() else {
            return Err(err("(document)", "is not a JSON object"));
        };
        match obj.get("model_type").and_then(Value::as_str) {
            Some("llama") => {}
            Some(other) => {
                return Err(err(
                    "model_type",
                    format!("is `{other}`: only `llama` checkpoints are supported"),
                ));
            }
            None => return Err(err("model_type", "is missing (expected `llama`)")),
        }
        if let Some(arch) = obj.get("architectures").filter(|v| !v.is_null()) {
            let ok = arch
                .as_array()
                .is_some_and(|a| a.iter().all(|v| v.as_str() == Some("LlamaForCausalLM")));
            if !ok {
                return Err(err(
                    "architectures",
                    format!("is `{arch}`: only `LlamaForCausalLM` is supported"),
                ));
            }
        }
        check_keys(obj)?;
        if let Some(act) = obj.get("hidden_act")
            && act.as_str() != Some("silu")
        {
            return Err(err(
                "hidden_act",
                format!("is `{act}`: pdsweep's MLP is SwiGLU (`silu`)"),
            ));
        }
        let d_model = required(obj, "hidden_size")?;
        let n_heads = required(obj, "num_attention_heads")?;
        if let Some(h) = positive(obj, "head_dim")?
            && h * n_heads != d_model
        {
            return Err(err(
                "head_dim",
                format!(
                    "is `{h}`, but pdsweep's attention heads are hidden_size / num_attention_heads = {} wide",
                    d_model as f64 / n_heads as f64
                ),
            ));
        }
        Ok(LlamaConfig {
            d_model,
            n_layers: required(obj, "num_hidden_layers")?,
            n_heads,
            n_kv_heads: positive(obj, "num_key_value_heads")?.unwrap_or(n_heads),
            d_ff: required(obj, "intermediate_size")?,
            vocab: required(obj, "vocab_size")?,
            tie_embeddings: flag(obj, "tie_word_embeddings")?.unwrap_or(false),
            rope_theta: rope_theta(obj)?,
            norm_eps: number(obj, "rms_norm_eps")?.unwrap_or(1e-6),
            max_positions: positive(obj, "max_position_embeddings")?.unwrap_or(2048),
        })
    }

    /// The `config.json` of an exported model, readable by transformers 4 and 5: `rope_theta`
    /// and `rope_parameters` both, f32 weights, and `extra` keys (token ids) merged in.
    pub fn to_json(&self, extra: &Map<String, Value>) -> String {
        let mut value = json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.d_model / self.n_heads.max(1),
            "intermediate_size": self.d_ff,
            "vocab_size": self.vocab,
            "tie_word_embeddings": self.tie_embeddings,
            "hidden_act": "silu",
            "rms_norm_eps": self.norm_eps,
            "rope_theta": self.rope_theta,
            "rope_parameters": {"rope_theta": self.rope_theta, "rope_type": "default"},
            "max_position_embeddings": self.max_positions,
            "attention_bias": false,
            "mlp_bias": false,
            "attention_dropout": 0.0,
            "torch_dtype": "float32",
            "use_cache": true,
        });
        if let Some(obj) = value.as_object_mut() {
            for (k, v) in extra {
                obj.insert(k.clone(), v.clone());
            }
        }
        serde_json::to_string_pretty(&value).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What transformers 5.24 writes for `LlamaConfig(vocab_size=300, hidden_size=64,
    /// intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
    /// num_key_value_heads=2, rope_theta=500000.0, rms_norm_eps=1e-6, max_position_embeddings=128)`.
    const SAVED: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 1, "dtype": "float32", "eos_token_id": 2, "head_dim": 16,
      "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
      "intermediate_size": 160, "max_position_embeddings": 128, "mlp_bias": false,
      "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
      "num_key_value_heads": 2, "pad_token_id": null, "pretraining_tp": 1,
      "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
      "tie_word_embeddings": false, "transformers_version": "5.24.0", "use_cache": true,
      "vocab_size": 300
    }"#;

    /// SmolLM-135M's published config (transformers 4 layout).
    const SMOLLM: &str = r#"{"architectures": ["LlamaForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu",
      "hidden_size": 576, "initializer_range": 0.02, "intermediate_size": 1536,
      "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 9,
      "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1,
      "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
      "tie_word_embeddings": true, "torch_dtype": "float32", "transformers_version": "4.40.1",
      "use_cache": true, "vocab_size": 49152}"#;

    #[test]
    fn transformers_5_config_is_read() {
        let c = LlamaConfig::parse(SAVED).unwrap();
        assert_eq!(
            (
                c.d_model,
                c.n_layers,
                c.n_heads,
                c.n_kv_heads,
                c.d_ff,
                c.vocab
            ),
            (64, 2, 4, 2, 160, 300)
        );
        assert!(!c.tie_embeddings);
        assert_eq!(
            (c.rope_theta, c.norm_eps, c.max_positions),
            (500_000.0, 1e-6, 128)
        );
    }

    #[test]
    fn transformers_4_config_is_read() {
        let c = LlamaConfig::parse(SMOLLM).unwrap();
        assert_eq!(
            (c.d_model, c.n_heads, c.n_kv_heads, c.vocab),
            (576, 9, 3, 49152)
        );
        assert!(c.tie_embeddings);
        assert_eq!((c.rope_theta, c.norm_eps), (10_000.0, 1e-5));
    }

    #[test]
    fn written_config_reads_back() {
        let c = LlamaConfig::parse(SAVED).unwrap();
        let extra = Map::from_iter([("eos_token_id".to_string(), json!(7))]);
        let text = c.to_json(&extra);
        assert_eq!(LlamaConfig::parse(&text).unwrap(), c);
        assert!(text.contains("\"eos_token_id\": 7"), "{text}");
    }

    fn refused(edit: &str, value: Value) -> ConfigError {
        let mut v: Value = serde_json::from_str(SAVED).unwrap();
        let obj = v.as_object_mut().unwrap();
        match edit.split_once('.') {
            Some((outer, inner)) => {
                obj[outer]
                    .as_object_mut()
                    .unwrap()
                    .insert(inner.into(), value);
            }
            None => {
                obj.insert(edit.into(), value);
            }
        }
        LlamaConfig::parse(&v.to_string()).unwrap_err()
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_by_name() {
        let cases: Vec<(&str, Value, &str)> = vec![
            ("model_type", json!("mistral"), "model_type"),
            (
                "architectures",
                json!(["MistralForCausalLM"]),
                "architectures",
            ),
            ("attention_bias", json!(true), "attention_bias"),
            ("mlp_bias", json!(true), "mlp_bias"),
            (
                "rope_scaling",
                json!({"type": "linear", "factor": 2.0}),
                "rope_scaling",
            ),
            (
                "rope_parameters.rope_type",
                json!("llama3"),
                "rope_parameters.rope_type",
            ),
            (
                "rope_parameters.factor",
                json!(8.0),
                "rope_parameters.factor",
            ),
            ("hidden_act", json!("gelu"), "hidden_act"),
            ("head_dim", json!(32), "head_dim"),
            ("sliding_window", json!(4096), "sliding_window"),
            (
                "quantization_config",
                json!({"bits": 4}),
                "quantization_config",
            ),
            ("num_experts", json!(8), "num_experts"),
            ("hidden_size", json!("big"), "hidden_size"),
        ];
        for (edit, value, key) in cases {
            let e = refused(edit, value);
            assert_eq!(e.key, key, "{edit}: {e:?}");
        }
    }

    #[test]
    fn inert_and_off_keys_are_accepted() {
        let mut v: Value = serde_json::from_str(SAVED).unwrap();
        let obj = v.as_object_mut().unwrap();
        obj.insert("rope_scaling".into(), Value::Null);
        obj.insert("_name_or_path".into(), json!("HuggingFaceTB/SmolLM-135M"));
        obj.insert("attention_bias".into(), json!(false));
        // What transformers writes for a model converted from a GGUF file (benches/smollm2.py).
        obj.insert(
            "_model_name_or_path".into(),
            json!("Smollm2 135M 8k Lc100K Mix1 Ep2"),
        );
        obj.insert("unk_token_id".into(), json!(0));
        assert!(LlamaConfig::parse(&v.to_string()).is_ok());
    }
}
