//! Tokenizers: byte-level (vocabulary 256, one token per byte), byte-level BPE trained on the
//! corpus with the `tokenizers` crate, and a Hugging Face `tokenizer.json` named by the sweep (a
//! pre-trained teacher's). A trained BPE tokenizer is saved as JSON next to the token cache so
//! every run of a sweep uses the same one.

use std::path::Path;

use tokenizers::Tokenizer as HfTokenizer;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;

use super::error::DataError;

/// Text → token ids.
#[derive(Clone)]
pub enum Tokenizer {
    /// One token per UTF-8 byte.
    Byte,
    /// Byte-level BPE.
    Bpe(Box<HfTokenizer>),
    /// A Hugging Face `tokenizer.json` (a pre-trained model's): each document is encoded with
    /// its special tokens, as transformers encodes a text.
    File(Box<HfTokenizer>),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Tokenizer::Byte => f.write_str("Tokenizer::Byte"),
            Tokenizer::Bpe(_) => f.write_str("Tokenizer::Bpe"),
            Tokenizer::File(_) => f.write_str("Tokenizer::File"),
        }
    }
}

/// End-of-document tokens as released tokenizers spell them, in order of preference: GPT-2's,
/// Pythia's, Qwen's, SmolLM2's and OLMo's `<|endoftext|>`, Llama 3's `<|end_of_text|>`, Gemma's
/// `<eos>`, Llama 2's and Mistral's `</s>`.
///
/// A chat model's end-of-turn token (`<|im_end|>`, `<end_of_turn>`, `<|eot_id|>`), which its
/// `config.json` may name as its EOS, is not what its pre-training put between documents, so
/// configuration files are not asked.
pub(crate) const END_OF_DOCUMENT: [&str; 5] = [
    "<|endoftext|>",
    "<|end_of_text|>",
    "<eos>",
    "</s>",
    "<|eos|>",
];

/// The id of `tokenizer`'s end-of-document token: the first of [`END_OF_DOCUMENT`] it has.
pub(crate) fn end_of_document(tokenizer: &HfTokenizer) -> Option<u32> {
    END_OF_DOCUMENT
        .iter()
        .find_map(|name| tokenizer.token_to_id(name))
}

fn tokenizer_error(e: impl Into<crate::error::Cause>) -> DataError {
    DataError::Tokenizer(e.into())
}

impl Tokenizer {
    /// Trains a byte-level BPE tokenizer of `vocab` tokens on `texts`.
    pub fn train_bpe<S: AsRef<str> + Send>(
        texts: impl Iterator<Item = S> + Send,
        vocab: u64,
    ) -> Result<Tokenizer, DataError> {
        let mut tokenizer = HfTokenizer::new(BPE::default());
        tokenizer.with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)));
        tokenizer.with_decoder(Some(ByteLevel::default()));
        let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
            .vocab_size(vocab as usize)
            .min_frequency(2)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build()
            .into();
        tokenizer
            .train(&mut trainer, texts)
            .map_err(tokenizer_error)?;
        Ok(Tokenizer::Bpe(Box::new(tokenizer)))
    }

    /// Loads a BPE tokenizer saved by [`Tokenizer::save`].
    pub fn load(path: &Path) -> Result<Tokenizer, DataError> {
        HfTokenizer::from_file(path)
            .map(|t| Tokenizer::Bpe(Box::new(t)))
            .map_err(|e| DataError::CorruptCache {
                path: path.to_path_buf(),
                source: e,
            })
    }

    /// Loads a Hugging Face `tokenizer.json` named by a sweep.
    pub fn from_file(path: &Path) -> Result<Tokenizer, DataError> {
        HfTokenizer::from_file(path)
            .map(|t| Tokenizer::File(Box::new(t)))
            .map_err(|e| {
                DataError::Tokenizer(crate::error::context(format!("`{}`", path.display()), e))
            })
    }

    /// Saves a BPE tokenizer as JSON (nothing to save for the byte tokenizer).
    pub fn save(&self, path: &Path) -> Result<(), DataError> {
        match self {
            Tokenizer::Byte => Ok(()),
            Tokenizer::Bpe(t) | Tokenizer::File(t) => {
                t.save(path, false).map_err(|e| DataError::Write {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
        }
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> u64 {
        match self {
            Tokenizer::Byte => 256,
            Tokenizer::Bpe(t) | Tokenizer::File(t) => t.get_vocab_size(true) as u64,
        }
    }

    /// Appends the tokens of `text` to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) -> Result<(), DataError> {
        match self {
            Tokenizer::Byte => out.extend(text.bytes().map(u32::from)),
            Tokenizer::Bpe(t) => out.extend_from_slice(
                t.encode_fast(text, false)
                    .map_err(tokenizer_error)?
                    .get_ids(),
            ),
            Tokenizer::File(t) => out.extend_from_slice(
                t.encode_fast(text, true)
                    .map_err(tokenizer_error)?
                    .get_ids(),
            ),
        }
        Ok(())
    }

    /// The end-of-document token (`end_of_document`; only a `tokenizer.json` has one).
    pub fn end_of_document(&self) -> Option<u32> {
        match self {
            Tokenizer::File(t) => end_of_document(t),
            Tokenizer::Byte | Tokenizer::Bpe(_) => None,
        }
    }

    /// Appends the tokens of `text` to `out` without special tokens (a separator between
    /// documents).
    pub fn encode_plain(&self, text: &str, out: &mut Vec<u32>) -> Result<(), DataError> {
        match self {
            Tokenizer::File(t) => {
                out.extend_from_slice(
                    t.encode_fast(text, false)
                        .map_err(tokenizer_error)?
                        .get_ids(),
                );
                Ok(())
            }
            other => other.encode_into(text, out),
        }
    }

    /// The text `tokens` decode to (special tokens left out; bytes that are not UTF-8, as a
    /// byte-level model may write, shown as U+FFFD).
    pub fn decode(&self, tokens: &[u32]) -> Result<String, DataError> {
        match self {
            Tokenizer::Byte => {
                let bytes: Vec<u8> = tokens.iter().map(|&t| t.min(255) as u8).collect();
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            Tokenizer::Bpe(t) | Tokenizer::File(t) => {
                t.decode(tokens, true).map_err(tokenizer_error)
            }
        }
    }

    /// The exact bytes of each token, so that a tokenization maps to byte offsets even where a
    /// token splits a multi-byte character: one byte per byte token; for byte-level BPE (GPT-2's
    /// alphabet: every vocabulary character stands for one byte) the bytes its characters stand
    /// for; for SentencePiece-style vocabularies `▁` is a space and `<0xXX>` a byte.
    ///
    /// Special tokens (BOS, EOS) have no bytes.
    pub fn token_bytes(&self, tokens: &[u32]) -> Result<Vec<Vec<u8>>, DataError> {
        let t = match self {
            Tokenizer::Byte => return Ok(tokens.iter().map(|&b| vec![b.min(255) as u8]).collect()),
            Tokenizer::Bpe(t) | Tokenizer::File(t) => t,
        };
        let byte_level = matches!(
            t.get_decoder(),
            Some(tokenizers::DecoderWrapper::ByteLevel(_))
        ) || matches!(
            t.get_pre_tokenizer(),
            Some(tokenizers::PreTokenizerWrapper::ByteLevel(_))
        );
        let specials: std::collections::HashSet<u32> = t
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, a)| a.special)
            .map(|(id, _)| *id)
            .collect();
        let decode_char = byte_level.then(byte_level_decoder);
        tokens
            .iter()
            .map(|&id| {
                if specials.contains(&id) {
                    return Ok(Vec::new());
                }
                let piece = t.id_to_token(id).ok_or_else(|| {
                    tokenizer_error(format!("token id {id} is not in the vocabulary"))
                })?;
                Ok(match &decode_char {
                    Some(map) => piece
                        .chars()
                        .map(|c| map.get(&c).copied().unwrap_or(b'?'))
                        .collect(),
                    None => sentencepiece_bytes(&piece),
                })
            })
            .collect()
    }

    /// The bytes of every id `0..vocab` ([`Tokenizer::token_bytes`]); ids the tokenizer does
    /// not have (a model's padding rows) and special tokens have none.
    pub fn vocab_bytes(&self, vocab: u64) -> Result<Vec<Vec<u8>>, DataError> {
        let known = match self {
            Tokenizer::Byte => 256,
            Tokenizer::Bpe(t) | Tokenizer::File(t) => t.get_vocab_size(true) as u64,
        };
        let ids: Vec<u32> = (0..vocab.min(known) as u32)
            .filter(|&id| match self {
                Tokenizer::Byte => true,
                Tokenizer::Bpe(t) | Tokenizer::File(t) => t.id_to_token(id).is_some(),
            })
            .collect();
        let mut out = vec![Vec::new(); vocab as usize];
        for (id, bytes) in ids.iter().zip(self.token_bytes(&ids)?) {
            out[*id as usize] = bytes;
        }
        Ok(out)
    }

    /// The byte length of every id `0..vocab` (see [`Tokenizer::vocab_bytes`]).
    pub fn token_lengths(&self, vocab: u64) -> Result<Vec<u32>, DataError> {
        Ok(self
            .vocab_bytes(vocab)?
            .iter()
            .map(|b| b.len() as u32)
            .collect())
    }

    /// The UTF-8 byte length of the text that `tokens` decode to.
    pub fn decoded_bytes(&self, tokens: &[u32]) -> Result<u64, DataError> {
        match self {
            Tokenizer::Byte => Ok(tokens.len() as u64),
            Tokenizer::Bpe(t) => Ok(t.decode(tokens, false).map_err(tokenizer_error)?.len() as u64),
            // the text's bytes: special tokens (BOS, EOS) are not text
            Tokenizer::File(t) => Ok(t.decode(tokens, true).map_err(tokenizer_error)?.len() as u64),
        }
    }
}

/// GPT-2's byte-level alphabet inverted: each of the 256 characters that stand for a byte,
/// mapped to it (printable Latin-1 bytes stand for themselves, the rest are shifted to U+0100…).
fn byte_level_decoder() -> std::collections::HashMap<char, u8> {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut shifted = 0u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                (char::from(b), b)
            } else {
                let c = char::from_u32(256 + shifted).unwrap_or('?');
                shifted += 1;
                (c, b)
            }
        })
        .collect()
}

/// A SentencePiece-style piece as bytes: `▁` is a space, `<0xXX>` the byte XX.
fn sentencepiece_bytes(piece: &str) -> Vec<u8> {
    if let Some(hex) = piece.strip_prefix("<0x").and_then(|p| p.strip_suffix('>'))
        && hex.len() == 2
        && let Ok(b) = u8::from_str_radix(hex, 16)
    {
        return vec![b];
    }
    piece.replace('\u{2581}', " ").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_tokens_are_bytes() {
        let mut out = Vec::new();
        Tokenizer::Byte.encode_into("hé", &mut out).unwrap();
        assert_eq!(out, vec![104, 195, 169]);
        assert_eq!(Tokenizer::Byte.decoded_bytes(&out).unwrap(), 3);
    }

    #[test]
    fn bpe_learns_merges_and_round_trips() {
        let text = "the cat sat on the mat. the cat ate the rat. ".repeat(200);
        let bpe = Tokenizer::train_bpe(std::iter::once(text.as_str()), 300).unwrap();
        assert!(bpe.vocab() > 256 && bpe.vocab() <= 300, "{}", bpe.vocab());
        let mut ids = Vec::new();
        bpe.encode_into("the cat sat on the mat.", &mut ids)
            .unwrap();
        assert!(
            ids.len() < "the cat sat on the mat.".len(),
            "merges shorten the text: {ids:?}"
        );
        assert_eq!(bpe.decoded_bytes(&ids).unwrap(), 23);
        assert!(ids.iter().all(|&i| (i as u64) < bpe.vocab()));
    }

    /// Token bytes concatenate to the text, also where a token splits a character (a BPE that
    /// has merged "é"'s two bytes with neighbours, or splits "€").
    #[test]
    fn token_bytes_concatenate_to_the_text() {
        let text = "café crème € naïve  \n\t日本語 ".repeat(100);
        let bpe = Tokenizer::train_bpe(std::iter::once(text.as_str()), 290).unwrap();
        for t in [Tokenizer::Byte, bpe] {
            let mut ids = Vec::new();
            t.encode_into("un café à 3 € — 日本", &mut ids).unwrap();
            let bytes: Vec<u8> = t.token_bytes(&ids).unwrap().concat();
            assert_eq!(bytes, "un café à 3 € — 日本".as_bytes(), "{t:?}");
        }
        assert_eq!(sentencepiece_bytes("\u{2581}the"), b" the");
        assert_eq!(sentencepiece_bytes("<0x0A>"), b"\n");
    }
}
