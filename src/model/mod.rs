//! The models: pdsweep's own LLaMA-style transformer, written once against burn's `Tensor` and
//! run unchanged on every backend (the backend is chosen by the `Device` passed to `init`), and
//! its weights by their Hugging Face names; the shape it is built from, with its exact
//! parameter counts and the rule that derives a shape from a target size; incremental decoding
//! with a key/value cache for generation. Beside it, the forward-only decoder of released
//! models of other families ([`Architecture`], [`Decoder`]), and the [`LanguageModel`] view that
//! teachers of either kind are used through.

mod arch;
mod decode;
mod decoder;
mod language_model;
mod shape;
mod stacked;
mod transformer;
mod weights;

pub(crate) use weights::transpose;

pub use arch::{
    Activation, Architecture, Family, Mlp, Norm, Placement, Positions, QkNorm, Rope, RopeScaling,
};
pub use decode::KvCache;
pub use decoder::{Affine, Decoder, LayerPart, Layout, Part, inverse_frequencies};
pub use language_model::{LanguageModel, TeacherModel};
pub use shape::{ModelShape, ParamCount, ShapeRule};
pub use stacked::{StackError, StackedTransformer, solo_shapes, solo_weights, with_solo_weights};
pub use transformer::{DEFAULT_NORM_EPS, DEFAULT_ROPE_THETA, Transformer, TransformerConfig};
pub use weights::{NamedTensor, WeightSource, weight_names};
