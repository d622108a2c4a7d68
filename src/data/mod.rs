//! Corpora and tokens: the built-in synthetic corpus, real text (txt, jsonl, parquet; shards
//! compressed or not, streamed), byte and
//! BPE tokenizers, the memory-mapped token cache, the fixed held-out split, and batch order.

mod batches;
pub mod bytes;
mod cache;
mod config;
mod corpus;
mod error;
mod estimate;
mod prepare;
mod prepared;
mod scan;
mod shards;
pub mod split;
mod stream;
pub mod synthetic;
mod tokenize;

pub use batches::{Batch, mix};
pub(crate) use batches::{
    Batcher, batch_tensors, eval_batches, prefetch, window_batch, windows_read,
};
pub(crate) use bytes::ByteIndex;

pub(crate) use config::SplitAnchor;
pub use config::{DataConfig, TokenizerRef};
pub use corpus::split_record;
pub(crate) use corpus::{byte_index, run_tokenizer, tokenizer_json};
pub use error::DataError;

pub use estimate::estimate;
pub use prepare::prepare;
pub(crate) use prepared::CorpusInfo;
pub use prepared::{Prepared, unigram_entropy};
pub use shards::Document;

pub(crate) use stream::Stream;
pub use tokenize::Tokenizer;
pub(crate) use tokenize::{END_OF_DOCUMENT, end_of_document};
