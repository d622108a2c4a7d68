//! The plain next-token objective of teachers and baselines, and the per-token cross-entropy
//! every objective starts from.

use burn::tensor::{FloatDType, Int, Tensor};

use super::{HeadInput, LossTerms, Objective};
use crate::data::Batch;
use crate::kernels;
use crate::model::LanguageModel;

/// Plain next-token cross-entropy (teachers and baselines).
#[derive(Debug, Default, Clone, Copy)]
pub struct NextToken;

impl Objective for NextToken {
    fn loss(
        &mut self,
        _step: u64,
        _steps: u64,
        _batch: &Batch,
        head: HeadInput,
        targets: Tensor<1, Int>,
    ) -> Tensor<1> {
        let n = targets.dims()[0].max(1) as f64;
        kernels::head_loss(
            head.hidden,
            &head.weight,
            targets,
            None,
            (1.0 / n, 0.0),
            head.chunk,
        )
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

/// What `model`'s head sees for `inputs` (`[batch, seq]`): the final hidden state of every
/// position (`[batch · seq, d_model]`, products in `compute`) and the head's weight.
pub fn head_input(
    model: &dyn LanguageModel,
    inputs: Tensor<2, Int>,
    compute: FloatDType,
    chunk: usize,
) -> HeadInput {
    let [batch, seq] = inputs.dims();
    let hidden = model.hidden_in(inputs, compute);
    let d = hidden.dims()[2];
    HeadInput {
        hidden: hidden.reshape([batch * seq, d]),
        weight: model.head_weight(compute),
        chunk,
    }
}

/// Σ over positions of the next-token cross-entropy (nats) of `targets` (`[batch, seq]`)
/// under `model` on `inputs`, through the fused chunked head: the logits never exist for the
/// whole batch. Differentiable on an autodiff device.
///
/// # Shapes
/// - returns: `[1]`
pub fn summed_cross_entropy(
    model: &dyn LanguageModel,
    inputs: Tensor<2, Int>,
    targets: Tensor<2, Int>,
    chunk: usize,
) -> Tensor<1> {
    let head = head_input(model, inputs, FloatDType::F32, chunk);
    let n: usize = targets.dims().iter().product();
    kernels::head_loss(
        head.hidden,
        &head.weight,
        targets.reshape([n]),
        None,
        (1.0, 0.0),
        chunk,
    )
}
