//! The [`Objective`] trait: what a training step minimises, as a loss tensor for a solo run or
//! as [`LossTerms`] that a stack evaluates for all its members at once.

use burn::tensor::{Int, Tensor};

use crate::kernels::HeadWeight;

use crate::data::Batch;
use crate::distill::Kept;
use crate::spec::LossKind;

/// The loss of one training step.
pub trait Objective {
    /// The scalar loss to minimise for `batch` at `step` of `steps`, from the model's final
    /// hidden state and head (the logits are made chunk by chunk inside the fused head and
    /// loss, `crate::kernels::head_loss`).
    ///
    /// # Shapes
    /// - `head.hidden`: `[batch · seq, d_model]` on the training (autodiff) device
    /// - `targets`: `[batch · seq]`
    /// - returns: `[1]`
    fn loss(
        &mut self,
        step: u64,
        steps: u64,
        batch: &Batch,
        head: HeadInput,
        targets: Tensor<1, Int>,
    ) -> Tensor<1>;

    /// The loss of `batch` at `step` of `steps` as terms that a stack of runs (see
    /// `crate::train::stack`) evaluates for all its members at once; equal to what
    /// [`Objective::loss`] computes.
    ///
    /// `Err` with the reason when the targets cannot be had (a distillation objective also keeps
    /// the error for its run's failure).
    fn terms(&mut self, step: u64, steps: u64, batch: &Batch) -> Result<LossTerms, String>;
}

/// What the output head of a training step sees: the final hidden state of every position, the
/// head's weight and the positions per chunk of the fused head and loss.
#[derive(Debug, Clone)]
pub struct HeadInput {
    /// `[positions, d_model]`, in the step's compute dtype.
    pub hidden: Tensor<2>,
    /// The head's weight.
    pub weight: HeadWeight,
    /// Positions per chunk.
    pub chunk: usize,
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
