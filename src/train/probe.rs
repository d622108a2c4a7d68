//! The calibration probe: a few real training steps of three small models on a backend, each
//! chosen so that one kind of work dominates (tensor operations, matrix products, element
//! operations), timed. About two seconds on the CPU; `plan::Calibration::probe` fits the times
//! into its prices before any run of the sweep was measured.

use std::time::Instant;

use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::objective::summed_cross_entropy;
use crate::model::{ModelShape, TransformerConfig};

/// Optimiser steps timed per probe model (after one untimed warm-up step).
const TIMED_STEPS: usize = 3;

/// (d_model, d_ff, vocab, context, sequences) of the three probe models (2 layers each).
const MODELS: [(u64, u64, u64, u64, u64); 3] = [
    (16, 48, 256, 32, 8),     // tensor operations dominate
    (128, 352, 256, 128, 16), // matrix products dominate
    (32, 88, 4096, 32, 16),   // the vocabulary softmax dominates
];

/// One probe model's timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProbeStep {
    /// The model.
    pub shape: ModelShape,
    /// Sequence length.
    pub context: u64,
    /// Sequences per step.
    pub seqs: u64,
    /// Median seconds per training step.
    pub seconds: f64,
}

/// Times a few training steps of each probe model on `device`.
pub(crate) fn probe_steps(device: &Device) -> Vec<ProbeStep> {
    MODELS
        .iter()
        .map(|&(d, ff, vocab, context, seqs)| {
            let shape = ModelShape {
                d_model: d,
                n_layers: 2,
                n_heads: d / 16,
                n_kv_heads: d / 16,
                d_ff: ff,
                vocab,
                tie_embeddings: true,
            };
            let seconds = time_steps(&shape, context as usize, seqs as usize, device);
            ProbeStep {
                shape,
                context,
                seqs,
                seconds,
            }
        })
        .collect()
}

/// Median seconds per training step of `shape` on random tokens.
fn time_steps(shape: &ModelShape, context: usize, seqs: usize, device: &Device) -> f64 {
    let ad = device.clone().autodiff();
    let mut model = TransformerConfig::new(*shape, context).init(&ad);
    let mut optim = AdamWConfig::new().with_weight_decay(0.1).init();
    let vocab = shape.vocab as i64;
    let tokens: Vec<i64> = (0..seqs * context)
        .map(|i| (i as i64 * 7919 + 13) % vocab)
        .collect();
    let batch = |device: &Device| {
        Tensor::<2, Int>::from_data(TensorData::new(tokens.clone(), [seqs, context]), device)
    };
    let mut times = Vec::with_capacity(TIMED_STEPS);
    for step in 0..=TIMED_STEPS {
        let start = Instant::now();
        let chunk = crate::kernels::default_head_chunk(shape.vocab as usize);
        let loss = summed_cross_entropy(&model, batch(&ad), batch(&ad), chunk)
            .div_scalar((seqs * context) as f64);
        let _ = loss.clone().into_scalar::<f32>();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
        if step > 0 {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
