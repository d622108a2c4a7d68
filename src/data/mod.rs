//! Corpora and tokens: the built-in synthetic corpus, real text (txt, jsonl, parquet), byte and
//! BPE tokenizers, the memory-mapped token cache, the fixed held-out split, and batch order.

mod batches;
mod cache;
mod config;
mod corpus;
mod error;
pub mod split;
pub mod synthetic;
mod text;
mod tokenize;

use std::path::Path;
use std::sync::Arc;

pub use batches::{Batch, Batcher, batch_tensors, eval_batches, mix};
pub use cache::TokenFile;
pub use config::{DataConfig, TokenizerRef};
pub use corpus::{CorpusFacts, CorpusFiles, find_files, tokenizer_json};
pub use error::DataError;
pub use text::{Document, corpus_files, read_documents};
pub use tokenize::Tokenizer;

use crate::spec::CorpusKind;
use synthetic::{SyntheticCorpus, SyntheticSpec};

/// Stream seed of the synthetic held-out split (never used for training).
const SYNTHETIC_VAL_STREAM: u64 = 0x0005_EED0_F4E1_D0A7;

/// A sequence of token ids, in memory or in the cache file.
#[derive(Debug, Clone)]
pub enum Stream {
    /// Generated tokens.
    Memory(Vec<u32>),
    /// `start..end` of a cache file.
    File {
        /// The cache.
        file: Arc<TokenFile>,
        /// First token.
        start: usize,
        /// One past the last token.
        end: usize,
    },
}

impl Stream {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        match self {
            Stream::Memory(v) => v.len(),
            Stream::File { start, end, .. } => end - start,
        }
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tokens `a..b` (clamped to the stream).
    pub fn slice(&self, a: usize, b: usize) -> Vec<u32> {
        let b = b.min(self.len());
        let a = a.min(b);
        match self {
            Stream::Memory(v) => v[a..b].to_vec(),
            Stream::File { file, start, .. } => file.slice(start + a, start + b),
        }
    }
}

/// What is known about a corpus, recorded with each run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CorpusInfo {
    /// Human-readable description.
    pub description: String,
    /// Identifies the tokens exactly: the token-cache key of a text corpus (settings plus each
    /// file's path, size and modification time; when byte-identical tokens were cached before
    /// under another key — the same texts copied or touched — that older key), or the generator
    /// version and seeds of the synthetic corpus. Logit stores record it so a store made from
    /// other tokens is refused.
    pub key: String,
    /// Tokens available for training (the generated length for the synthetic corpus).
    pub train_tokens: u64,
    /// Held-out tokens.
    pub val_tokens: u64,
    /// UTF-8 bytes per held-out token (1 for byte tokens; the synthetic corpus counts a
    /// token as a byte, so its bits per byte are bits per token).
    pub val_bytes_per_token: f64,
    /// Unigram entropy of the held-out tokens (nats): the loss of a frequency-only model.
    pub unigram_entropy_nats: f64,
    /// True entropy rate (synthetic only): no model can beat it in expectation.
    pub entropy_rate_nats: Option<f64>,
    /// Loss of the true generating process on this held-out split (synthetic only).
    pub oracle_val_loss: Option<f64>,
    /// Files read (text corpora; 0 for the synthetic corpus and older records).
    #[serde(default)]
    pub files: u64,
    /// Documents read, duplicates included.
    #[serde(default)]
    pub documents: u64,
    /// Groups of byte-identical documents, by source; the first of each was kept, the others
    /// dropped.
    #[serde(default)]
    pub duplicate_groups: Vec<Vec<String>>,
    /// How the held-out split was chosen, in words.
    #[serde(default)]
    pub val_split: String,
    /// Fraction of held-out 64-token windows that also occur in training (text corpora).
    #[serde(default)]
    pub val_overlap: Option<f64>,
    /// UTF-8 bytes of the training split (text corpora).
    #[serde(default)]
    pub train_bytes: u64,
}

/// The training and held-out streams of a run.
#[derive(Debug)]
pub struct Prepared {
    /// Training tokens.
    pub train: Stream,
    /// Held-out tokens.
    pub val: Stream,
    /// Whether training windows are shuffled per epoch (real text) or read in order (a fresh
    /// generated stream).
    pub shuffle: bool,
    /// Facts about the corpus.
    pub info: CorpusInfo,
}

/// Prepares the data of a run that trains on `train_tokens` tokens. Paths in `data` are
/// relative to `base_dir` (the sweep file's folder); caches go to `cache_dir`.
pub fn prepare(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
    train_tokens: u64,
) -> Result<Prepared, DataError> {
    match data.corpus {
        CorpusKind::Synthetic => prepare_synthetic(data, train_tokens),
        _ => corpus::prepare_text(data, base_dir, cache_dir),
    }
}

fn prepare_synthetic(data: &DataConfig, train_tokens: u64) -> Result<Prepared, DataError> {
    let vocab = u32::try_from(data.vocab)
        .map_err(|_| DataError::TooSmall(format!("vocabulary `{}` is too large", data.vocab)))?;
    let spec = SyntheticSpec::with_world(
        vocab,
        data.corpus_seed,
        data.synthetic_sources,
        data.synthetic_copies,
    );
    let corpus = SyntheticCorpus::new(spec).map_err(DataError::TooSmall)?;
    let val = corpus.generate(SYNTHETIC_VAL_STREAM, data.val_tokens as usize + 1);
    let train = corpus.generate(mix(data.seed, 0x7A1A), train_tokens as usize + 1);
    let n = val.tokens.len() as f64;
    let info = CorpusInfo {
        description: format!(
            "synthetic (vocab {vocab}, seed {}{})",
            data.corpus_seed,
            spec.world_note()
        ),
        key: format!(
            "synthetic-v1-vocab{vocab}-seed{}{}",
            data.corpus_seed,
            spec.key_suffix()
        ),
        train_tokens: train.tokens.len() as u64,
        val_tokens: val.tokens.len() as u64,
        val_bytes_per_token: 1.0,
        unigram_entropy_nats: unigram_entropy(&val.tokens),
        entropy_rate_nats: Some(val.entropy_sum_nats / n),
        oracle_val_loss: Some(val.nll_sum_nats / n),
        val_split: "a separate generated stream".into(),
        ..CorpusInfo::default()
    };
    Ok(Prepared {
        train: Stream::Memory(train.tokens),
        val: Stream::Memory(val.tokens),
        shuffle: false,
        info,
    })
}

/// Entropy (nats) of the token frequencies of `tokens`.
pub fn unigram_entropy(tokens: &[u32]) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for &t in tokens {
        *counts.entry(t).or_insert(0u64) += 1;
    }
    let n = tokens.len() as f64;
    counts
        .values()
        .map(|&c| c as f64 / n)
        .map(|p| -p * p.ln())
        .sum()
}
