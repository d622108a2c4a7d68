//! Planning: the files a sweep names and the vocabulary they decide, grid expansion into the
//! run graph (each run's resolved configuration and id), cost estimates, design checks, and
//! the plan's table, JSON and CSV renderings.

mod checks;
mod cost;
mod cost_model;
mod files;
mod grid;
pub mod memory;
mod render;
mod run;

pub(crate) use checks::{DesignWarning, corpus_checks, design_checks};
pub use checks::{
    LossPrior, MIN_STEPS, PLATEAU_SHARE, Priors, TStarPrior, TeacherLossPrior, measured_floor,
    passes, plateau_line,
};
pub use cost::{Throughput, checkpoint_bytes};
pub(crate) use cost::{Totals, default_flops_per_s, forward_flops};
pub use cost_model::Calibration;
pub(crate) use cost_model::{StepWork, step_work};
pub use files::resolve;
pub(crate) use files::resolve_files;
pub use render::{PlanFormat, render};
pub(crate) use run::{DistillConfig, PretrainedSource, teacher_candidates, tuned_on};
pub use run::{Run, RunConfig, RunId, RunKind};

use crate::data::DataConfig;
use crate::model::ModelShape;
use crate::spec::units::format_bytes;
use crate::spec::{SpecError, Sweep};

/// Options that come from the command line rather than the sweep file.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Overrides the FLOP/s used for time estimates (6·N·D at that rate only).
    pub flops_per_s: Option<f64>,
    /// Prices of the work of a step on this backend and machine (fitted on finished runs, or
    /// probed); without it (and without a FLOP/s) the stated defaults of the backend.
    pub calibration: Option<Calibration>,
}

/// The run graph of a sweep with its totals.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The sweep's name.
    pub sweep_name: String,
    /// SHA-256 of the sweep file.
    pub sweep_hash: String,
    /// Runs in graph order (teachers, logit passes, students, baselines).
    pub runs: Vec<Run>,
    /// Sweep-wide numbers.
    pub totals: Totals,
    /// The prepared corpus, once known ([`Plan::attach_corpus`]): passes over its training split
    /// are shown per run.
    pub corpus: Option<crate::data::CorpusInfo>,
    /// Design warnings (see `checks`).
    pub warnings: Vec<DesignWarning>,
    /// What the plan decided that a user should know, one line each (a padded teacher's
    /// vocabulary cut to its tokenizer's).
    pub notes: Vec<String>,
    /// FLOPs of training a teacher per student (the saving's reference).
    naive_flops: f64,
    /// What the time estimates were priced with.
    calibration: Calibration,
}

impl Plan {
    /// Expands `sweep` into its run graph and checks it against the sweep's limits.
    pub fn build(sweep: &Sweep, options: &PlanOptions) -> Result<Plan, SpecError> {
        let resolved = resolve_files(sweep)?;
        let mut expansion = grid::expand(sweep, &resolved)?;
        let estimates: Vec<_> = expansion
            .runs
            .iter()
            .map(|r| memory_of(r, &expansion.runs))
            .collect();
        for (run, m) in expansion.runs.iter_mut().zip(estimates) {
            run.memory = m;
        }
        let backend = sweep.file.backend;
        let calibration = match (options.flops_per_s, sweep.file.estimate.flops_per_s) {
            (Some(f), _) => Calibration::flops_only(f, "--flops-per-s"),
            (None, Some(f)) => Calibration::flops_only(f.0, "[estimate] flops_per_s"),
            (None, None) => options
                .calibration
                .clone()
                .unwrap_or_else(|| Calibration::stated(backend)),
        };
        let seconds = estimated_seconds(&expansion.runs, &calibration);
        let flops: f64 = expansion.runs.iter().map(|r| r.flops).sum();
        let throughput = Throughput {
            flops_per_s: if seconds > 0.0 { flops / seconds } else { 0.0 },
            source: calibration.source.clone(),
        };
        let mut totals = cost::totals(&expansion.runs, expansion.naive_flops, throughput);
        totals.estimated_seconds = seconds;
        let plan = Plan {
            sweep_name: sweep.file.name.to_string(),
            sweep_hash: sweep.hash.clone(),
            runs: expansion.runs,
            totals,
            corpus: None,
            warnings: Vec::new(),
            notes: resolved.notes,
            naive_flops: expansion.naive_flops,
            calibration,
        };
        if plan.text_corpus().is_none() {
            // A real-text corpus's stores are sized (smaller) once it is known: checked then.
            plan.check_disk(sweep)?;
        }
        plan.check_memory(sweep)?;
        Ok(plan)
    }

    /// The data settings of the sweep's real-text corpus (`None` for the synthetic corpus).
    pub fn text_corpus(&self) -> Option<&DataConfig> {
        self.runs
            .iter()
            .map(|r| &r.config.data)
            .find(|d| d.corpus != crate::spec::CorpusKind::Synthetic)
    }

    /// Adds the experimental-design warnings under `priors` (after [`Plan::attach_corpus`], so
    /// that the unigram entropy is known).
    pub fn check_design(&mut self, priors: &Priors) {
        let warnings = design_checks(self, priors);
        self.warnings.extend(warnings);
        self.notes.extend(checks::one_teacher_budget(self));
    }

    /// Records the prepared corpus and adds its design warnings. A real-text corpus sizes the
    /// logit stores exactly, and the plan is then checked against `sweep`'s `[limits] disk`.
    pub fn attach_corpus(
        &mut self,
        corpus: crate::data::CorpusInfo,
        sweep: &Sweep,
    ) -> Result<(), SpecError> {
        let sized = corpus.files > 0 && corpus.train_tokens > 0;
        if sized {
            self.size_stores(corpus.train_tokens);
        }
        self.warnings.extend(corpus_checks(self, &corpus));
        self.corpus = Some(corpus);
        if sized {
            self.check_disk(sweep)?;
        }
        Ok(())
    }

    /// Sizes the logit stores of a real-text corpus of `train_tokens` training tokens
    /// exactly: the union of the windows their students read (shared across seeds), not the
    /// sum of every stream that [`grid`] assumes before the corpus is known; then the totals.
    fn size_stores(&mut self, train_tokens: u64) {
        for run in self.runs.iter_mut().filter(|r| r.kind() == RunKind::Logits) {
            let Some(logits) = run.config.logits.as_ref() else {
                continue;
            };
            let context = run.config.data.context.max(1);
            let windows = train_tokens.saturating_sub(1) / context;
            let mut positions = crate::distill::logits_run::store_positions(
                &logits.reads,
                Some(windows),
                true,
                context,
            );
            if let (true, Some(students)) = (logits.aligned, logits.students.as_ref()) {
                // the students' positions in the teacher's tokens (the corpus read is theirs)
                positions = grid::aligned_positions(
                    positions,
                    students,
                    &run.config.data,
                    Some(train_tokens),
                );
            }
            let layout =
                crate::distill::store::Layout::of(run.config.data.vocab, &logits.truncation)
                    .aligned(logits.aligned);
            run.config.tokens = positions;
            run.config_json = run.config.to_json();
            run.flops = forward_flops(run.params.non_embedding, positions);
            run.disk_bytes = layout.bytes_per_token().saturating_mul(positions);
        }
        let seconds = estimated_seconds(&self.runs, &self.calibration);
        let flops: f64 = self.runs.iter().map(|r| r.flops).sum();
        let throughput = Throughput {
            flops_per_s: if seconds > 0.0 { flops / seconds } else { 0.0 },
            source: self.calibration.source.clone(),
        };
        self.totals = cost::totals(&self.runs, self.naive_flops, throughput);
        self.totals.estimated_seconds = seconds;
    }

    /// The run with id `id`.
    pub fn run(&self, id: &RunId) -> Option<&Run> {
        self.runs.iter().find(|r| &r.id == id)
    }

    /// The run with the largest predicted peak memory.
    pub fn largest_memory(&self) -> Option<&Run> {
        self.runs.iter().max_by_key(|r| r.memory.total())
    }

    /// Refuses a plan whose largest run would not fit `[limits] memory`, naming the run and
    /// what would shrink it.
    fn check_memory(&self, sweep: &Sweep) -> Result<(), SpecError> {
        let (Some(limit), Some(run)) = (&sweep.file.limits.memory, self.largest_memory()) else {
            return Ok(());
        };
        let budget = limit.get_ref().0;
        let m = &run.memory;
        if m.total() <= budget {
            return Ok(());
        }
        let hint = if m.head >= m.activations.max(m.state) {
            "lower `[train] head_chunk` (one chunk of logits is the largest part) or `[train] batch_tokens`".to_string()
        } else if m.activations >= m.state {
            match self.fitting_micro_batch(run, budget) {
                Some(tokens) => format!(
                    "set `[train] micro_batch_tokens = {tokens}` (the largest micro-batch that fits: the same batch, accumulated; the activations kept for the backward pass are the largest part), or lower `[train] batch_tokens`"
                ),
                None => "lower `[train] batch_tokens` (the activations kept for the backward pass are the largest part)".to_string(),
            }
        } else {
            "use smaller models, or raise the limit (weights, gradients and optimiser state are the largest part)".to_string()
        };
        Err(sweep
            .error_at(
                limit.span(),
                "limits.memory",
                format!(
                    "run `{}` needs about {} of memory at its peak ({} of weights and optimiser state, {} of activations, {} in the head{}) but the limit is {}",
                    run.name,
                    format_bytes(m.total() as f64),
                    format_bytes(m.state as f64),
                    format_bytes(m.activations as f64),
                    format_bytes(m.head as f64),
                    if m.teacher > 0 { format!(", {} for its teacher's targets", format_bytes(m.teacher as f64)) } else { String::new() },
                    format_bytes(budget as f64)
                ),
            )
            .with_hint(hint))
    }

    /// The largest micro-batch (in tokens, whole sequences) with which `run`'s training step
    /// would fit `budget`, when its batch does not and accumulation would help.
    fn fitting_micro_batch(&self, run: &Run, budget: u64) -> Option<u64> {
        let train = run.config.train.as_ref()?;
        if run.config.kind == RunKind::Logits || run.config.model.pretrained.is_some() {
            return None;
        }
        let rows = train.micro_rows(run.config.data.batch_seqs);
        (1..rows)
            .rev()
            .find(|&r| memory_at(run, &self.runs, r).total() <= budget)
            .map(|r| r * run.config.data.context)
    }

    /// Refuses a plan whose logit stores and checkpoints would not fit `[limits] disk`.
    ///
    /// For a real-text corpus it is called from [`Plan::attach_corpus`], when the stores are sized
    /// as the union of the windows their students read (before, only an upper bound is known).
    fn check_disk(&self, sweep: &Sweep) -> Result<(), SpecError> {
        let Some(limit) = &sweep.file.limits.disk else {
            return Ok(());
        };
        let budget = limit.get_ref().0;
        let t = &self.totals;
        let needed = t.logit_store_bytes.saturating_add(t.checkpoint_bytes);
        if needed <= budget {
            return Ok(());
        }
        Err(sweep
            .error_at(
                limit.span(),
                "limits.disk",
                format!(
                    "the plan needs {} on disk ({} of logit stores + {} of checkpoints) but the budget is {}",
                    format_bytes(needed as f64),
                    format_bytes(t.logit_store_bytes as f64),
                    format_bytes(t.checkpoint_bytes as f64),
                    format_bytes(budget as f64)
                ),
            )
            .with_hint("raise `[limits] disk`, lower `top_k`, or shrink the student token budgets"))
    }
}

/// Seconds to run `runs` one at a time at the prices of `calibration` (an online student also
/// pays its teacher's forward passes).
pub fn estimated_seconds(runs: &[Run], calibration: &Calibration) -> f64 {
    let shapes: std::collections::HashMap<&RunId, &ModelShape> = runs
        .iter()
        .map(|r| (&r.id, &r.config.model.shape))
        .collect();
    runs.iter()
        .map(|r| {
            let teacher = r
                .config
                .distill
                .as_ref()
                .and_then(|d| shapes.get(&d.teacher).copied());
            calibration.run_seconds(&r.config, teacher)
        })
        .sum()
}

/// The predicted peak of `run`, given the plan's runs (an online student's teacher is one of
/// them).
fn memory_of(run: &Run, runs: &[Run]) -> memory::MemoryEstimate {
    let rows = run
        .config
        .train
        .as_ref()
        .map_or(run.config.data.batch_seqs, |t| {
            t.micro_rows(run.config.data.batch_seqs)
        });
    memory_at(run, runs, rows)
}

/// The predicted peak of `run` when a training step holds `rows` sequences at a time (its
/// micro-batch): activations, head chunks and teacher targets scale with them; accumulating
/// adds one more copy of the gradients (the running sum beside a micro-batch's own).
fn memory_at(run: &Run, runs: &[Run], rows: u64) -> memory::MemoryEstimate {
    let c = &run.config;
    let shape = &c.model.shape;
    let positions = c.data.batch_seqs.saturating_mul(c.data.context);
    let micro_positions = rows.min(c.data.batch_seqs).saturating_mul(c.data.context);
    let chunk = c.train.as_ref().map_or_else(
        || crate::kernels::default_head_chunk(shape.vocab as usize),
        |t| t.head_chunk_for(shape.vocab as usize),
    ) as u64;
    let mut estimate = match c.kind {
        RunKind::Logits => memory::forward_pass(shape, positions, chunk),
        _ if c.model.pretrained.is_some() => memory::forward_pass(shape, positions, chunk),
        _ => {
            let width = c
                .distill
                .as_ref()
                .map_or(0, |d| d.truncation.top_k.kept(shape.vocab).min(256));
            let mut step = memory::training_step(shape, micro_positions, chunk, width);
            if micro_positions < positions {
                step.state = step
                    .state
                    .saturating_add(shape.params().total.saturating_mul(4));
            }
            step.teacher = match &c.distill {
                Some(d) if d.mode == crate::spec::DistillMode::Online => runs
                    .iter()
                    .find(|r| r.id == d.teacher)
                    .map_or(0, |teacher| {
                        let t = &teacher.config.model.shape;
                        let tchunk = crate::kernels::default_head_chunk(t.vocab as usize) as u64;
                        let pass = memory::forward_pass(t, micro_positions, tchunk);
                        pass.total() - pass.base
                    }),
                Some(_) => memory::STORE_READER_BYTES,
                None => 0,
            };
            step
        }
    };
    if c.data.tokenizer_file.is_some() {
        estimate.base += memory::TOKENIZER_FILE_BYTES;
    }
    estimate
}
