//! The types a fused head and loss takes (`super::ops::head_loss`, `super::composite::head_loss`):
//! the head's weight and the teacher's side of the distillation term.

use burn::tensor::{Int, Tensor};

use crate::spec::LossKind;

/// The teacher's side of a fused head's distillation term: its kept support at every position
/// (padded to a common width; see `crate::distill::SparseTargets`), the loss and τ.
#[derive(Debug, Clone)]
pub struct Distillation {
    /// Kept ids, `[rows, width]`.
    pub ids: Tensor<2, Int>,
    /// The teacher's log-probabilities at τ = 1, `[rows, width]`.
    pub log_probs: Tensor<2>,
    /// 1 for a real entry, 0 for padding, `[rows, width]`.
    pub mask: Tensor<2>,
    /// The distillation loss ℓ.
    pub kind: LossKind,
    /// τ.
    pub tau: f64,
}

/// The output head's weight: `[d, vocab]` for an untied head, the token embedding's `[vocab,
/// d]` when tied.
#[derive(Debug, Clone)]
pub struct HeadWeight {
    /// The weight, in the dtype of the head's product.
    pub weight: Tensor<2>,
    /// Whether it is stored `[vocab, d]` (tied to the embedding).
    pub tied: bool,
}
