//! Pass one of preparing a corpus: its documents streamed from the shards (one reader thread),
//! tokenised in parallel batches (rayon), their tokens appended to a scratch file, and what the
//! split needs of each — its hash, token span, byte length and source — kept in a small index.
//!
//! Memory is a few batches of text and the index (about 100 bytes per document), whatever the
//! size of the corpus: the tokens go to disk as they come.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use memmap2::Mmap;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::error::DataError;
use super::shards::Document;
use super::split::{Span, TokenizedDoc};
use super::tokenize::Tokenizer;

/// Separator appended after every document.
pub const DOC_SEPARATOR: &str = "\n\n";

/// Text of a batch handed to the tokenizer's threads at once.
const BATCH_BYTES: usize = 4 << 20;
/// Documents of a batch, at most.
const BATCH_DOCS: usize = 4096;

/// Tokenises documents for the cache: each with its separator, its ids checked against the
/// models' vocabulary and its bytes against its tokens'.
pub struct Encoder<'t> {
    tokenizer: &'t Tokenizer,
    lengths: Vec<u32>,
    vocab: u64,
}

/// One document's tokens and whether they are exactly its bytes.
pub struct Encoded {
    /// Its tokens.
    pub tokens: Vec<u32>,
    /// How its bytes and its tokens' bytes differ, when they do.
    pub inexact: Option<String>,
}

impl<'t> Encoder<'t> {
    /// An encoder for ids below `vocab` (the models' vocabulary).
    pub fn new(tokenizer: &'t Tokenizer, vocab: u64) -> Result<Encoder<'t>, DataError> {
        Ok(Encoder {
            tokenizer,
            lengths: tokenizer.token_lengths(tokenizer.vocab().max(vocab))?,
            vocab,
        })
    }

    /// The byte length of each token id.
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// The bytes `tokens` stand for.
    pub fn bytes_of(&self, tokens: &[u32]) -> u64 {
        tokens
            .iter()
            .map(|&t| u64::from(self.lengths.get(t as usize).copied().unwrap_or(0)))
            .sum()
    }

    /// `text`'s tokens (special tokens as the tokenizer adds them) followed by the separator's
    /// when `separator`, checked against the vocabulary.
    pub fn encode(&self, source: &str, text: &str, separator: bool) -> Result<Encoded, DataError> {
        let mut tokens = Vec::new();
        self.tokenizer.encode_into(text, &mut tokens)?;
        if separator {
            self.tokenizer.encode_plain(DOC_SEPARATOR, &mut tokens)?;
        }
        if let Some(&id) = tokens.iter().find(|&&t| u64::from(t) >= self.vocab) {
            return Err(DataError::Tokenizer(format!(
                "token id {id} (in `{source}`) is outside the models' vocabulary of {}",
                self.vocab
            )));
        }
        let expected = (text.len() + if separator { DOC_SEPARATOR.len() } else { 0 }) as u64;
        let got = self.bytes_of(&tokens);
        let inexact = (got != expected)
            .then(|| format!("`{source}`: its {expected} bytes become tokens of {got} bytes"));
        Ok(Encoded { tokens, inexact })
    }
}

/// Tokens written in order to a scratch file of native `u32`s, read back memory-mapped once
/// written; the file is removed when dropped.
pub struct Scratch {
    path: PathBuf,
    out: Option<BufWriter<fs::File>>,
    len: u64,
    map: Option<Mmap>,
}

impl Scratch {
    /// A new, empty scratch file at `path`.
    pub fn create(path: &Path) -> Result<Scratch, DataError> {
        // read as well as written: it is memory-mapped once written
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| DataError::Write {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        Ok(Scratch {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            len: 0,
            map: None,
        })
    }

    fn fail(&self, e: std::io::Error) -> DataError {
        DataError::Write {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Appends `tokens`, returning where they lie.
    pub fn push(&mut self, tokens: &[u32]) -> Result<Span, DataError> {
        let span = Span {
            start: self.len,
            len: tokens.len() as u64,
        };
        let Some(out) = self.out.as_mut() else {
            return Err(self.fail(std::io::Error::other("the scratch file was already read")));
        };
        if let Err(e) = out.write_all(bytemuck::cast_slice(tokens)) {
            return Err(self.fail(e));
        }
        self.len += span.len;
        Ok(span)
    }

    /// Every token written, memory-mapped (writing ends at the first call).
    pub fn tokens(&mut self) -> Result<&[u32], DataError> {
        if let Some(out) = self.out.take() {
            let file = out.into_inner().map_err(|e| self.fail(e.into_error()))?;
            if self.len > 0 {
                // SAFETY: the scratch file is private to this preparation, which holds the
                // cache entry's lock, and is not written after this point.
                let map = unsafe { Mmap::map(&file) }.map_err(|e| self.fail(e))?;
                self.map = Some(map);
            }
        }
        Ok(match &self.map {
            Some(map) => bytemuck::try_cast_slice(&map[..]).unwrap_or(&[]),
            None => &[],
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// What pass one learnt of a set of documents.
#[derive(Default)]
pub struct Scanned {
    /// Each document, its tokens in the scratch file.
    pub docs: Vec<TokenizedDoc>,
    /// The first document whose tokens are not exactly its bytes.
    pub inexact: Option<String>,
    /// The text and source of the document asked for by hash, if it was read.
    pub kept: Option<(String, String)>,
}

/// Tokenises `documents` in parallel batches, appending each document's tokens (with the
/// separator) to `scratch` in order. The text of the document whose SHA-256 is `keep` is kept.
pub fn scan(
    documents: impl Iterator<Item = Result<Document, DataError>> + Send,
    encoder: &Encoder,
    scratch: &mut Scratch,
    keep: Option<[u8; 32]>,
) -> Result<Scanned, DataError> {
    std::thread::scope(|scope| {
        let (send, batches) = mpsc::sync_channel::<Result<Vec<Document>, DataError>>(2);
        scope.spawn(move || read_batches(documents, send));
        let mut scanned = Scanned::default();
        for batch in batches {
            let batch = batch?;
            let encoded: Vec<Result<(Encoded, [u8; 32]), DataError>> = batch
                .par_iter()
                .map(|d| {
                    let hash: [u8; 32] = Sha256::digest(d.text.as_bytes()).into();
                    encoder.encode(&d.source, &d.text, true).map(|e| (e, hash))
                })
                .collect();
            for (doc, result) in batch.into_iter().zip(encoded) {
                let (encoded, hash) = result?;
                let tokens = scratch.push(&encoded.tokens)?;
                if scanned.inexact.is_none() {
                    scanned.inexact = encoded.inexact;
                }
                if keep == Some(hash) && scanned.kept.is_none() {
                    scanned.kept = Some((doc.source.clone(), doc.text.clone()));
                }
                scanned.docs.push(TokenizedDoc {
                    bytes: (doc.text.len() + DOC_SEPARATOR.len()) as u64,
                    source: doc.source,
                    hash,
                    tokens,
                });
            }
        }
        Ok(scanned)
    })
}

/// Groups `documents` into batches of about [`BATCH_BYTES`] and sends them; the first error
/// ends the stream.
fn read_batches(
    documents: impl Iterator<Item = Result<Document, DataError>>,
    send: mpsc::SyncSender<Result<Vec<Document>, DataError>>,
) {
    let (mut batch, mut bytes) = (Vec::new(), 0);
    for doc in documents {
        match doc {
            Ok(doc) => {
                bytes += doc.text.len();
                batch.push(doc);
                if bytes >= BATCH_BYTES || batch.len() >= BATCH_DOCS {
                    if send.send(Ok(std::mem::take(&mut batch))).is_err() {
                        return; // the consumer stopped on an error of its own
                    }
                    bytes = 0;
                }
            }
            Err(e) => {
                let _ = send.send(Err(e));
                return;
            }
        }
    }
    if !batch.is_empty() {
        let _ = send.send(Ok(batch));
    }
}
