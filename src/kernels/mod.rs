//! Fused kernels for training on the CPU: the output head fused with its losses in chunks of
//! positions, the language-model cross-entropy (log-softmax fused in), the sparse distillation losses
//! and the cross-tokenizer ones (ULD, GOLD), SwiGLU, RMSNorm, causal attention with rotary
//! embeddings and the bias-free linear layer, each with its own backward pass, vectorised (AVX-512 or AVX2, chosen at run
//! time) and spread over the current rayon pool. They plug into burn as a backend extension
//! for the flex backend; every other backend runs the same maths from burn's own ops.
//!
//! - `ops`: the tensor functions the model and the objectives call
//! - `extension`: burn's side (flex primitives, autodiff backward steps)
//! - `chunked_attention`: memory-efficient causal attention for training on every other
//!   backend (chunked forward, recomputing backward, from burn's primitive ops)
//! - [`composite`]: the burn-op versions (GPU backends, and the tests' reference)
//! - `cpu`: the kernels on plain slices
//! - [`cross_reference`]: the cross-tokenizer losses in f64, the reference of their kernels

mod chunked_attention;
pub mod composite;
mod cpu;
pub mod cross_reference;
mod extension;
mod head;
pub(crate) mod ops;

pub use cpu::cross::units;

pub use cpu::simd::isa;
pub(crate) use cpu::softmax::TAIL as TAIL_MASK;
pub(crate) use cpu::truncation::{exp_nonpositive, exp_sum_f64, none_above, row_max};
pub use head::{CrossDistillation, Distillation, HeadWeight};

pub use ops::{
    causal_attention, chunked_causal_attention, composite_only, cross_entropy, cross_head_loss,
    default_head_chunk, head_logits, head_loss, linear, rms_norm, sparse_distill, swiglu,
};
