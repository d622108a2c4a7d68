//! The student's objective (1 − α)·L_lm + α·L_kd: the next-token loss on the data mixed with a
//! sparse distillation loss against the teacher's targets ([`crate::distill::TeacherTargets`]),
//! α following its schedule over the run.

use burn::tensor::{Int, Tensor};

use super::{DistillTerm, LossTerms, Objective, cross_entropy};
use crate::data::Batch;
use crate::distill::{TeacherTargets, distill_loss};
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
        logits: Tensor<3>,
        targets: Tensor<2, Int>,
    ) -> Tensor<1> {
        let alpha = schedule::value_at(&self.alpha.0, step, steps);
        let [b, t, vocab] = logits.dims();
        let device = logits.device();
        let lm = cross_entropy(logits.clone(), targets).mean();
        let Some(sparse) = self.targets.targets(step, batch, &device) else {
            return lm.add_scalar(f64::NAN); // the store failed: stop this run (error recorded)
        };
        let kd = distill_loss(
            self.loss,
            logits.reshape([b * t, vocab]),
            &sparse,
            self.temperature.0,
        );
        lm.mul_scalar(1.0 - alpha) + kd.mul_scalar(alpha)
    }

    fn terms(&mut self, step: u64, steps: u64, batch: &Batch) -> Result<LossTerms, String> {
        let alpha = schedule::value_at(&self.alpha.0, step, steps);
        let kept = self.targets.kept(step, batch);
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
