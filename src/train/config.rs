//! A trained run's optimiser and loop settings: the learning-rate schedule, AdamW's decay and
//! betas, clipping, steps, how often to evaluate, checkpoint and log, and the arithmetic of
//! the step. Part of the run's resolved configuration, so part of its id.

use serde::{Deserialize, Serialize};

use crate::spec::{Precision, Schedule};

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
    /// Arithmetic of the training step.
    ///
    /// Left out of the JSON (and so of the id) when f32, so runs planned before mixed precision
    /// existed keep their ids; bf16 and f16 runs are new runs, since their results differ.
    #[serde(default, skip_serializing_if = "Precision::is_f32")]
    pub precision: Precision,
    /// Positions per chunk of the fused output head and loss (`[train] head_chunk`); `None` for the
    /// default of the vocabulary ([`TrainConfig::head_chunk_for`]).
    ///
    /// Left out of the JSON when unset, so earlier runs keep their ids; a chosen chunk is part of
    /// the id, as it changes the order in which the head's gradient is summed (the last bits of a
    /// run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_chunk: Option<u64>,
    /// Sequences per micro-batch (`[train] micro_batch_tokens` over the context), when the batch is
    /// accumulated from smaller ones; `None` for the whole batch at once.
    ///
    /// Left out of the JSON when unset, so earlier runs keep their ids; a chosen micro-batch is
    /// part of the id, as it changes the order in which gradients are summed (the last bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro_batch_seqs: Option<u64>,
}

impl TrainConfig {
    /// Positions per chunk of the fused head and loss at `vocab`: the configured one, or
    /// enough to keep one chunk's logits within 64 MiB (`crate::kernels::default_head_chunk`).
    pub fn head_chunk_for(&self, vocab: usize) -> usize {
        self.head_chunk
            .map_or_else(|| crate::kernels::default_head_chunk(vocab), |c| c as usize)
            .max(1)
    }

    /// Sequences per micro-batch for a batch of `batch_seqs` rows (never more than the batch,
    /// at least one).
    pub fn micro_rows(&self, batch_seqs: u64) -> u64 {
        self.micro_batch_seqs
            .map_or(batch_seqs, |m| m.min(batch_seqs))
            .max(1)
    }
}
