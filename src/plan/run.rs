//! One node of the run graph: its kind, its resolved configuration (everything needed to execute
//! it, stored before it starts), its id (a hash of that configuration) and its dependencies.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::shape::{ModelShape, ParamCount};
use crate::spec::Precision;
use crate::spec::{
    Alpha, Backend, CorpusKind, DistillMode, LossKind, Schedule, Temperature, TokenizerKind, TopK,
    TopP, hex,
};

/// What a run does (DESIGN.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Pre-trains a teacher on the plain next-token loss.
    Teacher,
    /// Runs a finished teacher over a student token stream and stores truncated logits.
    Logits,
    /// Pre-trains a student with the distillation loss.
    Student,
    /// The same student size and budget with no teacher.
    Baseline,
}

impl RunKind {
    /// Every kind, in graph order.
    pub const ALL: [RunKind; 4] = [
        RunKind::Teacher,
        RunKind::Logits,
        RunKind::Student,
        RunKind::Baseline,
    ];

    /// The lower-case word.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Teacher => "teacher",
            RunKind::Logits => "logits",
            RunKind::Student => "student",
            RunKind::Baseline => "baseline",
        }
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run id: the first 16 hex digits of SHA-256 over the run's resolved configuration as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RunId(pub String);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A model as the run graph knows it: a label, the shape and the size it was derived from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Short label used in run names (`2M`, or the entry's `name`).
    pub label: String,
    /// The target non-embedding size for derived shapes; `None` for explicit shapes.
    pub target: Option<u64>,
    /// The shape.
    pub shape: ModelShape,
    /// RoPE base frequency θ (left out of the JSON, and so of the id, at its default).
    #[serde(
        default = "default_rope_theta",
        skip_serializing_if = "is_default_rope_theta"
    )]
    pub rope_theta: f64,
    /// RMSNorm ε (left out of the JSON at its default).
    #[serde(
        default = "default_norm_eps",
        skip_serializing_if = "is_default_norm_eps"
    )]
    pub norm_eps: f64,
    /// For a pre-trained teacher: the Hugging Face folder its weights come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretrained: Option<PretrainedSource>,
}

fn default_rope_theta() -> f64 {
    crate::model::DEFAULT_ROPE_THETA
}
fn is_default_rope_theta(v: &f64) -> bool {
    *v == crate::model::DEFAULT_ROPE_THETA
}
fn default_norm_eps() -> f64 {
    crate::model::DEFAULT_NORM_EPS
}
fn is_default_norm_eps(v: &f64) -> bool {
    *v == crate::model::DEFAULT_NORM_EPS
}

impl ModelSpec {
    /// The model's architecture for `context` tokens.
    pub fn transformer(&self, context: u64) -> crate::model::TransformerConfig {
        crate::model::TransformerConfig {
            rope_theta: self.rope_theta,
            norm_eps: self.norm_eps,
            ..crate::model::TransformerConfig::new(self.shape, context as usize)
        }
    }
}

/// A model that is not trained by the sweep: a Hugging Face-format LLaMA folder. Its content
/// hashes are part of the run's id, so other weights are another teacher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PretrainedSource {
    /// The folder as written in the sweep file (relative to the sweep file's folder).
    pub path: String,
    /// SHA-256 (hex) of its `config.json`.
    pub config_sha256: String,
    /// SHA-256 (hex) over its weight files, in name order, each as its name, its length and
    /// its bytes.
    pub weights_sha256: String,
}

/// Where tokens come from and in which order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataConfig {
    /// Corpus kind.
    pub corpus: CorpusKind,
    /// Corpus path as written in the sweep file (relative to it), if any.
    pub path: Option<String>,
    /// jsonl field or parquet column.
    pub text_column: Option<String>,
    /// Tokenizer (`None` for the synthetic corpus).
    pub tokenizer: Option<TokenizerKind>,
    /// For `tokenizer = file`: which file, and its content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_file: Option<TokenizerRef>,
    /// Vocabulary size.
    pub vocab: u64,
    /// Held-out tokens.
    pub val_tokens: u64,
    /// Seed of the synthetic generator.
    pub corpus_seed: u64,
    /// Sources of the synthetic world when fewer than all four (absent: all four, so runs of
    /// the default world keep their ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_sources: Option<u32>,
    /// `Some(false)` for a synthetic world without copy events (absent: with copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_copies: Option<bool>,
    /// Sequence length.
    pub context: u64,
    /// Sequences per optimiser step (or per logit batch).
    pub batch_seqs: u64,
    /// Seed of the data order (and of initialisation for trained runs).
    pub seed: u64,
    /// A separate validation file or folder (relative to the sweep file), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_path: Option<String>,
    /// Version of the held-out split rule of text corpora: 2 holds out whole documents with
    /// duplicates dropped (`data::split`); 0 (absent) is the synthetic corpus, or a text run of
    /// an older pdsweep that held out the corpus's last tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub split: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A Hugging Face `tokenizer.json` a corpus is tokenised with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizerRef {
    /// The file as written in the sweep file (relative to the sweep file's folder).
    pub path: String,
    /// SHA-256 (hex) of its bytes: the token cache and the run ids key on it.
    pub sha256: String,
}

/// Optimiser settings of a trained run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Learning-rate schedule.
    pub lr: Schedule,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// AdamW betas.
    pub betas: [f64; 2],
    /// Gradient-norm clip (0 = off).
    pub grad_clip: f64,
    /// Optimiser steps.
    pub steps: u64,
    /// Held-out evaluations over the run.
    pub evals: u64,
    /// Checkpoint interval in steps.
    pub checkpoint_every: u64,
    /// Training-loss logging interval in steps.
    pub log_every: u64,
    /// Arithmetic of the training step. Left out of the JSON (and so of the id) when f32, so
    /// runs planned before mixed precision existed keep their ids; bf16 and f16 runs are new
    /// runs, since their results differ.
    #[serde(default, skip_serializing_if = "Precision::is_f32")]
    pub precision: Precision,
    /// For a student of a sweep with `[train] tune_lr`: the baselines its peak learning rate
    /// is chosen from; for a teacher of a sweep with `[teachers] tune_lr`: its candidate runs
    /// (`lr`'s peak is replaced by the best candidates' when the run starts; `run::tuning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<LrTuning>,
}

/// Where a run's peak learning rate comes from when it is tuned on other runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LrTuning {
    /// The candidate runs (same model and budget, every seed and peak; a teacher's: its own
    /// seed at every peak), in plan order. Left
    /// out of the run's id (see [`RunConfig::identity_json`]): adding a seed adds candidates,
    /// and must not make every finished student of the other seeds a new run.
    pub candidates: Vec<RunId>,
    /// The candidate peaks (`tune_lr`), which are part of the id. Empty in
    /// configurations recorded before they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peaks: Vec<f64>,
}

/// How the teacher distribution is truncated before use (Peng et al.: top-p, then top-k).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// Nucleus mass.
    pub top_p: TopP,
    /// Most tokens kept.
    pub top_k: TopK,
}

/// The distillation settings of a student run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DistillConfig {
    /// Offline (stored logits) or online.
    pub mode: DistillMode,
    /// ℓ.
    pub loss: LossKind,
    /// α schedule.
    pub alpha: Alpha,
    /// τ.
    pub temperature: Temperature,
    /// Truncation of the teacher distribution.
    pub truncation: Truncation,
    /// The teacher run's id (its configuration, shape included, is that run's).
    pub teacher: RunId,
}

/// Everything needed to execute a run. Its JSON (less a tuned student's candidate runs, see
/// [`RunConfig::identity_json`]) is hashed into the run's id, so two plans that resolve a run
/// identically give it the same id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// What the run does.
    pub kind: RunKind,
    /// The model trained, or for `logits` the teacher that is run.
    pub model: ModelSpec,
    /// Tokens trained on (or scored, for `logits`): whole steps of `batch_seqs · context`.
    pub tokens: u64,
    /// Data source and order.
    pub data: DataConfig,
    /// Optimiser (trained runs only).
    pub train: Option<TrainConfig>,
    /// Distillation (students only).
    pub distill: Option<DistillConfig>,
    /// For `logits`: the teacher run and the truncation stored.
    pub logits: Option<LogitsConfig>,
    /// The backend the sweep asks for (not part of the id: results do not depend on it beyond
    /// floating-point noise, so moving a sweep to a GPU keeps its finished runs).
    #[serde(skip)]
    pub backend: Backend,
}

/// What a `logits` run stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogitsConfig {
    /// The teacher run.
    pub teacher: RunId,
    /// The truncation applied.
    pub truncation: Truncation,
}

impl RunConfig {
    /// This configuration as the JSON that is hashed and stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The JSON hashed into the run's id: [`to_json`](Self::to_json) without a tuned
    /// student's candidate runs (`train.tune.candidates`), which list every seed's baselines.
    /// A student's identity is its own seed, shape, budget, distillation and the candidate
    /// peaks; the rate it trains at is chosen when it starts and recorded with its result.
    pub fn identity_json(&self) -> String {
        let Some(tune) = self.train.as_ref().and_then(|t| t.tune.as_ref()) else {
            return self.to_json();
        };
        let mut config = self.clone();
        if let Some(train) = config.train.as_mut() {
            train.tune = Some(LrTuning {
                candidates: Vec::new(),
                peaks: tune.peaks.clone(),
            });
        }
        config.to_json()
    }
}

/// The runs a stored configuration's learning rate is tuned on (`train.tune.candidates`),
/// read from its JSON; empty for a run that is not tuned. Schedulers treat these dependencies
/// as settled once each is done or failed: a candidate that diverged is an answer ("this rate
/// is too high"), not a blocker.
pub fn tuned_on(config_json: &str) -> Vec<String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(config_json) else {
        return Vec::new();
    };
    value["train"]["tune"]["candidates"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The ids of the teachers' learning-rate candidates (`[teachers] tune_lr`) among runs given as
/// (kind, configuration JSON): every run a teacher's learning rate is tuned on.
pub fn teacher_candidates<'a>(
    runs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> std::collections::HashSet<String> {
    runs.into_iter()
        .filter(|(kind, _)| *kind == "teacher")
        .flat_map(|(_, config)| tuned_on(config))
        .collect()
}

impl RunId {
    /// The id of a configuration given as its JSON (see [`RunConfig::to_json`]).
    pub fn of_json(json: &str) -> RunId {
        RunId(hex(&Sha256::digest(json.as_bytes())[..8]))
    }
}

/// A node of the run graph with its derived numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Hash of `config`.
    pub id: RunId,
    /// Human-readable, unique within a plan.
    pub name: String,
    /// The resolved configuration.
    pub config: RunConfig,
    /// `config` as JSON: what the id hashes and the database stores.
    pub config_json: String,
    /// Parameter counts of the model trained (or run).
    pub params: ParamCount,
    /// FLOPs this run will spend (6·N·D training, 2·N·D per forward pass).
    pub flops: f64,
    /// Runs that must finish first.
    pub depends_on: Vec<RunId>,
    /// Predicted bytes on disk when done (logit store or checkpoint).
    pub disk_bytes: u64,
}

impl Run {
    /// The run's kind.
    pub fn kind(&self) -> RunKind {
        self.config.kind
    }

    /// Tokens trained or scored.
    pub fn tokens(&self) -> u64 {
        self.config.tokens
    }
}
