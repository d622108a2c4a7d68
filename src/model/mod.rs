//! The transformer: one LLaMA-style decoder, written once against burn's `Tensor` and run
//! unchanged on every backend (the backend is chosen by the `Device` passed to `init`).

mod transformer;

pub use transformer::{Transformer, TransformerConfig};
