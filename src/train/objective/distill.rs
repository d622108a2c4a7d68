//! The student's objective (1 − α)·L_lm + α·L_kd: the next-token loss on the data mixed with a
//! sparse distillation loss against the teacher's targets ([`crate::distill::TeacherTargets`]),
//! α following its schedule over the run.

use burn::tensor::{Int, Tensor};

use super::{DistillTerm, HeadInput, LossTerms, Objective};
use crate::data::Batch;
use crate::distill::TeacherTargets;
use crate::kernels::{self, Distillation};
use crate::spec::{Alpha, LossKind, Temperature};
use crate::train::schedule;

/// The distillation objective of one student run.
pub struct DistillObjective<'a> {
    /// ℓ, the distillation loss.
    pub loss: LossKind,
    /// α's schedule.
    pub alpha: Alpha,
    /// τ.
    pub temperature: Temperature,
    /// The teacher targets.
    pub targets: TeacherTargets<'a>,
}

impl Objective for DistillObjective<'_> {
    fn loss(
        &mut self,
        step: u64,
        steps: u64,
        batch: &Batch,
        head: HeadInput,
        targets: Tensor<1, Int>,
    ) -> Tensor<1> {
        let alpha = schedule::value_at(&self.alpha.0, step, steps);
        let device = head.hidden.device();
        let n = targets.dims()[0].max(1) as f64;
        if self.targets.cross.is_some() {
            return self.cross_loss(alpha, batch, head, targets);
        }
        let Some(sparse) = self.targets.targets(batch, &device) else {
            // the store failed: stop this run (error recorded)
            let lm = kernels::head_loss(
                head.hidden,
                &head.weight,
                targets,
                None,
                (1.0, 0.0),
                head.chunk,
            );
            return lm.add_scalar(f64::NAN);
        };
        let distill = Distillation {
            ids: sparse.ids,
            log_probs: sparse.log_probs,
            mask: sparse.mask,
            kind: self.loss,
            tau: self.temperature.0,
        };
        kernels::head_loss(
            head.hidden,
            &head.weight,
            targets,
            Some(&distill),
            ((1.0 - alpha) / n, alpha / n),
            head.chunk,
        )
    }

    fn terms(&mut self, step: u64, steps: u64, batch: &Batch) -> Result<LossTerms, String> {
        if self.targets.cross.is_some() {
            return Err(
                "a student of another tokenizer's teacher trains alone, not in a stack".into(),
            );
        }
        let alpha = schedule::value_at(&self.alpha.0, step, steps);
        let kept = self.targets.kept(batch);
        if let Some(e) = &self.targets.error {
            return Err(e.to_string());
        }
        if kept.len() != batch.batch * batch.context {
            return Err(format!(
                "the teacher gave {} positions for a batch of {}",
                kept.len(),
                batch.batch * batch.context
            ));
        }
        Ok(LossTerms {
            lm_weight: 1.0 - alpha,
            distill: Some(DistillTerm {
                weight: alpha,
                kind: self.loss,
                tau: self.temperature.0,
                kept,
            }),
        })
    }
}

impl DistillObjective<'_> {
    /// The loss of a student whose teacher has another tokenizer: (1 − α) times the mean
    /// next-token cross-entropy plus α times the mean over the batch's units of the loss across
    /// tokenizers (`kernels::cross_head_loss`; GOLD's normalisation by aligned units).
    fn cross_loss(
        &mut self,
        alpha: f64,
        batch: &Batch,
        head: HeadInput,
        targets: Tensor<1, Int>,
    ) -> Tensor<1> {
        let device = head.hidden.device();
        let n = targets.dims()[0].max(1) as f64;
        let Some((cross, units)) = self.targets.cross_targets(batch, &device) else {
            // the teacher's positions failed: stop this run (error recorded)
            let lm = kernels::head_loss(
                head.hidden,
                &head.weight,
                targets,
                None,
                (1.0, 0.0),
                head.chunk,
            );
            return lm.add_scalar(f64::NAN);
        };
        kernels::cross_head_loss(
            head.hidden,
            &head.weight,
            targets,
            &cross,
            ((1.0 - alpha) / n, alpha / units.max(1) as f64),
            head.chunk,
        )
    }
}
