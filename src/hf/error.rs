//! What can go wrong reading or writing Hugging Face files; every message names the file (and
//! the key or tensor) at fault.

use crate::error::Cause;
use std::path::PathBuf;

/// An error of the Hugging Face interop.
#[derive(Debug, thiserror::Error)]
pub enum HfError {
    /// A file could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// A `config.json` key pdsweep cannot honour (or a value of the wrong type).
    #[error("`{}`: key `{key}` {message}\n\nhint: pdsweep loads the families llama, qwen2, qwen3, mistral, gemma2, gemma3_text, gpt_neox, gpt2 and olmo2 (docs: guide/pretrained.md); a key that does not change the model's output may be removed from config.json", path.display())]
    Config {
        /// The config.json.
        path: PathBuf,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A weight file is damaged, or lacks or adds a tensor, or holds one of the wrong shape or
    /// type.
    #[error("`{}`", path.display())]
    Weights {
        /// The weight file (or the folder).
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: Cause,
    },
    /// A `tokenizer.json` cannot be loaded.
    #[error("tokenizer `{}` cannot be loaded", path.display())]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// A file could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
}
