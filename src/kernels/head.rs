//! The types a fused head and loss takes (`super::ops::head_loss`, `super::composite::head_loss`,
//! and their cross-tokenizer twins `cross_head_loss`): the head's weight and the teacher's
//! side of the distillation term.

use burn::tensor::{Int, Tensor};

use crate::spec::{CrossTokenizer, LossKind};

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
    /// cap · tanh(z / cap) applied to every logit z (Gemma 2's final soft-capping); `None` for
    /// every model pdsweep trains.
    pub softcap: Option<f64>,
}

impl HeadWeight {
    /// `logits` soft-capped as this head says (unchanged without a cap).
    pub fn cap<const D: usize>(&self, logits: burn::tensor::Tensor<D>) -> burn::tensor::Tensor<D> {
        match self.softcap {
            Some(cap) => logits.div_scalar(cap).tanh().mul_scalar(cap),
            None => logits,
        }
    }
}

/// The teacher's side of a fused head's cross-tokenizer distillation term (ULD, or GOLD's
/// hybrid; the maths is in `super::cpu::cross`'s module doc): how student rows group into units
/// aligned with the teacher's tokens, the teacher's merged and tempered entries at each unit's
/// base row, which of them (and which student ids) have a twin in the other vocabulary, and
/// the loss's settings.
///
/// # Shapes
/// - `span`: `[rows]`; `log_t`, `matched`, `mask`: `[rows, width]`; `student_matched`:
///   `[vocab]`
#[derive(Debug, Clone)]
pub struct CrossDistillation {
    /// n > 0 at a unit's base row (the unit is that row and the n − 1 rows after it), 0 at
    /// those later rows, −1 at a row outside every unit (no distillation term).
    pub span: Tensor<1, Int>,
    /// ln t_e of the teacher's entries, already merged over the unit and tempered, sorted
    /// descending among the valid entries of a row; read at base rows.
    pub log_t: Tensor<2>,
    /// The student id whose bytes are the entry's, or −1.
    pub matched: Tensor<2, Int>,
    /// 1 for a real entry, 0 for padding.
    pub mask: Tensor<2>,
    /// 1.0 for a student id that some teacher token matches, else 0.0 (all 0 for ULD).
    pub student_matched: Tensor<1>,
    /// ULD, or GOLD's hybrid.
    pub kind: CrossTokenizer,
    /// The student's temperature τ (no τ² factor on these losses).
    pub tau: f64,
    /// k: ULD compares the k largest probabilities of each side.
    pub top_k: usize,
    /// Gold's (w_m, w_u): the weights of the exact KL over matched tokens and of ULD over the
    /// rest.
    pub gold_weights: (f64, f64),
}
