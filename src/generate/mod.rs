//! Text from a model: prompts continued token by token with a key/value cache
//! (`crate::model::KvCache`), so that generation is linear in its length, greedy or sampled
//! ([`Sampling`]), batched over prompts of one length. One code path serves `pdsweep sample`
//! and the distillation degree's continuations (`crate::similarity`).
//!
//! **The window.** A model has seen at most its context of tokens; when the cache is full, the
//! last half of the context is kept and re-read (prefilled) at positions 0.., and generation
//! goes on from there. That costs one prefill of context/2 tokens per context/2 new tokens, so
//! generation stays linear; within the first context of tokens it is exactly the model's
//! distribution given the whole prefix.

mod sampling;

pub(crate) use sampling::Sampler;
pub use sampling::{Sampling, argmax};

use burn::tensor::{Device, Int, Tensor, TensorData};

use crate::model::{KvCache, Transformer};

/// Why generation could not run.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// A prompt without any token (a model needs one to condition on).
    #[error("prompt {0} has no tokens: give at least one")]
    EmptyPrompt(usize),
    /// Sampling settings out of range.
    #[error("{0}")]
    Sampling(String),
    /// A token id outside the model's vocabulary.
    #[error("prompt {index} has token {token}, outside the model's vocabulary of {vocab}")]
    Token {
        /// Which prompt.
        index: usize,
        /// The offending id.
        token: u32,
        /// The model's vocabulary.
        vocab: usize,
    },
    /// Reading logits back from the device failed.
    #[error("reading the logits back from the device failed: {0}")]
    Device(String),
}

/// What one call generates: for each prompt, in order, the new tokens only.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// New tokens per prompt.
    pub tokens: Vec<Vec<u32>>,
    /// Model calls made (prefills and steps), for the cost.
    pub forward_calls: usize,
}

/// Continues each of `prompts` by `new_tokens` tokens.
///
/// Sequence `i` draws from its own stream of `seed` (`Sampler::new(seed, first_stream + i)`), so a
/// prompt gives the same text whatever it is batched with.
pub fn generate(
    model: &Transformer,
    prompts: &[Vec<u32>],
    new_tokens: usize,
    how: &Sampling,
    seed: u64,
    first_stream: u64,
    device: &Device,
) -> Result<Generated, GenerateError> {
    how.check().map_err(GenerateError::Sampling)?;
    let vocab = model.vocab();
    for (index, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return Err(GenerateError::EmptyPrompt(index));
        }
        if let Some(&token) = p.iter().find(|&&t| t as usize >= vocab) {
            return Err(GenerateError::Token {
                index,
                token,
                vocab,
            });
        }
    }
    let mut out = vec![Vec::new(); prompts.len()];
    let mut calls = 0;
    // batch the prompts of each length together
    let mut lengths: Vec<usize> = prompts.iter().map(Vec::len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    for len in lengths {
        let members: Vec<usize> = (0..prompts.len())
            .filter(|&i| prompts[i].len() == len)
            .collect();
        let group: Vec<&[u32]> = members.iter().map(|&i| prompts[i].as_slice()).collect();
        let mut samplers: Vec<Sampler> = members
            .iter()
            .map(|&i| Sampler::new(seed, first_stream + i as u64))
            .collect();
        let (tokens, n) = continue_batch(model, &group, new_tokens, how, &mut samplers, device)?;
        calls += n;
        for (&i, t) in members.iter().zip(tokens) {
            out[i] = t;
        }
    }
    Ok(Generated {
        tokens: out,
        forward_calls: calls,
    })
}

/// Continues prompts of one length together.
fn continue_batch(
    model: &Transformer,
    prompts: &[&[u32]],
    new_tokens: usize,
    how: &Sampling,
    samplers: &mut [Sampler],
    device: &Device,
) -> Result<(Vec<Vec<u32>>, usize), GenerateError> {
    let batch = prompts.len();
    let context = model.context();
    let keep = (context / 2).max(1);
    let mut seqs: Vec<Vec<u32>> = prompts.iter().map(|p| p.to_vec()).collect();
    let mut cache = KvCache::new();
    let mut calls = 0;
    // the first call reads the prompt (its last `keep` tokens if it fills the context)
    let start = if seqs[0].len() >= context {
        seqs[0].len() - keep
    } else {
        0
    };
    let mut feed: Vec<Vec<u32>> = seqs.iter().map(|s| s[start..].to_vec()).collect();
    for _ in 0..new_tokens {
        if cache.len() + feed[0].len() > context {
            cache = KvCache::new();
            feed = seqs.iter().map(|s| s[s.len() - keep..].to_vec()).collect();
        }
        let logits = model.decode(ids(&feed, device), &mut cache);
        calls += 1;
        let [_, seq, vocab] = logits.dims();
        let last = logits.narrow(1, seq - 1, 1).reshape([batch, vocab]);
        let rows = last
            .into_data()
            .try_to_vec::<f32>()
            .map_err(|e| GenerateError::Device(format!("{e:?}")))?;
        for (b, seqn) in seqs.iter_mut().enumerate() {
            let next = samplers[b].pick(&rows[b * vocab..(b + 1) * vocab], how);
            seqn.push(next);
        }
        feed = seqs.iter().map(|s| vec![s[s.len() - 1]]).collect();
    }
    let plen = prompts[0].len();
    Ok((
        seqs.into_iter().map(|s| s[plen..].to_vec()).collect(),
        calls,
    ))
}

/// `rows` (all of one length) as a `[batch, len]` id tensor.
fn ids(rows: &[Vec<u32>], device: &Device) -> Tensor<2, Int> {
    let len = rows[0].len();
    let data: Vec<i64> = rows.iter().flatten().map(|&t| i64::from(t)).collect();
    Tensor::from_data(TensorData::new(data, [rows.len(), len]), device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelShape, TransformerConfig};

    fn model(context: usize) -> Transformer {
        let shape = ModelShape {
            n_layers: 2,
            d_model: 16,
            n_heads: 2,
            n_kv_heads: 2,
            d_ff: 40,
            vocab: 29,
            tie_embeddings: true,
        };
        let device = Device::flex();
        device.seed(3);
        TransformerConfig::new(shape, context).init(&device)
    }

    /// Greedy generation with the cache picks, at every step, the argmax of the full forward
    /// over the whole sequence so far (within the first context).
    #[test]
    fn greedy_generation_follows_the_full_forward() {
        let device = Device::flex();
        let m = model(32);
        let prompt = vec![3u32, 14, 15, 9, 2];
        let got = generate(
            &m,
            std::slice::from_ref(&prompt),
            20,
            &Sampling::greedy(),
            0,
            0,
            &device,
        )
        .unwrap();
        let mut seq = prompt;
        for &next in &got.tokens[0] {
            let logits = m.forward(ids(&[seq.clone()], &device));
            let [_, len, vocab] = logits.dims();
            let row = logits
                .narrow(1, len - 1, 1)
                .reshape([vocab])
                .into_data()
                .try_to_vec::<f32>()
                .unwrap();
            assert_eq!(next, argmax(&row));
            seq.push(next);
        }
        assert_eq!(got.forward_calls, 20);
    }

    /// Past the context the window slides (every token is still produced) and a prompt's text
    /// does not depend on what it is batched with.
    #[test]
    fn the_window_slides_and_batching_does_not_change_a_prompt() {
        let device = Device::flex();
        let m = model(8);
        let how = Sampling::default();
        let a = vec![1u32, 2, 3];
        let b = vec![4u32, 5, 6];
        let both = generate(&m, &[a.clone(), b], 30, &how, 9, 0, &device).unwrap();
        let alone = generate(&m, &[a], 30, &how, 9, 0, &device).unwrap();
        assert_eq!(both.tokens[0], alone.tokens[0]);
        assert_eq!(both.tokens[1].len(), 30);
        assert!(both.tokens[1].iter().all(|&t| t < 29));
        let long: Vec<u32> = (0..20).map(|i| i % 29).collect();
        let g = generate(&m, &[long], 5, &how, 9, 0, &device).unwrap();
        assert_eq!(g.tokens[0].len(), 5);
    }

    #[test]
    fn empty_prompts_and_foreign_tokens_are_refused() {
        let device = Device::flex();
        let m = model(8);
        let how = Sampling::default();
        let e = generate(&m, &[vec![]], 3, &how, 0, 0, &device).unwrap_err();
        assert!(matches!(e, GenerateError::EmptyPrompt(0)));
        let e = generate(&m, &[vec![1, 99]], 3, &how, 0, 0, &device).unwrap_err();
        assert!(e.to_string().contains("99"));
    }
}
