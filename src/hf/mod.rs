//! Hugging Face file formats: `config.json` of every released family pdsweep loads (read and
//! checked; LLaMA's also written), safetensors
//! weights (single or sharded; F32, F16, BF16 in, F32 out), `tokenizer.json`, and pre-trained
//! teachers loaded into pdsweep's model. Exporting finished runs as model folders is
//! `report::export`'s.

mod config;
mod error;
pub(crate) mod families;
mod pretrained;
mod tokenizer;
mod weights;

pub(crate) use config::LlamaConfig;
pub(crate) use error::HfError;
pub use families::{ReleasedConfig, parse as parse_config};
pub use pretrained::{PretrainedModel, load_model, read_config};
pub use tokenizer::TokenizerFile;
pub use weights::write_safetensors;
pub(crate) use weights::{SINGLE, weights_sha256};
