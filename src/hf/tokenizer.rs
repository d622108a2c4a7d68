//! A Hugging Face `tokenizer.json`: loaded with the `tokenizers` crate to learn its vocabulary
//! (the ids a model must cover) and hashed, so the token cache and the runs key on its content.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use super::error::HfError;

/// The one special token `tokenizer` puts before a text when encoding it with its special
/// tokens, if it puts exactly one.
fn bos_prefix(tokenizer: &Tokenizer) -> Option<u32> {
    let with = tokenizer.encode("a", true).ok()?;
    let plain = tokenizer.encode("a", false).ok()?;
    let (with, plain) = (with.get_ids(), plain.get_ids());
    match with.split_first() {
        Some((&first, rest)) if rest.starts_with(plain) && with.len() > plain.len() => Some(first),
        _ => None,
    }
}

/// What pdsweep needs to know about a `tokenizer.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenizerFile {
    /// Where it is.
    pub path: PathBuf,
    /// SHA-256 (hex) of its bytes.
    pub sha256: String,
    /// One past its largest token id (added tokens included): the vocabulary a model needs.
    pub vocab: u64,
    /// The token its post-processor puts before every text (`<bos>` of Gemma, Llama 3's
    /// `<|begin_of_text|>`), if it puts one: a model released with it was trained with it, so
    /// every window it sees begins with it.
    pub bos: Option<u32>,
    /// Its end-of-document token (`crate::data::end_of_document`), which ends every document
    /// of a corpus joined by `separator = "eos"`.
    pub eos: Option<u32>,
}

impl TokenizerFile {
    /// Loads and hashes the tokenizer at `path`.
    pub fn read(path: &Path) -> Result<TokenizerFile, HfError> {
        let bytes = std::fs::read(path).map_err(|e| HfError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let tokenizer = Tokenizer::from_bytes(&bytes).map_err(|e| HfError::Tokenizer {
            path: path.to_path_buf(),
            source: e,
        })?;
        let vocab = tokenizer
            .get_vocab(true)
            .values()
            .max()
            .map_or(0, |&id| u64::from(id) + 1);
        if vocab == 0 {
            return Err(HfError::Tokenizer {
                path: path.to_path_buf(),
                source: "it has an empty vocabulary".into(),
            });
        }
        Ok(TokenizerFile {
            path: path.to_path_buf(),
            sha256: crate::digest::hex(&Sha256::digest(&bytes)),
            vocab,
            bos: bos_prefix(&tokenizer),
            eos: crate::data::end_of_document(&tokenizer),
        })
    }

    /// Whether `other` maps every token to the same id as this one (the same file, or another
    /// file with the same vocabulary and added tokens).
    pub fn same_vocabulary(&self, other: &TokenizerFile) -> Result<bool, HfError> {
        if self.sha256 == other.sha256 {
            return Ok(true);
        }
        let load = |p: &Path| {
            Tokenizer::from_file(p).map_err(|e| HfError::Tokenizer {
                path: p.to_path_buf(),
                source: e,
            })
        };
        Ok(load(&self.path)?.get_vocab(true) == load(&other.path)?.get_vocab(true))
    }
}
