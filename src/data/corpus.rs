//! A real-text corpus prepared once per sweep: its files found and read (a path that does not
//! exist or holds no readable text is refused, naming the path as written and as resolved),
//! tokenised (a BPE tokenizer is trained once), split into training and held-out text (see
//! [`super::split`]) and written to the token cache with a JSON file of facts beside it.
//!
//! Preparation holds an exclusive lock on the cache entry (`tokens-KEY.lock`), so workers of one
//! process and other processes wait for the one that builds it and never see half a cache.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::bytes::{BoundaryRecord, ByteIndex, SplitRecord};
use super::cache::TokenFile;
use super::cache::TokenWriter;
use super::error::DataError;
use super::prepared::{CorpusInfo, Prepared, unigram_entropy};
use super::scan::{Encoder, Part, Scanned, Scratch, scan};
use super::shards::{Documents, corpus_files};
use super::split::{self, Split, TokenizedDoc};
use super::stream::Stream;
use super::tokenize::Tokenizer;
use crate::atomic::write_atomic;
use crate::data::DataConfig;
use crate::digest::hex;
use crate::spec::{CorpusKind, Separator, TokenizerKind};

/// Facts about a prepared corpus, kept in `corpus-KEY.json` beside its token cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CorpusFacts {
    /// Files read (training and validation).
    pub files: u64,
    /// Documents read, duplicates included.
    pub documents: u64,
    /// Groups of byte-identical documents (first one kept).
    pub duplicate_groups: Vec<Vec<String>>,
    /// How the held-out split was chosen.
    pub val_split: String,
    /// Fraction of held-out 64-token windows also found in training.
    pub val_overlap: f64,
    /// UTF-8 bytes of the training split.
    pub train_bytes: u64,
}

/// The files of a text corpus: training files, and validation files when `val_path` is set.
#[derive(Debug, Clone)]
pub(crate) struct CorpusFiles {
    /// Training files, sorted.
    pub train: Vec<PathBuf>,
    /// Validation files, sorted (empty without `val_path`).
    pub val: Vec<PathBuf>,
    /// The resolved corpus path.
    pub path: PathBuf,
}

/// `written` (relative to `base_dir`) as an absolute path, for messages.
fn resolve(base_dir: &Path, written: &str) -> PathBuf {
    let joined = base_dir.join(written);
    std::path::absolute(&joined).unwrap_or(joined)
}

/// Finds the corpus files of `data`, refusing a path that cannot be read or holds no file of
/// the corpus kind; the error names the key, the path as written and as resolved.
pub(crate) fn find_files(data: &DataConfig, base_dir: &Path) -> Result<CorpusFiles, DataError> {
    let find = |key: &'static str, written: &str| {
        let path = resolve(base_dir, written);
        corpus_files(&path, data.corpus)
            .map(|files| (files, path.clone()))
            .map_err(|e| DataError::CorpusPath {
                key,
                written: written.to_string(),
                resolved: path,
                source: e.into_cause(),
            })
    };
    let (train, path) = find("path", data.path.as_deref().unwrap_or_default())?;
    let val = match data.val_path.as_deref() {
        Some(v) => find("val_path", v)?.0,
        None => Vec::new(),
    };
    Ok(CorpusFiles { train, val, path })
}

/// The cache key of a text corpus: its settings, the split rule, and each file's path, size and
/// modification time (content hashing a large corpus on every run would cost more than it
/// protects).
fn cache_key(data: &DataConfig, files: &CorpusFiles) -> String {
    let mut h = Sha256::new();
    h.update(format!(
        "{:?}|{:?}|{}|{}|{:?}|split-v2",
        data.corpus, data.tokenizer, data.vocab, data.val_tokens, data.text_column
    ));
    if !data.separator.is_blank_line() {
        h.update(format!("|separator={}", data.separator)); // blank lines: older caches' keys
    }
    if let Some(file) = &data.tokenizer_file {
        h.update(format!("|tokenizer-sha256={}", file.sha256)); // the file's content, not its path
    }
    if let Some(anchor) = &data.follow {
        h.update(format!(
            "|follows={:?}|{:?}|{}",
            anchor.tokenizer,
            anchor.tokenizer_file.as_ref().map(|f| &f.sha256),
            anchor.vocab
        ));
    }
    for (tag, list) in [("t", &files.train), ("v", &files.val)] {
        for f in list {
            let meta = fs::metadata(f).ok();
            let modified = meta
                .as_ref()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            h.update(format!(
                "|{tag}|{}|{:?}|{:?}",
                f.display(),
                meta.map(|m| m.len()),
                modified
            ));
        }
    }
    hex(&h.finalize()[..8])
}

/// Prepares (or opens the prepared) text corpus of `data`: paths relative to `base_dir`, cache
/// files in `cache_dir`.
pub fn prepare_text(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<Prepared, DataError> {
    let files = find_files(data, base_dir)?;
    let key = cache_key(data, &files);
    let paths = EntryPaths::new(cache_dir, &key);
    let (file, facts) = {
        let _lock = lock(cache_dir, &key)?;
        match open_cached(&paths.tokens, &paths.facts)? {
            Some(cached) => cached,
            None => {
                paths.remove_leftovers();
                build(data, &files, &paths, base_dir, cache_dir)?;
                open_cached(&paths.tokens, &paths.facts)?.ok_or_else(|| DataError::Write {
                    path: paths.tokens.clone(),
                    source: "the token cache vanished right after it was written".into(),
                })?
            }
        }
    };
    let identity = identity_key(cache_dir, &key)?;
    Ok(prepared(data, &files, identity, file, facts))
}

/// The key that identifies the tokens of cache entry `key` to logit stores.
///
/// The cache key notices a change cheaply (paths, sizes, modification times), so copying or
/// re-provisioning the same texts gives a new entry with the same tokens; its identity is then that
/// of the oldest entry in `cache_dir` whose tokens and facts are byte-identical, so the logit
/// stores made from them stay valid. Recorded in `alias-KEY` after the first comparison.
fn identity_key(cache_dir: &Path, key: &str) -> Result<String, DataError> {
    let alias_path = cache_dir.join(format!("alias-{key}"));
    if let Ok(alias) = fs::read_to_string(&alias_path) {
        let alias = alias.trim();
        if !alias.is_empty() && alias.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(alias.to_string());
        }
    }
    let entry = |k: &str| {
        (
            cache_dir.join(format!("tokens-{k}.bin")),
            cache_dir.join(format!("corpus-{k}.json")),
        )
    };
    let (tokens, facts) = entry(key);
    let Some(own_facts) = fs::read(&facts).ok() else {
        return Ok(key.to_string());
    };
    let mut twins: Vec<(std::time::SystemTime, String)> = Vec::new();
    for other in fs::read_dir(cache_dir).into_iter().flatten().flatten() {
        let name = other.file_name().to_string_lossy().to_string();
        let Some(k) = name
            .strip_prefix("tokens-")
            .and_then(|n| n.strip_suffix(".bin"))
        else {
            continue;
        };
        let (t, f) = entry(k);
        if k == key || fs::read(&f).ok().as_deref() != Some(own_facts.as_slice()) {
            continue;
        }
        if let Ok(born) = fs::metadata(&f).and_then(|m| m.modified())
            && same_tokens(&tokens, &t)
        {
            twins.push((born, k.to_string()));
        }
    }
    let own_born = fs::metadata(&facts).and_then(|m| m.modified()).ok();
    let identity = twins
        .into_iter()
        .filter(|(born, _)| own_born.is_none_or(|own| *born < own))
        .min()
        .map_or_else(|| key.to_string(), |(_, k)| k);
    write_atomic(&alias_path, &[identity.as_bytes()])?;
    Ok(identity)
}

/// Whether the token files at `a` and `b` hold the same tokens and splits (compared a chunk at
/// a time, whatever their format version).
fn same_tokens(a: &Path, b: &Path) -> bool {
    let (Ok(a), Ok(b)) = (TokenFile::open(a), TokenFile::open(b)) else {
        return false;
    };
    let step = 1 << 20;
    (a.len(), a.train_len, a.vocab, a.val_bytes) == (b.len(), b.train_len, b.vocab, b.val_bytes)
        && (0..a.len())
            .step_by(step)
            .all(|i| a.slice(i, i + step) == b.slice(i, i + step))
}

/// Holds an exclusive lock on cache entry `key` until dropped.
fn lock(cache_dir: &Path, key: &str) -> Result<fs::File, DataError> {
    let path = cache_dir.join(format!("tokens-{key}.lock"));
    let fail = |e: std::io::Error| DataError::Write {
        path: path.clone(),
        source: e.into(),
    };
    fs::create_dir_all(cache_dir).map_err(|e| DataError::Write {
        path: cache_dir.to_path_buf(),
        source: e.into(),
    })?;
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(fail)?;
    file.lock().map_err(fail)?;
    Ok(file)
}

/// The cached tokens and facts, or `None` when the cache was not built yet.
fn open_cached(
    token_path: &Path,
    facts_path: &Path,
) -> Result<Option<(TokenFile, CorpusFacts)>, DataError> {
    let file = match TokenFile::open(token_path) {
        Ok(file) => file,
        Err(DataError::Missing { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    // hashed whole once after writing; later opens trust its stamp (`TokenFile::verify_once`)
    file.verify_once()?;
    let facts = match fs::read(facts_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| DataError::CorruptCache {
            path: facts_path.to_path_buf(),
            source: e.into(),
        })?,
        // Written before the tokens; absent only if removed by hand: rebuild both.
        Err(_) => return Ok(None),
    };
    Ok(Some((file, facts)))
}

fn prepared(
    data: &DataConfig,
    files: &CorpusFiles,
    key: String,
    file: TokenFile,
    facts: CorpusFacts,
) -> Prepared {
    let file = Arc::new(file);
    let (train_len, len) = (file.train_len, file.len());
    let val = Stream::File {
        file: file.clone(),
        start: train_len,
        end: len,
    };
    let val_tokens = val.slice(0, val.len());
    let info = CorpusInfo {
        key,
        description: format!(
            "{} at {} ({} files, {} tokenizer{})",
            data.corpus,
            files.path.display(),
            facts.files,
            tokenizer_name(data),
            match data.separator {
                Separator::Eos => ", each document ending with its EOS token",
                Separator::BlankLine => "",
            }
        ),
        train_tokens: train_len as u64,
        val_tokens: (len - train_len) as u64,
        val_bytes_per_token: file.val_bytes as f64 / (len - train_len).max(1) as f64,
        unigram_entropy_nats: unigram_entropy(&val_tokens),
        entropy_rate_nats: None,
        oracle_val_loss: None,
        files: facts.files,
        documents: facts.documents,
        duplicate_groups: facts.duplicate_groups,
        val_split: facts.val_split,
        val_overlap: Some(facts.val_overlap),
        train_bytes: facts.train_bytes,
    };
    Prepared {
        train: Stream::File {
            file,
            start: 0,
            end: train_len,
        },
        val,
        shuffle: true,
        info,
    }
}

fn tokenizer_name(data: &DataConfig) -> String {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::Bpe), _) => "bpe".into(),
        (Some(TokenizerKind::File), Some(file)) => format!("`{}`", file.path),
        _ => "byte".into(),
    }
}

/// The `tokenizer.json` a run's tokens come from: the sweep's tokenizer file, or the BPE
/// tokenizer trained into `cache_dir` (once the cache exists); `None` for byte tokens and the
/// synthetic corpus.
pub(crate) fn tokenizer_json(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
) -> Option<PathBuf> {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::File), Some(file)) => Some(base_dir.join(&file.path)),
        (Some(TokenizerKind::Bpe), _) => {
            let files = find_files(data, base_dir).ok()?;
            let json = cache_dir.join(format!("tokenizer-{}.json", cache_key(data, &files)));
            json.is_file().then_some(json)
        }
        _ => None,
    }
}

/// The tokenizer a finished run's tokens came from, to turn them back into text: bytes, the
/// sweep's tokenizer file, or the BPE tokenizer trained into `cache_dir`; `None` for the
/// synthetic corpus (its tokens are not text).
pub(crate) fn run_tokenizer(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<Option<Tokenizer>, DataError> {
    if data.corpus == CorpusKind::Synthetic {
        return Ok(None);
    }
    match data.tokenizer {
        Some(TokenizerKind::Bpe) | Some(TokenizerKind::File) => {
            let Some(path) = tokenizer_json(data, base_dir, cache_dir) else {
                return Err(DataError::Missing {
                    path: cache_dir.to_path_buf(),
                    source: "the run's trained tokenizer is not in the token cache (run the sweep first)"
                        .into(),
                });
            };
            Tokenizer::from_file(&path).map(Some)
        }
        _ => Ok(Some(Tokenizer::Byte)),
    }
}

/// The tokenizer of a text corpus: bytes, BPE trained on `docs` (saved to `bpe_path`; trained on
/// the training documents only, so held-out text does not shape it), or the sweep's tokenizer
/// file, checked against the hash the plan recorded.
fn corpus_tokenizer(
    data: &DataConfig,
    files: &CorpusFiles,
    bpe_path: &Path,
    base_dir: &Path,
) -> Result<Tokenizer, DataError> {
    match (data.tokenizer, &data.tokenizer_file) {
        (Some(TokenizerKind::Bpe), _) => {
            let failed = std::sync::Mutex::new(None);
            let texts = documents(data, &files.train).map_while(|d| match d {
                Ok(d) => Some(d.text),
                Err(e) => {
                    if let Ok(mut first) = failed.lock() {
                        *first = Some(e);
                    }
                    None
                }
            });
            let t = Tokenizer::train_bpe(texts, data.vocab)?;
            if let Some(e) = failed.into_inner().ok().flatten() {
                return Err(e);
            }
            t.save(bpe_path)?;
            Ok(t)
        }
        (Some(TokenizerKind::File), Some(file)) => {
            let path = base_dir.join(&file.path);
            let bytes = fs::read(&path).map_err(|e| DataError::Missing {
                path: path.clone(),
                source: e.into(),
            })?;
            if hex(&Sha256::digest(&bytes)) != file.sha256 {
                return Err(DataError::Tokenizer(format!(
                    "`{}` changed since the sweep was planned\n\nhint: run `pdsweep plan` (or `run`) again",
                    path.display()
                ).into()));
            }
            Tokenizer::from_file(&path)
        }
        (Some(TokenizerKind::File), None) => Err(DataError::Tokenizer(
            "the run names a tokenizer file but not which".into(),
        )),
        _ => Ok(Tokenizer::Byte),
    }
}

/// The documents of `files`, streamed.
fn documents(data: &DataConfig, files: &[PathBuf]) -> Documents {
    let column = data.text_column.as_deref().unwrap_or("text");
    Documents::new(files, data.corpus, column)
}

/// Reads, tokenises, splits and caches a text corpus, and records the split (`split-KEY.json`,
/// [`SplitRecord`]).
///
/// The documents stream through the tokenizer into a scratch file (pass one, [`scan`]); the split
/// is chosen from what is known of each document; the cache is written from the scratch file piece
/// by piece (pass two).
fn build(
    data: &DataConfig,
    files: &CorpusFiles,
    paths: &EntryPaths,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<(), DataError> {
    let tokenizer = corpus_tokenizer(data, files, &paths.tokenizer, base_dir)?;
    let encoder = Encoder::new(&tokenizer, data.vocab, data.separator)?;
    let anchor = match data.anchor() {
        Some(anchor) => Some(split_record(&anchor, base_dir, cache_dir)?),
        None => None,
    };
    let keep = anchor
        .as_ref()
        .and_then(|r| r.boundary.as_ref())
        .and_then(|b| unhex32(&b.hash));
    let mut scratch = Scratch::create(&paths.scratch)?;
    let val_docs = match files.val.is_empty() {
        true => None,
        false => Some(scan_nonempty(
            data,
            &files.val,
            &encoder,
            &mut scratch,
            None,
        )?),
    };
    let docs = scan_nonempty(data, &files.train, &encoder, &mut scratch, keep)?;
    let mut inexact = docs
        .inexact
        .clone()
        .or_else(|| val_docs.as_ref().and_then(|v| v.inexact.clone()));
    let val = data.val_tokens;
    let split = match (&anchor, val_docs) {
        (Some(record), val_docs) => {
            follow(&encoder, docs, val_docs, record, &mut scratch, &mut inexact)?
        }
        (None, None) => {
            check_size(&docs.docs, val, &files.path)?;
            split::hold_out(docs.docs, val)
        }
        (None, Some(v)) => split::separate(docs.docs, v.docs, val),
    };
    let total_files = (files.train.len() + files.val.len()) as u64;
    write(
        data,
        &encoder,
        split,
        &mut scratch,
        total_files,
        paths,
        inexact,
    )
}

/// [`scan`] of `files`, refusing files that hold no text at all.
fn scan_nonempty(
    data: &DataConfig,
    files: &[PathBuf],
    encoder: &Encoder,
    scratch: &mut Scratch,
    keep: Option<[u8; 32]>,
) -> Result<Scanned, DataError> {
    let scanned = scan(documents(data, files), encoder, scratch, keep)?;
    let separator = encoder.separator_bytes();
    if scanned.docs.iter().all(|d| d.bytes <= separator) {
        return Err(DataError::Empty {
            path: files.first().cloned().unwrap_or_default(),
            what: "no text in any document".into(),
        });
    }
    Ok(scanned)
}

/// The files of one cache entry.
struct EntryPaths {
    tokens: PathBuf,
    facts: PathBuf,
    tokenizer: PathBuf,
    split: PathBuf,
    scratch: PathBuf,
}

impl EntryPaths {
    fn new(cache_dir: &Path, key: &str) -> EntryPaths {
        EntryPaths {
            tokens: cache_dir.join(format!("tokens-{key}.bin")),
            facts: cache_dir.join(format!("corpus-{key}.json")),
            tokenizer: cache_dir.join(format!("tokenizer-{key}.json")),
            split: cache_dir.join(format!("split-{key}.json")),
            scratch: cache_dir.join(format!("tokens-{key}.scratch")),
        }
    }

    /// Removes what a preparation killed while building this entry left behind: its scratch file
    /// and the temporary files of its tokens, facts, split and tokenizer.
    ///
    /// Called under the entry's lock, so no live process is writing them; the build that follows
    /// starts over and writes the same bytes an uninterrupted one would.
    fn remove_leftovers(&self) {
        let _ = fs::remove_file(&self.scratch);
        for file in [&self.tokens, &self.facts, &self.split, &self.tokenizer] {
            let (Some(dir), Some(stem)) =
                (file.parent(), file.file_stem().and_then(|s| s.to_str()))
            else {
                continue;
            };
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| crate::atomic::is_temp_of(name, stem))
                {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }
}

/// The split another tokenizer made (`record`) applied to the documents tokenised here: the
/// same documents held out and the boundary document cut at the same byte (moved back to a
/// character boundary, where a byte-level split cut inside a character).
fn follow(
    encoder: &Encoder,
    docs: Scanned,
    val_docs: Option<Scanned>,
    record: &SplitRecord,
    scratch: &mut Scratch,
    inexact: &mut Option<String>,
) -> Result<Split, DataError> {
    let held: std::collections::HashSet<[u8; 32]> =
        record.held.iter().filter_map(|h| unhex32(h)).collect();
    let boundary = record
        .boundary
        .as_ref()
        .and_then(|b| unhex32(&b.hash).map(|h| (h, b.head_bytes)));
    let description = format!(
        "held out: the same text as the students' tokenizer ({} whole documents{})",
        record.held.len(),
        if boundary.is_some() {
            " and the tail of one"
        } else {
            ""
        }
    );
    if let Some(val_docs) = val_docs {
        let mut split = split::separate(docs.docs, val_docs.docs, u64::MAX);
        let val = scratch.collect(&split.val)?;
        let keep = tokens_within(encoder, &val, record.val_bytes);
        split.val.truncate(keep);
        split.description = description;
        return Ok(split);
    }
    let boundary_text = docs.kept;
    let mut failure = None;
    let split = split::follow(
        docs.docs,
        &held,
        boundary,
        |_, head_bytes| {
            let Some((source, text)) = &boundary_text else {
                return (Vec::new(), Vec::new());
            };
            let mut at = (head_bytes as usize).min(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let head = encoder.encode(source, &text[..at], Part::Head);
            let tail = encoder.encode(source, &text[at..], Part::Tail);
            match (head, tail) {
                (Ok(h), Ok(t)) => {
                    if inexact.is_none() {
                        *inexact = h.inexact.or(t.inexact);
                    }
                    (h.tokens, t.tokens)
                }
                (Err(e), _) | (_, Err(e)) => {
                    failure = Some(e);
                    (Vec::new(), Vec::new())
                }
            }
        },
        description,
    );
    match failure {
        Some(e) => Err(e),
        None => Ok(split),
    }
}

/// How many of the first tokens of `val` decode to at most `bytes` bytes.
fn tokens_within(encoder: &Encoder, val: &[u32], bytes: u64) -> u64 {
    let lengths = encoder.lengths();
    let mut at = 0u64;
    val.iter()
        .take_while(|&&t| {
            at += u64::from(lengths.get(t as usize).copied().unwrap_or(0));
            at <= bytes
        })
        .count() as u64
}

fn unhex32(h: &str) -> Option<[u8; 32]> {
    if h.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The split record of the text corpus of `data` (`split-KEY.json`): what it held out and where its
/// training pieces lie, for another tokenizer to follow and for the byte index.
///
/// A cache entry made before records were kept is rebuilt (the same tokens) to make one.
pub fn split_record(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<SplitRecord, DataError> {
    let files = find_files(data, base_dir)?;
    let key = cache_key(data, &files);
    let paths = EntryPaths::new(cache_dir, &key);
    let read = |p: &Path| -> Result<Option<SplitRecord>, DataError> {
        match fs::read(p) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| DataError::CorruptCache {
                        path: p.to_path_buf(),
                        source: e.into(),
                    })
            }
            Err(_) => Ok(None),
        }
    };
    let _lock = lock(cache_dir, &key)?;
    if let (Some(record), Some(_)) = (
        read(&paths.split)?,
        open_cached(&paths.tokens, &paths.facts)?,
    ) {
        return Ok(record);
    }
    build(data, &files, &paths, base_dir, cache_dir)?;
    read(&paths.split)?.ok_or_else(|| DataError::Write {
        path: paths.split.clone(),
        source: "the split record vanished right after it was written".into(),
    })
}

/// The byte index of the training stream of `prepared` (a text corpus prepared from `data`): where
/// each token ends in the corpus's byte coordinate.
///
/// Refused for a tokenizer whose tokens are not the text's bytes.
pub(crate) fn byte_index(
    data: &DataConfig,
    prepared: &Prepared,
    base_dir: &Path,
    cache_dir: &Path,
) -> Result<ByteIndex, DataError> {
    let record = split_record(data, base_dir, cache_dir)?;
    if !record.exact_bytes {
        return Err(DataError::Tokenizer(format!(
            "the {} tokenizer rewrites the text ({}), so its tokens cannot be aligned by bytes with another tokenizer's",
            tokenizer_name(data),
            record
                .inexact
                .as_deref()
                .unwrap_or("its tokens are not the text's bytes")
        ).into()));
    }
    let tokenizer = run_tokenizer(data, base_dir, cache_dir)?
        .ok_or_else(|| DataError::Tokenizer("the synthetic corpus has no bytes to align".into()))?;
    let lengths = tokenizer.token_lengths(tokenizer.vocab().max(data.vocab))?;
    Ok(ByteIndex::new(
        prepared.train.clone(),
        lengths,
        record.train_segments,
    ))
}

/// Refuses a corpus with fewer than 5× the held-out tokens.
fn check_size(docs: &[TokenizedDoc], val: u64, path: &Path) -> Result<(), DataError> {
    let total: u64 = docs.iter().map(|d| d.tokens.len).sum();
    if total < val.saturating_mul(5) {
        return Err(DataError::TooSmall(format!(
            "corpus `{}` has {total} tokens, too few to hold out {val} (need at least 5× as many)\n\nhint: lower `[corpus] val_tokens`",
            path.display()
        )));
    }
    Ok(())
}

/// Pass two: the cache written from the scratch tokens piece by piece (training, then
/// held-out), with the split record and the facts; bytes are counted from the tokens' byte
/// lengths and the held-out windows looked for in training as the tokens pass.
fn write(
    data: &DataConfig,
    encoder: &Encoder,
    split: Split,
    scratch: &mut Scratch,
    files: u64,
    paths: &EntryPaths,
    inexact: Option<String>,
) -> Result<(), DataError> {
    let val = scratch.collect(&split.val)?;
    let val_bytes = encoder.bytes_of(&val);
    let mut overlap = split::Overlap::new(&val);
    let mut writer = TokenWriter::create(&paths.tokens, encoder_vocab(encoder, data))?;
    let head = split.boundary.map(|b| {
        let start = split.train_segments[b.segment].token;
        start..start + b.head_tokens as u64
    });
    let (mut train_bytes, mut head_bytes) = (0u64, 0u64);
    scratch.visit(&split.train, |block| {
        let at = writer.written();
        if let Some(head) = &head {
            let (a, b) = (head.start.max(at), head.end.min(at + block.len() as u64));
            if a < b {
                head_bytes += encoder.bytes_of(&block[(a - at) as usize..(b - at) as usize]);
            }
        }
        train_bytes += encoder.bytes_of(block);
        overlap.feed(block);
        writer.push(block)
    })?;
    writer.push(&val)?;
    let record = SplitRecord {
        held: split.held.iter().map(|h| hex(h)).collect(),
        boundary: split.boundary.map(|b| BoundaryRecord {
            hash: hex(&b.hash),
            head_bytes,
        }),
        val_bytes,
        train_segments: split.train_segments,
        exact_bytes: inexact.is_none(),
        inexact,
    };
    let record_json = serde_json::to_vec(&record).map_err(|e| DataError::Write {
        path: paths.split.clone(),
        source: e.into(),
    })?;
    write_atomic(&paths.split, &[&record_json])?;
    let facts = CorpusFacts {
        files,
        documents: split.documents,
        duplicate_groups: split.duplicate_groups,
        val_split: split.description,
        val_overlap: overlap.fraction(),
        train_bytes,
    };
    let json = serde_json::to_vec_pretty(&facts).map_err(|e| DataError::Write {
        path: paths.facts.clone(),
        source: e.into(),
    })?;
    write_atomic(&paths.facts, &[&json])?;
    writer.finish(split.train.len(), val_bytes)
}

fn encoder_vocab(encoder: &Encoder, data: &DataConfig) -> u64 {
    (encoder.lengths().len() as u64).max(data.vocab)
}
