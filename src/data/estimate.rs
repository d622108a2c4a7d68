//! What preparing a text corpus will give and cost, estimated without preparing it: the files'
//! sizes on disk; a few whole files, evenly spaced through the list, read for their text bytes
//! per file byte (compression, JSON or parquet overhead); and a sample of their documents
//! tokenised for tokens per byte and this machine's tokens per second. `plan --dry-run` prices
//! a corpus of billions of tokens this way in seconds, where preparing it takes an hour.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use super::config::DataConfig;
use super::corpus::find_files;
use super::error::DataError;
use super::prepared::{CorpusInfo, unigram_entropy};
use super::scan::{Encoder, Part};
use super::shards::Documents;
use super::tokenize::Tokenizer;
use crate::spec::TokenizerKind;

/// Files read whole for the text-to-file ratio, at most (a 64 MiB shard reads in about a
/// second).
const SAMPLE_FILES: usize = 4;
/// Text tokenised for tokens per byte and speed.
const SAMPLE_TEXT: u64 = 4 << 20;

/// A corpus's size and preparation cost, estimated from a sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CorpusEstimate {
    /// Files of the corpus (training and validation).
    pub files: u64,
    /// Their bytes on disk.
    pub file_bytes: u64,
    /// Files read whole for the sample.
    pub sample_files: u64,
    /// Text bytes per file byte in them.
    pub text_per_file_byte: f64,
    /// Text bytes tokenised.
    pub sample_bytes: u64,
    /// The tokens they gave (separators included).
    pub sample_tokens: u64,
    /// Tokens per second tokenising the sample on this machine's threads.
    pub tokens_per_s: f64,
    /// Unigram entropy of the sample's tokens (nats).
    pub unigram_entropy_nats: f64,
    /// Estimated tokens of the training files, and of the validation files (`val_path`).
    pub train_file_tokens: u64,
    /// Estimated tokens of the validation files (0 without `val_path`).
    pub val_file_tokens: u64,
    /// Bytes per token of the cache (2 below 65,536 ids, else 4).
    pub token_width: u64,
}

impl CorpusEstimate {
    /// Estimated tokens of the whole corpus.
    pub fn tokens(&self) -> u64 {
        self.train_file_tokens + self.val_file_tokens
    }

    /// Estimated text bytes of the whole corpus.
    pub fn text_bytes(&self) -> u64 {
        (self.file_bytes as f64 * self.text_per_file_byte) as u64
    }

    /// Estimated bytes of the token cache.
    pub fn cache_bytes(&self) -> u64 {
        self.tokens() * self.token_width
    }

    /// Estimated seconds to prepare the corpus at the sample's speed (tokenising dominates).
    pub fn prepare_s(&self) -> f64 {
        self.tokens() as f64 / self.tokens_per_s.max(1.0)
    }

    /// The facts a plan needs, as estimated (the split is not chosen: held out is
    /// `val_tokens` of the training files, or the validation files).
    pub fn info(&self, data: &DataConfig, path: &Path) -> CorpusInfo {
        let val = match self.val_file_tokens {
            0 => data.val_tokens.min(self.train_file_tokens / 2),
            v => v.min(data.val_tokens),
        };
        let train = match self.val_file_tokens {
            0 => self.train_file_tokens - val,
            _ => self.train_file_tokens,
        };
        CorpusInfo {
            description: format!(
                "{} at {} ({} files, {} on disk; estimated, not read: {} of text ≈ {} tokens at \
                 {:.2} bytes/token from {} of {} file(s); cache ≈ {}; preparing it ≈ {} at the \
                 sample's {:.0}K tokens/s on {} thread(s))",
                data.corpus,
                path.display(),
                self.files,
                human_bytes(self.file_bytes),
                human_bytes(self.text_bytes()),
                human_count(self.tokens()),
                self.sample_bytes as f64 / self.sample_tokens.max(1) as f64,
                human_bytes(self.sample_bytes),
                self.sample_files,
                human_bytes(self.cache_bytes()),
                human_secs(self.prepare_s()),
                self.tokens_per_s / 1e3,
                rayon::current_num_threads(),
            ),
            key: String::new(),
            train_tokens: train,
            val_tokens: val,
            val_bytes_per_token: self.sample_bytes as f64 / self.sample_tokens.max(1) as f64,
            unigram_entropy_nats: self.unigram_entropy_nats,
            files: self.files,
            val_split: "not chosen (estimated from a sample)".into(),
            train_bytes: (train as f64 * self.sample_bytes as f64
                / self.sample_tokens.max(1) as f64) as u64,
            ..CorpusInfo::default()
        }
    }
}

/// Estimates what preparing the text corpus of `data` (paths relative to `base_dir`) gives and
/// costs, reading a sample of it.
pub fn estimate(
    data: &DataConfig,
    base_dir: &Path,
) -> Result<(CorpusEstimate, PathBuf), DataError> {
    let files = find_files(data, base_dir)?;
    let size = |f: &PathBuf| fs::metadata(f).map_or(0, |m| m.len());
    let all: Vec<PathBuf> = files.train.iter().chain(&files.val).cloned().collect();
    let (sample, read) = read_sample(data, &spread(&all, SAMPLE_FILES))?;
    let read_file_bytes: u64 = read.iter().map(size).sum();
    let read_text: u64 = sample.read_text;
    if read_text == 0 {
        return Err(DataError::Empty {
            path: files.path.clone(),
            what: "no text in the sampled files".into(),
        });
    }
    let tokenizer = sample_tokenizer(data, base_dir, &sample.texts)?;
    let encoder = Encoder::new(&tokenizer, data.vocab, data.separator)?;
    let started = Instant::now();
    let tokens = sample
        .texts
        .par_iter()
        .map(|t| encoder.encode("sample", t, Part::Whole).map(|e| e.tokens))
        .collect::<Result<Vec<Vec<u32>>, DataError>>()?;
    let secs = started.elapsed().as_secs_f64().max(1e-6);
    let flat: Vec<u32> = tokens.concat();
    let sample_bytes: u64 = sample.texts.iter().map(|t| t.len() as u64).sum();
    let per_file_byte = read_text as f64 / read_file_bytes.max(1) as f64;
    let tokens_of = |list: &[PathBuf]| {
        let text = list.iter().map(size).sum::<u64>() as f64 * per_file_byte;
        (text * flat.len() as f64 / sample_bytes.max(1) as f64) as u64
    };
    let estimate = CorpusEstimate {
        files: all.len() as u64,
        file_bytes: all.iter().map(size).sum(),
        sample_files: read.len() as u64,
        text_per_file_byte: per_file_byte,
        sample_bytes,
        sample_tokens: flat.len() as u64,
        tokens_per_s: flat.len() as f64 / secs,
        unigram_entropy_nats: unigram_entropy(&flat),
        train_file_tokens: tokens_of(&files.train),
        val_file_tokens: tokens_of(&files.val),
        token_width: if data.vocab <= 1 << 16 { 2 } else { 4 },
    };
    Ok((estimate, files.path))
}

/// The text read from the sampled files.
struct Sample {
    /// Documents kept for tokenising (about [`SAMPLE_TEXT`] bytes).
    texts: Vec<String>,
    /// Text bytes of every document read.
    read_text: u64,
}

/// Reads `picked` whole; returns the sample (an equal share of [`SAMPLE_TEXT`] from each file)
/// and the files read.
fn read_sample(data: &DataConfig, picked: &[PathBuf]) -> Result<(Sample, Vec<PathBuf>), DataError> {
    let column = data.text_column.as_deref().unwrap_or("text");
    let mut sample = Sample {
        texts: Vec::new(),
        read_text: 0,
    };
    let mut kept = 0u64;
    let mut read = Vec::new();
    for file in picked {
        for doc in Documents::new(std::slice::from_ref(file), data.corpus, column) {
            let doc = doc?;
            sample.read_text += doc.text.len() as u64;
            // a few documents from each file, so each file's text is in the sample
            if kept < SAMPLE_TEXT * (read.len() as u64 + 1) / picked.len().max(1) as u64 {
                kept += doc.text.len() as u64;
                sample.texts.push(doc.text);
            }
        }
        read.push(file.clone());
    }
    Ok((sample, read))
}

/// At most `n` of `files`, evenly spaced through the list (the first always).
fn spread(files: &[PathBuf], n: usize) -> Vec<PathBuf> {
    let step = files.len().div_ceil(n.max(1)).max(1);
    files.iter().step_by(step).cloned().collect()
}

/// The tokenizer preparation would use, for the sample: a `bpe` tokenizer is trained on the
/// sample (preparation trains it on the whole training split, so its tokens per byte is a little
/// better than this one's).
fn sample_tokenizer(
    data: &DataConfig,
    base_dir: &Path,
    texts: &[String],
) -> Result<Tokenizer, DataError> {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::Bpe), _) => Tokenizer::train_bpe(texts.iter(), data.vocab),
        (Some(TokenizerKind::File), Some(file)) => Tokenizer::from_file(&base_dir.join(&file.path)),
        _ => Ok(Tokenizer::Byte),
    }
}

fn human_bytes(b: u64) -> String {
    let b = b as f64;
    match b {
        _ if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        _ if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.0} KB", b / 1e3),
    }
}

fn human_count(n: u64) -> String {
    let n = n as f64;
    match n {
        _ if n >= 1e9 => format!("{:.2}B", n / 1e9),
        _ if n >= 1e6 => format!("{:.1}M", n / 1e6),
        _ => format!("{:.0}K", n / 1e3),
    }
}

fn human_secs(s: f64) -> String {
    match s {
        _ if s >= 3600.0 => format!(
            "{:.0} h {:02.0} min",
            (s / 3600.0).floor(),
            (s % 3600.0) / 60.0
        ),
        _ if s >= 60.0 => format!("{:.0} min", s / 60.0),
        _ => format!("{s:.0} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_evenly_spaced_files() {
        let files: Vec<PathBuf> = (0..10).map(|i| PathBuf::from(format!("f{i}"))).collect();
        let picked = spread(&files, 4);
        assert_eq!(picked, ["f0", "f3", "f6", "f9"].map(PathBuf::from));
        assert_eq!(spread(&files[..2], 4).len(), 2);
    }
}
