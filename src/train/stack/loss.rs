//! The loss of every member of a stack in one pass: the next-token cross-entropy of all the
//! members' positions at once, and each distillation term over the members that share its
//! loss and temperature, weighted per member as that member's own [`LossTerms`] say.

use burn::tensor::{Device, IndexingUpdateOp, Int, Tensor, TensorData};

use crate::distill::{distill_loss_rows, sparse_targets};
use crate::train::{LossTerms, cross_entropy};

/// Each member's loss (what its solo run's objective computes).
///
/// # Shapes
/// - `logits`: `[members, positions, vocab]`, `targets`: `[members, positions]`
/// - returns: `[members]`
pub(crate) fn stack_loss(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    terms: &[LossTerms],
) -> Tensor<1> {
    let [members, positions, vocab] = logits.dims();
    let device = logits.device();
    let lm = cross_entropy(logits.clone(), targets)
        .reshape([members, positions])
        .mean_dim(1)
        .reshape([members]);
    let lm_weights: Vec<f64> = terms.iter().map(|t| t.lm_weight).collect();
    let mut loss = weighted(lm, &lm_weights, &device);
    for group in distill_groups(terms) {
        let rows = if group.len() == members {
            logits.clone().reshape([members * positions, vocab])
        } else {
            logits
                .clone()
                .select(0, index(&group, &device))
                .reshape([group.len() * positions, vocab])
        };
        let first = terms[group[0]].distill.as_ref();
        let (Some(kind), Some(tau)) = (first.map(|d| d.kind), first.map(|d| d.tau)) else {
            continue;
        };
        let kept: Vec<_> = group
            .iter()
            .filter_map(|&k| terms[k].distill.as_ref())
            .flat_map(|d| d.kept.iter().cloned())
            .collect();
        let sparse = sparse_targets(&kept, &device);
        let per_member = distill_loss_rows(kind, rows, &sparse, tau)
            .reshape([group.len(), positions])
            .mean_dim(1)
            .reshape([group.len()]);
        let alphas: Vec<f64> = group
            .iter()
            .map(|&k| terms[k].distill.as_ref().map_or(0.0, |d| d.weight))
            .collect();
        let kd = weighted(per_member, &alphas, &device);
        loss = if group.len() == members {
            loss + kd
        } else {
            loss.select_assign(0, index(&group, &device), kd, IndexingUpdateOp::Add)
        };
    }
    loss
}

/// Members with a distillation term, grouped by (loss, temperature), in member order.
fn distill_groups(terms: &[LossTerms]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(crate::spec::LossKind, u64, Vec<usize>)> = Vec::new();
    for (k, term) in terms.iter().enumerate() {
        let Some(d) = &term.distill else { continue };
        match groups
            .iter_mut()
            .find(|(kind, tau, _)| *kind == d.kind && *tau == d.tau.to_bits())
        {
            Some((_, _, members)) => members.push(k),
            None => groups.push((d.kind, d.tau.to_bits(), vec![k])),
        }
    }
    groups.into_iter().map(|(_, _, members)| members).collect()
}

/// `values[k] · weights[k]`, with the weights rounded to f32 as a solo run's `mul_scalar` does.
fn weighted(values: Tensor<1>, weights: &[f64], device: &Device) -> Tensor<1> {
    match weights.first() {
        Some(&w) if weights.iter().all(|&x| x == w) => values.mul_scalar(w),
        _ => {
            let w: Vec<f32> = weights.iter().map(|&w| w as f32).collect();
            values * Tensor::from_data(TensorData::new(w, [weights.len()]), device)
        }
    }
}

fn index(members: &[usize], device: &Device) -> Tensor<1, Int> {
    let ids: Vec<i64> = members.iter().map(|&k| k as i64).collect();
    Tensor::from_data(TensorData::new(ids, [members.len()]), device)
}
