//! Peak resident memory of each run, predicted from its shape, batch, vocabulary and head
//! chunk: what `plan` shows per run, what `[limits] memory` is checked against, and what `run`
//! records next to the measured peak (`runs.peak_rss_bytes`).
//!
//! A training step holds the model's f32 weights, their gradients, AdamW's two moments and the
//! update's new weights (20 bytes a parameter), the activations every layer keeps for its backward pass (per position: the block's input and both norms' outputs, q, k
//! and v, the attention output, SwiGLU's gate, up and product: 6·d + 2·d_kv + 3·d_ff floats), the
//! fused head's buffers (one chunk of logits, ∂h and ∂W) and the teacher's targets; an online
//! student also holds its teacher and one forward pass of it. A logit pass holds the teacher,
//! one layer's temporaries of a forward pass and two copies of one chunk of logits; an offline
//! student the index of its store. Every process also pays a base (code, allocator pad, corpus,
//! and a loaded `tokenizer.json`). Measured against `run`'s
//! recorded peaks in `docs/src/science/memory.md`.

use crate::model::ModelShape;

/// What every pdsweep process holds before a run's tensors: code, the allocator's pad
/// (`crate::alloc`) and the corpus's token caches (measured: 56 MiB for the quick start).
pub(crate) const BASE_BYTES: u64 = 64 << 20;

/// What a `tokenizer.json` adds to the base once loaded (its vocabulary and merges as the
/// `tokenizers` crate holds them; measured 185 MiB for SmolLM2's 49,152 tokens).
pub(crate) const TOKENIZER_FILE_BYTES: u64 = 192 << 20;

/// What an offline student's store reader adds (`crate::distill::reader`): the index of the
/// store's windows (its shards' headers and digests, about 80 bytes a window) and one step's
/// blocks; it reads each window from disk when a batch asks for it.
pub(crate) const STORE_READER_BYTES: u64 = 8 << 20;

/// Bytes per parameter of a training step's state: the f32 weight, its gradient, AdamW's two
/// moments and the updated weight made before the old is dropped.
const STATE_BYTES_PER_PARAM: u64 = 20;

/// Positions of one forward pass of a logit pass (`crate::distill::teacher_support`).
const PASS_POSITIONS: u64 = 4096;

/// Floats of one chunk of logits in a logit pass: the chunk and its copy on the host.
const PASS_COPIES: u64 = 2;

/// A run's predicted peak, in parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryEstimate {
    /// Weights, gradients and optimiser state (or a teacher's weights alone).
    pub state: u64,
    /// Activations kept for (or made by) one step.
    pub activations: u64,
    /// The head's chunk of logits and its other buffers.
    pub head: u64,
    /// An online student's teacher (weights and one forward pass), or an offline student's
    /// shard of its logit store.
    pub teacher: u64,
    /// What the process holds besides the run's tensors: `BASE_BYTES`, and
    /// `TOKENIZER_FILE_BYTES` with a `tokenizer.json` corpus.
    pub base: u64,
}

impl MemoryEstimate {
    /// The whole predicted peak, the process's base included.
    pub fn total(&self) -> u64 {
        self.base
            .saturating_add(self.state)
            .saturating_add(self.activations)
            .saturating_add(self.head)
            .saturating_add(self.teacher)
    }
}

/// Floats one position keeps per layer for the backward pass.
fn kept_per_position(s: &ModelShape) -> u64 {
    let kv = s.d_model / s.n_heads.max(1) * s.n_kv_heads;
    6 * s.d_model + 2 * kv + 3 * s.d_ff
}

/// Floats one position needs inside one layer of a forward pass without gradients.
fn forward_per_position(s: &ModelShape) -> u64 {
    let kv = s.d_model / s.n_heads.max(1) * s.n_kv_heads;
    4 * s.d_model + 2 * kv + 3 * s.d_ff
}

/// The predicted peak of a training step of `shape` on `positions` positions with `chunk`
/// positions per head chunk and a teacher support of `width` entries per position.
pub(crate) fn training_step(
    shape: &ModelShape,
    positions: u64,
    chunk: u64,
    width: u64,
) -> MemoryEstimate {
    let params = shape.params().total;
    let (d, vocab) = (shape.d_model, shape.vocab);
    let activations = positions
        .saturating_mul(kept_per_position(shape) * shape.n_layers + 3 * d)
        .saturating_mul(4);
    let chunk = chunk.min(positions.max(1));
    let head = (chunk.saturating_mul(vocab) + positions * d + vocab * d).saturating_mul(4)
        + positions.saturating_mul(width).saturating_mul(16);
    MemoryEstimate {
        state: params.saturating_mul(STATE_BYTES_PER_PARAM),
        activations,
        head,
        teacher: 0,
        base: BASE_BYTES,
    }
}

/// The predicted peak of a forward pass of `shape` (no gradients) over `positions` positions
/// whose head makes `chunk` positions of logits at a time: its weights, one layer's
/// temporaries, the hidden states and two copies of a chunk of logits.
pub(crate) fn forward_pass(shape: &ModelShape, positions: u64, chunk: u64) -> MemoryEstimate {
    let params = shape.params().total;
    let positions = positions.min(PASS_POSITIONS);
    let chunk = chunk.min(positions.max(1));
    MemoryEstimate {
        state: params.saturating_mul(4),
        activations: positions
            .saturating_mul(forward_per_position(shape) + 2 * shape.d_model)
            .saturating_mul(4),
        head: chunk
            .saturating_mul(shape.vocab)
            .saturating_mul(4 * PASS_COPIES),
        teacher: 0,
        base: BASE_BYTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(vocab: u64) -> ModelShape {
        ModelShape {
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            n_kv_heads: 4,
            d_ff: 352,
            vocab,
            tie_embeddings: true,
        }
    }

    #[test]
    fn the_head_grows_with_the_chunk_not_with_positions_times_vocabulary() {
        let big = training_step(&shape(152_064), 2048, 64, 32);
        let bigger_batch = training_step(&shape(152_064), 8192, 64, 32);
        // four times the positions: the head's logits stay one chunk
        let chunk_logits = 64 * 152_064 * 4;
        assert!(
            big.head >= chunk_logits && big.head < chunk_logits + 152_064 * 128 * 4 + (1 << 24)
        );
        assert!(bigger_batch.head - big.head < 8192 * 128 * 4 + 8192 * 32 * 16);
        // doubling the chunk adds one more chunk of logits
        let wider = training_step(&shape(152_064), 2048, 128, 32);
        assert_eq!(wider.head - big.head, 64 * 152_064 * 4);
        // state: 20 bytes per parameter
        assert_eq!(big.state, shape(152_064).params().total * 20);
    }

    #[test]
    fn a_forward_pass_holds_its_weights_one_layer_and_two_chunks() {
        let s = shape(49_152);
        let f = forward_pass(&s, 16 * 256, 341);
        assert_eq!(f.state, s.params().total * 4);
        assert_eq!(f.head, 341 * 49_152 * 8);
        assert_eq!(
            f.activations,
            4096 * (4 * 128 + 2 * 128 + 3 * 352 + 256) * 4
        );
    }
}
