//! Hugging Face interop: LLaMA `config.json` (read and checked, written), safetensors weights
//! (single or sharded; F32, F16, BF16 in, F32 out), `tokenizer.json`, pre-trained teachers
//! loaded into pdsweep's model, and finished runs exported as model folders with a model card
//! that `transformers` loads with `AutoModelForCausalLM`.

mod card;
mod config;
mod error;
mod export;
mod pretrained;
mod tokenizer;
mod weights;

pub use config::{ConfigError, LlamaConfig};
pub use error::HfError;
pub use export::{ExportPaths, ExportSummary, export_models};
pub use pretrained::{PretrainedModel, load_model, read_config};
pub use tokenizer::TokenizerFile;
pub use weights::{
    INDEX, SINGLE, WeightFiles, weight_file_paths, weights_sha256, write_safetensors,
};
