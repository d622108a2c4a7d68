//! A pre-trained model in a Hugging Face folder: its `config.json` read and checked by its
//! family, its identity (content hashes), its `tokenizer.json` if it has one, and its weights
//! loaded into pdsweep's transformer (a plain LLaMA) or the released decoder (any other
//! family).

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use sha2::{Digest, Sha256};

use super::error::HfError;
use super::families::{self, FamilyWeights, ReleasedConfig};
use super::tokenizer::TokenizerFile;
use super::weights::WeightFiles;
use crate::model::ModelShape;
use crate::model::{Decoder, TeacherModel, TransformerConfig};

/// A Hugging Face folder's `config.json` and what sits beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct PretrainedModel {
    /// The folder.
    pub dir: PathBuf,
    /// Its architecture.
    pub config: ReleasedConfig,
    /// SHA-256 (hex) of `config.json`.
    pub config_sha256: String,
    /// Its `tokenizer.json`, when it has one.
    pub tokenizer: Option<TokenizerFile>,
}

/// Reads `dir/config.json`: the architecture and the file's SHA-256.
pub fn read_config(dir: &Path) -> Result<(ReleasedConfig, String), HfError> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| HfError::Read {
        path: path.clone(),
        source: e.into(),
    })?;
    let config = families::parse(&text).map_err(|e| HfError::Config {
        path: path.clone(),
        key: e.key,
        message: e.message,
    })?;
    Ok((config, crate::digest::hex(&Sha256::digest(text.as_bytes()))))
}

impl PretrainedModel {
    /// Reads the folder `dir` (its config.json, and its tokenizer.json if present; the
    /// weights are not touched).
    pub fn read(dir: &Path) -> Result<PretrainedModel, HfError> {
        if !dir.is_dir() {
            return Err(HfError::Read {
                path: dir.to_path_buf(),
                source: "not a folder (expected a Hugging Face model folder with config.json and model.safetensors)".into(),
            });
        }
        let (config, config_sha256) = read_config(dir)?;
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer = tokenizer_path
            .is_file()
            .then(|| TokenizerFile::read(&tokenizer_path))
            .transpose()?;
        Ok(PretrainedModel {
            dir: dir.to_path_buf(),
            config,
            config_sha256,
            tokenizer,
        })
    }

    /// The shape of the model (exact for a plain LLaMA, the nearest LLaMA shape for another
    /// architecture; check it with [`ModelShape::validate`]).
    pub fn shape(&self) -> ModelShape {
        self.config.shape()
    }
}

/// Loads the weights of the folder `dir` into a model for `config`'s context and vocabulary on
/// `device`: pdsweep's transformer for a plain LLaMA (`config` is its architecture), the released
/// decoder of its family otherwise.
///
/// `config_sha256` is the hash the plan recorded: a `config.json` changed since is refused (the
/// run's identity would not describe the model any more). A `config` with fewer vocabulary rows
/// than the folder's `vocab_size` keeps the first rows of the embedding and head (a padded
/// vocabulary cut to its tokenizer's, as the plan decided).
pub fn load_model(
    dir: &Path,
    config: &TransformerConfig,
    config_sha256: &str,
    device: &Device,
) -> Result<TeacherModel, HfError> {
    let (released, sha) = read_config(dir)?;
    if sha != config_sha256 {
        return Err(HfError::Weights {
            path: dir.join("config.json"),
            source: "it changed since the sweep was planned\n\nhint: run `pdsweep plan` (or `run`) again; the changed teacher becomes a new run".into(),
        });
    }
    let mut files = WeightFiles::open(dir)?;
    if released.as_llama().is_some() {
        if released.arch.vocab > config.shape.vocab {
            files.cut_vocabulary(released.arch.vocab as usize);
        }
        let model = match config.from_weights(&mut files, device) {
            Ok(m) => m,
            Err(reason) => {
                return Err(files.take_error().unwrap_or(HfError::Weights {
                    path: dir.to_path_buf(),
                    source: reason.into(),
                }));
            }
        };
        files.finish(config.shape.tie_embeddings)?;
        return Ok(TeacherModel::own(model, *config));
    }
    load_decoder(dir, &released, config, &mut files, device).map(TeacherModel::released)
}

/// The released decoder of `released`'s family from `files`.
fn load_decoder(
    dir: &Path,
    released: &ReleasedConfig,
    config: &TransformerConfig,
    files: &mut WeightFiles,
    device: &Device,
) -> Result<Decoder, HfError> {
    let mut arch = released.arch.clone();
    arch.vocab = arch.vocab.min(config.shape.vocab);
    let names: Vec<String> = files.names().map(str::to_string).collect();
    let naming = families::naming(&arch, &names);
    let mut layout = FamilyWeights::new(files, naming.as_ref());
    let decoder = Decoder::from_weights(&arch, config.context, &mut layout, device);
    let error = layout.take_error();
    let decoder = decoder.map_err(|reason| {
        error.unwrap_or(HfError::Weights {
            path: dir.to_path_buf(),
            source: reason.into(),
        })
    })?;
    let vocab = naming.vocab_tensors();
    files.finish_with(
        arch.tie_embeddings,
        (&vocab[1], &vocab[0]),
        &|n| naming.is_buffer(n),
        &format!("the `{}` model config.json describes", arch.family),
    )?;
    Ok(decoder)
}
