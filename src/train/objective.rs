//! What a training step minimises. The plain next-token loss lives here; distillation adds its
//! own objective (teacher logits mixed in with weight α) without touching the training loop.

use burn::tensor::{Int, Tensor};

use crate::data::Batch;
use crate::distill::Kept;
use crate::kernels;
use crate::spec::LossKind;

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

    /// The loss of `batch` at `step` of `steps` as terms that a stack of runs (see
    /// `crate::train::stack`) evaluates for all its members at once; equal to what
    /// [`Objective::loss`] computes. `Err` with the reason when the targets cannot be had (a
    /// distillation objective also keeps the error for its run's failure).
    fn terms(&mut self, step: u64, steps: u64, batch: &Batch) -> Result<LossTerms, String>;
}

/// What one step's loss is made of: `lm_weight` times the mean next-token cross-entropy, plus
/// an optional distillation term.
#[derive(Debug, Clone)]
pub struct LossTerms {
    /// Weight of the mean next-token cross-entropy (1 − α for a student, 1 otherwise).
    pub lm_weight: f64,
    /// The distillation term, if any.
    pub distill: Option<DistillTerm>,
}

/// `weight` times the mean over positions of the sparse distillation loss `kind` at
/// temperature `tau` against the teacher's kept support (`crate::distill::distill_loss`).
#[derive(Debug, Clone)]
pub struct DistillTerm {
    /// α at this step.
    pub weight: f64,
    /// ℓ.
    pub kind: LossKind,
    /// τ.
    pub tau: f64,
    /// The teacher's kept support at every position of the batch, in batch order.
    pub kept: Vec<Kept>,
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
