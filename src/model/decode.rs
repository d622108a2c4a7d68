//! Incremental decoding with a key/value cache: the same decoder as [`Transformer::forward`],
//! fed a few tokens at a time, keeping every layer's rotated keys and values so that each new
//! token costs one position's work instead of the whole prefix's. Written with burn's tensor
//! ops only, so it runs unchanged on every backend; inference only (f32, no autodiff).
//!
//! Positions are those of the cache: a cache of `len` tokens places the next token at position
//! `len`, and the cache holds at most the model's context (its rotary tables end there); what to
//! do when it is full (slide a window) is the caller's rule (`crate::generate`).

use burn::tensor::activation::softmax;
use burn::tensor::{Bool, Int, Tensor, TensorData};

use super::transformer::{Attention, Block, Transformer};
use crate::kernels;
use crate::kernels::composite::{repeat_kv, rotate};

/// Every layer's rotated keys and values so far, `[batch, kv_heads, len, head_dim]` each.
#[derive(Debug, Default)]
pub struct KvCache {
    layers: Vec<(Tensor<4>, Tensor<4>)>,
    len: usize,
}

impl KvCache {
    /// An empty cache (the first [`Transformer::decode`] call fills it).
    pub fn new() -> Self {
        KvCache::default()
    }

    /// Number of positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Transformer {
    /// Longest sequence the model's rotary tables cover (its training context).
    pub fn context(&self) -> usize {
        self.rope_cos.dims()[0]
    }

    /// Next-token logits (f32) at every position of `tokens`, which follow the `cache.len()`
    /// tokens already in `cache`; appends their keys and values to `cache`. Equal (up to float
    /// rounding) to the corresponding rows of [`Transformer::forward`] on the whole sequence.
    ///
    /// # Shapes
    /// - `tokens`: `[batch, seq]` with `cache.len() + seq` ≤ [`Transformer::context`], the
    ///   same batch as the cache's
    /// - returns: `[batch, seq, vocab]`
    ///
    /// # Panics
    /// When the sequence would pass the context (callers slide their window first).
    pub fn decode(&self, tokens: Tensor<2, Int>, cache: &mut KvCache) -> Tensor<3> {
        let [_, seq] = tokens.dims();
        let start = cache.len;
        assert!(
            start + seq <= self.context(),
            "decoding past the context ({} + {seq} > {})",
            start,
            self.context()
        );
        let cos = self.rope_cos.clone().narrow(0, start, seq);
        let sin = self.rope_sin.clone().narrow(0, start, seq);
        let mask = (seq > 1).then(|| causal_mask(start, seq, &tokens.device()));
        let mut x = self.embed.forward(tokens);
        let first = cache.layers.is_empty();
        for (i, block) in self.blocks.iter().enumerate() {
            let past = (!first).then(|| cache.layers[i].clone());
            let (out, kv) = block.decode(x, &cos, &sin, past, mask.as_ref());
            x = out;
            if first {
                cache.layers.push(kv);
            } else {
                cache.layers[i] = kv;
            }
        }
        cache.len = start + seq;
        let x = kernels::rms_norm(x, self.norm.gamma.val(), self.norm.epsilon);
        match &self.head {
            Some(head) => kernels::linear(x, head.weight.val()),
            None => kernels::linear(x, self.embed.weight.val().transpose()),
        }
    }
}

/// `true` where new position `i` (absolute `start + i`) must not see key `j`: `j > start + i`.
///
/// # Shapes
/// - returns: `[1, 1, seq, start + seq]`
fn causal_mask(start: usize, seq: usize, device: &burn::tensor::Device) -> Tensor<4, Bool> {
    let keys = start + seq;
    let data: Vec<bool> = (0..seq)
        .flat_map(|i| (0..keys).map(move |j| j > start + i))
        .collect();
    Tensor::from_data(TensorData::new(data, [1, 1, seq, keys]), device)
}

impl Block {
    fn decode(
        &self,
        x: Tensor<3>,
        cos: &Tensor<2>,
        sin: &Tensor<2>,
        past: Option<(Tensor<4>, Tensor<4>)>,
        mask: Option<&Tensor<4, Bool>>,
    ) -> (Tensor<3>, (Tensor<4>, Tensor<4>)) {
        let norm =
            |n: &burn::nn::RmsNorm, x: Tensor<3>| kernels::rms_norm(x, n.gamma.val(), n.epsilon);
        let (attn, kv) = self
            .attn
            .decode(norm(&self.attn_norm, x.clone()), cos, sin, past, mask);
        let x = x + attn;
        let h = norm(&self.mlp_norm, x.clone());
        let mlp = &self.mlp;
        let hidden = kernels::swiglu(
            kernels::linear(h.clone(), mlp.gate.weight.val()),
            kernels::linear(h, mlp.up.weight.val()),
        );
        (x + kernels::linear(hidden, mlp.down.weight.val()), kv)
    }
}

impl Attention {
    fn decode(
        &self,
        x: Tensor<3>,
        cos: &Tensor<2>,
        sin: &Tensor<2>,
        past: Option<(Tensor<4>, Tensor<4>)>,
        mask: Option<&Tensor<4, Bool>>,
    ) -> (Tensor<3>, (Tensor<4>, Tensor<4>)) {
        let [batch, seq, _] = x.dims();
        let hd = self.head_dim;
        let split = |t: Tensor<3>, n: usize| t.reshape([batch, seq, n, hd]).swap_dims(1, 2);
        let (cos, sin) = (cos.clone().unsqueeze::<4>(), sin.clone().unsqueeze::<4>());
        let q = rotate(
            split(
                kernels::linear(x.clone(), self.wq.weight.val()),
                self.n_heads,
            ),
            &cos,
            &sin,
        );
        let k = rotate(
            split(
                kernels::linear(x.clone(), self.wk.weight.val()),
                self.n_kv_heads,
            ),
            &cos,
            &sin,
        );
        let v = split(kernels::linear(x, self.wv.weight.val()), self.n_kv_heads);
        let (k, v) = match past {
            Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
            None => (k, v),
        };
        let groups = self.n_heads / self.n_kv_heads;
        let scores = q.matmul(repeat_kv(k.clone(), groups).swap_dims(2, 3)) / (hd as f64).sqrt();
        let scores = match mask {
            Some(m) => scores.mask_fill(m.clone(), f32::NEG_INFINITY),
            None => scores,
        };
        let out = softmax(scores, 3).matmul(repeat_kv(v.clone(), groups));
        let out = out.swap_dims(1, 2).reshape([batch, seq, self.n_heads * hd]);
        (kernels::linear(out, self.wo.weight.val()), (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelShape, TransformerConfig};
    use burn::tensor::Device;

    fn model(n_heads: u64, n_kv_heads: u64) -> Transformer {
        let shape = ModelShape {
            n_layers: 2,
            d_model: 16,
            n_heads,
            n_kv_heads,
            d_ff: 40,
            vocab: 37,
            tie_embeddings: n_kv_heads == n_heads,
        };
        let device = Device::flex();
        device.seed(7);
        TransformerConfig::new(shape, 24).init(&device)
    }

    fn tokens(ids: &[i64], batch: usize) -> Tensor<2, Int> {
        let data: Vec<i64> = (0..batch).flat_map(|_| ids.iter().copied()).collect();
        Tensor::from_data(TensorData::new(data, [batch, ids.len()]), &Device::flex())
    }

    /// Prefill then single steps give the full forward's logits at every position, with plain
    /// and grouped-query attention, tied and untied heads.
    #[test]
    fn cached_decoding_equals_the_full_forward() {
        let ids: Vec<i64> = (0..20).map(|i| (i * 7 + 3) % 37).collect();
        for (heads, kv) in [(4, 4), (4, 2)] {
            let m = model(heads, kv);
            let full = m
                .forward(tokens(&ids, 2))
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            let mut cache = KvCache::new();
            let mut got = m.decode(tokens(&ids[..9], 2), &mut cache);
            for i in 9..ids.len() {
                let step = m.decode(tokens(&ids[i..i + 1], 2), &mut cache);
                got = Tensor::cat(vec![got, step], 1);
            }
            assert_eq!(cache.len(), ids.len());
            let got = got.into_data().try_to_vec::<f32>().unwrap();
            assert_eq!(got.len(), full.len());
            let worst = full
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(
                worst < 1e-4,
                "heads {heads}/{kv}: largest difference {worst}"
            );
        }
    }
}
