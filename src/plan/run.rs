//! One node of the run graph: its kind, its resolved configuration (everything needed to execute
//! it, stored before it starts), its id (a hash of that configuration) and its dependencies.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::data::DataConfig;
use crate::digest::hex;
use crate::distill::Truncation;
use crate::model::{ModelShape, ParamCount};
use crate::spec::{Alpha, Backend, DistillMode, LossKind, Temperature};
use crate::train::TrainConfig;

/// What a run does (`docs/src/reference/run-graph.md`).
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

    /// The kind named by its lower-case word; `None` for any other text.
    pub fn parse(word: &str) -> Option<RunKind> {
        RunKind::ALL.into_iter().find(|k| k.as_str() == word)
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run id: the first 16 hex digits of SHA-256 over the run's resolved configuration as JSON
/// ([`RunConfig::identity_json`]).
///
/// A new id is only ever made from a configuration ([`RunId::of`]); ids read back from where they
/// were recorded keep what was written ([`RunId::from_stored`]). In JSON and SQLite it is the plain
/// string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// The id of `config`.
    pub fn of(config: &RunConfig) -> RunId {
        RunId(hex(&Sha256::digest(config.identity_json().as_bytes())[..8]))
    }

    /// An id as it was recorded (the sweep database, a run's files, a job's manifest): taken
    /// as written, never computed.
    pub fn from_stored(id: String) -> RunId {
        RunId(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for RunId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RunId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
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
    /// For a released teacher of another architecture than plain LLaMA: that architecture (`shape`
    /// is then its nearest LLaMA shape, for what is priced by shape).
    ///
    /// Absent for pdsweep's own models and plain LLaMA teachers, so their ids are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<crate::model::Architecture>,
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
    /// Exact parameter counts: the released architecture's, else the shape's.
    pub fn params(&self) -> crate::model::ParamCount {
        match &self.arch {
            Some(a) => a.params(),
            None => self.shape.params(),
        }
    }

    /// The model's architecture for `context` tokens.
    pub fn transformer(&self, context: u64) -> crate::model::TransformerConfig {
        crate::model::TransformerConfig {
            rope_theta: self.rope_theta,
            norm_eps: self.norm_eps,
            ..crate::model::TransformerConfig::new(self.shape, context as usize)
        }
    }
}

/// A model that is not trained by the sweep: a Hugging Face model folder of a family pdsweep
/// loads. Its content hashes are part of the run's id, so other weights are another teacher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PretrainedSource {
    /// The folder as written in the sweep file (relative to the sweep file's folder).
    pub path: String,
    /// SHA-256 (hex) of its `config.json`.
    pub config_sha256: String,
    /// SHA-256 (hex) over its weight files, in name order, each as its name, its length and
    /// its bytes.
    pub weights_sha256: String,
    /// The token the model sees before every window (its tokenizer puts it before each text, so it
    /// was trained with it: Gemma, Llama 3).
    ///
    /// Part of the id; absent (and left out of the JSON) for models without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos: Option<u32>,
}

/// Where a run's peak learning rate comes from when it is tuned on other runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LrTuning {
    /// The candidate runs (same model and budget, every seed and peak; a teacher's: its own seed at
    /// every peak), in plan order.
    ///
    /// Left out of the run's id (see [`RunConfig::identity_json`]): adding a seed adds candidates,
    /// and must not make every finished student of the other seeds a new run.
    pub candidates: Vec<RunId>,
    /// The candidate peaks (`tune_lr`), which are part of the id. Empty in
    /// configurations recorded before they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peaks: Vec<f64>,
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
    /// The loss across tokenizers, for a teacher whose tokenizer is not the student's (absent
    /// otherwise, so same-tokenizer students keep their ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_tokenizer: Option<crate::spec::CrossTokenizer>,
    /// The arithmetic of the teacher's forward passes when it runs online (absent for f32, so
    /// f32 students keep their ids).
    #[serde(default, skip_serializing_if = "crate::spec::TeacherPrecision::is_f32")]
    pub teacher_precision: crate::spec::TeacherPrecision,
}

impl DistillConfig {
    /// The objective a student with these settings trains on, its teacher targets from
    /// `source`.
    pub fn objective<'a>(
        &self,
        source: crate::distill::TeacherSource<'a>,
    ) -> crate::train::DistillObjective<'a> {
        crate::train::DistillObjective {
            loss: self.loss,
            alpha: self.alpha,
            temperature: self.temperature,
            targets: crate::distill::TeacherTargets {
                truncation: self.truncation,
                tau: self.temperature.0,
                source,
                error: None,
                cross: None,
            },
        }
    }
}

/// Everything needed to execute a run.
///
/// Its JSON (less a tuned run's candidate runs, see [`RunConfig::identity_json`]) is hashed into
/// the run's id, so two plans that resolve a run identically give it the same id. The JSON is the
/// sweep database's record of the run: its layout is fixed (`RunConfigJson`), whatever the shape of
/// the types here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "RunConfigJson", from = "RunConfigJson")]
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
    /// For a student of a sweep with `[train] tune_lr`: the baselines its peak learning rate is
    /// chosen from; for a teacher of a sweep with `[teachers] tune_lr`: its candidate runs
    /// (`train.lr`'s peak is replaced by the best candidate's when the run starts; `run::tuning`).
    ///
    /// Recorded inside `train` in the JSON.
    pub tune: Option<LrTuning>,
    /// Distillation (students only).
    pub distill: Option<DistillConfig>,
    /// For `logits`: the teacher run and the truncation stored.
    pub logits: Option<LogitsConfig>,
    /// The backend the sweep asks for (not part of the id: results do not depend on it beyond
    /// floating-point noise, so moving a sweep to a GPU keeps its finished runs).
    pub backend: Backend,
}

/// A run configuration as the database records it (and its id hashes): `tune` sits inside `train`,
/// after the optimiser settings; the backend is not recorded.
///
/// Field order is part of the id.
#[derive(Serialize, Deserialize)]
struct RunConfigJson {
    kind: RunKind,
    model: ModelSpec,
    tokens: u64,
    data: DataConfig,
    train: Option<TrainJson>,
    distill: Option<DistillConfig>,
    logits: Option<LogitsConfig>,
}

/// `train` as recorded: the optimiser settings, then the tuning.
#[derive(Serialize, Deserialize)]
struct TrainJson {
    #[serde(flatten)]
    config: TrainConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tune: Option<LrTuning>,
}

impl From<RunConfig> for RunConfigJson {
    fn from(c: RunConfig) -> Self {
        RunConfigJson {
            kind: c.kind,
            model: c.model,
            tokens: c.tokens,
            data: c.data,
            train: c.train.map(|config| TrainJson {
                config,
                tune: c.tune,
            }),
            distill: c.distill,
            logits: c.logits,
        }
    }
}

impl From<RunConfigJson> for RunConfig {
    fn from(j: RunConfigJson) -> Self {
        let (train, tune) = match j.train {
            Some(t) => (Some(t.config), t.tune),
            None => (None, None),
        };
        RunConfig {
            kind: j.kind,
            model: j.model,
            tokens: j.tokens,
            data: j.data,
            train,
            tune,
            distill: j.distill,
            logits: j.logits,
            backend: Backend::default(),
        }
    }
}

/// What a `logits` run stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogitsConfig {
    /// The teacher run.
    pub teacher: RunId,
    /// The truncation applied.
    pub truncation: Truncation,
    /// The student streams (seed, positions) whose windows the store covers. Not part of the
    /// run's id: a plan that adds a seed or a longer budget extends the same store.
    #[serde(default)]
    pub reads: Vec<crate::distill::logits_run::StoreRead>,
    /// The truncations its students read it at (each a refinement of `truncation`), whose
    /// fidelity the pass measures. Not part of the run's id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<Truncation>,
    /// A store for students of another tokenizer: each position also keeps the teacher's
    /// log-probability of the token that follows and where that token ends in the corpus's
    /// bytes (`crate::distill::store`), so students align on it by bytes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub aligned: bool,
    /// For an aligned store: the students' data (their tokenizer), whose windows decide the
    /// teacher windows it covers. Not part of the run's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub students: Option<DataConfig>,
    /// The arithmetic of the teacher's pass (absent for f32, so f32 stores keep their ids); the
    /// store's header records it.
    #[serde(default, skip_serializing_if = "crate::spec::TeacherPrecision::is_f32")]
    pub precision: crate::spec::TeacherPrecision,
}

impl RunConfig {
    /// The model's architecture at the run's context.
    pub fn transformer(&self) -> crate::model::TransformerConfig {
        self.model.transformer(self.data.context)
    }

    /// The model this run starts from, drawn from its seed ([`crate::train::init_model`]).
    pub fn init_model(&self, device: &burn::tensor::Device) -> crate::model::Transformer {
        crate::train::init_model(&self.transformer(), self.data.seed, device)
    }

    /// What the logit store of this `logits` run holds; `None` for another kind of run.
    pub fn store_spec(&self) -> Option<crate::distill::logits_run::StoreSpec<'_>> {
        let logits = self.logits.as_ref()?;
        Some(crate::distill::logits_run::StoreSpec {
            teacher_run: &logits.teacher.0,
            truncation: logits.truncation,
            data: &self.data,
            reads: &logits.reads,
            students: logits.students.as_ref(),
            precision: logits.precision,
        })
    }

    /// This configuration as the JSON that is hashed and stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The JSON hashed into the run's id: [`to_json`](Self::to_json) without a tuned run's
    /// candidate runs (`train.tune.candidates`), which list every seed's baselines, and without a
    /// logit pass's coverage (its students' streams and the positions they add up to).
    ///
    /// A student's identity is its own seed, shape, budget, distillation and the candidate peaks;
    /// the rate it trains at is chosen when it starts and recorded with its result. A logit store's
    /// is its teacher, corpus, context and truncation: it grows with the students it serves.
    pub fn identity_json(&self) -> String {
        if let Some(logits) = self.logits.as_ref() {
            let mut config = self.clone();
            config.tokens = 0;
            config.logits = Some(LogitsConfig {
                reads: Vec::new(),
                views: Vec::new(),
                students: None,
                ..logits.clone()
            });
            return config.to_json();
        }
        let Some(tune) = self.tune.as_ref() else {
            return self.to_json();
        };
        let mut config = self.clone();
        config.tune = Some(LrTuning {
            candidates: Vec::new(),
            peaks: tune.peaks.clone(),
        });
        config.to_json()
    }
}

/// The runs a stored configuration's learning rate is tuned on (`train.tune.candidates`), read from
/// its JSON; empty for a run that is not tuned.
///
/// Schedulers treat these dependencies as settled once each is done or failed: a candidate that
/// diverged is an answer ("this rate is too high"), not a blocker.
pub(crate) fn tuned_on(config_json: &str) -> Vec<RunId> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(config_json) else {
        return Vec::new();
    };
    value["train"]["tune"]["candidates"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|v| v.as_str().map(|id| RunId::from_stored(id.into())))
                .collect()
        })
        .unwrap_or_default()
}

/// The ids of the teachers' learning-rate candidates (`[teachers] tune_lr`) among runs given as
/// (kind, configuration JSON): every run a teacher's learning rate is tuned on.
pub(crate) fn teacher_candidates<'a>(
    runs: impl IntoIterator<Item = (RunKind, &'a str)>,
) -> std::collections::HashSet<RunId> {
    runs.into_iter()
        .filter(|(kind, _)| *kind == RunKind::Teacher)
        .flat_map(|(_, config)| tuned_on(config))
        .collect()
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
    /// Predicted peak resident memory while it runs ([`crate::plan::memory`]).
    pub memory: crate::plan::memory::MemoryEstimate,
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
