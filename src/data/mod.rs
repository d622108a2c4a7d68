//! Corpora and tokens: the built-in synthetic corpus, real text (txt, jsonl, parquet), byte and
//! BPE tokenizers, the memory-mapped token cache, the fixed held-out split, and batch order.

mod batches;
mod cache;
mod error;
pub mod synthetic;
mod text;
mod tokenize;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use batches::{Batch, Batcher, eval_batches, mix};
pub use cache::{TokenFile, write_atomic};
pub use error::DataError;
pub use text::{Document, corpus_files, read_documents};
pub use tokenize::Tokenizer;

use crate::plan::DataConfig;
use crate::spec::{CorpusKind, TokenizerKind, hex};
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CorpusInfo {
    /// Human-readable description.
    pub description: String,
    /// Identifies the tokens exactly: the token-cache key of a text corpus (settings plus each
    /// file's path, size and modification time), or the generator version and seeds of the
    /// synthetic corpus. Logit stores record it so a store made from other tokens is refused.
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
        _ => prepare_text(data, base_dir, cache_dir),
    }
}

fn prepare_synthetic(data: &DataConfig, train_tokens: u64) -> Result<Prepared, DataError> {
    let vocab = u32::try_from(data.vocab)
        .map_err(|_| DataError::TooSmall(format!("vocabulary `{}` is too large", data.vocab)))?;
    let corpus = SyntheticCorpus::new(SyntheticSpec {
        vocab,
        seed: data.corpus_seed,
    })
    .map_err(DataError::TooSmall)?;
    let val = corpus.generate(SYNTHETIC_VAL_STREAM, data.val_tokens as usize + 1);
    let train = corpus.generate(mix(data.seed, 0x7A1A), train_tokens as usize + 1);
    let n = val.tokens.len() as f64;
    let info = CorpusInfo {
        description: format!("synthetic (vocab {vocab}, seed {})", data.corpus_seed),
        key: format!("synthetic-v1-vocab{vocab}-seed{}", data.corpus_seed),
        train_tokens: train.tokens.len() as u64,
        val_tokens: val.tokens.len() as u64,
        val_bytes_per_token: 1.0,
        unigram_entropy_nats: unigram_entropy(&val.tokens),
        entropy_rate_nats: Some(val.entropy_sum_nats / n),
        oracle_val_loss: Some(val.nll_sum_nats / n),
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

/// The cache key of a text corpus: its settings and each file's path, size and modification
/// time (content hashing a large corpus on every run would cost more than it protects).
fn cache_key(data: &DataConfig, files: &[PathBuf]) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "{:?}|{:?}|{}|{}|{:?}",
        data.corpus, data.tokenizer, data.vocab, data.val_tokens, data.text_column
    ));
    if let Some(file) = &data.tokenizer_file {
        h.update(format!("|tokenizer-sha256={}", file.sha256)); // the file's content, not its path
    }
    for f in files {
        let meta = std::fs::metadata(f).ok();
        let modified = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        h.update(format!(
            "|{}|{:?}|{:?}",
            f.display(),
            meta.map(|m| m.len()),
            modified
        ));
    }
    hex(&h.finalize()[..8])
}

fn prepare_text(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<Prepared, DataError> {
    let path = base_dir.join(data.path.as_deref().unwrap_or_default());
    let files = corpus_files(&path, data.corpus)?;
    let key = cache_key(data, &files);
    let token_path = cache_dir.join(format!("tokens-{key}.bin"));
    let file = match TokenFile::open(&token_path) {
        Ok(file) => file,
        Err(DataError::Missing { .. }) => {
            build_cache(
                data,
                &files,
                &token_path,
                &cache_dir.join(format!("tokenizer-{key}.json")),
                base_dir,
            )?;
            TokenFile::open(&token_path)?
        }
        Err(e) => return Err(e),
    };
    let file = Arc::new(file);
    let (train_len, len) = (file.train_len, file.len());
    let val = Stream::File {
        file: file.clone(),
        start: train_len,
        end: len,
    };
    let val_tokens = val.slice(0, val.len());
    let info = CorpusInfo {
        key: key.clone(),
        description: format!(
            "{} at {} ({} files, {} tokenizer)",
            data.corpus,
            path.display(),
            files.len(),
            tokenizer_name(data)
        ),
        train_tokens: train_len as u64,
        val_tokens: (len - train_len) as u64,
        val_bytes_per_token: file.val_bytes as f64 / (len - train_len).max(1) as f64,
        unigram_entropy_nats: unigram_entropy(&val_tokens),
        entropy_rate_nats: None,
        oracle_val_loss: None,
    };
    Ok(Prepared {
        train: Stream::File {
            file,
            start: 0,
            end: train_len,
        },
        val,
        shuffle: true,
        info,
    })
}

fn tokenizer_name(data: &DataConfig) -> String {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::Bpe), _) => "bpe".into(),
        (Some(TokenizerKind::File), Some(file)) => format!("`{}`", file.path),
        _ => "byte".into(),
    }
}

/// The `tokenizer.json` a run's tokens come from: the sweep's tokenizer file, or the BPE
/// tokenizer trained into `cache_dir` (once the cache exists); `None` for byte tokens and the
/// synthetic corpus.
pub fn tokenizer_json(data: &DataConfig, base_dir: &Path, cache_dir: &Path) -> Option<PathBuf> {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::File), Some(file)) => Some(base_dir.join(&file.path)),
        (Some(TokenizerKind::Bpe), _) => {
            let path = base_dir.join(data.path.as_deref().unwrap_or_default());
            let files = corpus_files(&path, data.corpus).ok()?;
            let json = cache_dir.join(format!("tokenizer-{}.json", cache_key(data, &files)));
            json.is_file().then_some(json)
        }
        _ => None,
    }
}

/// The tokenizer of a text corpus: bytes, BPE trained on `docs` (saved to `bpe_path`), or the
/// sweep's tokenizer file, checked against the hash the plan recorded.
fn corpus_tokenizer(
    data: &DataConfig,
    docs: &[Document],
    bpe_path: &Path,
    base_dir: &Path,
) -> Result<Tokenizer, DataError> {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::Bpe), _) => {
            let t = Tokenizer::train_bpe(docs.iter().map(|d| d.text.as_str()), data.vocab)?;
            t.save(bpe_path)?;
            Ok(t)
        }
        (Some(TokenizerKind::File), Some(file)) => {
            let path = base_dir.join(&file.path);
            let bytes = std::fs::read(&path).map_err(|e| DataError::Missing {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            if hex(&Sha256::digest(&bytes)) != file.sha256 {
                return Err(DataError::Tokenizer(format!(
                    "`{}` changed since the sweep was planned\n\nhint: run `pdsweep plan` (or `run`) again",
                    path.display()
                )));
            }
            Tokenizer::from_file(&path)
        }
        (Some(TokenizerKind::File), None) => Err(DataError::Tokenizer(
            "the run names a tokenizer file but not which".into(),
        )),
        _ => Ok(Tokenizer::Byte),
    }
}

/// Reads, tokenises and caches a text corpus; the last `val_tokens` tokens are held out.
fn build_cache(
    data: &DataConfig,
    files: &[PathBuf],
    token_path: &Path,
    tokenizer_path: &Path,
    base_dir: &Path,
) -> Result<(), DataError> {
    let column = data.text_column.as_deref().unwrap_or("text");
    let docs = read_documents(files, data.corpus, column)?;
    let tokenizer = corpus_tokenizer(data, &docs, tokenizer_path, base_dir)?;
    let mut tokens = Vec::new();
    for doc in &docs {
        tokenizer.encode_into(&doc.text, &mut tokens)?;
        tokenizer.encode_plain("\n\n", &mut tokens)?;
    }
    if let Some(&id) = tokens.iter().find(|&&t| u64::from(t) >= data.vocab) {
        return Err(DataError::Tokenizer(format!(
            "token id {id} is outside the models' vocabulary of {}",
            data.vocab
        )));
    }
    let val = data.val_tokens as usize;
    if tokens.len() < val.saturating_mul(5) {
        return Err(DataError::TooSmall(format!(
            "corpus `{}` has {} tokens, too few to hold out {val} (need at least 5× as many)\n\nhint: lower `[corpus] val_tokens`",
            files
                .first()
                .map(|f| f.display().to_string())
                .unwrap_or_default(),
            tokens.len()
        )));
    }
    let train_len = tokens.len() - val;
    let val_bytes = tokenizer.decoded_bytes(&tokens[train_len..])?;
    TokenFile::write(
        token_path,
        &tokens,
        train_len,
        tokenizer.vocab().max(data.vocab),
        val_bytes,
    )
}
