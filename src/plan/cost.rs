//! Compute, storage and time accounting (`docs/src/science/accounting.md`): FLOPs per run, the cost
//! of training every pairing naively, predicted logit-store and checkpoint bytes, and a time
//! estimate.

use std::collections::BTreeMap;

use serde::Serialize;

use super::run::{Run, RunKind};
use crate::spec::Backend;

/// Training FLOPs of a model with `n` non-embedding parameters on `d` tokens: 6·N·D.
pub(crate) fn training_flops(n: u64, d: u64) -> f64 {
    6.0 * n as f64 * d as f64
}

/// Forward-pass FLOPs of a model with `n` non-embedding parameters over `d` tokens: 2·N·D.
pub(crate) fn forward_flops(n: u64, d: u64) -> f64 {
    2.0 * n as f64 * d as f64
}

/// Bytes of a training checkpoint: f32 weights and AdamW's two f32 moments (12 bytes per
/// parameter).
pub fn checkpoint_bytes(params_total: u64) -> u64 {
    params_total.saturating_mul(12)
}

/// Sustained training FLOP/s assumed for a backend before anything has been measured.
pub(crate) fn default_flops_per_s(backend: Backend) -> f64 {
    match backend {
        Backend::Cpu => 3e10,
        Backend::Wgpu => 2e13,
        Backend::Cuda => 1e14,
    }
}

/// Where the throughput used for time estimates came from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Throughput {
    /// FLOP/s assumed.
    pub flops_per_s: f64,
    /// `flag`, `sweep file` or `default for <backend>`.
    pub source: String,
}

/// Sweep-wide totals.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Totals {
    /// Number of runs.
    pub runs: usize,
    /// Runs per kind.
    pub by_kind: BTreeMap<RunKind, usize>,
    /// FLOPs of the whole plan.
    pub flops: f64,
    /// FLOPs per kind.
    pub flops_by_kind: BTreeMap<RunKind, f64>,
    /// FLOPs if every student trained its own teacher and computed logits online.
    pub naive_flops: f64,
    /// `naive_flops − flops`.
    pub saved_flops: f64,
    /// Predicted bytes of all logit stores.
    pub logit_store_bytes: u64,
    /// Predicted bytes of all checkpoints.
    pub checkpoint_bytes: u64,
    /// The throughput assumed.
    pub throughput: Throughput,
    /// `flops / flops_per_s`, run one at a time.
    pub estimated_seconds: f64,
}

/// Adds up the plan. `teacher_flops` gives the training FLOPs of a student's teacher.
pub fn totals(runs: &[Run], naive_extra: f64, throughput: Throughput) -> Totals {
    let mut by_kind = BTreeMap::new();
    let mut flops_by_kind = BTreeMap::new();
    let (mut flops, mut store, mut ckpt) = (0.0, 0u64, 0u64);
    for run in runs {
        *by_kind.entry(run.kind()).or_insert(0) += 1;
        *flops_by_kind.entry(run.kind()).or_insert(0.0) += run.flops;
        flops += run.flops;
        match run.kind() {
            RunKind::Logits => store = store.saturating_add(run.disk_bytes),
            _ => ckpt = ckpt.saturating_add(run.disk_bytes),
        }
    }
    let naive = naive_extra;
    Totals {
        runs: runs.len(),
        by_kind,
        flops,
        flops_by_kind,
        naive_flops: naive,
        saved_flops: naive - flops,
        logit_store_bytes: store,
        checkpoint_bytes: ckpt,
        estimated_seconds: flops / throughput.flops_per_s,
        throughput,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_follow_kaplan() {
        assert_eq!(training_flops(1_000_000, 20_000_000), 1.2e14);
        assert_eq!(forward_flops(1_000_000, 20_000_000), 4e13);
    }
}
