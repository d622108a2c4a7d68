//! Tokens in the corpus's byte coordinate, for distillation across tokenizers: the record of a
//! split that another tokenizer follows (`split-KEY.json` beside the token cache), and the byte
//! index of a training stream, which says where each token ends.
//!
//! The byte coordinate is shared by every tokenizer of a corpus: the kept documents (exact
//! duplicates dropped) laid end to end in their order, each as its text and the separator
//! after it. A training stream is a run of document pieces ([`Segment`]s) in that coordinate;
//! held-out documents are gaps. Within a piece, a token ends where the previous one ended plus
//! its own bytes ([`crate::data::Tokenizer::token_lengths`]; special tokens have none), so two
//! tokenizations of the same pieces can be compared byte by byte (`crate::distill::align`).

use serde::{Deserialize, Serialize};

use super::split::Segment;
use super::stream::Stream;

/// What a split held out and where its training pieces lie, as another tokenizer needs it to
/// hold out the same text ([`super::split::follow`]) and as the byte index needs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitRecord {
    /// SHA-256 (hex) of each document held out whole.
    pub held: Vec<String>,
    /// The document cut between the splits, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundary: Option<BoundaryRecord>,
    /// UTF-8 bytes of the held-out text.
    pub val_bytes: u64,
    /// Where each document piece of the training stream starts.
    pub train_segments: Vec<Segment>,
    /// Whether every document's tokens are exactly its bytes (a tokenizer whose normaliser
    /// rewrites text breaks this, and its tokens cannot be aligned by bytes).
    pub exact_bytes: bool,
    /// The first document whose tokens are not its bytes, with how they differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inexact: Option<String>,
}

/// The document whose tail is held out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryRecord {
    /// SHA-256 (hex) of its text.
    pub hash: String,
    /// Bytes of its head, the training part.
    pub head_bytes: u64,
}

/// Tokens between two stored offsets.
const STEP: usize = 256;

/// Where each token of a training stream ends in the byte coordinate, in O(1) memory per
/// `STEP` tokens: the start of every `STEP`-th token is stored and the rest summed from the
/// token lengths on demand.
#[derive(Debug, Clone)]
pub struct ByteIndex {
    stream: Stream,
    lengths: Vec<u32>,
    segments: Vec<Segment>,
    /// The start of token `k · STEP`.
    starts: Vec<u64>,
}

impl ByteIndex {
    /// The index of `stream` (a training stream) cut into `segments`, with the byte length of
    /// every id.
    pub fn new(stream: Stream, lengths: Vec<u32>, segments: Vec<Segment>) -> ByteIndex {
        let mut index = ByteIndex {
            stream,
            lengths,
            segments,
            starts: Vec::new(),
        };
        let n = index.stream.len();
        let mut at = 0u64;
        let mut seg = 0usize;
        for chunk_start in (0..n).step_by(STEP) {
            let tokens = index.stream.slice(chunk_start, (chunk_start + STEP).min(n));
            for (i, &t) in tokens.iter().enumerate() {
                let token = chunk_start + i;
                while seg < index.segments.len() && index.segments[seg].token as usize <= token {
                    at = index.segments[seg].byte;
                    seg += 1;
                }
                if i == 0 {
                    index.starts.push(at);
                }
                at += u64::from(index.length(t));
            }
        }
        index
    }

    fn length(&self, id: u32) -> u32 {
        self.lengths.get(id as usize).copied().unwrap_or(0)
    }

    /// The training stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Tokens in the stream.
    pub fn len(&self) -> usize {
        self.stream.len()
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.stream.is_empty()
    }

    /// Where tokens `a..b` end and the bytes of each (clamped to the stream).
    pub fn ends(&self, a: usize, b: usize) -> (Vec<u64>, Vec<u32>) {
        let b = b.min(self.len());
        let a = a.min(b);
        if a == b {
            return (Vec::new(), Vec::new());
        }
        let k = a / STEP;
        let from = k * STEP;
        let tokens = self.stream.slice(from, b);
        // the segment starts that fall in from..b, in order
        let first_seg = self
            .segments
            .partition_point(|s| (s.token as usize) <= from);
        let mut segs = self.segments[first_seg..]
            .iter()
            .take_while(|s| (s.token as usize) < b)
            .peekable();
        let mut at = self.starts[k];
        let (mut ends, mut lens) = (Vec::with_capacity(b - a), Vec::with_capacity(b - a));
        for (i, &t) in tokens.iter().enumerate() {
            let token = from + i;
            while let Some(s) = segs.next_if(|s| s.token as usize <= token) {
                at = s.byte;
            }
            let len = self.length(t);
            at += u64::from(len);
            if token >= a {
                ends.push(at);
                lens.push(len);
            }
        }
        (ends, lens)
    }

    /// Where token `i` ends.
    pub fn end(&self, i: usize) -> u64 {
        self.ends(i, i + 1).0.first().copied().unwrap_or(0)
    }

    /// The first token that ends at or after `byte` (`len()` when none does).
    pub fn first_ending_at_or_after(&self, byte: u64) -> usize {
        // the last stored start at or before byte bounds the search from below
        let k = self
            .starts
            .partition_point(|&s| s <= byte)
            .saturating_sub(1);
        let mut from = k * STEP;
        loop {
            let to = (from + STEP).min(self.len());
            if from >= to {
                return self.len();
            }
            let (ends, _) = self.ends(from, to);
            if let Some(i) = ends.iter().position(|&e| e >= byte) {
                return from + i;
            }
            from = to;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token ends follow the lengths within a piece and jump to the next piece's start, from
    /// any first token, across stored offsets.
    #[test]
    fn ends_follow_lengths_and_jump_between_pieces() {
        // ids are their own lengths; pieces start at tokens 0 and 600 (bytes 10 and 5000)
        let tokens: Vec<u32> = (0..1000).map(|i| 1 + (i % 3)).collect();
        let segments = vec![
            Segment { token: 0, byte: 10 },
            Segment {
                token: 600,
                byte: 5000,
            },
        ];
        let lengths = vec![0, 1, 2, 3];
        let index = ByteIndex::new(Stream::Memory(tokens.clone()), lengths, segments);
        let mut expected = Vec::new();
        let mut at = 10u64;
        for (i, &t) in tokens.iter().enumerate() {
            if i == 600 {
                at = 5000;
            }
            at += u64::from(t);
            expected.push(at);
        }
        for (a, b) in [
            (0, 1000),
            (0, 1),
            (255, 257),
            (599, 602),
            (700, 1000),
            (999, 1005),
        ] {
            let (ends, lens) = index.ends(a, b);
            assert_eq!(ends, expected[a..b.min(1000)], "{a}..{b}");
            assert_eq!(lens.len(), ends.len());
        }
        assert_eq!(index.end(600), 5001);
        for byte in [0, 11, 12, 1000, 1213, 4000, 5001, 5002] {
            let first = expected.iter().position(|&e| e >= byte).unwrap_or(1000);
            assert_eq!(index.first_ending_at_or_after(byte), first, "byte {byte}");
        }
        assert_eq!(index.first_ending_at_or_after(u64::MAX), 1000);
    }
}
