//! A stack of K same-shape decoders run as one batched model: every weight of the solo
//! [`Transformer`] gains a leading member axis (`[K, rows, cols]`), the projections become
//! batched matrix products and attention runs the K·batch sequences at once, so a step of K
//! runs costs one launch per operation instead of K. Member k computes exactly what its solo
//! model computes: the stack is built from (and taken apart into) solo models, weight by weight.

use burn::module::{Param, ParamId};
use burn::tensor::activation::silu;
use burn::tensor::{Int, Tensor};

use super::transformer::Transformer;

/// The weights of K same-shape transformers, each `[K, rows, cols]`, in [`Slot`] order: token
/// embedding; per block attention norm, wq, wk, wv, wo, MLP norm, gate, up, down; final norm; the
/// untied head if any.
///
/// RMSNorm gains are stored as `[K, 1, d]` rows.
#[derive(Debug, Clone)]
pub(crate) struct StackedTransformer {
    /// The stacked weights (plain tensors, no autodiff).
    pub weights: Vec<Tensor<3>>,
    layers: usize,
    n_heads: usize,
    n_kv_heads: usize,
    norm_eps: f64,
    /// cos of the rotary angles, `[context, head_dim]` (shared: same shape, same θ).
    rope_cos: Tensor<2>,
    /// sin of the rotary angles, `[context, head_dim]`.
    rope_sin: Tensor<2>,
}

/// Weights per block, in stacking order.
const PER_BLOCK: usize = 9;

/// Why solo models cannot be stacked.
#[derive(Debug, thiserror::Error)]
#[error("cannot stack these models: {0}")]
pub(crate) struct StackError(String);

/// One weight of a solo model, seen through the stacking order.
enum Slot<'a> {
    /// An RMSNorm gain, `[d]`.
    Gain(&'a mut Param<Tensor<1>>),
    /// A matrix, `[rows, cols]`.
    Matrix(&'a mut Param<Tensor<2>>),
}

/// Every weight of `model` in stacking order.
fn slots(model: &mut Transformer) -> Vec<Slot<'_>> {
    let mut out = vec![Slot::Matrix(&mut model.embed.weight)];
    for block in &mut model.blocks {
        out.push(Slot::Gain(&mut block.attn_norm.gamma));
        out.push(Slot::Matrix(&mut block.attn.wq.weight));
        out.push(Slot::Matrix(&mut block.attn.wk.weight));
        out.push(Slot::Matrix(&mut block.attn.wv.weight));
        out.push(Slot::Matrix(&mut block.attn.wo.weight));
        out.push(Slot::Gain(&mut block.mlp_norm.gamma));
        out.push(Slot::Matrix(&mut block.mlp.gate.weight));
        out.push(Slot::Matrix(&mut block.mlp.up.weight));
        out.push(Slot::Matrix(&mut block.mlp.down.weight));
    }
    out.push(Slot::Gain(&mut model.norm.gamma));
    if let Some(head) = &mut model.head {
        out.push(Slot::Matrix(&mut head.weight));
    }
    out
}

/// `model`'s weights in stacking order, each as a plain `[1, rows, cols]` tensor, with the
/// parameter ids they carry (an optimiser's state is keyed by them).
pub(crate) fn solo_weights(model: &Transformer) -> Vec<(ParamId, Tensor<3>)> {
    let mut model = model.clone();
    slots(&mut model)
        .into_iter()
        .map(|slot| match slot {
            Slot::Gain(p) => {
                let [d] = p.val().dims();
                (p.id, p.val().inner().reshape([1, 1, d]))
            }
            Slot::Matrix(p) => {
                let [r, c] = p.val().dims();
                (p.id, p.val().inner().reshape([1, r, c]))
            }
        })
        .collect()
}

/// The solo shape of each of `model`'s weights in stacking order (`[d]` for a gain, `[rows,
/// cols]` for a matrix).
pub(crate) fn solo_shapes(model: &Transformer) -> Vec<Vec<usize>> {
    let mut model = model.clone();
    slots(&mut model)
        .into_iter()
        .map(|slot| match slot {
            Slot::Gain(p) => p.val().dims().to_vec(),
            Slot::Matrix(p) => p.val().dims().to_vec(),
        })
        .collect()
}

/// `template` with its weights replaced by `weights` (each `[1, rows, cols]`, stacking order),
/// keeping its parameter ids.
pub(crate) fn with_solo_weights(template: &Transformer, weights: Vec<Tensor<3>>) -> Transformer {
    let mut model = template.clone();
    for (slot, w) in slots(&mut model).into_iter().zip(weights) {
        match slot {
            Slot::Gain(p) => {
                let [d] = p.val().dims();
                *p = Param::initialized(p.id, w.reshape([d]));
            }
            Slot::Matrix(p) => {
                let [r, c] = p.val().dims();
                *p = Param::initialized(p.id, w.reshape([r, c]));
            }
        }
    }
    model
}

impl StackedTransformer {
    /// The stack of `members` (same shape, context, RoPE θ and RMSNorm ε), member k at index k.
    pub fn stack(members: &[Transformer]) -> Result<StackedTransformer, StackError> {
        let first = members
            .first()
            .ok_or_else(|| StackError("a stack needs at least one member".into()))?;
        let per_member: Vec<Vec<Tensor<3>>> = members
            .iter()
            .map(|m| solo_weights(m).into_iter().map(|(_, w)| w).collect())
            .collect();
        let dims = |ws: &Vec<Tensor<3>>| ws.iter().map(|w| w.dims()).collect::<Vec<_>>();
        let reference = dims(&per_member[0]);
        let eps = first.norm.epsilon;
        for (k, (m, ws)) in members.iter().zip(&per_member).enumerate() {
            if dims(ws) != reference
                || m.norm.epsilon != eps
                || m.head.is_some() != first.head.is_some()
            {
                return Err(StackError(format!("member {k} has another shape")));
            }
            if m.rope_cos.dims() != first.rope_cos.dims() {
                return Err(StackError(format!("member {k} has another context")));
            }
        }
        let weights = (0..reference.len())
            .map(|slot| Tensor::cat(per_member.iter().map(|ws| ws[slot].clone()).collect(), 0))
            .collect();
        let attn = &first
            .blocks
            .first()
            .map(|b| (b.attn.n_heads, b.attn.n_kv_heads));
        let (n_heads, n_kv_heads) = attn.unwrap_or((1, 1));
        Ok(StackedTransformer {
            weights,
            layers: first.blocks.len(),
            n_heads,
            n_kv_heads,
            norm_eps: eps,
            rope_cos: first.rope_cos.clone().inner(),
            rope_sin: first.rope_sin.clone().inner(),
        })
    }

    /// Members in the stack.
    #[cfg(test)]
    pub fn members(&self) -> usize {
        self.weights.first().map_or(0, |w| w.dims()[0])
    }

    /// Member `k` as a solo model: `template` (that member's own model, for its shape and
    /// parameter ids) with the member's current weights, on the plain device.
    pub fn member(&self, k: usize, template: &Transformer) -> Transformer {
        let weights = self
            .weights
            .iter()
            .map(|w| w.clone().narrow(0, k, 1))
            .collect();
        with_solo_weights(template, weights)
    }

    /// The stack of the members at `keep` (in that order), e.g. without a member that failed.
    pub fn select(&self, keep: &[usize]) -> StackedTransformer {
        let Some(first) = self.weights.first() else {
            return self.clone();
        };
        let ids: Vec<i64> = keep.iter().map(|&k| k as i64).collect();
        let index = Tensor::<1, Int>::from_data(
            burn::tensor::TensorData::new(ids, [keep.len()]),
            &first.device(),
        );
        StackedTransformer {
            weights: self
                .weights
                .iter()
                .map(|w| w.clone().select(0, index.clone()))
                .collect(),
            ..self.clone()
        }
    }

    /// Next-token logits of every member, computed with `weights` (this stack's weights, or
    /// autodiff leaves made from them; see [`StackedTransformer::leaves`]).
    ///
    /// # Shapes
    /// - `tokens`: `[members, batch, seq]`, member k's batch at index k
    /// - returns: `[members, batch · seq, vocab]`
    pub fn forward(&self, weights: &[Tensor<3>], tokens: Tensor<3, Int>) -> Tensor<3> {
        let [k, batch, seq] = tokens.dims();
        let n = batch * seq;
        let [_, vocab, d] = weights[0].dims();
        let device = tokens.device();
        // member k's token t is row k·vocab + t of the members' embeddings laid end to end
        let offsets = Tensor::<1, Int>::arange(0..k as i64, &device)
            .mul_scalar(vocab as i64)
            .reshape([k, 1]);
        let rows = (tokens.reshape([k, n]) + offsets).reshape([k * n]);
        let mut x = weights[0]
            .clone()
            .reshape([k * vocab, d])
            .select(0, rows)
            .reshape([k, n, d]);
        let cos = self.rope_cos.clone().narrow(0, 0, seq);
        let sin = self.rope_sin.clone().narrow(0, 0, seq);
        for layer in 0..self.layers {
            let w = &weights[1 + layer * PER_BLOCK..1 + (layer + 1) * PER_BLOCK];
            let h = self.rms_norm(x.clone(), &w[0]);
            let q = h.clone().matmul(w[1].clone());
            let kk = h.clone().matmul(w[2].clone());
            let v = h.matmul(w[3].clone());
            let fold = |t: Tensor<3>| {
                let width = t.dims()[2];
                t.reshape([k * batch, seq, width])
            };
            // The solo model's attention (fused on the CPU), the members' sequences side by side
            // in the batch.
            let attended = crate::kernels::causal_attention(
                fold(q),
                fold(kk),
                fold(v),
                cos.clone(),
                sin.clone(),
                self.n_heads,
                self.n_kv_heads,
            );
            let width = attended.dims()[2];
            x = x + attended.reshape([k, n, width]).matmul(w[4].clone());
            let h = self.rms_norm(x.clone(), &w[5]);
            let hidden = silu(h.clone().matmul(w[6].clone())) * h.matmul(w[7].clone());
            x = x + hidden.matmul(w[8].clone());
        }
        let last = 1 + self.layers * PER_BLOCK;
        let x = self.rms_norm(x, &weights[last]);
        match weights.get(last + 1) {
            Some(head) => x.matmul(head.clone()),
            None => x.matmul(weights[0].clone().swap_dims(1, 2)),
        }
    }

    /// Autodiff leaves of this stack's weights on `device`'s autodiff twin, for one step.
    pub fn leaves(&self) -> Vec<Tensor<3>> {
        self.weights
            .iter()
            .map(|w| w.clone().autodiff().require_grad())
            .collect()
    }

    /// RMSNorm of every member with its own gain (as burn's `RmsNorm::forward` computes it).
    ///
    /// # Shapes
    /// - `x`: `[members, rows, d]`, `gain`: `[members, 1, d]`
    fn rms_norm(&self, x: Tensor<3>, gain: &Tensor<3>) -> Tensor<3> {
        let rms = (x.clone().square().mean_dim(2) + self.norm_eps).sqrt();
        (x / rms) * gain.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelShape;
    use crate::model::TransformerConfig;
    use burn::tensor::{Device, TensorData};

    fn shape(tie: bool, kv: u64) -> ModelShape {
        ModelShape {
            d_model: 32,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: kv,
            d_ff: 96,
            vocab: 64,
            tie_embeddings: tie,
        }
    }

    fn tokens(seed: usize, batch: usize, seq: usize) -> Vec<i64> {
        (0..batch * seq)
            .map(|i| ((i * 7 + seed * 13) % 64) as i64)
            .collect()
    }

    /// Every member of a stack gives its solo model's logits, tied or untied, with
    /// grouped-query attention or without.
    #[test]
    fn each_member_computes_what_its_solo_model_computes() {
        let device = Device::flex();
        for (tie, kv) in [(true, 4), (false, 2)] {
            let models: Vec<Transformer> = (0..3)
                .map(|s| {
                    device.seed(s);
                    TransformerConfig::new(shape(tie, kv), 16).init(&device)
                })
                .collect();
            let stack = StackedTransformer::stack(&models).unwrap();
            let (batch, seq) = (2, 12);
            let all: Vec<i64> = (0..3).flat_map(|s| tokens(s, batch, seq)).collect();
            let stacked =
                Tensor::<3, Int>::from_data(TensorData::new(all, [3, batch, seq]), &device);
            let out: Vec<f32> = stack
                .forward(&stack.weights, stacked)
                .into_data()
                .try_to_vec()
                .unwrap();
            let per_member = batch * seq * 64;
            for (k, model) in models.iter().enumerate() {
                let solo = Tensor::<2, Int>::from_data(
                    TensorData::new(tokens(k, batch, seq), [batch, seq]),
                    &device,
                );
                let want: Vec<f32> = model.forward(solo).into_data().try_to_vec().unwrap();
                let got = &out[k * per_member..(k + 1) * per_member];
                let worst = want
                    .iter()
                    .zip(got)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(worst < 1e-5, "tie {tie} kv {kv} member {k}: {worst}");
            }
        }
    }

    /// Taking a member out of the stack gives back its solo weights and ids; selecting members
    /// keeps the chosen ones in order.
    #[test]
    fn members_come_back_out_with_their_ids() {
        let device = Device::flex();
        let models: Vec<Transformer> = (0..3)
            .map(|s| {
                device.seed(10 + s);
                TransformerConfig::new(shape(false, 4), 8).init(&device)
            })
            .collect();
        let stack = StackedTransformer::stack(&models).unwrap().select(&[2, 0]);
        assert_eq!(stack.members(), 2);
        for (k, original) in [(0, &models[2]), (1, &models[0])] {
            let back = stack.member(k, original);
            for ((id_a, a), (id_b, b)) in
                solo_weights(&back).into_iter().zip(solo_weights(original))
            {
                assert_eq!(id_a, id_b);
                let (a, b): (Vec<f32>, Vec<f32>) = (
                    a.into_data().try_to_vec().unwrap(),
                    b.into_data().try_to_vec().unwrap(),
                );
                assert_eq!(a, b);
            }
        }
    }
}
