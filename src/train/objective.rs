//! What a training step minimises. The plain next-token loss lives here; distillation adds its
//! own objective (teacher logits mixed in with weight α) without touching the training loop.

use burn::tensor::{Int, Tensor};

use crate::data::Batch;
use crate::kernels;

/// The loss of one training step.
pub trait Objective {
    /// The scalar loss to minimise for `batch` at `step` of `steps`.
    ///
    /// # Shapes
    /// - `logits`: `[batch, seq, vocab]` on the training (autodiff) device
    /// - `targets`: `[batch, seq]`
    /// - returns: `[1]`
    fn loss(
        &mut self,
        step: u64,
        steps: u64,
        batch: &Batch,
        logits: Tensor<3>,
        targets: Tensor<2, Int>,
    ) -> Tensor<1>;
}

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
