//! The architecture of a released decoder-only model, as one description every family maps
//! onto: the norms and where they sit, the attention's variants (grouped heads, head width,
//! biases, q/k norms, scale, soft-capping, a sliding window per layer), rotary or learned
//! positions, the MLP's kind and activation, embedding scaling and the head.
//!
//! Reading a family's `config.json` into it is `crate::hf::families`'s job; running it is
//! [`crate::model::Decoder`]'s. pdsweep's own students are the plain LLaMA of
//! [`crate::model::Transformer`]; this description is for teachers, which need only a forward
//! pass.
//!
//! Parameter counts follow `sum(p.numel() for p in model.parameters())` in transformers (tied
//! weights once); the non-embedding count N excludes the token embedding, learned positions
//! and the output head.

use serde::{Deserialize, Serialize};

use super::shape::{ModelShape, ParamCount};

/// The model families pdsweep loads, by their `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// `llama`: LLaMA 1–3, SmolLM, SmolLM2, TinyLlama.
    Llama,
    /// `qwen2`: Qwen2 and Qwen2.5 (biases on q, k and v).
    Qwen2,
    /// `qwen3`: Qwen3 dense models (per-head q/k RMSNorm).
    Qwen3,
    /// `mistral`: Mistral (sliding window).
    Mistral,
    /// `gemma2`: Gemma 2 (sandwich norms, soft-capping, alternating local/global layers).
    Gemma2,
    /// `gemma3_text`: Gemma 3's language models (q/k norm, local/global RoPE bases).
    Gemma3,
    /// `gpt_neox`: GPT-NeoX and Pythia (LayerNorm, parallel residual, partial rotary).
    GptNeox,
    /// `gpt2`: GPT-2 (learned positions, LayerNorm, GELU MLP).
    Gpt2,
    /// `olmo2`: OLMo 2 (norms after attention and MLP, full-width q/k norm).
    Olmo2,
}

impl Family {
    /// Every family, in the order the documentation lists them.
    pub const ALL: [Family; 9] = [
        Family::Llama,
        Family::Qwen2,
        Family::Qwen3,
        Family::Mistral,
        Family::Gemma2,
        Family::Gemma3,
        Family::GptNeox,
        Family::Gpt2,
        Family::Olmo2,
    ];

    /// The family's `model_type` in `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Mistral => "mistral",
            Family::Gemma2 => "gemma2",
            Family::Gemma3 => "gemma3_text",
            Family::GptNeox => "gpt_neox",
            Family::Gpt2 => "gpt2",
            Family::Olmo2 => "olmo2",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.model_type())
    }
}

/// Which normalisation the blocks and the final norm use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// RMSNorm, x · γ / √(mean(x²) + ε). Gemma's `(1 + w)` form is stored as γ = 1 + w.
    Rms,
    /// LayerNorm with a bias.
    Layer,
}

/// Where a block's norms sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// x + attn(norm(x)), then x + mlp(norm(x)) (LLaMA, GPT-2, NeoX without parallel residual).
    Pre,
    /// x + norm(attn(norm(x))), then x + norm(mlp(norm(x))) (Gemma 2 and 3).
    Sandwich,
    /// x + norm(attn(x)), then x + norm(mlp(x)) (OLMo 2).
    Post,
    /// x + attn(norm₁(x)) + mlp(norm₂(x)) (GPT-NeoX's parallel residual).
    Parallel,
}

impl Placement {
    /// Norms per block.
    pub fn norms(self) -> u64 {
        match self {
            Placement::Sandwich => 4,
            _ => 2,
        }
    }
}

/// Normalisation of queries and keys before the rotary embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QkNorm {
    /// None.
    None,
    /// RMSNorm over each head's `head_dim` values, one γ per norm shared by the heads (Qwen3,
    /// Gemma 3).
    PerHead,
    /// RMSNorm over the whole projection (`heads · head_dim` values) (OLMo 2).
    Full,
}

/// The MLP's activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// x · σ(x).
    Silu,
    /// The exact GELU, x · Φ(x) (`gelu`).
    Gelu,
    /// GELU's tanh approximation (`gelu_new`, `gelu_pytorch_tanh`).
    GeluTanh,
}

/// The MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// down(act(gate(x)) · up(x)) (SwiGLU, GeGLU).
    Gated(Activation),
    /// fc_out(act(fc_in(x))) (GPT-2, NeoX).
    Plain(Activation),
}

/// How RoPE's inverse frequencies are scaled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum RopeScaling {
    /// θ^(−2j/d) as is.
    None,
    /// Every frequency divided by `factor` (positions interpolated).
    Linear {
        /// The factor.
        factor: f64,
    },
    /// Llama 3's rule: low frequencies divided by `factor`, high ones kept, a smooth blend
    /// between (wavelengths against `original / low_freq_factor` and `original /
    /// high_freq_factor`).
    Llama3 {
        /// The factor.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original: f64,
    },
}

/// One set of rotary parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rope {
    /// Base θ.
    pub theta: f64,
    /// Scaling of the frequencies.
    pub scaling: RopeScaling,
}

/// How positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Positions {
    /// Rotary embeddings ("rotate half") on the first `dims` values of each query and key head.
    Rotary {
        /// Rotated values per head (even, at most `head_dim`).
        dims: u64,
        /// The parameters of global layers (and of every layer without a local set).
        global: Rope,
        /// The parameters of sliding-window layers, when they differ (Gemma 3).
        local: Option<Rope>,
    },
    /// A learned embedding per position added to the token embedding (GPT-2).
    Learned {
        /// Rows of the position embedding.
        rows: u64,
    },
}

/// The architecture of a released model (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    /// Where it comes from: decides the names of its weights.
    pub family: Family,
    /// Width of the residual stream.
    pub d_model: u64,
    /// Blocks.
    pub n_layers: u64,
    /// Query heads.
    pub n_heads: u64,
    /// Key/value heads.
    pub n_kv_heads: u64,
    /// Width of one head (may differ from d_model / n_heads).
    pub head_dim: u64,
    /// The MLP's hidden width.
    pub d_ff: u64,
    /// Rows of the embedding and the head.
    pub vocab: u64,
    /// Whether the head is the token embedding.
    pub tie_embeddings: bool,
    /// The norm of blocks, q/k and the final norm.
    pub norm: Norm,
    /// ε of every norm.
    pub norm_eps: f64,
    /// Where the blocks' norms sit.
    pub placement: Placement,
    /// Query and key norms.
    pub qk_norm: QkNorm,
    /// Biases on the q, k and v projections.
    pub qkv_bias: bool,
    /// A bias on the attention's output projection.
    pub o_bias: bool,
    /// Biases on the MLP's projections.
    pub mlp_bias: bool,
    /// The MLP.
    pub mlp: Mlp,
    /// Positions.
    pub positions: Positions,
    /// Scale of the attention scores (1/√head_dim unless the family says otherwise).
    pub attn_scale: f64,
    /// cap · tanh(score / cap) on the attention scores.
    pub attn_softcap: Option<f64>,
    /// cap · tanh(logit / cap) on the output logits.
    pub final_softcap: Option<f64>,
    /// The token embedding is multiplied by √d_model (Gemma).
    pub embed_scale: bool,
    /// Per layer: the sliding window (a query sees itself and the `w − 1` positions before
    /// it), or `None` for global attention.
    pub windows: Vec<Option<u64>>,
}

/// The largest value any single dimension may take.
const MAX_DIM: u64 = 1 << 24;

impl Architecture {
    /// A LLaMA of `shape` whose heads are `head_dim` wide (pre-norm RMSNorm of ε `norm_eps`,
    /// SwiGLU, full-width RoPE `rope`, no biases): what a family adjusts, and pdsweep's own.
    pub fn plain_llama(
        family: Family,
        shape: ModelShape,
        head_dim: u64,
        norm_eps: f64,
        rope: Rope,
    ) -> Architecture {
        Architecture {
            family,
            d_model: shape.d_model,
            n_layers: shape.n_layers,
            n_heads: shape.n_heads,
            n_kv_heads: shape.n_kv_heads,
            head_dim,
            d_ff: shape.d_ff,
            vocab: shape.vocab,
            tie_embeddings: shape.tie_embeddings,
            norm: Norm::Rms,
            norm_eps,
            placement: Placement::Pre,
            qk_norm: QkNorm::None,
            qkv_bias: false,
            o_bias: false,
            mlp_bias: false,
            mlp: Mlp::Gated(Activation::Silu),
            positions: Positions::Rotary {
                dims: head_dim,
                global: rope,
                local: None,
            },
            attn_scale: 1.0 / (head_dim as f64).sqrt(),
            attn_softcap: None,
            final_softcap: None,
            embed_scale: false,
            windows: vec![None; shape.n_layers as usize],
        }
    }

    /// pdsweep's own LLaMA ([`crate::model::Transformer`]) of `config`, as an architecture
    /// the released decoder runs (a teacher trained here, run in bf16).
    pub fn of_transformer(config: &crate::model::TransformerConfig) -> Architecture {
        let s = config.shape;
        let rope = Rope {
            theta: config.rope_theta,
            scaling: RopeScaling::None,
        };
        Architecture::plain_llama(
            Family::Llama,
            s,
            s.d_model / s.n_heads.max(1),
            config.norm_eps,
            rope,
        )
    }

    /// Checks the dimensions: positive and bounded, heads grouping evenly, an even rotary width
    /// within the head, one window entry per layer.
    pub fn validate(&self) -> Result<(), String> {
        let dims = [
            ("hidden size", self.d_model),
            ("layers", self.n_layers),
            ("attention heads", self.n_heads),
            ("key/value heads", self.n_kv_heads),
            ("head width", self.head_dim),
            ("MLP width", self.d_ff),
        ];
        for (what, value) in dims {
            if value == 0 || value > MAX_DIM {
                return Err(format!("{what} `{value}` must lie in [1, {MAX_DIM}]"));
            }
        }
        if self.vocab < 2 || self.vocab > u64::from(u32::MAX) {
            return Err(format!("vocabulary `{}` must lie in [2, 2^32)", self.vocab));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(format!(
                "{} attention heads do not group evenly over {} key/value heads",
                self.n_heads, self.n_kv_heads
            ));
        }
        if let Positions::Rotary { dims, .. } = self.positions
            && (dims == 0 || !dims.is_multiple_of(2) || dims > self.head_dim)
        {
            return Err(format!(
                "{dims} rotary values per head: must be even and at most the head width {}",
                self.head_dim
            ));
        }
        if self.windows.len() as u64 != self.n_layers {
            return Err(format!(
                "{} layer types for {} layers",
                self.windows.len(),
                self.n_layers
            ));
        }
        if self.windows.contains(&Some(0)) {
            return Err("a sliding window of 0 positions".into());
        }
        Ok(())
    }

    /// Exact parameter counts (see the module doc).
    pub fn params(&self) -> ParamCount {
        let (d, l, v) = (
            u128::from(self.d_model),
            u128::from(self.n_layers),
            u128::from(self.vocab),
        );
        let (q, kv) = (
            u128::from(self.n_heads * self.head_dim),
            u128::from(self.n_kv_heads * self.head_dim),
        );
        let ff = u128::from(self.d_ff);
        let norm = |width: u128| match self.norm {
            Norm::Rms => width,
            Norm::Layer => 2 * width,
        };
        let mut attn = d * q + 2 * d * kv + q * d;
        if self.qkv_bias {
            attn += q + 2 * kv;
        }
        if self.o_bias {
            attn += d;
        }
        attn += match self.qk_norm {
            QkNorm::None => 0,
            QkNorm::PerHead => 2 * norm(u128::from(self.head_dim)),
            QkNorm::Full => norm(q) + norm(kv),
        };
        let mlp = match self.mlp {
            Mlp::Gated(_) => 3 * d * ff + if self.mlp_bias { 2 * ff + d } else { 0 },
            Mlp::Plain(_) => 2 * d * ff + if self.mlp_bias { ff + d } else { 0 },
        };
        let block = attn + mlp + u128::from(self.placement.norms()) * norm(d);
        let non_embedding = l * block + norm(d);
        let positions = match self.positions {
            Positions::Learned { rows } => u128::from(rows) * d,
            Positions::Rotary { .. } => 0,
        };
        let embedding = v * d + positions;
        let head = if self.tie_embeddings { 0 } else { v * d };
        let clamp = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        ParamCount {
            total: clamp(non_embedding + embedding + head),
            non_embedding: clamp(non_embedding),
            embedding: clamp(embedding),
            head: clamp(head),
        }
    }

    /// The LLaMA shape nearest this architecture, for what is priced by shape alone (memory
    /// of activations, the head's FLOPs): the same width, depth, heads, MLP width, vocabulary
    /// and tying.
    pub fn nearest_shape(&self) -> ModelShape {
        ModelShape {
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            d_ff: self.d_ff,
            vocab: self.vocab,
            tie_embeddings: self.tie_embeddings,
        }
    }

    /// Forward FLOPs per token at `context` tokens: 2 per weight of the matrix products (head
    /// included) plus the attention's score and value products over the positions each layer
    /// sees (half the context on average, at most its window).
    pub fn forward_flops_per_token(&self, context: u64) -> f64 {
        let p = self.params();
        let d = self.d_model as f64;
        let matmul = p.non_embedding as f64 + (self.vocab as f64) * d;
        let attn: f64 = self
            .windows
            .iter()
            .map(|w| {
                let seen = (context as f64 / 2.0).min(w.map_or(f64::MAX, |w| w as f64));
                2.0 * 2.0 * (self.n_heads * self.head_dim) as f64 * seen
            })
            .sum();
        2.0 * matmul + attn
    }

    /// A one-line summary, `18L d640 h4/kv1 hd256 ff2048 gemma3_text`.
    pub fn summary(&self) -> String {
        let gqa = if self.n_kv_heads != self.n_heads {
            format!("/kv{}", self.n_kv_heads)
        } else {
            String::new()
        };
        let hd = if self.head_dim * self.n_heads != self.d_model {
            format!(" hd{}", self.head_dim)
        } else {
            String::new()
        };
        format!(
            "{}L d{} h{}{}{} ff{} {}",
            self.n_layers, self.d_model, self.n_heads, gqa, hd, self.d_ff, self.family
        )
    }
}
