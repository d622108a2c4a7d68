//! The models: pdsweep's own LLaMA-style transformer, written once against burn's `Tensor` and
//! run unchanged on every backend (the backend is chosen by the `Device` passed to `init`), and
//! its weights by their Hugging Face names; the shape it is built from, with its exact
//! parameter counts and the rule that derives a shape from a target size; incremental decoding
//! with a key/value cache for generation. Beside it, the forward-only decoder of released
//! models of other families (`Architecture`, [`Decoder`]), and the [`LanguageModel`] view that
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

pub(crate) use arch::{
    Activation, Architecture, Family, Mlp, Norm, Placement, Positions, QkNorm, Rope, RopeScaling,
};
pub(crate) use decode::KvCache;
pub(crate) use decoder::LayerPart;
pub use decoder::{Decoder, Layout, Part};
pub use language_model::{LanguageModel, TeacherModel};
pub use shape::{ModelShape, ParamCount, ShapeRule};
pub(crate) use stacked::{StackedTransformer, solo_shapes, solo_weights};
pub(crate) use transformer::{DEFAULT_NORM_EPS, DEFAULT_ROPE_THETA};
pub use transformer::{Transformer, TransformerConfig};
pub use weights::NamedTensor;
pub(crate) use weights::WeightSource;
