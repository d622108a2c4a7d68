//! A Hugging Face LLaMA `config.json` as pdsweep's own transformer runs it (shape, RoPE θ,
//! RMSNorm ε, tied embeddings, longest context), written for exported models in both of
//! transformers' layouts (4: `rope_theta`; 5: `rope_parameters`). Reading any family's config
//! is `super::families`'s job; a plain LLaMA reads back into this.

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

impl LlamaConfig {
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

    #[test]
    fn written_config_reads_back() {
        let c = LlamaConfig {
            d_model: 64,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            d_ff: 160,
            vocab: 300,
            tie_embeddings: false,
            rope_theta: 500_000.0,
            norm_eps: 1e-6,
            max_positions: 128,
        };
        let extra = Map::from_iter([("eos_token_id".to_string(), json!(7))]);
        let text = c.to_json(&extra);
        let back = crate::hf::families::parse(&text).unwrap();
        assert_eq!(back.as_llama(), Some(c));
        assert!(text.contains("\"eos_token_id\": 7"), "{text}");
    }
}
