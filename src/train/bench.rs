//! Throughput of one model shape on one device, measured through the real code paths: a
//! training run (`train`, the loop every run uses, on the synthetic corpus) or a logit pass
//! (the teacher forward and truncation a `logits` run does). Steps before `warmup` (kernel
//! compilation and autotuning on a GPU) are left out; the median of the rest is reported, with
//! model FLOP/s and MFU ([`super::utilization`]).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use burn::tensor::Device;
use serde::Serialize;

use super::TrainConfig;
use super::trainer::{TrainEvent, TrainJob, init_model, train};
use super::utilization::{Utilization, forward_flops_per_token, train_flops_per_token};
use super::{NextToken, TrainError};
use crate::data::{self, Batcher, DataConfig, DataError};
use crate::distill::{TruncateOn, teacher_support};
use crate::model::{ModelShape, TransformerConfig};
use crate::spec::{Backend, CorpusKind, Precision, Schedule, TopK};

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchSpec {
    /// The model.
    pub shape: ModelShape,
    /// Sequence length.
    pub context: u64,
    /// Sequences per step.
    pub batch_seqs: u64,
    /// Steps measured after the warm-up.
    pub steps: u64,
    /// Steps run first and not measured.
    pub warmup: u64,
    /// Training precision.
    pub precision: Precision,
    /// `Some(k)`: a logit pass keeping the top k (and the top-p nucleus of
    /// [`BenchSpec::logits_top_p`]), instead of training.
    pub logits_top_k: Option<TopK>,
    /// The logit pass's nucleus mass (1: the top k alone).
    pub logits_top_p: f64,
}

/// A measurement.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// `train` or `logits`.
    pub mode: &'static str,
    /// The backend.
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// `f32`, `bf16` or `f16`.
    pub precision: String,
    /// Every parameter.
    pub params_total: u64,
    /// Sequence length.
    pub context: u64,
    /// Tokens (positions) per step.
    pub tokens_per_step: u64,
    /// Steps measured.
    pub steps: u64,
    /// Median step time of the measured steps.
    pub step_s_median: f64,
    /// Tokens (training) or positions (logit pass) per second, from the median step.
    pub tokens_per_s: f64,
    /// Model FLOPs per token.
    pub model_flops_per_token: f64,
    /// Model FLOP/s.
    pub model_flops_per_s: f64,
    /// The peak MFU is measured against.
    pub peak_flops_per_s: Option<f64>,
    /// Model FLOPs utilisation.
    pub mfu: Option<f64>,
    /// Wall time of the warm-up steps (compilation, autotuning).
    pub warmup_s: f64,
    /// A logit pass's truncation (`top-k 32, top-p 1`); absent for training.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<String>,
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The synthetic corpus could not be made.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Training failed (unsupported precision, divergence, ...).
    #[error(transparent)]
    Train(#[from] TrainError),
    /// The shape is invalid.
    #[error("{0}")]
    Shape(String),
    /// A setting is out of range.
    #[error("{0}")]
    Setting(String),
}

/// Measures `spec` on `device` (named `device_name`, of `backend`); scratch files (the
/// corpus cache, the final checkpoint) go to `scratch`.
pub fn run_bench(
    spec: &BenchSpec,
    device: &Device,
    backend: Backend,
    device_name: &str,
    scratch: &Path,
) -> Result<BenchResult, BenchError> {
    spec.shape.validate().map_err(BenchError::Shape)?;
    if !(spec.logits_top_p > 0.0 && spec.logits_top_p <= 1.0) {
        return Err(BenchError::Setting(format!(
            "`--top-p {}` is outside (0, 1]\n\nhint: 0.95 keeps the 95 % nucleus; 1 keeps the top k alone",
            spec.logits_top_p
        )));
    }
    let total_steps = total_steps(spec);
    let tokens_per_step = spec.context * spec.batch_seqs;
    let model = TransformerConfig::new(spec.shape, spec.context as usize);
    let data_config = bench_data_config(spec);
    let train_config = bench_train_config(spec, total_steps);
    let tokens = total_steps * tokens_per_step;
    let prepared = data::prepare(&data_config, scratch, &scratch.join("cache"), tokens)?;
    let step_s = match spec.logits_top_k {
        None => train_step_times(
            model,
            &data_config,
            &train_config,
            &prepared,
            device,
            backend,
            scratch,
        )?,
        Some(k) => logit_step_times(&model, &data_config, &prepared, spec, k, device, backend)?,
    };
    Ok(bench_result(
        spec,
        backend,
        device_name,
        tokens_per_step,
        &step_s,
    ))
}

/// The steps a bench runs: its warm-up and at least one measured step.
fn total_steps(spec: &BenchSpec) -> u64 {
    spec.warmup + spec.steps.max(1)
}

/// The data settings of a bench: the synthetic corpus at the spec's vocabulary, context and
/// batch.
fn bench_data_config(spec: &BenchSpec) -> DataConfig {
    DataConfig {
        corpus: CorpusKind::Synthetic,
        path: None,
        text_column: None,
        tokenizer: None,
        tokenizer_file: None,
        vocab: spec.shape.vocab,
        separator: Default::default(),
        val_tokens: 2 * (spec.context + 1),
        corpus_seed: 0,
        synthetic_sources: None,
        synthetic_copies: None,
        context: spec.context,
        batch_seqs: spec.batch_seqs,
        seed: 1,
        val_path: None,
        split: 0,
        follow: None,
    }
}

/// The loop settings of a bench: `total_steps` at a constant rate, logging every step and
/// never checkpointing.
fn bench_train_config(spec: &BenchSpec, total_steps: u64) -> TrainConfig {
    TrainConfig {
        lr: Schedule::constant(1e-4),
        weight_decay: 0.1,
        betas: [0.9, 0.95],
        grad_clip: 1.0,
        steps: total_steps,
        evals: 1,
        checkpoint_every: u64::MAX,
        log_every: 1,
        precision: spec.precision,
        head_chunk: None,
        micro_batch_seqs: None,
    }
}

/// The wall seconds of each training step, from the loop every run uses.
fn train_step_times(
    model: TransformerConfig,
    data_config: &DataConfig,
    train_config: &TrainConfig,
    prepared: &data::Prepared,
    device: &Device,
    backend: Backend,
    scratch: &Path,
) -> Result<Vec<f64>, BenchError> {
    let stop = AtomicBool::new(false);
    let job = TrainJob {
        run_id: "bench",
        model,
        data_config,
        train: train_config,
        data: prepared,
        device,
        backend,
        checkpoint: &scratch.join("bench.ckpt"),
        stop: &stop,
    };
    let mut times = Vec::new();
    let mut last = 0.0;
    train(&job, &mut NextToken, &mut |event| {
        if let TrainEvent::Step { wall_s, .. } = event {
            times.push(wall_s - last);
            last = wall_s;
        }
    })?;
    let _ = std::fs::remove_file(scratch.join("bench.ckpt"));
    Ok(times)
}

/// The wall seconds of each teacher logit pass truncated to top-k `k` and the spec's top-p.
fn logit_step_times(
    model: &TransformerConfig,
    data_config: &DataConfig,
    prepared: &data::Prepared,
    spec: &BenchSpec,
    k: TopK,
    device: &Device,
    backend: Backend,
) -> Result<Vec<f64>, BenchError> {
    let teacher = init_model(model, data_config.seed, device);
    let batcher = Batcher::new(
        &prepared.train,
        spec.context as usize,
        spec.batch_seqs as usize,
        1,
        false,
    )
    .ok_or_else(|| BenchError::Shape("the synthetic corpus is too short".into()))?;
    let on = TruncateOn::for_backend(backend);
    Ok((0..total_steps(spec))
        .map(|step| {
            let start = Instant::now();
            let kept = teacher_support(
                &teacher,
                &batcher.batch(step),
                device,
                spec.logits_top_p,
                k,
                on,
            );
            std::hint::black_box(kept);
            start.elapsed().as_secs_f64()
        })
        .collect())
}

/// The bench's result from its step times: the median after the warm-up, throughput and
/// utilization.
fn bench_result(
    spec: &BenchSpec,
    backend: Backend,
    device_name: &str,
    tokens_per_step: u64,
    step_s: &[f64],
) -> BenchResult {
    let warmup = (spec.warmup as usize).min(step_s.len());
    let mut measured = step_s[warmup..].to_vec();
    measured.sort_by(f64::total_cmp);
    let median = measured
        .get(measured.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    let tokens_per_s = tokens_per_step as f64 / median;
    let flops_per_token = match spec.logits_top_k {
        None => train_flops_per_token(&spec.shape, spec.context),
        Some(_) => forward_flops_per_token(&spec.shape, spec.context),
    };
    let used = Utilization::of(tokens_per_s, flops_per_token, device_name);
    BenchResult {
        mode: if spec.logits_top_k.is_some() {
            "logits"
        } else {
            "train"
        },
        backend: backend.to_string(),
        device: device_name.to_string(),
        precision: match spec.logits_top_k {
            None => spec.precision.to_string(),
            Some(_) => "f32".into(), // a logit pass stores f32 teacher probabilities
        },
        params_total: spec.shape.params().total,
        context: spec.context,
        tokens_per_step,
        steps: measured.len() as u64,
        step_s_median: median,
        tokens_per_s,
        model_flops_per_token: used.flops_per_token,
        model_flops_per_s: used.flops_per_s,
        peak_flops_per_s: used.peak_flops_per_s,
        mfu: used.mfu,
        warmup_s: step_s[..warmup].iter().sum(),
        truncation: spec
            .logits_top_k
            .map(|k| format!("top-k {k}, top-p {}", spec.logits_top_p)),
    }
}
