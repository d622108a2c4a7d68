//! The transformer: one LLaMA-style decoder, written once against burn's `Tensor` and run
//! unchanged on every backend (the backend is chosen by the `Device` passed to `init`), and its
//! weights by their Hugging Face names; the shape it is built from, with its exact parameter
//! counts and the rule that derives a shape from a target size; incremental decoding with a
//! key/value cache for generation.

mod decode;
mod shape;
mod stacked;
mod transformer;
mod weights;

pub use decode::KvCache;
pub use shape::{ModelShape, ParamCount, ShapeRule};
pub use stacked::{StackError, StackedTransformer, solo_shapes, solo_weights, with_solo_weights};
pub use transformer::{DEFAULT_NORM_EPS, DEFAULT_ROPE_THETA, Transformer, TransformerConfig};
pub use weights::{NamedTensor, WeightSource, weight_names};
