//! A run's prepared data: its training and held-out streams and the facts about the corpus
//! that every run records.

use super::stream::Stream;

/// What is known about a corpus, recorded with each run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CorpusInfo {
    /// Human-readable description.
    pub description: String,
    /// Identifies the tokens exactly: the token-cache key of a text corpus (settings plus each
    /// file's path, size and modification time; when byte-identical tokens were cached before under
    /// another key — the same texts copied or touched — that older key), or the generator version
    /// and seeds of the synthetic corpus.
    ///
    /// Logit stores record it so a store made from other tokens is refused.
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
