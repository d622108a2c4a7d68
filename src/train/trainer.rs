//! The training loop: AdamW with decoupled weight decay, global gradient-norm clipping, a
//! scheduled learning rate, periodic held-out evaluation, checkpoints, and divergence detection.
//! It reports progress as [`TrainEvent`]s and never prints; the loss comes from an
//! [`Objective`], so distillation plugs in without changing the loop.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsAccumulator, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, FloatDType, Tensor};

use super::TrainConfig;
use super::checkpoint::{self, CheckpointError, CheckpointState};
use super::objective::{Objective, head_input, summed_cross_entropy};
use super::precision::{self, LossScale, UnsupportedPrecision};
use super::schedule;
use crate::data::DataConfig;
use crate::data::{Batch, Batcher, Prepared, Stream, batch_tensors, eval_batches, prefetch};
use crate::model::{Transformer, TransformerConfig};
use crate::spec::Backend;

/// Rows per held-out evaluation batch (fewer at large vocabularies, see [`eval_rows`]).
const EVAL_BATCH: usize = 16;

/// Rows per held-out batch for `context` × `vocab` logits: 16, or fewer when that many rows
/// would hold more than 2^25 logits (128 MiB per tensor; a real tokenizer's 50K–150K
/// vocabulary would otherwise need gigabytes per evaluation step).
pub(crate) fn eval_rows(context: usize, vocab: usize) -> usize {
    ((1usize << 25) / (context * vocab).max(1)).clamp(1, EVAL_BATCH)
}

/// Progress of a training run.
#[derive(Debug, Clone, PartialEq)]
pub enum TrainEvent {
    /// Training begins (or resumes at `start_step`).
    Started {
        /// Total optimiser steps.
        steps: u64,
        /// First step to run (0, or where a checkpoint left off).
        start_step: u64,
    },
    /// The mean training loss over the last logging interval.
    Step {
        /// Steps completed.
        step: u64,
        /// Training tokens consumed.
        tokens: u64,
        /// Mean loss (nats/token) over the interval.
        loss: f64,
        /// Learning rate of the last step.
        lr: f64,
        /// Throughput over the interval.
        tokens_per_s: f64,
        /// Training wall time so far.
        wall_s: f64,
    },
    /// A held-out evaluation.
    Eval {
        /// Steps completed.
        step: u64,
        /// Training tokens consumed.
        tokens: u64,
        /// Held-out cross-entropy (nats/token).
        loss: f64,
        /// Held-out bits per byte.
        bpb: f64,
        /// Training wall time so far.
        wall_s: f64,
    },
    /// A checkpoint was written.
    Checkpoint {
        /// Steps completed.
        step: u64,
    },
}

/// A finished training run.
pub struct TrainOutcome {
    /// The trained model (plain, no autodiff).
    pub model: Transformer,
    /// Final held-out loss (nats/token).
    pub val_loss: f64,
    /// Final held-out bits per byte.
    pub val_bpb: f64,
    /// Mean training loss over the last logging interval.
    pub train_loss: f64,
    /// Steps run in total.
    pub steps: u64,
    /// Tokens trained on.
    pub tokens: u64,
    /// Training wall time (all sessions).
    pub wall_s: f64,
    /// Mean training throughput.
    pub tokens_per_s: f64,
}

/// Why training stopped early.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The loss became NaN or infinite.
    #[error(
        "training diverged at step {step}: loss is {loss}\n\nhint: lower `[train] lr` (or this model's own `lr` in its `models` entry), or raise `warmup`"
    )]
    Diverged {
        /// The step.
        step: u64,
        /// The loss value.
        loss: f64,
    },
    /// A checkpoint could not be written or read.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The run has no training data.
    #[error("{0}")]
    NoData(String),
    /// A stop was requested; the run checkpointed at `step`.
    #[error("interrupted at step {step} (checkpoint written)")]
    Interrupted {
        /// Steps completed.
        step: u64,
    },
    /// The device cannot compute in the run's precision.
    #[error(transparent)]
    Precision(#[from] UnsupportedPrecision),
}

/// One training run's inputs.
pub struct TrainJob<'a> {
    /// The run id (checkpoints are tied to it).
    pub run_id: &'a str,
    /// The model's architecture.
    pub model: TransformerConfig,
    /// The data settings: context, sequences per step and the seed (of the data order and of
    /// initialisation).
    pub data_config: &'a DataConfig,
    /// The optimiser and loop settings.
    pub train: &'a TrainConfig,
    /// Its data.
    pub data: &'a Prepared,
    /// The plain device (training uses its autodiff twin).
    pub device: &'a Device,
    /// The backend `device` belongs to (for messages).
    pub backend: Backend,
    /// The checkpoint file.
    pub checkpoint: &'a Path,
    /// Set to stop after the current step (with a checkpoint).
    pub stop: &'a AtomicBool,
}

/// burn's device seed is process-wide and parameters are initialised lazily, so two runs
/// initialising models at once (`run --jobs N`) would draw from one another's stream.
///
/// Seeding and materialising every parameter happen under this lock.
static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Builds a fresh model of `model` on `device`, its weights drawn from `seed`.
///
/// The weights depend only on the seed, whatever other threads of the process do meanwhile, and
/// whatever the backend: they are always drawn on the CPU (burn's GPU backends have random
/// generators of their own, so a model drawn on a GPU would start somewhere else than the same run
/// on the CPU) and then copied to `device`.
pub fn init_model(model_config: &TransformerConfig, seed: u64, device: &Device) -> Transformer {
    let host = Device::flex();
    let on_host = device.clone().without_autodiff() == host;
    let drawn = {
        let _alone = INIT.lock().unwrap_or_else(|e| e.into_inner());
        let at = if on_host { device } else { &host };
        at.seed(seed);
        let model = model_config.init(at);
        model.visit(&mut Materialize);
        model
    };
    if on_host {
        return drawn;
    }
    let model = model_config.init(device).load_record(drawn.into_record());
    model.visit(&mut Materialize);
    model
}

/// Forces every lazily initialised parameter to draw its weights now.
struct Materialize;

impl ModuleVisitor for Materialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let _ = param.val();
    }
}

/// AdamW's ε: the same for every run.
pub(crate) const ADAM_EPSILON: f32 = 1e-8;

/// A fresh AdamW (decoupled weight decay) with the run's β and weight decay.
pub(crate) fn optimizer(train: &TrainConfig) -> ModuleOptimizer {
    AdamWConfig::new()
        .with_beta_1(train.betas[0] as f32)
        .with_beta_2(train.betas[1] as f32)
        .with_epsilon(ADAM_EPSILON)
        .with_weight_decay(train.weight_decay as f32)
        .init()
}

/// The run's training settings, with its model, optimiser and progress: fresh from its seed, or
/// from its checkpoint when one exists.
pub(crate) fn start_or_resume<'a>(
    job: &TrainJob<'a>,
) -> Result<
    (
        &'a TrainConfig,
        Transformer,
        ModuleOptimizer,
        CheckpointState,
    ),
    TrainError,
> {
    let train = job.train;
    precision::check_supported(job.device, job.backend, train.precision)?;
    let ad = job.device.clone().autodiff();
    let mut model = init_model(&job.model, job.data_config.seed, &ad);
    let mut optim = optimizer(train);
    let mut state = CheckpointState {
        run_id: job.run_id.into(),
        step: 0,
        tokens: 0,
        wall_s: 0.0,
        log_loss_sum: 0.0,
        log_steps: 0,
        loss_scale: LossScale::initial(train.precision).map(|s| s.scale),
        loss_scale_good_steps: 0,
    };
    if let Some(saved) = checkpoint::load(job.checkpoint, job.run_id)? {
        model = saved.model(model)?;
        optim = saved.optimizer(optim)?;
        state = saved.state;
    }
    Ok((train, model, optim, state))
}

/// Trains `job` with `objective`, reporting through `on_event`.
pub fn train(
    job: &TrainJob,
    objective: &mut dyn Objective,
    on_event: &mut dyn FnMut(TrainEvent),
) -> Result<TrainOutcome, TrainError> {
    let cfg = job.data_config;
    let (train, mut model, mut optim, mut state) = start_or_resume(job)?;
    let ad = job.device.clone().autodiff();
    let compute = precision::compute_dtype(train.precision);
    let mut scaler = state.loss_scale.map(|scale| LossScale {
        scale,
        good_steps: state.loss_scale_good_steps,
    });
    let (context, rows) = (cfg.context as usize, cfg.batch_seqs as usize);
    let batcher = train_batcher(job, context, rows)?;
    let steps = train.steps;
    let tokens_per_step = (context * rows) as u64;
    let head_chunk = train.head_chunk_for(model.vocab());
    let micro_rows = train.micro_rows(cfg.batch_seqs) as usize;
    let eval_every = steps.div_ceil(train.evals.max(1)).max(1);
    on_event(TrainEvent::Started {
        steps,
        start_step: state.step,
    });
    let session = Instant::now();
    let wall_before = state.wall_s;
    let wall = |s: &Instant| wall_before + s.elapsed().as_secs_f64();
    let mut interval = Interval {
        loss: state.log_loss_sum,
        steps: state.log_steps,
        start: Instant::now(),
        timed_steps: 0, // steps of this session in the interval, for tokens/s
    };
    let mut last = LastLosses {
        train: f64::NAN,
        val: f64::NAN,
        val_bpb: f64::NAN,
    };
    let first = state.step;
    // batches are built ahead on another thread while the step runs
    let trained = prefetch(batcher, first..steps, |batches| -> Result<(), TrainError> {
        for (step, batch) in (first..steps).zip(batches) {
            if job.stop.load(Ordering::Relaxed) {
                let wall_s = wall(&session);
                state = checkpoint_state(state, step, tokens_per_step, wall_s, &interval, scaler);
                checkpoint::save(job.checkpoint, &state, &model, Some(&optim))?;
                return Err(TrainError::Interrupted { step });
            }
            let lr = schedule::value_at(&train.lr, step, steps);
            let loss = train_step(
                &mut model,
                &mut optim,
                objective,
                &batch,
                (step, steps),
                Update {
                    lr,
                    grad_clip: train.grad_clip,
                    compute,
                    head_chunk,
                    micro_rows,
                    scaler: scaler.as_mut(),
                },
                &ad,
            )?;
            interval.add(loss);
            let done = step + 1;
            if done % train.log_every == 0 || done == steps {
                let secs = interval.start.elapsed().as_secs_f64().max(1e-9);
                let mean = interval.loss / interval.steps as f64;
                last.train = mean;
                on_event(TrainEvent::Step {
                    step: done,
                    tokens: done * tokens_per_step,
                    loss: mean,
                    lr,
                    tokens_per_s: (interval.timed_steps * tokens_per_step) as f64 / secs,
                    wall_s: wall(&session),
                });
                interval.restart();
            }
            if done % eval_every == 0 || done == steps {
                let (loss, bpb) = evaluate_val(&model.valid(), job, context);
                (last.val, last.val_bpb) = (loss, bpb);
                on_event(TrainEvent::Eval {
                    step: done,
                    tokens: done * tokens_per_step,
                    loss,
                    bpb,
                    wall_s: wall(&session),
                });
            }
            if done % train.checkpoint_every == 0 || done == steps {
                let wall_s = wall(&session);
                state = checkpoint_state(state, done, tokens_per_step, wall_s, &interval, scaler);
                checkpoint::save(job.checkpoint, &state, &model, Some(&optim))?;
                on_event(TrainEvent::Checkpoint { step: done });
            }
        }
        Ok(())
    });
    trained?;
    let wall_s = wall(&session);
    let model = model.valid();
    let (val_loss, val_bpb) = if last.val.is_nan() {
        evaluate_val(&model, job, context)
    } else {
        (last.val, last.val_bpb)
    };
    Ok(TrainOutcome {
        model,
        val_loss,
        val_bpb,
        train_loss: last.train,
        steps,
        tokens: steps * tokens_per_step,
        wall_s,
        tokens_per_s: (steps * tokens_per_step) as f64 / wall_s.max(1e-9),
    })
}

/// The batches of `job`'s training split, or an error when it is shorter than one sequence.
fn train_batcher<'a>(
    job: &'a TrainJob,
    context: usize,
    rows: usize,
) -> Result<Batcher<'a>, TrainError> {
    let cfg = job.data_config;
    Batcher::new(&job.data.train, context, rows, cfg.seed, job.data.shuffle).ok_or_else(|| {
        TrainError::NoData(format!(
            "the training split has fewer than {} tokens",
            context + 1
        ))
    })
}

/// The running logging interval: its summed loss and steps (carried across a resume) and
/// this session's share of it, for tokens/s.
struct Interval {
    /// Summed training loss since the last log line.
    loss: f64,
    /// Steps since the last log line.
    steps: u64,
    /// When this session's part of the interval began.
    start: Instant,
    /// Steps of this session in the interval.
    timed_steps: u64,
}

impl Interval {
    /// Counts one step's loss.
    fn add(&mut self, loss: f64) {
        self.loss += loss;
        self.steps += 1;
        self.timed_steps += 1;
    }

    /// Starts a new interval after a log line.
    fn restart(&mut self) {
        (self.loss, self.steps, self.start) = (0.0, 0, Instant::now());
        self.timed_steps = 0;
    }
}

/// The last losses reported: the training loss of the last interval and the last held-out
/// evaluation.
struct LastLosses {
    /// Mean training loss over the last logging interval.
    train: f64,
    /// Held-out loss (nats/token).
    val: f64,
    /// Held-out bits per byte.
    val_bpb: f64,
}

/// `state` brought to `step`: its tokens, wall time, the logging interval under way and the
/// loss scale, so a resume continues exactly.
fn checkpoint_state(
    state: CheckpointState,
    step: u64,
    tokens_per_step: u64,
    wall_s: f64,
    interval: &Interval,
    scaler: Option<LossScale>,
) -> CheckpointState {
    CheckpointState {
        step,
        tokens: step * tokens_per_step,
        wall_s,
        log_loss_sum: interval.loss,
        log_steps: interval.steps,
        loss_scale: scaler.map(|s| s.scale),
        loss_scale_good_steps: scaler.map_or(0, |s| s.good_steps),
        ..state
    }
}

/// The held-out loss and bits per byte of `model` on `job`'s validation split.
fn evaluate_val(
    model: &dyn crate::model::LanguageModel,
    job: &TrainJob,
    context: usize,
) -> (f64, f64) {
    evaluate(
        model,
        &job.data.val,
        context,
        job.device,
        job.data.info.val_bytes_per_token,
    )
}

/// How one optimiser step updates the model.
pub(crate) struct Update<'a> {
    /// Learning rate.
    pub(crate) lr: f64,
    /// Global gradient-norm clip (0 = off).
    pub(crate) grad_clip: f64,
    /// The dtype of the matrix products.
    pub(crate) compute: FloatDType,
    /// The f16 loss scale, if any.
    pub(crate) scaler: Option<&'a mut LossScale>,
    /// Positions per chunk of the fused head and loss.
    pub(crate) head_chunk: usize,
    /// Rows per micro-batch (the batch's rows, or more, for one pass).
    pub(crate) micro_rows: usize,
}

/// One optimiser step; returns the loss before the update.
///
/// The batch's gradients are summed over micro-batches of `update.micro_rows` rows (one pass when
/// the batch fits), each micro-batch's mean loss weighted by its share of the positions, so the
/// step is the whole batch's. With a loss scale, the scaled loss is differentiated, the gradients
/// are unscaled (in the same pass as clipping), and a step whose gradients overflowed is skipped.
pub(crate) fn train_step(
    model: &mut Transformer,
    optim: &mut ModuleOptimizer,
    objective: &mut dyn Objective,
    batch: &Batch,
    (step, steps): (u64, u64),
    update: Update,
    device: &Device,
) -> Result<f64, TrainError> {
    let scale = update.scaler.as_ref().map_or(1.0, |s| s.scale);
    let pass = Pass {
        at: (step, steps),
        compute: update.compute,
        head_chunk: update.head_chunk,
        scale,
        device,
    };
    let (value, mut grads) = if update.micro_rows >= batch.batch {
        pass.backward(model, objective, batch, 1.0)?
    } else {
        pass.accumulate(model, objective, batch, update.micro_rows)?
    };

    // one clip and one update for the whole batch
    let mut factor = 1.0 / scale;
    if update.grad_clip > 0.0 || update.scaler.is_some() {
        let norm = global_norm(&*model, &grads).map(|n| n / scale);
        if let Some(scaler) = update.scaler
            && !scaler.update(norm.is_some_and(f64::is_finite))
        {
            return Ok(value); // overflow: skip this step, retry at a smaller scale
        }
        if let Some(norm) = norm
            && update.grad_clip > 0.0
            && norm.is_finite()
            && norm > update.grad_clip
        {
            factor *= update.grad_clip / (norm + 1e-6);
        }
    }
    if factor != 1.0 {
        model.visit(&mut Scale {
            grads: &mut grads,
            factor,
        });
    }
    *model = optim.step(update.lr, model.clone(), grads);
    Ok(value)
}

/// What every forward and backward pass of one optimiser step shares.
struct Pass<'a> {
    /// The step and the run's steps (schedules read them).
    at: (u64, u64),
    compute: FloatDType,
    head_chunk: usize,
    /// The f16 loss scale (1 without one).
    scale: f64,
    device: &'a Device,
}

impl Pass<'_> {
    /// The loss of `part` (its mean over positions) and the gradients of `weight` × scale ×
    /// that loss. A non-finite loss stops the run.
    fn backward(
        &self,
        model: &Transformer,
        objective: &mut dyn Objective,
        part: &Batch,
        weight: f64,
    ) -> Result<(f64, GradientsParams), TrainError> {
        let (step, steps) = self.at;
        let (inputs, targets) = batch_tensors(part, self.device);
        let positions = part.batch * part.context;
        let head = head_input(model, inputs, self.compute, self.head_chunk);
        let loss = objective.loss(step, steps, part, head, targets.reshape([positions]));
        let factor = weight * self.scale;
        let scaled = if factor == 1.0 {
            loss.clone()
        } else {
            loss.clone().mul_scalar(factor)
        };
        // Why the value is read after `backward`: on a GPU, reading it first would make the
        // host wait for the forward pass before queueing the backward one (a stall every
        // micro-batch); read now, the device runs both back to back. A non-finite loss still
        // stops the run before the optimiser steps.
        let grads = scaled.backward();
        let value = loss.into_scalar::<f32>() as f64;
        if !value.is_finite() {
            return Err(TrainError::Diverged { step, loss: value });
        }
        Ok((value, GradientsParams::from_grads(grads, model)))
    }

    /// The whole batch's loss and gradients, summed over micro-batches of `rows` rows: each
    /// weighted by its share of the batch's positions, so a micro-batch's mean loss adds up to the
    /// batch's mean.
    ///
    /// Only one micro-batch's activations are alive at a time.
    fn accumulate(
        &self,
        model: &Transformer,
        objective: &mut dyn Objective,
        batch: &Batch,
        rows: usize,
    ) -> Result<(f64, GradientsParams), TrainError> {
        let total = (batch.batch * batch.context).max(1) as f64;
        let mut summed = GradientsAccumulator::<Transformer>::new();
        let mut value = 0.0;
        for part in batch.micro_batches(rows) {
            let weight = (part.batch * part.context) as f64 / total;
            let (loss, grads) = self.backward(model, objective, &part, weight)?;
            value += weight * loss;
            summed.accumulate(model, grads);
        }
        Ok((value, summed.grads()))
    }
}

/// The global L2 norm of all gradients (`None` when there are none).
fn global_norm(model: &Transformer, grads: &GradientsParams) -> Option<f64> {
    let mut norm = SquaredNorm { grads, total: None };
    model.visit(&mut norm);
    norm.total
        .map(|total| (total.into_scalar::<f32>() as f64).sqrt())
}

struct SquaredNorm<'a> {
    grads: &'a GradientsParams,
    total: Option<Tensor<1>>,
}

impl ModuleVisitor for SquaredNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(g) = self.grads.get::<D>(param.id) {
            let sq = g.square().sum();
            self.total = Some(match self.total.take() {
                Some(t) => t + sq,
                None => sq,
            });
        }
    }
}

struct Scale<'a> {
    grads: &'a mut GradientsParams,
    factor: f64,
}

impl ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(g) = self.grads.remove::<D>(param.id) {
            self.grads.register(param.id, g.mul_scalar(self.factor));
        }
    }
}

/// Held-out cross-entropy (nats/token) and bits per byte of `model` on every window of `val`.
pub fn evaluate(
    model: &dyn crate::model::LanguageModel,
    val: &Stream,
    context: usize,
    device: &Device,
    bytes_per_token: f64,
) -> (f64, f64) {
    let (mut nll, mut count) = (0.0f64, 0usize);
    let chunk = crate::kernels::default_head_chunk(model.vocab());
    for batch in eval_batches(val, context, eval_rows(context, model.vocab())) {
        let (inputs, targets) = batch_tensors(&batch, device);
        let losses = summed_cross_entropy(model, inputs, targets, chunk);
        nll += losses.into_scalar::<f32>() as f64;
        count += batch.batch * batch.context;
    }
    let loss = nll / count.max(1) as f64;
    (
        loss,
        loss / std::f64::consts::LN_2 / bytes_per_token.max(1e-9),
    )
}
