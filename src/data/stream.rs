//! A token stream: generated tokens in memory, or a range of the memory-mapped token cache.

use std::sync::Arc;

use super::cache::TokenFile;

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
