//! Expands a sweep into the run graph: resolves every model to a shape, crosses teachers,
//! students, token budgets, seeds and distillation axes, shares one teacher and one logit store
//! among the students that can use them, and applies the pairing constraints.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;

use super::cost;
use super::files::{OwnTokenizer, Resolved, SweepFiles};
use super::run::{
    DistillConfig, LogitsConfig, LrTuning, ModelSpec, PretrainedSource, Run, RunConfig, RunId,
    RunKind,
};
use crate::data::{DataConfig, SplitAnchor, TokenizerRef};
use crate::distill::Truncation;
use crate::distill::logits_run::{StoreRead, store_positions};
use crate::model::{ModelShape, ShapeRule};
use crate::spec::units::format_count;
use crate::spec::{
    Alpha, CrossTokenizer, Design, DistillMode, DistillSection, GroupSection, LossKind, Missing,
    ModelEntry, Schedule, SpecError, Sweep, Targets, TeacherPrecision, Temperature, TokenBudget,
    TopK, TopP,
};
use crate::train::TrainConfig;

/// A model of a group with the budgets and seeds it trains with.
struct GroupModel {
    spec: ModelSpec,
    n: u64,
    budgets: Vec<TokenBudget>,
    seeds: Vec<u64>,
    /// The model's own learning-rate schedule, if its entry sets one.
    lr: Option<Schedule>,
    key: String,
    span: Range<usize>,
    /// A teacher with a tokenizer of its own: its data (its tokenizer, following the
    /// students' split), without a seed. `None`: the sweep's data.
    data: Option<DataConfig>,
}

/// One distillation setting: a point of the `[distill]` axes.
#[derive(Clone, Copy)]
struct DistillPoint {
    mode: DistillMode,
    loss: LossKind,
    alpha: Alpha,
    temperature: Temperature,
    top_p: TopP,
    top_k: TopK,
    targets: Targets,
    missing: Missing,
    /// The loss across tokenizers (`None` without `[distill] cross_tokenizer`).
    cross: Option<CrossTokenizer>,
    /// The arithmetic of the teacher's passes.
    teacher_precision: TeacherPrecision,
}

impl DistillPoint {
    /// The point as a student runs it: sampled targets have no nucleus (top-p 1) and no tail
    /// (they estimate the whole distribution), so those axes do not apply to them.
    fn normalised(self) -> DistillPoint {
        match self.targets {
            Targets::TopK => self,
            Targets::Sampled => DistillPoint {
                top_p: TopP(1.0),
                missing: Missing::Renormalise,
                ..self
            },
        }
    }

    /// The point as a student of a teacher with the same tokenizer (`crossing` false) or
    /// another (true) runs it: the cross-tokenizer loss applies only across tokenizers, where
    /// it replaces `loss` and renormalises over the kept tokens (`missing` does not apply).
    fn for_pair(self, crossing: bool) -> DistillPoint {
        if crossing {
            DistillPoint {
                loss: LossKind::Kl,
                missing: Missing::Renormalise,
                ..self
            }
        } else {
            DistillPoint {
                cross: None,
                ..self
            }
        }
    }

    /// The distillation settings of a student of this point reading `teacher`.
    fn config_for(&self, teacher: RunId) -> DistillConfig {
        DistillConfig {
            mode: self.mode,
            loss: self.loss,
            alpha: self.alpha,
            temperature: self.temperature,
            truncation: Truncation {
                top_p: self.top_p,
                top_k: self.top_k,
                targets: self.targets,
                missing: self.missing,
            },
            teacher,
            cross_tokenizer: self.cross,
            teacher_precision: self.teacher_precision,
        }
    }

    /// Identifies the point (for dropping settings that normalise to one).
    fn key(&self) -> String {
        format!(
            "{} {} {:?} {} {} {} {} {} {:?} {}",
            self.mode,
            self.loss,
            self.alpha,
            self.temperature.0,
            self.top_p.0,
            self.top_k,
            self.targets,
            self.missing,
            self.cross,
            self.teacher_precision
        )
    }
}

/// A logit store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct StoreKey {
    /// Its teacher run's index.
    teacher: usize,
    /// Its seed (0 for a text corpus).
    seed: u64,
    /// The k of sampled targets (0 for top-k).
    sampled: u64,
    /// Whether the teacher runs in bf16.
    bf16: bool,
}

/// What a logit store's readers ask of it.
#[derive(Default)]
struct StoreReaders {
    /// The tokens of each stream it serves, by seed.
    reads: BTreeMap<u64, u64>,
    /// Its widest top-k (`u64::MAX`: every token).
    widest: u64,
    /// Whether a reader keeps the tail.
    bucket: bool,
    /// The truncations its students read.
    views: Vec<Truncation>,
}

/// A trained teacher the students may pair with.
struct TeacherRun {
    index: usize,
    model: usize,
    budget: usize,
    seed: u64,
}

/// The expanded graph plus the cost of the naive alternative.
pub struct Expansion {
    /// Runs in graph order.
    pub runs: Vec<Run>,
    /// FLOPs if every student trained its own teacher and ran it online.
    pub naive_flops: f64,
}

/// Expands `sweep` into runs, with what the files it names say (`resolved`).
pub fn expand(sweep: &Sweep, resolved: &Resolved) -> Result<Expansion, SpecError> {
    let ctx = Context::new(sweep, resolved)?;
    let teachers = ctx.group_models(&sweep.file.teachers, "teachers", true)?;
    let students = ctx.group_models(&sweep.file.students, "students", false)?;
    check_labels(sweep, &teachers, &students)?;
    let mut builder = Builder {
        ctx: &ctx,
        runs: Vec::new(),
        students: Vec::new(),
        baselines: Vec::new(),
        naive_flops: 0.0,
    };
    let teacher_runs = builder.teachers(&teachers)?;
    builder.students(&teachers, &teacher_runs, &students)?;
    builder.finish()
}

/// Settings shared by every run of the sweep.
struct Context<'a> {
    sweep: &'a Sweep,
    /// The files the sweep names.
    files: &'a SweepFiles,
    /// Teachers with a tokenizer of their own, by `[[teachers.models]]` index.
    own: &'a BTreeMap<usize, OwnTokenizer>,
    /// The vocabulary every model shares.
    vocab: u64,
    rule: ShapeRule,
    /// RoPE θ and RMSNorm ε of the models the sweep trains.
    rope_theta: f64,
    norm_eps: f64,
    data: DataConfig,
    train: TrainConfig,
    tokens_per_step: u64,
    distill: Vec<DistillPoint>,
    multi_seed: bool,
}

impl<'a> Context<'a> {
    fn new(sweep: &'a Sweep, resolved: &'a Resolved) -> Result<Self, SpecError> {
        let f = &sweep.file;
        let m = &f.model;
        let context = m.context.get_ref().0;
        let batch = f.train.batch_tokens.get_ref().0;
        let batch_seqs = ((batch as f64 / context as f64).round() as u64).max(1);
        let corpus = f
            .corpus
            .as_ref()
            .map(|c| c.get_ref().clone())
            .unwrap_or_default();
        let rule = ShapeRule {
            aspect_ratio: m.aspect_ratio.0,
            head_dim: m.head_dim.map(|h| h.0),
            kv_groups: m.kv_groups.0,
            ffn_multiple: m.ffn_multiple.map(|f| f.0),
            tie_embeddings: m.tie_embeddings,
            vocab: resolved.vocab,
        };
        let data = DataConfig {
            corpus: corpus.kind,
            path: corpus.path.clone(),
            text_column: corpus.text_column.clone(),
            tokenizer: corpus
                .tokenizer
                .as_ref()
                .map(|t| t.kind())
                .or(match corpus.kind {
                    crate::spec::CorpusKind::Synthetic => None,
                    _ => Some(crate::spec::TokenizerKind::Byte),
                }),
            tokenizer_file: corpus
                .tokenizer
                .as_ref()
                .and_then(|t| t.file())
                .zip(resolved.files.tokenizer.as_ref())
                .map(|(path, file)| TokenizerRef {
                    path: path.to_string(),
                    sha256: file.sha256.clone(),
                }),
            vocab: resolved.vocab,
            separator: resolved.separator,
            val_tokens: corpus.val_tokens.map_or(200_000, |v| v.0),
            corpus_seed: corpus.seed.unwrap_or(0),
            synthetic_sources: corpus.sources.filter(|&n| n != 4),
            synthetic_copies: corpus.copies.filter(|&c| !c),
            context,
            batch_seqs,
            seed: 0,
            val_path: corpus.val_path.clone(),
            split: match corpus.kind {
                crate::spec::CorpusKind::Synthetic => 0,
                _ => 2,
            },
            follow: None,
        };
        let t = &f.train;
        let train = TrainConfig {
            lr: t.lr,
            weight_decay: t.weight_decay.0,
            betas: [t.betas[0].0, t.betas[1].0],
            grad_clip: t.grad_clip,
            steps: 0,
            evals: t.evals.0,
            checkpoint_every: t.checkpoint_every.0,
            log_every: t.log_every.0,
            precision: t.precision,
            head_chunk: t.head_chunk.map(|c| c.0),
            micro_batch_seqs: t
                .micro_batch_tokens
                .as_ref()
                .map(|m| ((m.get_ref().0 as f64 / context as f64).round() as u64).max(1))
                .filter(|&m| m < batch_seqs),
        };
        let d = &f.distill;
        let distill = distill_points(d);
        if distill
            .iter()
            .any(|p| p.targets == Targets::Sampled && p.top_k == TopK::All)
        {
            return Err(SpecError::whole_file(
                &sweep.path,
                "`[distill] targets = \"sampled\"` draws `top_k` tokens per position, and a setting pairs it with `top_k = \"all\"`",
            )
            .with_hint("give sampled targets a number of draws, e.g. `top_k = 32`"));
        }
        let mut all_seeds: BTreeSet<u64> = f.seed.values().iter().copied().collect();
        for group in [&f.teachers, &f.students] {
            let g = group.get_ref();
            all_seeds.extend(g.seed.iter().flat_map(|s| s.values().iter().copied()));
            for e in &g.models {
                all_seeds.extend(
                    e.get_ref()
                        .seed
                        .iter()
                        .flat_map(|s| s.values().iter().copied()),
                );
            }
        }
        Ok(Context {
            sweep,
            files: &resolved.files,
            own: &resolved.own_tokenizers,
            vocab: resolved.vocab,
            rule,
            rope_theta: m
                .rope_theta
                .map_or(crate::model::DEFAULT_ROPE_THETA, |r| r.0),
            norm_eps: m.norm_eps.map_or(crate::model::DEFAULT_NORM_EPS, |r| r.0),
            data,
            train,
            tokens_per_step: batch_seqs * context,
            distill,
            multi_seed: all_seeds.len() > 1,
        })
    }

    /// Resolves the models of a group: `sizes` first, then `models` entries.
    fn group_models(
        &self,
        group: &toml::Spanned<GroupSection>,
        key: &str,
        teachers: bool,
    ) -> Result<Vec<GroupModel>, SpecError> {
        let g = group.get_ref();
        let sweep_seeds = self.sweep.file.seed.values();
        let group_seeds: Vec<u64> = match &g.seed {
            Some(s) => s.values().to_vec(),
            None if teachers => sweep_seeds[..1].to_vec(),
            None => sweep_seeds.to_vec(),
        };
        let mut out: Vec<GroupModel> = Vec::new();
        for (i, size) in g.sizes.iter().enumerate() {
            let entry_key = format!("{key}.sizes[{i}]");
            let shape = self.derive(size.get_ref().0, size.span(), &entry_key, self.vocab)?;
            let target = size.get_ref().0;
            if let Some(prev) = out.iter().find(|m| m.spec.target == Some(target)) {
                return Err(self
                    .sweep
                    .error_at(
                        size.span(),
                        &entry_key,
                        format!("size `{}` is listed twice", format_count(target as f64)),
                    )
                    .with_hint(format!("remove the duplicate from `{}`", prev.key)));
            }
            out.push(self.group_model(
                format_count(target as f64),
                Some(target),
                shape,
                g,
                None,
                &group_seeds,
                entry_key,
                size.span(),
            ));
        }
        for (i, entry) in g.models.iter().enumerate() {
            let entry_key = format!("{key}.models[{i}]");
            let e = entry.get_ref();
            let own = self.own.get(&i).filter(|_| teachers);
            let vocab = own.map_or(self.vocab, |o| o.vocab);
            let mut model = if let (true, Some(model)) = (teachers, self.files.teachers.get(&i)) {
                self.pretrained_model(e, model, entry_key, entry.span(), vocab)?
            } else {
                let (label, target, shape) =
                    self.entry_shape(e, entry.span(), &entry_key, vocab)?;
                self.group_model(
                    label,
                    target,
                    shape,
                    g,
                    Some(e),
                    &group_seeds,
                    entry_key,
                    entry.span(),
                )
            };
            model.data = own.map(|o| self.own_data(o));
            out.push(model);
        }
        Ok(out)
    }

    /// The data of a teacher with its own tokenizer: the sweep's corpus tokenised by it,
    /// holding out what the students' tokenizer holds out.
    fn own_data(&self, own: &OwnTokenizer) -> DataConfig {
        DataConfig {
            tokenizer: Some(own.kind),
            tokenizer_file: own.file.clone(),
            vocab: own.vocab,
            follow: Some(SplitAnchor::of(&self.data)),
            ..self.data.clone()
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn group_model(
        &self,
        label: String,
        target: Option<u64>,
        shape: ModelShape,
        g: &GroupSection,
        entry: Option<&ModelEntry>,
        group_seeds: &[u64],
        key: String,
        span: Range<usize>,
    ) -> GroupModel {
        let budgets = entry
            .and_then(|e| e.tokens.as_ref())
            .unwrap_or(&g.tokens)
            .values()
            .to_vec();
        let seeds = entry
            .and_then(|e| e.seed.as_ref())
            .map_or_else(|| group_seeds.to_vec(), |s| s.values().to_vec());
        GroupModel {
            lr: entry.and_then(|e| e.lr),
            n: shape.params().non_embedding,
            spec: ModelSpec {
                label,
                target,
                shape,
                rope_theta: self.rope_theta,
                norm_eps: self.norm_eps,
                pretrained: None,
                arch: None,
            },
            budgets,
            seeds,
            key,
            span,
            data: None,
        }
    }

    /// A pre-trained teacher: its shape, θ and ε from its config.json, its identity from the
    /// content of its config and weights; one run, not trained.
    fn pretrained_model(
        &self,
        e: &ModelEntry,
        model: &crate::hf::PretrainedModel,
        key: String,
        span: Range<usize>,
        vocab: u64,
    ) -> Result<GroupModel, SpecError> {
        let path = e.pretrained.clone().unwrap_or_default();
        let fail = |message: String| {
            self.sweep
                .error_at(span.clone(), &format!("{key}.pretrained"), message)
        };
        // Its tokenizer's vocabulary: a padded teacher's extra rows are cut (plan/files.rs).
        let shape = ModelShape {
            vocab,
            ..model.shape()
        };
        // a plain LLaMA runs as pdsweep's transformer; any other architecture as the decoder
        let arch = match model.config.as_llama() {
            Some(_) => {
                shape
                    .validate()
                    .map_err(|m| fail(format!("`{}/config.json`: {m}", model.dir.display())))?;
                None
            }
            None => {
                let arch = crate::model::Architecture {
                    vocab,
                    ..model.config.arch.clone()
                };
                arch.validate()
                    .map_err(|m| fail(format!("`{}/config.json`: {m}", model.dir.display())))?;
                Some(arch)
            }
        };
        let n = arch
            .as_ref()
            .map_or(shape.params(), |a| a.params())
            .non_embedding;
        let label = match &e.name {
            Some(name) => name.to_string(),
            None => {
                let folder = model
                    .dir
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                folder.parse::<crate::spec::Name>().map_err(|m| {
                    fail(format!("the folder name cannot label runs: {m}"))
                        .with_hint("give the entry a `name`")
                })?;
                folder
            }
        };
        let weights_sha256 =
            crate::hf::weights_sha256(&model.dir).map_err(|e| fail(crate::error::chain(&e)))?;
        let llama = model.config.as_llama();
        Ok(GroupModel {
            n,
            spec: ModelSpec {
                label,
                target: None,
                shape,
                rope_theta: llama
                    .as_ref()
                    .map_or(crate::model::DEFAULT_ROPE_THETA, |l| l.rope_theta),
                norm_eps: llama
                    .as_ref()
                    .map_or(crate::model::DEFAULT_NORM_EPS, |l| l.norm_eps),
                arch,
                pretrained: Some(PretrainedSource {
                    path,
                    config_sha256: model.config_sha256.clone(),
                    weights_sha256,
                    bos: model.tokenizer.as_ref().and_then(|t| t.bos),
                }),
            },
            budgets: vec![TokenBudget::Absolute(0)],
            seeds: self.sweep.file.seed.values()[..1].to_vec(),
            lr: None,
            key,
            span,
            data: None,
        })
    }

    fn derive(
        &self,
        target: u64,
        span: Range<usize>,
        key: &str,
        vocab: u64,
    ) -> Result<ModelShape, SpecError> {
        ShapeRule { vocab, ..self.rule }
            .derive(target)
            .map_err(|msg| {
                self.sweep
                    .error_at(span, key, msg)
                    .with_hint("choose another size, or give an explicit shape in a `models` entry")
            })
    }

    fn entry_shape(
        &self,
        e: &ModelEntry,
        span: Range<usize>,
        key: &str,
        vocab: u64,
    ) -> Result<(String, Option<u64>, ModelShape), SpecError> {
        if let Some(size) = e.size {
            let shape = self.derive(size.0, span, key, vocab)?;
            let label = e
                .name
                .as_ref()
                .map_or_else(|| format_count(size.0 as f64), |n| n.to_string());
            return Ok((label, Some(size.0), shape));
        }
        let get = |v: Option<crate::spec::Count>| v.map_or(0, |c| c.0);
        let n_heads = get(e.n_heads);
        let shape = ModelShape {
            d_model: get(e.d_model),
            n_layers: get(e.n_layers),
            n_heads,
            n_kv_heads: e.n_kv_heads.map_or(n_heads, |c| c.0),
            d_ff: get(e.d_ff),
            vocab: e.vocab.map_or(vocab, |c| c.0),
            tie_embeddings: e.tie_embeddings.unwrap_or(self.rule.tie_embeddings),
        };
        shape
            .validate()
            .map_err(|msg| self.sweep.error_at(span.clone(), key, msg))?;
        let label = e.name.as_ref().map_or_else(
            || format!("d{}x{}", shape.d_model, shape.n_layers),
            |n| n.to_string(),
        );
        Ok((label, None, shape))
    }

    /// Resolves a budget for a model of `n` parameters to whole optimiser steps.
    fn tokens(&self, budget: TokenBudget, n: u64, m: &GroupModel) -> Result<(u64, u64), SpecError> {
        let requested = budget.resolve(n).map_err(|msg| {
            self.sweep
                .error_at(m.span.clone(), &format!("{}.tokens", m.key), msg)
        })?;
        let steps = requested.div_ceil(self.tokens_per_step);
        Ok((steps, steps * self.tokens_per_step))
    }

    fn data(&self, seed: u64) -> DataConfig {
        DataConfig {
            seed,
            ..self.data.clone()
        }
    }

    /// The data of model `m` (its own tokenizer's, if it has one) with `seed`.
    fn data_of(&self, m: &GroupModel, seed: u64) -> DataConfig {
        match &m.data {
            Some(own) => DataConfig {
                seed,
                ..own.clone()
            },
            None => self.data(seed),
        }
    }

    fn train(&self, steps: u64) -> TrainConfig {
        TrainConfig {
            steps,
            ..self.train.clone()
        }
    }

    /// Whether the corpus is the synthetic one (a training stream generated per seed).
    fn synthetic(&self) -> bool {
        self.data.corpus == crate::spec::CorpusKind::Synthetic
    }

    fn seed_suffix(&self, seed: u64) -> String {
        if self.multi_seed {
            format!("-s{seed}")
        } else {
            String::new()
        }
    }
}

/// Refuses two models of the sweep with the same label within a group, and two models of a
/// group that would be the same model (one shape, learning rate, budgets and seeds), such as
/// two size targets that resolve to one shape.
fn check_labels(
    sweep: &Sweep,
    teachers: &[GroupModel],
    students: &[GroupModel],
) -> Result<(), SpecError> {
    for group in [teachers, students] {
        for (i, m) in group.iter().enumerate() {
            let twin = group[..i].iter().find(|p| {
                p.spec.shape == m.spec.shape
                    && p.lr == m.lr
                    && p.budgets == m.budgets
                    && p.seeds == m.seeds
            });
            if let Some(prev) = twin {
                return Err(sweep
                    .error_at(
                        m.span.clone(),
                        &m.key,
                        format!(
                            "`{}` and `{}` resolve to the same model ({}, {} non-embedding parameters), so they would train the same runs twice",
                            m.spec.label,
                            prev.spec.label,
                            m.spec.shape.summary(),
                            m.n
                        ),
                    )
                    .with_hint("remove one of the two, or move their sizes further apart (derived shapes meet their target within 10 %)"));
            }
        }
        let mut seen: HashMap<&str, &GroupModel> = HashMap::new();
        for m in group {
            if let Some(prev) = seen.insert(&m.spec.label, m) {
                return Err(sweep
                    .error_at(
                        m.span.clone(),
                        &m.key,
                        format!(
                            "model label `{}` is also used by `{}`",
                            m.spec.label, prev.key
                        ),
                    )
                    .with_hint("give the entry a distinct `name`"));
            }
        }
    }
    Ok(())
}

/// Accumulates runs.
struct Builder<'c, 'a> {
    ctx: &'c Context<'a>,
    /// Teachers, then logit passes (looked up by index).
    runs: Vec<Run>,
    students: Vec<Run>,
    baselines: Vec<Run>,
    naive_flops: f64,
}

/// One student model at one token budget and seed: what its distilled runs share, whatever
/// the teacher.
struct StudentSlot<'a> {
    m: &'a GroupModel,
    steps: u64,
    tokens: u64,
    seed: u64,
    /// The baselines its learning rate is tuned on (`[train] tune_lr`), else empty.
    tuning: &'a [RunId],
    /// `-BUDGET` in its name when the students have several budgets, else empty.
    budget_part: &'a str,
    /// `-sSEED` in its name when the sweep has several seeds, else empty.
    seed_part: String,
}

/// The teacher run a student distils from.
struct TeacherSlot<'a> {
    t: &'a GroupModel,
    /// Its index in the builder's runs.
    run: usize,
    /// `-BUDGET` in the student's name when the teachers have several budgets, else empty.
    budget_part: &'a str,
}

/// A student whose logit store is not known yet.
struct PendingStudent {
    config: RunConfig,
    name: String,
    teacher: usize,
    /// (teacher run, store seed, 0 for top-k targets or the draws of sampled ones).
    store_key: Option<StoreKey>,
    /// The baselines its learning rate is tuned on (`[train] tune_lr`), else empty.
    tuned_on: Vec<RunId>,
}

impl Builder<'_, '_> {
    /// Adds a teacher or logit pass; returns its index in `runs`.
    fn push(
        &mut self,
        config: RunConfig,
        name: String,
        depends_on: Vec<RunId>,
        flops: f64,
    ) -> usize {
        self.runs.push(make_run(config, name, depends_on, flops));
        self.runs.len() - 1
    }

    fn trained(
        &self,
        kind: RunKind,
        m: &GroupModel,
        steps: u64,
        tokens: u64,
        seed: u64,
    ) -> RunConfig {
        RunConfig {
            kind,
            model: m.spec.clone(),
            tokens,
            data: self.ctx.data_of(m, seed),
            train: Some(TrainConfig {
                lr: m.lr.unwrap_or(self.ctx.train.lr),
                ..self.ctx.train(steps)
            }),
            tune: None,
            distill: None,
            logits: None,
            backend: self.ctx.sweep.file.backend,
        }
    }

    /// Adds the baselines of student `m` at one budget, one per seed (and per peak learning
    /// rate of `[train] tune_lr`); returns the runs a student's rate is tuned on: every one of
    /// them when the rate is tuned, none otherwise.
    fn baselines_of(
        &mut self,
        m: &GroupModel,
        steps: u64,
        tokens: u64,
        budget_part: &str,
    ) -> Vec<RunId> {
        let peaks = self
            .ctx
            .sweep
            .file
            .train
            .tune_lr
            .as_ref()
            .map(|t| t.get_ref().clone());
        let mut candidates = Vec::new();
        for &seed in &m.seeds {
            let seed_part = self.ctx.seed_suffix(seed);
            let name = format!("baseline-{}{budget_part}{seed_part}", m.spec.label);
            let flops = cost::training_flops(m.n, tokens);
            self.naive_flops += flops;
            let config = self.trained(RunKind::Baseline, m, steps, tokens, seed);
            let Some(peaks) = &peaks else {
                self.baselines
                    .push(make_run(config, name, Vec::new(), flops));
                continue;
            };
            for &peak in peaks {
                let mut config = config.clone();
                if let Some(train) = config.train.as_mut() {
                    train.lr.0.peak = peak;
                }
                let run = make_run(config, format!("{name}-lr{peak:e}"), Vec::new(), flops);
                candidates.push(run.id.clone());
                self.baselines.push(run);
            }
        }
        candidates
    }

    /// A student's trained-run configuration, its learning rate tuned on `tuning` if any.
    fn student(
        &self,
        m: &GroupModel,
        steps: u64,
        tokens: u64,
        seed: u64,
        tuning: &[RunId],
    ) -> RunConfig {
        let mut config = self.trained(RunKind::Student, m, steps, tokens, seed);
        if config.train.is_some() && !tuning.is_empty() {
            let peaks = self.ctx.sweep.file.train.tune_lr.as_ref();
            config.tune = Some(LrTuning {
                candidates: tuning.to_vec(),
                peaks: peaks.map(|t| t.get_ref().clone()).unwrap_or_default(),
            });
        }
        config
    }

    fn teachers(&mut self, teachers: &[GroupModel]) -> Result<Vec<TeacherRun>, SpecError> {
        let mut out = Vec::new();
        let many_budgets = distinct_budgets(teachers) > 1;
        for (mi, m) in teachers.iter().enumerate() {
            if m.spec.pretrained.is_some() {
                let seed = m.seeds[0];
                let index = self.pretrained_teacher(m, seed);
                out.push(TeacherRun {
                    index,
                    model: mi,
                    budget: 0,
                    seed,
                });
                continue;
            }
            for (bi, &budget) in m.budgets.iter().enumerate() {
                let (steps, tokens) = self.ctx.tokens(budget, m.n, m)?;
                for &seed in &m.seeds {
                    let config = self.trained(RunKind::Teacher, m, steps, tokens, seed);
                    let budget_part = if many_budgets {
                        format!("-{budget}")
                    } else {
                        String::new()
                    };
                    let name = format!(
                        "teacher-{}{}{}",
                        m.spec.label,
                        budget_part,
                        self.ctx.seed_suffix(seed)
                    );
                    let flops = cost::training_flops(m.n, tokens);
                    let index = self.tuned_teacher(config, name, flops);
                    out.push(TeacherRun {
                        index,
                        model: mi,
                        budget: bi,
                        seed,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Adds teacher `name` (and, with `[teachers] tune_lr`, one candidate run per peak that
    /// it depends on and is tuned on); returns the teacher's index in `runs`.
    fn tuned_teacher(&mut self, config: RunConfig, name: String, flops: f64) -> usize {
        let peaks = self.ctx.sweep.file.teachers.get_ref().tune_lr.as_ref();
        let Some(peaks) = peaks.map(|p| p.get_ref().clone()) else {
            return self.push(config, name, Vec::new(), flops);
        };
        let mut candidates = Vec::new();
        for &peak in &peaks {
            let mut candidate = config.clone();
            if let Some(train) = candidate.train.as_mut() {
                train.lr.0.peak = peak;
            }
            let index = self.push(candidate, format!("{name}-lr{peak:e}"), Vec::new(), flops);
            candidates.push(self.runs[index].id.clone());
        }
        let mut config = config;
        if config.train.is_some() {
            config.tune = Some(LrTuning {
                candidates: candidates.clone(),
                peaks,
            });
        }
        self.push(config, name, candidates, flops)
    }

    /// A pre-trained teacher's run: not trained (no tokens, no optimiser); it measures its
    /// held-out loss on the sweep's corpus, so its cost is one forward pass over that split.
    fn pretrained_teacher(&mut self, m: &GroupModel, seed: u64) -> usize {
        let config = RunConfig {
            kind: RunKind::Teacher,
            model: m.spec.clone(),
            tokens: 0,
            data: self.ctx.data_of(m, seed),
            train: None,
            tune: None,
            distill: None,
            logits: None,
            backend: self.ctx.sweep.file.backend,
        };
        let flops = cost::forward_flops(m.n, config.data.val_tokens);
        let name = format!("teacher-{}", m.spec.label);
        self.push(config, name, Vec::new(), flops)
    }

    fn students(
        &mut self,
        teachers: &[GroupModel],
        teacher_runs: &[TeacherRun],
        students: &[GroupModel],
    ) -> Result<(), SpecError> {
        let sweep = self.ctx.sweep;
        let baseline = sweep.file.students.get_ref().trains_baselines();
        let constraints = sweep
            .file
            .constraints
            .as_ref()
            .map(|c| c.get_ref().clone())
            .unwrap_or_default();
        let allowed = |teacher_n: u64, student_n: u64| {
            let ratio = teacher_n as f64 / student_n as f64;
            (!constraints.require_teacher_larger || teacher_n > student_n)
                && constraints.min_teacher_ratio.is_none_or(|r| ratio >= r.0)
                && constraints.max_teacher_ratio.is_none_or(|r| ratio <= r.0)
        };
        let many_teacher_budgets = distinct_budgets(teachers) > 1;
        let many_budgets = distinct_budgets(students) > 1;
        let labels = axis_labels(&sweep.file.distill);
        let mut pending: Vec<PendingStudent> = Vec::new();
        let mut used_teachers = vec![false; teachers.len()];
        for m in students {
            for &budget in &m.budgets {
                let (steps, tokens) = self.ctx.tokens(budget, m.n, m)?;
                let budget_part = if many_budgets {
                    format!("-{budget}")
                } else {
                    String::new()
                };
                let tuning = if baseline {
                    self.baselines_of(m, steps, tokens, &budget_part)
                } else {
                    Vec::new()
                };
                for &seed in &m.seeds {
                    let slot = StudentSlot {
                        m,
                        steps,
                        tokens,
                        seed,
                        tuning: &tuning,
                        budget_part: &budget_part,
                        seed_part: self.ctx.seed_suffix(seed),
                    };
                    for (ti, t) in teachers.iter().enumerate() {
                        if !allowed(t.n, m.n) {
                            continue;
                        }
                        used_teachers[ti] = true;
                        for bi in 0..t.budgets.len() {
                            let Some(tr) = pick_teacher(teacher_runs, ti, bi, seed) else {
                                continue;
                            };
                            let t_budget = if many_teacher_budgets && t.spec.pretrained.is_none() {
                                format!("-{}", t.budgets[bi])
                            } else {
                                String::new()
                            };
                            let from = TeacherSlot {
                                t,
                                run: tr.index,
                                budget_part: &t_budget,
                            };
                            pending.extend(self.distilled(&slot, &from, &labels)?);
                        }
                    }
                }
            }
        }
        self.check_pairs(teachers, students, &used_teachers, pending.is_empty())?;
        self.link_students(pending);
        Ok(())
    }

    /// The students of `slot` distilled from the teacher run of `from`: one per distinct
    /// distillation setting of the sweep (as this pair sees it: a pair across tokenizers has
    /// settings of its own).
    fn distilled(
        &mut self,
        slot: &StudentSlot<'_>,
        from: &TeacherSlot<'_>,
        labels: &AxisLabels,
    ) -> Result<Vec<PendingStudent>, SpecError> {
        let (m, t) = (slot.m, from.t);
        let teacher = &self.runs[from.run];
        let crossing = t.data.is_some();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for point in &self.ctx.distill {
            let point = &point.for_pair(crossing);
            if !seen.insert(point.key()) {
                continue;
            }
            if crossing && point.targets == Targets::Sampled {
                return Err(cross_sampled_error(self.ctx.sweep, t));
            }
            let config = RunConfig {
                distill: Some(point.config_for(teacher.id.clone())),
                ..self.student(m, slot.steps, slot.tokens, slot.seed, slot.tuning)
            };
            let name = format!(
                "student-{}{}-from-{}{}{}{}",
                m.spec.label,
                slot.budget_part,
                t.spec.label,
                from.budget_part,
                labels.describe(point),
                slot.seed_part,
            );
            self.naive_flops += naive_pair_flops(teacher, t.n, m.n, slot.tokens);
            let store_key = self.store_key(point, from.run, slot.seed);
            out.push(PendingStudent {
                config,
                name,
                teacher: from.run,
                store_key,
                tuned_on: slot.tuning.to_vec(),
            });
        }
        Ok(out)
    }

    fn check_pairs(
        &self,
        teachers: &[GroupModel],
        students: &[GroupModel],
        used: &[bool],
        no_students: bool,
    ) -> Result<(), SpecError> {
        let sweep = self.ctx.sweep;
        let span = sweep.file.constraints.as_ref().map_or(0..0, |c| c.span());
        let smallest_student = students.iter().map(|s| s.n).min().unwrap_or(0);
        if no_students {
            let largest_teacher = teachers.iter().map(|t| t.n).max().unwrap_or(0);
            return Err(sweep
                .error_at(
                    span,
                    "constraints",
                    format!(
                        "the constraints leave zero teacher–student pairs (largest teacher has {} non-embedding parameters, smallest student {})",
                        format_count(largest_teacher as f64),
                        format_count(smallest_student as f64)
                    ),
                )
                .with_hint("add larger teachers or smaller students, or relax `[constraints]`"));
        }
        if let Some((t, _)) = teachers.iter().zip(used).find(|(_, u)| !**u) {
            return Err(sweep
                .error_at(
                    t.span.clone(),
                    &t.key,
                    format!(
                        "teacher `{}` ({} non-embedding parameters) is smaller than `[constraints]` allow for every student (smallest student: {}); it would be trained for nothing",
                        t.spec.label,
                        format_count(t.n as f64),
                        format_count(smallest_student as f64)
                    ),
                )
                .with_hint("remove this teacher, or relax `[constraints]`"));
        }
        Ok(())
    }

    /// Creates one logit store per teacher (per teacher and seed for the synthetic corpus,
    /// whose stream is generated per seed), covering the windows of every student stream that
    /// reads it, at its widest top-k (stores keep the top k with no nucleus cut; each student
    /// applies its own top-p and top-k when reading), then adds the students with their
    /// dependencies.
    fn link_students(&mut self, pending: Vec<PendingStudent>) {
        let mut store_ids = HashMap::new();
        for (key, readers) in store_readers(&pending) {
            let index = self.push_store(key, readers);
            store_ids.insert(key, self.runs[index].id.clone());
        }
        for p in pending {
            self.push_student(p, &store_ids);
        }
    }

    /// The logit store an offline student of `point` reads from teacher run `teacher` on
    /// `seed`, or `None` for an online student.
    fn store_key(&self, point: &DistillPoint, teacher: usize, seed: u64) -> Option<StoreKey> {
        // a text corpus's store serves every seed
        let store_seed = if self.ctx.synthetic() { seed } else { 0 };
        // sampled stores hold their own draws, one store per k
        let kind = match point.targets {
            Targets::TopK => 0,
            Targets::Sampled => top_k_key(point.top_k),
        };
        let bf16 = !point.teacher_precision.is_f32();
        (point.mode == DistillMode::Offline).then_some(StoreKey {
            teacher,
            seed: store_seed,
            sampled: kind,
            bf16,
        })
    }

    /// Adds the logit run of store `key` serving `readers`; returns its index.
    fn push_store(&mut self, key: StoreKey, readers: StoreReaders) -> usize {
        let StoreReaders {
            reads,
            widest,
            bucket,
            views,
        } = readers;
        let StoreKey {
            teacher: teacher_index,
            seed,
            sampled,
            bf16,
        } = key;
        let reads: Vec<StoreRead> = reads
            .into_iter()
            .map(|(seed, tokens)| StoreRead { seed, tokens })
            .collect();
        // until the corpus is known (`Plan::attach_corpus`), at most every stream's own
        let shuffled = !self.ctx.synthetic();
        let tokens = store_positions(&reads, None, shuffled, self.ctx.data.context);
        let truncation = store_truncation(widest, sampled, bucket);
        let teacher = &self.runs[teacher_index];
        // a teacher of another tokenizer: its own tokens, and a store students align on
        let aligned = !self.ctx.data.same_tokens(&teacher.config.data);
        let tokens = if aligned {
            aligned_positions(tokens, &self.ctx.data, &teacher.config.data, None)
        } else {
            tokens
        };
        let config = RunConfig {
            kind: RunKind::Logits,
            model: teacher.config.model.clone(),
            tokens,
            data: DataConfig {
                seed,
                ..teacher.config.data.clone()
            },
            train: None,
            tune: None,
            distill: None,
            logits: Some(LogitsConfig {
                teacher: teacher.id.clone(),
                truncation,
                reads,
                views,
                aligned,
                students: aligned.then(|| self.ctx.data(0)),
                precision: if bf16 {
                    TeacherPrecision::Bf16
                } else {
                    TeacherPrecision::F32
                },
            }),
            backend: self.ctx.sweep.file.backend,
        };
        let name = format!(
            "logits-{}-{}{}{}{}{}",
            teacher.name.trim_start_matches("teacher-"),
            if sampled > 0 { "sampled" } else { "k" },
            truncation.top_k,
            if bucket { "-tail" } else { "" },
            if bf16 { "-bf16" } else { "" },
            if shuffled {
                String::new()
            } else {
                self.ctx.seed_suffix(seed)
            }
        );
        let flops = cost::forward_flops(teacher.params.non_embedding, tokens);
        let deps = vec![teacher.id.clone()];
        self.push(config, name, deps, flops)
    }

    /// Adds student `p`, depending on its logit store (or, online, its teacher) and on the
    /// baselines its rate is tuned on.
    fn push_student(&mut self, p: PendingStudent, store_ids: &HashMap<StoreKey, RunId>) {
        let teacher = &self.runs[p.teacher];
        let n_s = p.config.model.shape.params().non_embedding;
        let mut flops = cost::training_flops(n_s, p.config.tokens);
        let dependency = match p.store_key {
            Some(key) => store_ids[&key].clone(),
            None => {
                // a teacher of another tokenizer reads the same bytes in its own tokens
                let positions = if self.ctx.data.same_tokens(&teacher.config.data) {
                    p.config.tokens
                } else {
                    aligned_positions(p.config.tokens, &self.ctx.data, &teacher.config.data, None)
                };
                flops += cost::forward_flops(teacher.params.non_embedding, positions);
                teacher.id.clone()
            }
        };
        let mut depends_on = vec![dependency];
        depends_on.extend(p.tuned_on);
        self.students
            .push(make_run(p.config, p.name, depends_on, flops));
    }

    fn finish(mut self) -> Result<Expansion, SpecError> {
        self.runs.append(&mut self.students);
        self.runs.append(&mut self.baselines);
        let mut seen = HashSet::new();
        self.runs.retain(|r| seen.insert(r.id.clone()));
        let mut names: HashMap<&str, &Run> = HashMap::new();
        for run in &self.runs {
            if let Some(other) = names.insert(&run.name, run) {
                return Err(SpecError::whole_file(
                    &self.ctx.sweep.path,
                    format!(
                        "runs `{}` and `{}` would share the name `{}`",
                        other.id, run.id, run.name
                    ),
                )
                .with_hint("give the models distinct `name`s"));
            }
        }
        Ok(Expansion {
            runs: self.runs,
            naive_flops: self.naive_flops,
        })
    }
}

/// A run with its id, sizes and predicted disk use.
fn make_run(config: RunConfig, name: String, depends_on: Vec<RunId>, flops: f64) -> Run {
    let params = config.model.params();
    let disk_bytes = match config.kind {
        RunKind::Logits => {
            let vocab = config.data.vocab;
            let per_token = config.logits.as_ref().map_or(
                crate::distill::store::logit_bytes_per_token(vocab, vocab),
                |l| {
                    crate::distill::store::Layout::of(vocab, &l.truncation)
                        .aligned(l.aligned)
                        .bytes_per_token()
                },
            );
            per_token.saturating_mul(config.tokens)
        }
        _ if config.model.pretrained.is_some() => 0, // read from its folder, never written
        _ => cost::checkpoint_bytes(params.total),
    };
    let config_json = config.to_json();
    Run {
        id: RunId::of(&config),
        name,
        config,
        config_json,
        params,
        flops,
        depends_on,
        disk_bytes,
        memory: Default::default(),
    }
}

/// Teacher positions an aligned store holds for students reading `student_positions` of their
/// own tokens, before either corpus is read: the same bytes in the teacher's tokens
/// ([`bytes_per_token_guess`]), plus up to one teacher window where a student window's bytes
/// straddle two; at most `cap` (the teacher's whole split, once known).
pub fn aligned_positions(
    student_positions: u64,
    students: &DataConfig,
    teacher: &DataConfig,
    cap: Option<u64>,
) -> u64 {
    let ratio = bytes_per_token_guess(students) / bytes_per_token_guess(teacher);
    let windows = student_positions.div_ceil(students.context.max(1));
    let per_window = (students.context as f64 * ratio).ceil() as u64 + teacher.context;
    let positions = windows * per_window;
    cap.map_or(positions, |c| {
        positions.min((c as f64 * ratio).ceil() as u64)
    })
}

/// Bytes per token of a tokenizer before its corpus is read: 1 for bytes; for a byte-level BPE
/// of V tokens, with x = log2(V / 256), min(1 + 0.7·x, 2.1 + 0.145·x): 2.4 at V = 1,024 and 3.2
/// at V = 49,152, what pdsweep's trained BPE and SmolLM2's tokenizer give on Shakespeare.
pub fn bytes_per_token_guess(data: &DataConfig) -> f64 {
    match data.tokenizer {
        Some(crate::spec::TokenizerKind::Byte) | None => 1.0,
        _ => {
            let x = (data.vocab.max(257) as f64 / 256.0).log2();
            (1.0 + 0.7 * x).min(2.1 + 0.145 * x)
        }
    }
}

fn top_k_key(k: TopK) -> u64 {
    match k {
        TopK::Keep(k) => k,
        TopK::All => u64::MAX,
    }
}

/// The error for sampled targets from teacher `t`, whose tokenizer is not its students'.
fn cross_sampled_error(sweep: &Sweep, t: &GroupModel) -> SpecError {
    sweep
        .error_at(
            t.span.clone(),
            &t.key,
            format!(
                "teacher `{}` has another tokenizer than its students, and sampled targets are not aligned across tokenizers",
                t.spec.label
            ),
        )
        .with_hint("use `targets = \"top_k\"` with this teacher")
}

/// What a student of `student_n` distilled from `teacher` (of `teacher_n`) on `tokens` costs
/// without sharing: the teacher's training, its forward passes and the student's training.
fn naive_pair_flops(teacher: &Run, teacher_n: u64, student_n: u64, tokens: u64) -> f64 {
    // a tuned teacher also trains its candidates
    let tuned = teacher.config.tune.as_ref();
    let teacher_train = teacher.flops * (1 + tuned.map_or(0, |t| t.candidates.len())) as f64;
    let online = cost::forward_flops(teacher_n, tokens);
    teacher_train + online + cost::training_flops(student_n, tokens)
}

/// The stores the offline students read, each with what its students ask of it.
fn store_readers(pending: &[PendingStudent]) -> BTreeMap<StoreKey, StoreReaders> {
    let mut stores: BTreeMap<StoreKey, StoreReaders> = BTreeMap::new();
    for p in pending {
        if let (Some(key), Some(d)) = (p.store_key, &p.config.distill) {
            let entry = stores.entry(key).or_default();
            let tokens = entry.reads.entry(p.config.data.seed).or_insert(0);
            *tokens = (*tokens).max(p.config.tokens);
            entry.widest = entry.widest.max(top_k_key(d.truncation.top_k));
            entry.bucket |= d.truncation.missing == Missing::Bucket;
            if !entry.views.contains(&d.truncation) {
                entry.views.push(d.truncation);
            }
        }
    }
    stores
}

/// The truncation a store keeps: its readers' widest top-k, the whole nucleus, sampled
/// targets when `sampled` is a k, and the tail when a reader keeps it.
fn store_truncation(widest: u64, sampled: u64, bucket: bool) -> Truncation {
    let top_k = if widest == u64::MAX {
        TopK::All
    } else {
        TopK::Keep(widest)
    };
    Truncation {
        top_p: TopP(1.0),
        top_k,
        targets: if sampled > 0 {
            Targets::Sampled
        } else {
            Targets::TopK
        },
        missing: if bucket {
            Missing::Bucket
        } else {
            Missing::Renormalise
        },
    }
}

/// The teacher run for a student of `seed`: the same seed if that teacher has it, else its first.
fn pick_teacher(
    runs: &[TeacherRun],
    model: usize,
    budget: usize,
    seed: u64,
) -> Option<&TeacherRun> {
    let mut candidates = runs
        .iter()
        .filter(|t| t.model == model && t.budget == budget);
    let first = candidates.clone().next();
    candidates.find(|t| t.seed == seed).or(first)
}

fn distinct_budgets(models: &[GroupModel]) -> usize {
    let labels: BTreeSet<String> = models
        .iter()
        .filter(|m| m.spec.pretrained.is_none())
        .flat_map(|m| m.budgets.iter().map(|b| b.to_string()))
        .collect();
    labels.len()
}

/// Which `[distill]` axes have more than one value, so run names show only what varies.
struct AxisLabels {
    mode: bool,
    loss: bool,
    alpha: bool,
    temperature: bool,
    top_p: bool,
    top_k: bool,
    targets: bool,
    missing: bool,
    cross: bool,
    teacher_precision: bool,
}

fn axis_labels(d: &crate::spec::DistillSection) -> AxisLabels {
    AxisLabels {
        mode: d.mode.values().len() > 1,
        loss: d.loss.values().len() > 1,
        alpha: d.alpha.values().len() > 1,
        temperature: d.temperature.values().len() > 1,
        top_p: d.top_p.values().len() > 1,
        top_k: d.top_k.values().len() > 1,
        targets: d.targets.values().len() > 1,
        missing: d.missing.values().len() > 1,
        cross: d
            .cross_tokenizer
            .as_ref()
            .is_some_and(|c| c.values().len() > 1),
        teacher_precision: d.teacher_precision.values().len() > 1,
    }
}

impl AxisLabels {
    fn describe(&self, p: &DistillPoint) -> String {
        let mut s = String::new();
        if self.mode {
            s += &format!("-{}", p.mode);
        }
        if self.loss {
            s += &format!("-{}", p.loss);
        }
        if self.alpha {
            s += &format!("-a{}", p.alpha.0.label());
        }
        if self.temperature {
            s += &format!("-t{}", p.temperature.0);
        }
        if self.top_p {
            s += &format!("-p{}", p.top_p.0);
        }
        if self.top_k {
            s += &format!("-k{}", p.top_k);
        }
        if self.targets {
            s += &format!("-{}", p.targets);
        }
        if self.missing {
            s += &format!("-{}", p.missing);
        }
        if let (true, Some(cross)) = (self.cross, p.cross) {
            s += &format!("-{cross}");
        }
        if self.teacher_precision {
            s += &format!("-teacher-{}", p.teacher_precision);
        }
        s
    }
}

/// The distillation settings of `[distill]`: every combination of the axes, or (design
/// `one_at_a_time`) the reference setting (each axis at its first value) and one setting per
/// other value of each axis, the rest kept at the reference.
fn distill_points(d: &DistillSection) -> Vec<DistillPoint> {
    let (modes, losses, alphas) = (d.mode.values(), d.loss.values(), d.alpha.values());
    let (temps, top_ps, top_ks) = (d.temperature.values(), d.top_p.values(), d.top_k.values());
    let (targets, missing) = (d.targets.values(), d.missing.values());
    let precisions = d.teacher_precision.values();
    let cross: Vec<Option<CrossTokenizer>> = match &d.cross_tokenizer {
        Some(axis) => axis.values().iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let reference = DistillPoint {
        mode: modes[0],
        loss: losses[0],
        alpha: alphas[0],
        temperature: temps[0],
        top_p: top_ps[0],
        top_k: top_ks[0],
        targets: targets[0],
        missing: missing[0],
        cross: cross[0],
        teacher_precision: precisions[0],
    };
    let mut points = vec![reference];
    // each axis in turn: every point so far with each value of it (grid), or the reference
    // with each other value (one at a time)
    let mut vary = |set: &dyn Fn(&mut DistillPoint, usize), n: usize| match d.design {
        Design::Grid => {
            points = points
                .iter()
                .flat_map(|p| {
                    (0..n).map(move |i| {
                        let mut q = *p;
                        set(&mut q, i);
                        q
                    })
                })
                .collect();
        }
        Design::OneAtATime => points.extend((1..n).map(|i| {
            let mut q = reference;
            set(&mut q, i);
            q
        })),
    };
    vary(&|p, i| p.mode = modes[i], modes.len());
    vary(&|p, i| p.loss = losses[i], losses.len());
    vary(&|p, i| p.alpha = alphas[i], alphas.len());
    vary(&|p, i| p.temperature = temps[i], temps.len());
    vary(&|p, i| p.top_p = top_ps[i], top_ps.len());
    vary(&|p, i| p.top_k = top_ks[i], top_ks.len());
    vary(&|p, i| p.targets = targets[i], targets.len());
    vary(&|p, i| p.missing = missing[i], missing.len());
    vary(&|p, i| p.cross = cross[i], cross.len());
    vary(
        &|p, i| p.teacher_precision = precisions[i],
        precisions.len(),
    );
    // sampled targets ignore top-p and the tail: settings that differ only there are one
    let mut seen = Vec::new();
    points
        .into_iter()
        .map(DistillPoint::normalised)
        .filter(|p| {
            let key = p.key();
            let new = !seen.contains(&key);
            if new {
                seen.push(key);
            }
            new
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::plan::{Plan, PlanOptions, RunKind};
    use crate::spec::Sweep;

    /// The plan of one 100K teacher and one 30K student (no baseline) with `[distill]` `distill`.
    fn plan_of(distill: &str) -> Plan {
        let text = format!(
            "name = \"d\"\n[teachers]\nsizes = [\"100K\"]\n[students]\nsizes = [\"30K\"]\nbaseline = false\n[distill]\n{distill}"
        );
        let sweep = Sweep::parse(Path::new("d.toml"), text).expect("valid sweep");
        Plan::build(&sweep, &PlanOptions::default()).expect("plans")
    }

    fn students(distill: &str) -> Vec<String> {
        plan_of(distill)
            .runs
            .iter()
            .filter(|r| r.kind() == RunKind::Student)
            .map(|r| r.name.clone())
            .collect()
    }

    const AXES: &str = "mode = [\"offline\", \"online\"]\nloss = [\"kl\", \"mse\", \"ce_soft\"]\ntemperature = [1.0, 2.0]\ntop_k = [32, 8]\n";

    /// `teacher_precision`: f32 keeps every id it had before the key existed; bf16 adds its own
    /// logit store (named `-bf16`, its precision in the store's configuration) and students.
    #[test]
    fn teacher_precision_adds_a_bf16_store_and_keeps_f32_ids() {
        let runs = |distill: &str| -> Vec<(String, String, String)> {
            plan_of(distill)
                .runs
                .iter()
                .map(|r| (r.name.clone(), r.id.to_string(), r.config.to_json()))
                .collect()
        };
        let plain = runs("");
        assert_eq!(plain, runs("teacher_precision = \"f32\"\n"));
        let both = runs("teacher_precision = [\"f32\", \"bf16\"]\n");
        let stores: Vec<_> = both.iter().filter(|r| r.0.starts_with("logits-")).collect();
        assert_eq!(stores.len(), 2, "{both:?}");
        let bf16 = stores
            .iter()
            .find(|r| r.0.ends_with("-bf16"))
            .expect("a bf16 store");
        assert!(bf16.2.contains("\"precision\":\"bf16\""), "{}", bf16.2);
        // the f32 store keeps its id; the bf16 one is new
        let ids = |rs: &[(String, String, String)]| -> Vec<String> {
            rs.iter()
                .filter(|r| r.0.starts_with("logits-"))
                .map(|r| r.1.clone())
                .collect()
        };
        assert!(ids(&both).contains(&ids(&plain)[0]));
        let students: Vec<_> = both
            .iter()
            .filter(|r| r.0.starts_with("student-"))
            .collect();
        assert_eq!(students.len(), 2);
        assert!(students.iter().any(|r| r.0.contains("teacher-bf16")));
        let bad = Sweep::parse(
            Path::new("d.toml"),
            "name = \"d\"\n[distill]\nteacher_precision = \"f16\"\n".into(),
        );
        assert!(bad.is_err_and(|e| e.to_string().contains("teacher_precision")));
    }

    /// f32 runs keep the ids they had before `precision` existed; f16 and bf16 runs are new.
    #[test]
    fn precision_changes_run_ids_only_when_not_f32() {
        let ids = |train: &str| -> Vec<String> {
            let text = format!(
                "name = \"d\"\n[teachers]\nsizes = [\"100K\"]\n[students]\nsizes = [\"30K\"]\n[train]\n{train}"
            );
            let sweep = Sweep::parse(Path::new("d.toml"), text).expect("valid sweep");
            let plan = Plan::build(&sweep, &PlanOptions::default()).expect("plans");
            plan.runs.iter().map(|r| r.id.to_string()).collect()
        };
        let plain = ids("");
        assert_eq!(plain, ids("precision = \"f32\"\n"));
        let half = ids("precision = \"bf16\"\n");
        assert!(plain.iter().all(|id| !half.contains(id)));
        let text = "name = \"d\"\n[teachers]\nsizes = [\"100K\"]\n[students]\nsizes = [\"30K\"]\n[train]\nprecision = \"fp8\"\n";
        let err = Sweep::parse(Path::new("d.toml"), text.into())
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("precision")));
    }

    #[test]
    fn a_grid_plans_every_combination() {
        assert_eq!(students(AXES).len(), 2 * 3 * 2 * 2);
    }

    #[test]
    fn one_at_a_time_varies_each_axis_around_the_first_values() {
        let names = students(&format!("design = \"one_at_a_time\"\n{AXES}"));
        assert_eq!(names.len(), 1 + 1 + 2 + 1 + 1, "{names:?}");
        assert!(names[0].ends_with("offline-kl-t1-k32"), "{names:?}");
        for varied in [
            "online-kl-t1-k32",
            "offline-mse-t1-k32",
            "offline-ce_soft-t1-k32",
        ] {
            assert!(
                names.iter().any(|n| n.ends_with(varied)),
                "{varied}: {names:?}"
            );
        }
        for varied in ["offline-kl-t2-k32", "offline-kl-t1-k8"] {
            assert!(
                names.iter().any(|n| n.ends_with(varied)),
                "{varied}: {names:?}"
            );
        }
        assert!(!names.iter().any(|n| n.contains("online-mse")));
    }

    /// `targets` and `missing` are axes: a sampled student reads its own store of draws, a
    /// bucket student makes its teacher's top-k store keep the tail (so every top-k student of
    /// that teacher shares it); sampled targets ignore top-p and the tail, so a grid does not
    /// plan them twice.
    #[test]
    fn targets_and_missing_are_axes_with_their_own_stores() {
        let text = "name = \"d\"\n[teachers]\nsizes = [\"100K\"]\n[students]\nsizes = [\"30K\"]\nbaseline = false\n[distill]\ndesign = \"one_at_a_time\"\ntop_k = 32\ntargets = [\"top_k\", \"sampled\"]\nmissing = [\"renormalise\", \"bucket\"]\n";
        let sweep = Sweep::parse(Path::new("d.toml"), text.into()).expect("valid sweep");
        let plan = Plan::build(&sweep, &PlanOptions::default()).expect("plans");
        let of = |kind| plan.runs.iter().filter(move |r| r.kind() == kind);
        let names: Vec<&str> = of(RunKind::Student).map(|r| r.name.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        let stores: Vec<&str> = of(RunKind::Logits).map(|r| r.name.as_str()).collect();
        assert_eq!(stores.len(), 2, "{stores:?}");
        assert!(
            stores.iter().any(|n| n.ends_with("-k32-tail")),
            "{stores:?}"
        );
        assert!(
            stores.iter().any(|n| n.ends_with("-sampled32")),
            "{stores:?}"
        );
        let per_token = |suffix: &str| {
            of(RunKind::Logits)
                .find(|r| r.name.ends_with(suffix))
                .map(|r| r.disk_bytes / r.config.tokens)
        };
        // byte vocabulary: 32 × (8 + 8) bits + an 8-bit tail; 32 × (8 + 8 + 6) bits
        assert_eq!(per_token("-k32-tail"), Some(65));
        assert_eq!(per_token("-sampled32"), Some(88));
        // a grid of both axes: sampled × bucket is sampled × renormalise
        let grid = students(
            "top_k = 32\ntargets = [\"top_k\", \"sampled\"]\nmissing = [\"renormalise\", \"bucket\"]\n",
        );
        assert_eq!(grid.len(), 3, "{grid:?}");
        // draws must be a number
        let text = "name = \"d\"\n[teachers]\nsizes = [\"100K\"]\n[students]\nsizes = [\"30K\"]\n[distill]\ntop_k = \"all\"\ntargets = \"sampled\"\n";
        let sweep = Sweep::parse(Path::new("d.toml"), text.into()).expect("valid sweep");
        let err = Plan::build(&sweep, &PlanOptions::default())
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("sampled") && e.contains("top_k")));
    }
}
