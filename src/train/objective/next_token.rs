//! The plain next-token objective of teachers and baselines, and the per-token cross-entropy
//! every objective starts from.

use burn::tensor::{Int, Tensor};

use super::{LossTerms, Objective};
use crate::data::Batch;
use crate::kernels;

/// Plain next-token cross-entropy (teachers and baselines).
#[derive(Debug, Default, Clone, Copy)]
pub struct NextToken;

impl Objective for NextToken {
    fn loss(
        &mut self,
        _step: u64,
        _steps: u64,
        _batch: &Batch,
        logits: Tensor<3>,
        targets: Tensor<2, Int>,
    ) -> Tensor<1> {
        cross_entropy(logits, targets).mean()
    }

    fn terms(&mut self, _step: u64, _steps: u64, _batch: &Batch) -> Result<LossTerms, String> {
        Ok(LossTerms {
            lm_weight: 1.0,
            distill: None,
        })
    }
}

/// Per-token negative log-likelihood (nats) of `targets` under `logits`.
///
/// # Shapes
/// - `logits`: `[batch, seq, vocab]`, `targets`: `[batch, seq]`
/// - returns: `[batch · seq]`
pub fn cross_entropy(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<1> {
    let [batch, seq, vocab] = logits.dims();
    let n = batch * seq;
    kernels::cross_entropy(logits.reshape([n, vocab]), targets.reshape([n]))
}
