//! Token-level similarity of two models of one vocabulary, teacher-forced on held-out text:
//! at every position both read the same true prefix, and we compare their next-token
//! distributions: top-1 agreement (the same most likely token) and the Jensen–Shannon
//! divergence, JSD(p, q) = ½ KL(p ‖ m) + ½ KL(q ‖ m) with m = (p + q)/2, in nats (0 for equal
//! distributions, at most ln 2). Symmetric, unlike KL(teacher ‖ student).

use burn::tensor::Device;
use burn::tensor::activation::log_softmax;

use crate::data::{Stream, batch_tensors, eval_batches};
use crate::model::Transformer;

/// Rows per forward pass (windows of the context).
const ROWS: usize = 16;

/// Teacher-forced token similarity of two models.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenSimilarity {
    /// Share of positions where both models' most likely token is the same.
    pub agreement: f64,
    /// Mean Jensen–Shannon divergence per position (nats).
    pub jsd: f64,
    /// Positions compared.
    pub positions: usize,
}

/// Compares `a` and `b` on the first `max_windows` held-out windows of `context` tokens.
pub(crate) fn token_similarity(
    a: &Transformer,
    b: &Transformer,
    val: &Stream,
    context: usize,
    max_windows: usize,
    device: &Device,
) -> TokenSimilarity {
    let (mut same, mut jsd, mut count) = (0.0f64, 0.0f64, 0usize);
    let mut windows = 0;
    for batch in eval_batches(val, context, ROWS) {
        if windows >= max_windows {
            break;
        }
        windows += batch.batch;
        let (inputs, _) = batch_tensors(&batch, device);
        let la = log_softmax(a.forward(inputs.clone()), 2);
        let lb = log_softmax(b.forward(inputs), 2);
        let agree = la
            .clone()
            .argmax(2)
            .equal(lb.clone().argmax(2))
            .int()
            .sum()
            .into_scalar::<i64>();
        let (pa, pb) = (la.clone().exp(), lb.clone().exp());
        let lm = ((pa.clone() + pb.clone()) * 0.5).clamp_min(1e-30).log();
        let divergence = ((pa * (la - lm.clone())).sum() + (pb * (lb - lm)).sum()) * 0.5;
        same += agree as f64;
        jsd += f64::from(divergence.into_scalar::<f32>());
        count += batch.batch * batch.context;
    }
    TokenSimilarity {
        agreement: same / count.max(1) as f64,
        jsd: jsd / count.max(1) as f64,
        positions: count,
    }
}
