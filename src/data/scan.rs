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

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::error::DataError;
use super::shards::Document;
use super::split::{Piece, Pieces, Span, TokenizedDoc};
use super::tokenize::{END_OF_DOCUMENT, Tokenizer};
use crate::spec::Separator;

/// The text after every document when documents are joined by a blank line.
pub const DOC_SEPARATOR: &str = "\n\n";

/// Text of a batch handed to the tokenizer's threads at once.
const BATCH_BYTES: usize = 4 << 20;
/// Documents of a batch, at most.
const BATCH_DOCS: usize = 4096;

/// Which part of a document a text is: a corpus cuts at most one document in two (a held-out
/// boundary that follows another tokenizer's split).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A whole document: it begins and ends.
    Whole,
    /// The beginning of a document cut in two: it begins, and does not end.
    Head,
    /// The rest of it: it ends.
    Tail,
}

/// Tokenises documents for the cache: each joined to the next by the corpus's separator
/// ([`Separator`]), its ids checked against the models' vocabulary and its bytes against its
/// tokens'.
pub struct Encoder<'t> {
    tokenizer: &'t Tokenizer,
    lengths: Vec<u32>,
    vocab: u64,
    /// The end-of-document token when documents end with it (`separator = "eos"`).
    eos: Option<u32>,
}

/// One document's tokens and whether they are exactly its bytes.
pub struct Encoded {
    /// Its tokens.
    pub tokens: Vec<u32>,
    /// How its bytes and its tokens' bytes differ, when they do.
    pub inexact: Option<String>,
}

impl<'t> Encoder<'t> {
    /// An encoder for ids below `vocab` (the models' vocabulary), joining documents by
    /// `separator`.
    pub fn new(
        tokenizer: &'t Tokenizer,
        vocab: u64,
        separator: Separator,
    ) -> Result<Encoder<'t>, DataError> {
        let eos = match separator {
            Separator::BlankLine => None,
            Separator::Eos => Some(tokenizer.end_of_document().ok_or_else(|| {
                DataError::Tokenizer(format!(
                    "documents end with the tokenizer's end-of-document token (`separator = \"eos\"`), \
                     and this tokenizer has none of {}; set `[corpus] separator = \"blank_line\"`",
                    END_OF_DOCUMENT.join(", ")
                ).into())
            })?),
        };
        Ok(Encoder {
            tokenizer,
            lengths: tokenizer.token_lengths(tokenizer.vocab().max(vocab))?,
            vocab,
            eos,
        })
    }

    /// The byte length of each token id.
    pub fn lengths(&self) -> &[u32] {
        &self.lengths
    }

    /// The bytes a document's separator adds to its text: two for a blank line, none for an
    /// EOS token (special tokens stand for no text).
    pub fn separator_bytes(&self) -> u64 {
        match self.eos {
            Some(_) => 0,
            None => DOC_SEPARATOR.len() as u64,
        }
    }

    /// The bytes `tokens` stand for.
    pub fn bytes_of(&self, tokens: &[u32]) -> u64 {
        tokens
            .iter()
            .map(|&t| u64::from(self.lengths.get(t as usize).copied().unwrap_or(0)))
            .sum()
    }

    /// The tokens of `text`, `part` of a document of `source`, checked against the vocabulary.
    ///
    /// A part that begins a document gets the special tokens the tokenizer adds (BOS, for families
    /// trained so); a part that ends one gets the separator: the EOS token, or the blank line's
    /// tokens. (Joined by blank lines, a tail keeps the special tokens too, as pdsweep always
    /// tokenised it, so older caches keep their tokens.)
    pub fn encode(&self, source: &str, text: &str, part: Part) -> Result<Encoded, DataError> {
        let mut tokens = Vec::new();
        match (part, self.eos) {
            (Part::Tail, Some(_)) => self.tokenizer.encode_plain(text, &mut tokens)?,
            _ => self.tokenizer.encode_into(text, &mut tokens)?,
        }
        let ends = part != Part::Head;
        match self.eos {
            Some(eos) if ends => tokens.push(eos),
            None if ends => self.tokenizer.encode_plain(DOC_SEPARATOR, &mut tokens)?,
            _ => {}
        }
        if let Some(&id) = tokens.iter().find(|&&t| u64::from(t) >= self.vocab) {
            return Err(DataError::Tokenizer(
                format!(
                    "token id {id} (in `{source}`) is outside the models' vocabulary of {}",
                    self.vocab
                )
                .into(),
            ));
        }
        let expected = text.len() as u64 + if ends { self.separator_bytes() } else { 0 };
        let got = self.bytes_of(&tokens);
        let inexact = (got != expected)
            .then(|| format!("`{source}`: its {expected} bytes become tokens of {got} bytes"));
        Ok(Encoded { tokens, inexact })
    }
}

/// Tokens written in order to a scratch file of native `u32`s, then read back a block at a time
/// (positional reads: the file's pages stay in the page cache, not in this process's memory);
/// the file is removed when dropped.
pub struct Scratch {
    path: PathBuf,
    out: BufWriter<fs::File>,
    len: u64,
}

/// Tokens read from the scratch file at once.
const READ_BLOCK: u64 = 1 << 20;

impl Scratch {
    /// A new, empty scratch file at `path`.
    pub fn create(path: &Path) -> Result<Scratch, DataError> {
        // read as well as written: pass two reads it back
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| DataError::Write {
                path: path.to_path_buf(),
                source: e.into(),
            })?;
        Ok(Scratch {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            len: 0,
        })
    }

    fn fail(&self, e: std::io::Error) -> DataError {
        DataError::Write {
            path: self.path.clone(),
            source: e.into(),
        }
    }

    /// Appends `tokens`, returning where they lie.
    pub fn push(&mut self, tokens: &[u32]) -> Result<Span, DataError> {
        let span = Span {
            start: self.len,
            len: tokens.len() as u64,
        };
        if let Err(e) = self.out.write_all(bytemuck::cast_slice(tokens)) {
            return Err(self.fail(e));
        }
        self.len += span.len;
        Ok(span)
    }

    /// Hands the tokens of `pieces` to `f` in order, a block of at most 2^20 tokens at a time.
    pub fn visit(
        &mut self,
        pieces: &Pieces,
        mut f: impl FnMut(&[u32]) -> Result<(), DataError>,
    ) -> Result<(), DataError> {
        use std::os::unix::fs::FileExt;
        if let Err(e) = self.out.flush() {
            return Err(self.fail(e));
        }
        let mut block: Vec<u32> = Vec::new();
        for piece in &pieces.pieces {
            let span = match piece {
                Piece::Owned(tokens) => {
                    f(tokens)?;
                    continue;
                }
                Piece::Span(span) => *span,
            };
            let mut at = span.start;
            while at < span.start + span.len {
                let n = READ_BLOCK.min(span.start + span.len - at) as usize;
                block.resize(n, 0);
                let read = self
                    .out
                    .get_ref()
                    .read_exact_at(bytemuck::cast_slice_mut(&mut block), at * 4);
                if let Err(e) = read {
                    return Err(self.fail(e));
                }
                f(&block)?;
                at += n as u64;
            }
        }
        Ok(())
    }

    /// The tokens of `pieces`, in memory (for the held-out split, which is small).
    pub fn collect(&mut self, pieces: &Pieces) -> Result<Vec<u32>, DataError> {
        let mut out = Vec::with_capacity(pieces.len() as usize);
        self.visit(pieces, |block| {
            out.extend_from_slice(block);
            Ok(())
        })?;
        Ok(out)
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
                    encoder
                        .encode(&d.source, &d.text, Part::Whole)
                        .map(|e| (e, hash))
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
                    bytes: doc.text.len() as u64 + encoder.separator_bytes(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::AddedToken;
    use tokenizers::processors::template::TemplateProcessing;

    const TEXT: &str = "the cat sat on the mat. the dog sat on the log. ";

    /// A `tokenizer.json`-style tokenizer trained on [`TEXT`], with `<|endoftext|>` and, when
    /// `bos`, a post-processor that puts `<bos>` before every text (as Gemma's does).
    fn file_tokenizer(eos: bool, bos: bool) -> Tokenizer {
        let Tokenizer::Bpe(mut t) =
            Tokenizer::train_bpe(std::iter::once(TEXT.repeat(50)), 300).expect("bpe trains")
        else {
            unreachable!("train_bpe gives a bpe tokenizer")
        };
        let specials: Vec<AddedToken> = [("<|endoftext|>", eos), ("<bos>", bos)]
            .iter()
            .filter(|(_, keep)| *keep)
            .map(|(name, _)| AddedToken::from(*name, true))
            .collect();
        t.add_special_tokens(&specials);
        if bos {
            let id = t.token_to_id("<bos>").expect("added");
            let template = TemplateProcessing::builder()
                .try_single("<bos> $A")
                .expect("template")
                .special_tokens(vec![("<bos>", id)])
                .build()
                .expect("template builds");
            t.with_post_processor(Some(template));
        }
        Tokenizer::File(t)
    }

    fn plain(t: &Tokenizer, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        t.encode_plain(text, &mut out).expect("encodes");
        out
    }

    #[test]
    fn eos_documents_begin_with_bos_and_end_with_eos() {
        let t = file_tokenizer(true, true);
        let (bos, eos) = (t.vocab() as u32 - 1, t.vocab() as u32 - 2);
        assert_eq!(t.end_of_document(), Some(eos));
        let encoder = Encoder::new(&t, t.vocab(), Separator::Eos).expect("has an eos");
        assert_eq!(encoder.separator_bytes(), 0);
        let text = "the cat sat.";
        let body = plain(&t, text);
        let whole = encoder.encode("a", text, Part::Whole).expect("encodes");
        assert_eq!(whole.tokens, [vec![bos], body.clone(), vec![eos]].concat());
        assert_eq!(whole.inexact, None, "BOS and EOS stand for no bytes");
        let head = encoder.encode("a", "the cat", Part::Head).expect("encodes");
        assert_eq!(head.tokens, [vec![bos], plain(&t, "the cat")].concat());
        let tail = encoder.encode("a", " sat.", Part::Tail).expect("encodes");
        assert_eq!(tail.tokens, [plain(&t, " sat."), vec![eos]].concat());
        assert_eq!(encoder.bytes_of(&whole.tokens), text.len() as u64);
    }

    #[test]
    fn blank_lines_keep_the_old_tokens() {
        let t = file_tokenizer(true, true);
        let encoder = Encoder::new(&t, t.vocab(), Separator::BlankLine).expect("encoder");
        assert_eq!(encoder.separator_bytes(), 2);
        let mut expected = Vec::new();
        t.encode_into("the cat sat.", &mut expected)
            .expect("encodes");
        expected.extend(plain(&t, DOC_SEPARATOR));
        let whole = encoder
            .encode("a", "the cat sat.", Part::Whole)
            .expect("encodes");
        assert_eq!(whole.tokens, expected);
        assert_eq!(whole.inexact, None);
    }

    #[test]
    fn eos_is_refused_for_a_tokenizer_without_one() {
        for t in [file_tokenizer(false, true), Tokenizer::Byte] {
            let Err(e) = Encoder::new(&t, t.vocab(), Separator::Eos) else {
                panic!("{t:?} has no end-of-document token");
            };
            let e = crate::error::chain(&e);
            assert!(e.contains("blank_line"), "{e}");
        }
    }
}
