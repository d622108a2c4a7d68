//! A run's data configuration: where its tokens come from (corpus, tokenizer, held-out split)
//! and in which order (context, batch, seed). It is part of the run's resolved configuration,
//! so every field here is part of the run's id.

use serde::{Deserialize, Serialize};

use crate::spec::{CorpusKind, Separator, TokenizerKind};

/// Where tokens come from and in which order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataConfig {
    /// Corpus kind.
    pub corpus: CorpusKind,
    /// Corpus path as written in the sweep file (relative to it), if any.
    pub path: Option<String>,
    /// jsonl field or parquet column.
    pub text_column: Option<String>,
    /// Tokenizer (`None` for the synthetic corpus).
    pub tokenizer: Option<TokenizerKind>,
    /// For `tokenizer = file`: which file, and its content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_file: Option<TokenizerRef>,
    /// Vocabulary size.
    pub vocab: u64,
    /// How documents are joined (absent: a blank line, so runs made before the choice keep
    /// their ids).
    #[serde(default, skip_serializing_if = "Separator::is_blank_line")]
    pub separator: Separator,
    /// Held-out tokens.
    pub val_tokens: u64,
    /// Seed of the synthetic generator.
    pub corpus_seed: u64,
    /// Sources of the synthetic world when fewer than all four (absent: all four, so runs of
    /// the default world keep their ids).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_sources: Option<u32>,
    /// `Some(false)` for a synthetic world without copy events (absent: with copies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic_copies: Option<bool>,
    /// Sequence length.
    pub context: u64,
    /// Sequences per optimiser step (or per logit batch).
    pub batch_seqs: u64,
    /// Seed of the data order (and of initialisation for trained runs).
    pub seed: u64,
    /// A separate validation file or folder (relative to the sweep file), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_path: Option<String>,
    /// Version of the held-out split rule of text corpora: 2 holds out whole documents with
    /// duplicates dropped (`data::split`); 0 (absent) is the synthetic corpus, or a text run of
    /// an older pdsweep that held out the corpus's last tokens.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub split: u32,
    /// A corpus tokenised for a teacher of another tokenizer holds out what the students'
    /// tokenizer holds out (the same documents, the boundary document cut at the same byte),
    /// so both train on the same text and bytes align (absent: the split is this tokenizer's
    /// own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow: Option<SplitAnchor>,
}

/// The tokenizer whose held-out split a corpus follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitAnchor {
    /// Its kind.
    pub tokenizer: Option<TokenizerKind>,
    /// Its file, for `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_file: Option<TokenizerRef>,
    /// Its vocabulary.
    pub vocab: u64,
}

impl DataConfig {
    /// The data configuration of the tokenizer this one's split follows, if any.
    pub fn anchor(&self) -> Option<DataConfig> {
        self.follow.as_ref().map(|a| DataConfig {
            tokenizer: a.tokenizer,
            tokenizer_file: a.tokenizer_file.clone(),
            vocab: a.vocab,
            follow: None,
            ..self.clone()
        })
    }

    /// Whether `other` tokenises the corpus the same way (same tokenizer, file and vocabulary).
    pub fn same_tokens(&self, other: &DataConfig) -> bool {
        self.tokenizer == other.tokenizer
            && self.tokenizer_file == other.tokenizer_file
            && self.vocab == other.vocab
    }
}

impl SplitAnchor {
    /// The anchor that is `data`'s tokenizer.
    pub fn of(data: &DataConfig) -> SplitAnchor {
        SplitAnchor {
            tokenizer: data.tokenizer,
            tokenizer_file: data.tokenizer_file.clone(),
            vocab: data.vocab,
        }
    }
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// A Hugging Face `tokenizer.json` a corpus is tokenised with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenizerRef {
    /// The file as written in the sweep file (relative to the sweep file's folder).
    pub path: String,
    /// SHA-256 (hex) of its bytes: the token cache and the run ids key on it.
    pub sha256: String,
}
