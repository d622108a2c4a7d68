//! The sweep file as written: serde structs with `deny_unknown_fields`, defaults, and value
//! types that validate themselves while parsing (so a bad value is reported at its line).

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::axis::{Axis, OneOrMany};
use super::units::{ByteSize, Count, TokenBudget};
use super::values::{
    Alpha, Backend, CorpusKind, CrossTokenizer, Design, DistillMode, Family, Fraction, LossKind,
    Missing, Name, Ratio, Schedule, Separator, Targets, Temperature, TokenizerSetting, TopK, TopP,
};
use super::values::{Precision, TeacherPrecision};

/// A whole sweep file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// Names the sweep and its folder `results/NAME/`.
    pub name: Name,
    /// Free text shown in reports.
    #[serde(default)]
    pub description: Option<String>,
    /// Seeds; several seeds repeat the runs (for error bars).
    #[serde(default = "default_seed")]
    pub seed: OneOrMany<u64>,
    /// Where models train: `cpu` (default), `wgpu`, `cuda`.
    #[serde(default)]
    pub backend: Backend,
    /// The training text.
    #[serde(default)]
    pub corpus: Option<Spanned<CorpusSection>>,
    /// The model family and the rule that turns a size into a shape.
    #[serde(default)]
    pub model: ModelSection,
    /// Teacher models.
    pub teachers: Spanned<GroupSection>,
    /// Student models.
    pub students: Spanned<GroupSection>,
    /// Distillation knobs; each may be a list, which becomes a sweep axis.
    #[serde(default)]
    pub distill: DistillSection,
    /// Optimiser and schedule.
    #[serde(default)]
    pub train: TrainSection,
    /// Which teacher–student pairs are planned.
    #[serde(default)]
    pub constraints: Option<Spanned<ConstraintsSection>>,
    /// Resource limits the plan must respect.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Assumptions used for time estimates before throughput has been measured.
    #[serde(default)]
    pub estimate: EstimateSection,
    /// Resources of the jobs `pdsweep slurm` submits.
    #[serde(default)]
    pub slurm: Option<super::slurm::SlurmSection>,
    /// The researcher's prior on the optimal teacher, for `plan`'s design checks.
    #[serde(default)]
    pub prior: PriorSection,
}

/// `[prior]`: what the researcher expects the optimal teacher to be before this sweep's own
/// fits say (they replace it once `pdsweep fit` has run).
///
/// It decides only which teacher grids `plan` warns about; no run depends on it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorSection {
    /// The optimal teacher's non-embedding parameters as a multiple of the student's (for
    /// example from an earlier sweep on similar text); without it the rule of thumb 2.5.
    #[serde(default)]
    pub teacher_ratio: Option<Ratio>,
    /// Where the prior comes from, printed with the check.
    #[serde(default)]
    pub source: Option<String>,
}

fn default_seed() -> OneOrMany<u64> {
    OneOrMany(vec![1])
}

/// `[corpus]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusSection {
    /// `synthetic` (built in, the default), `text`, `jsonl` or `parquet`.
    #[serde(default)]
    pub kind: CorpusKind,
    /// File or folder, relative to the sweep file (text, jsonl and parquet only).
    #[serde(default)]
    pub path: Option<String>,
    /// The jsonl field or parquet column holding the text (default `text`).
    #[serde(default)]
    pub text_column: Option<String>,
    /// `byte` (vocabulary 256), `bpe` (trained on the corpus) or the path of a Hugging Face
    /// `tokenizer.json`; not used by `synthetic`.
    #[serde(default)]
    pub tokenizer: Option<TokenizerSetting>,
    /// How documents are joined: `eos` (BOS where the tokenizer adds one, the text, its
    /// end-of-document token: as released models were trained; the default with a `tokenizer.json`
    /// that has one, as every tokenizer of the sweep must) or `blank_line` (`"\n\n"` after each;
    /// the default and the only choice with `byte` and `bpe`).
    ///
    /// Teachers with tokenizers of their own join documents the same way.
    #[serde(default)]
    pub separator: Option<Spanned<Separator>>,
    /// Vocabulary size for `bpe` and `synthetic`.
    #[serde(default)]
    pub vocab_size: Option<Spanned<Count>>,
    /// Held-out tokens kept aside for evaluation.
    #[serde(default)]
    pub val_tokens: Option<Count>,
    /// A separate validation file or folder (same kind as `path`), relative to the sweep file;
    /// without it whole documents of the corpus are held out.
    #[serde(default)]
    pub val_path: Option<String>,
    /// Seed of the synthetic generator (default 0).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Synthetic only: how many of the four sources (Markov chains of orders 1–4) documents
    /// come from (default 4); 1 is a bigram chain small models learn almost to its entropy rate.
    #[serde(default)]
    pub sources: Option<u32>,
    /// Synthetic only: whether copy events happen (default true).
    #[serde(default)]
    pub copies: Option<bool>,
}

/// `[model]`: the family and the documented size-to-shape rule.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Only `llama` (RMSNorm, RoPE, SwiGLU, optional grouped-query attention).
    #[serde(default)]
    pub family: Family,
    /// Context length in tokens.
    #[serde(default = "default_context")]
    pub context: Spanned<Count>,
    /// Target d_model / n_layers of derived shapes.
    #[serde(default = "default_aspect")]
    pub aspect_ratio: Ratio,
    /// Head dimension of derived shapes (default: 64 from d_model 512, 32 from 128, else 16).
    #[serde(default)]
    pub head_dim: Option<Count>,
    /// Query heads per key/value head in derived shapes (1 = plain multi-head attention).
    #[serde(default = "default_one")]
    pub kv_groups: Count,
    /// d_ff of derived shapes is a multiple of this (default: 8 below d_model 256, 32 below
    /// 2,048, else 128).
    #[serde(default)]
    pub ffn_multiple: Option<Count>,
    /// Share the token embedding with the output head.
    #[serde(default = "default_true")]
    pub tie_embeddings: bool,
    /// RoPE base frequency θ of the models the sweep trains (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_theta: Option<Ratio>,
    /// RMSNorm ε of the models the sweep trains (default 1e-5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_eps: Option<Ratio>,
}

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            family: Family::Llama,
            context: default_context(),
            aspect_ratio: default_aspect(),
            head_dim: None,
            kv_groups: default_one(),
            ffn_multiple: None,
            tie_embeddings: true,
            rope_theta: None,
            norm_eps: None,
        }
    }
}

fn default_context() -> Spanned<Count> {
    Spanned::new(0..0, Count(256))
}
fn default_aspect() -> Ratio {
    Ratio(32.0)
}
fn default_one() -> Count {
    Count(1)
}
fn default_true() -> bool {
    true
}

/// `[teachers]` or `[students]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSection {
    /// Target non-embedding sizes; a shape is derived for each.
    #[serde(default)]
    pub sizes: Vec<Spanned<Count>>,
    /// Token budgets (absolute or `Nx`); each is an axis value.
    #[serde(default = "default_tokens")]
    pub tokens: Axis<TokenBudget>,
    /// Seeds for this group (default: the sweep's `seed`; for teachers, its first value).
    #[serde(default)]
    pub seed: Option<OneOrMany<u64>>,
    /// Students only: also train each student size and budget without a teacher.
    #[serde(default)]
    pub baseline: Option<Spanned<bool>>,
    /// Teachers only: peak learning rates tried for every teacher (the schedule's shape is the
    /// teacher's `lr`): each is trained as a candidate run, and the teacher takes the peak whose
    /// candidate reaches the lowest held-out loss, adopting that candidate (see `run::tuning`).
    ///
    /// Students tune on their baselines instead (`[train] tune_lr`).
    #[serde(default)]
    pub tune_lr: Option<Spanned<Vec<f64>>>,
    /// Models given one by one: a derived `size` or an explicit shape.
    #[serde(default)]
    pub models: Vec<Spanned<ModelEntry>>,
}

impl GroupSection {
    /// Students: whether baselines are trained (`baseline`, default true).
    pub fn trains_baselines(&self) -> bool {
        self.baseline.as_ref().is_none_or(|b| *b.get_ref())
    }
}

fn default_tokens() -> Axis<TokenBudget> {
    OneOrMany(vec![TokenBudget::PerParam(20.0)])
}

/// One `[[teachers.models]]` / `[[students.models]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Name used in run names (default: derived from the size).
    #[serde(default)]
    pub name: Option<Name>,
    /// Target non-embedding size; a shape is derived (excludes the explicit keys).
    #[serde(default)]
    pub size: Option<Count>,
    /// Explicit shape: model width.
    #[serde(default)]
    pub d_model: Option<Count>,
    /// Explicit shape: number of blocks.
    #[serde(default)]
    pub n_layers: Option<Count>,
    /// Explicit shape: query heads.
    #[serde(default)]
    pub n_heads: Option<Count>,
    /// Explicit shape: key/value heads (default `n_heads`).
    #[serde(default)]
    pub n_kv_heads: Option<Count>,
    /// Explicit shape: SwiGLU hidden width.
    #[serde(default)]
    pub d_ff: Option<Count>,
    /// Explicit shape: vocabulary (must match the corpus tokenizer).
    #[serde(default)]
    pub vocab: Option<Count>,
    /// Explicit shape: tie embedding and head (default `[model] tie_embeddings`).
    #[serde(default)]
    pub tie_embeddings: Option<bool>,
    /// Token budgets for this model (default: the group's).
    #[serde(default)]
    pub tokens: Option<Axis<TokenBudget>>,
    /// Seeds for this model (default: the group's).
    #[serde(default)]
    pub seed: Option<OneOrMany<u64>>,
    /// Learning-rate schedule for this model (default: `[train] lr`), e.g. a smaller peak for
    /// the largest teacher.
    #[serde(default)]
    pub lr: Option<Schedule>,
    /// Teachers only: a Hugging Face-format LLaMA folder (config.json, safetensors weights),
    /// relative to the sweep file. The teacher is not trained; its shape comes from the folder.
    #[serde(default)]
    pub pretrained: Option<String>,
    /// Teachers only: the teacher's own tokenizer (`byte`, `bpe` or a `tokenizer.json`), when it
    /// differs from the students' `[corpus] tokenizer`; its students then distil across tokenizers
    /// (`[distill] cross_tokenizer`).
    ///
    /// A pre-trained teacher brings its own.
    #[serde(default)]
    pub tokenizer: Option<TokenizerSetting>,
    /// Teachers only: the vocabulary of a `bpe` `tokenizer`.
    #[serde(default)]
    pub vocab_size: Option<Count>,
}

/// `[distill]`: every key may be a single value or a list (an axis).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistillSection {
    /// `grid` (every combination of the axes) or `one_at_a_time` (vary one axis at a time
    /// around the first value of each).
    #[serde(default)]
    pub design: Design,
    /// `offline` (stored logits) or `online` (teacher runs inside the student step).
    #[serde(default = "default_mode")]
    pub mode: Axis<DistillMode>,
    /// `kl`, `reverse_kl`, `ce_soft` or `mse`.
    #[serde(default = "default_loss")]
    pub loss: Axis<LossKind>,
    /// Weight of the distillation term: a number or a schedule table.
    #[serde(default = "default_alpha")]
    pub alpha: Axis<Alpha>,
    /// Softmax temperature τ.
    #[serde(default = "default_temperature")]
    pub temperature: Axis<Temperature>,
    /// Nucleus truncation of the teacher distribution (1.0 keeps all).
    #[serde(default = "default_top_p")]
    pub top_p: Axis<TopP>,
    /// Keep at most this many teacher tokens (`"all"` keeps all).
    #[serde(default = "default_top_k")]
    pub top_k: Axis<TopK>,
    /// `top_k` (the k most probable tokens) or `sampled` (k tokens drawn from the teacher,
    /// counts as weights; `top_p` does not apply).
    #[serde(default = "default_targets")]
    pub targets: Axis<Targets>,
    /// `renormalise` (drop the tail's mass) or `bucket` (keep it as one extra outcome).
    #[serde(default = "default_missing")]
    pub missing: Axis<Missing>,
    /// The loss of a student whose teacher has another tokenizer: `uld` or `gold` (required
    /// for such pairs, which are refused without it; ignored for pairs that share one).
    #[serde(default)]
    pub cross_tokenizer: Option<Axis<CrossTokenizer>>,
    /// The arithmetic of the teacher's forward passes: `f32` or `bf16` (weights in bf16, f32
    /// sums), for the logit pass and online targets; the teacher's own scoring stays f32.
    #[serde(default = "default_teacher_precision")]
    pub teacher_precision: Axis<TeacherPrecision>,
}

impl Default for DistillSection {
    fn default() -> Self {
        DistillSection {
            design: Design::Grid,
            mode: default_mode(),
            loss: default_loss(),
            alpha: default_alpha(),
            temperature: default_temperature(),
            top_p: default_top_p(),
            top_k: default_top_k(),
            targets: default_targets(),
            missing: default_missing(),
            cross_tokenizer: None,
            teacher_precision: default_teacher_precision(),
        }
    }
}

fn default_teacher_precision() -> Axis<TeacherPrecision> {
    OneOrMany(vec![TeacherPrecision::F32])
}

fn default_mode() -> Axis<DistillMode> {
    OneOrMany(vec![DistillMode::Offline])
}
fn default_loss() -> Axis<LossKind> {
    OneOrMany(vec![LossKind::Kl])
}
fn default_alpha() -> Axis<Alpha> {
    OneOrMany(vec![Alpha(Schedule::constant(0.9))])
}
fn default_temperature() -> Axis<Temperature> {
    OneOrMany(vec![Temperature(1.0)])
}
fn default_top_p() -> Axis<TopP> {
    OneOrMany(vec![TopP(0.95)])
}
fn default_targets() -> Axis<Targets> {
    OneOrMany(vec![Targets::TopK])
}
fn default_missing() -> Axis<Missing> {
    OneOrMany(vec![Missing::Renormalise])
}
fn default_top_k() -> Axis<TopK> {
    OneOrMany(vec![TopK::Keep(50)])
}

/// `[train]`: optimiser, schedule, batch and bookkeeping intervals.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainSection {
    /// Learning rate: a number (constant) or a schedule table.
    #[serde(default = "default_lr")]
    pub lr: Schedule,
    /// Tokens per optimiser step, rounded to whole sequences of `[model] context`.
    #[serde(default = "default_batch")]
    pub batch_tokens: Spanned<Count>,
    /// AdamW decoupled weight decay.
    #[serde(default = "default_weight_decay")]
    pub weight_decay: Fraction,
    /// AdamW β1 and β2.
    #[serde(default = "default_betas")]
    pub betas: [Fraction; 2],
    /// Clip the global gradient norm to this (0 disables clipping).
    #[serde(default = "default_grad_clip")]
    pub grad_clip: f64,
    /// Held-out evaluations per run (evenly spaced, the last at the end).
    #[serde(default = "default_evals")]
    pub evals: Count,
    /// Write a checkpoint every this many optimiser steps (and always at the end).
    #[serde(default = "default_checkpoint_every")]
    pub checkpoint_every: Count,
    /// Log the training loss every this many steps.
    #[serde(default = "default_log_every")]
    pub log_every: Count,
    /// Arithmetic of the training step: `f32` (default), `bf16` or `f16` (mixed precision).
    #[serde(default)]
    pub precision: Precision,
    /// Peak learning rates tried for every baseline (the schedule's shape is `lr`'s): each
    /// student size and budget keeps the rate whose baselines reach the lowest mean held-out
    /// loss over the seeds, its students train at that rate, and gains are measured against
    /// the baseline at that rate (see `run::tuning`).
    #[serde(default)]
    pub tune_lr: Option<Spanned<Vec<f64>>>,
    /// Positions per chunk of the fused output head and loss: one chunk's logits (positions ×
    /// vocabulary floats) are the largest buffer of a large-vocabulary step.
    ///
    /// Default: as many as keep them within 64 MiB (at least 128).
    #[serde(default)]
    pub head_chunk: Option<Count>,
    /// Tokens per micro-batch (gradient accumulation), rounded to whole sequences: each optimiser
    /// step sums the gradients of `batch_tokens / micro_batch_tokens` forward and backward passes,
    /// then clips and steps once, as for the whole batch.
    ///
    /// Only the activations of one micro-batch are held at a time. Default: the whole batch at
    /// once.
    #[serde(default)]
    pub micro_batch_tokens: Option<Spanned<Count>>,
}

impl Default for TrainSection {
    fn default() -> Self {
        TrainSection {
            lr: default_lr(),
            batch_tokens: default_batch(),
            weight_decay: default_weight_decay(),
            betas: default_betas(),
            grad_clip: default_grad_clip(),
            evals: default_evals(),
            checkpoint_every: default_checkpoint_every(),
            log_every: default_log_every(),
            precision: Precision::default(),
            tune_lr: None,
            head_chunk: None,
            micro_batch_tokens: None,
        }
    }
}

fn default_lr() -> Schedule {
    Schedule::wsd(3e-3, 0.1, 0.2)
}
fn default_batch() -> Spanned<Count> {
    Spanned::new(0..0, Count(16_384))
}
fn default_weight_decay() -> Fraction {
    Fraction(0.1)
}
fn default_betas() -> [Fraction; 2] {
    [Fraction(0.9), Fraction(0.95)]
}
fn default_grad_clip() -> f64 {
    1.0
}
fn default_evals() -> Count {
    Count(10)
}
fn default_checkpoint_every() -> Count {
    Count(200)
}
fn default_log_every() -> Count {
    Count(10)
}

/// `[constraints]`: which teacher–student pairs are planned.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConstraintsSection {
    /// Pair a student only with teachers of more non-embedding parameters.
    #[serde(default)]
    pub require_teacher_larger: bool,
    /// Pair only when teacher N / student N is at least this.
    #[serde(default)]
    pub min_teacher_ratio: Option<Ratio>,
    /// Pair only when teacher N / student N is at most this.
    #[serde(default)]
    pub max_teacher_ratio: Option<Ratio>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    /// Disk budget for logit stores and checkpoints; `plan` refuses a sweep predicted above it.
    #[serde(default)]
    pub disk: Option<Spanned<ByteSize>>,
    /// Memory budget of one run: `plan` refuses a sweep whose largest run is predicted to
    /// peak above it (`crate::plan::memory`).
    #[serde(default)]
    pub memory: Option<Spanned<ByteSize>>,
}

/// `[estimate]`: assumptions for time estimates before `run` has measured anything.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateSection {
    /// Sustained training FLOP/s (default depends on the backend).
    #[serde(default)]
    pub flops_per_s: Option<Ratio>,
}
