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

pub use batches::{
    Batch, Batcher, batch_tensors, eval_batches, mix, prefetch, window_batch, windows_read,
};
pub use bytes::{ByteIndex, SplitRecord};
pub use cache::TokenFile;
pub use config::{DataConfig, SplitAnchor, TokenizerRef};
pub use corpus::{
    CorpusFacts, CorpusFiles, byte_index, find_files, run_tokenizer, split_record, tokenizer_json,
};
pub use error::DataError;
pub use estimate::{CorpusEstimate, estimate};
pub use prepare::prepare;
pub use prepared::{CorpusInfo, Prepared, unigram_entropy};
pub use shards::{Document, Documents, corpus_files, read_documents};
pub use stream::Stream;
pub use tokenize::{END_OF_DOCUMENT, Tokenizer, end_of_document};
