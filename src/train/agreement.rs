//! Teacher–student agreement on held-out text: how far a student has become like its teacher,
//! token by token (top-1 agreement and KL(teacher ‖ student) over the full vocabulary).

use burn::tensor::Device;
use burn::tensor::activation::log_softmax;

use super::eval_rows;
use crate::data::{Stream, batch_tensors, eval_batches};
use crate::model::{LanguageModel, Transformer};

/// Teacher–student top-1 agreement and KL(teacher ‖ student) in nats/token (full vocabulary,
/// τ = 1) on every held-out window: a token-level measure of how far the student has become
/// like its teacher.
pub fn agreement(
    student: &Transformer,
    teacher: &dyn LanguageModel,
    val: &Stream,
    context: usize,
    device: &Device,
) -> (f64, f64) {
    let (mut same, mut kl, mut count) = (0.0f64, 0.0f64, 0usize);
    for batch in eval_batches(val, context, eval_rows(context, teacher.vocab())) {
        let (inputs, _) = batch_tensors(&batch, device);
        let s = log_softmax(student.forward(inputs.clone()), 2);
        let t = log_softmax(teacher.logits(inputs), 2);
        let agree = s
            .clone()
            .argmax(2)
            .equal(t.clone().argmax(2))
            .int()
            .sum()
            .into_scalar::<i64>();
        let divergence = (t.clone().exp() * (t - s)).sum().into_scalar::<f32>();
        same += agree as f64;
        kl += divergence as f64;
        count += batch.batch * batch.context;
    }
    (same / count.max(1) as f64, kl / count.max(1) as f64)
}
