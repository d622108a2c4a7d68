//! The offline logit store: the truncated teacher distribution at every position of the
//! training windows its students read, packed tightly in checksummed shards.
//!
//! # Format
//!
//! A store is a folder of shards `shard-HASH.bin`. A store belongs to one teacher, one corpus
//! and context and one truncation, never to a seed: its unit is the *window* (the `context`
//! positions of training window `w`, `data::Batcher`), and each student reads the windows of
//! its steps in its own order, so one store serves every seed and budget. A shard holds a set
//! of windows (ascending); a store grows by new shards for the windows a new seed or a longer
//! budget adds, and a shard once written is never rewritten. A shard is:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `PDSLGT02` |
//! | 4 | length `h` of the JSON header (u32, little-endian) |
//! | 32 | SHA-256 of the header and the digest table |
//! | h | JSON header: the [`StoreHeader`] (teacher run and checkpoint hash, corpus and context, vocab, top-p, top-k, value encoding, positions per window) and the windows held |
//! | 32·n | SHA-256 of each window's block |
//! | n·B | the blocks, each `B` = `block_bytes``(context, V, k)` bytes |
//!
//! Within a block each position is bit-packed, least significant bit first: exactly k entries
//! (the store's top-k, at most the vocabulary), each a token id in ⌈log2 V⌉ bits and a value in
//! 8 bits, most probable first. The value is the token's log-probability under the full vocabulary, −ln pᵢ, quantised
//! uniformly over [0, 16] nats (step 0.063 nats; rarer tokens read 16). A store keeps the top k
//! tokens of every position (no nucleus cut): the reader applies top-p and a smaller top-k
//! itself ([`super::truncate::refine`]), so one store serves every top-p, every top-k up to its
//! own, every τ, loss and α, and its size is known exactly before it is written. For a byte
//! vocabulary this is 2 bytes per kept logit.
//!
//! An *aligned* store (`aligned`, for students of another tokenizer) ends each position with
//! the teacher's −ln p of the token that actually follows, in 16 bits uniform over [0, 64]
//! nats (step 0.001 nats: merged spans add several of them), and the bytes from the end of the
//! position's context to the end of that token in the corpus's byte coordinate
//! (`crate::data::bytes`; a gap between documents counts) in 32 bits; each block starts with
//! where the window's first position's context ends (64 bits). A student aligns its own
//! positions on these offsets (`super::align`).
//!
//! Two variants, named in the header ([`Layout`]): a store of *sampled* targets (`targets =
//! "sampled"`) holds k slots per position, the distinct ids drawn, most often drawn first, each
//! with its value and its count in ⌈log2 (k+1)⌉ bits (unused slots: count 0); a store with a
//! *tail* (`tail`, kept when a student uses `missing = "bucket"`) ends each position with the
//! teacher's mass outside the k tokens, −ln m quantised like a value (the sum of the quantised
//! kept values would miss it by up to 3 % of the head's mass).
//!
//! Shards are written to a temporary file and renamed, named by a hash of the windows they
//! hold (two writers of the same windows write the same bytes). A shard whose magic, checksum,
//! header or size does not match what the reader expects is refused with its path; each
//! window's block is checked against its digest when it is read.

use crate::error::Cause;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::truncate::{Kept, TokenAfter, Truncation};
use crate::atomic::write_atomic;
use crate::spec::Targets;

/// Bits that identify one of `vocab` tokens: ⌈log2 V⌉.
pub fn index_bits(vocab: u64) -> u32 {
    64 - (vocab.max(2) - 1).leading_zeros()
}

/// Bits of one stored teacher value (a quantised log-probability).
pub(crate) const VALUE_BITS: u32 = 8;

/// How one position of a store's blocks is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Vocabulary (ids take ⌈log2 V⌉ bits).
    pub vocab: u64,
    /// Entries per position.
    pub top_k: u64,
    /// Each entry carries its draw count (sampled targets).
    pub counts: bool,
    /// Each position ends with the teacher's mass outside its entries.
    pub tail: bool,
    /// Each position keeps the next token's ln p and byte span (an aligned store).
    pub aligned: bool,
}

/// Bits of an aligned position's next-token log-probability.
const NEXT_BITS: u32 = 16;
/// Bits of an aligned position's byte span.
const SPAN_BITS: u32 = 32;
/// Nats the next-token value spans.
const NEXT_RANGE: f32 = 64.0;

impl Layout {
    /// The layout of a store of `truncation` (top-k as `truncation.top_k.kept(vocab)`) over
    /// `vocab`; `tail` when a reader keeps the tail.
    pub fn of(vocab: u64, truncation: &Truncation) -> Layout {
        Layout {
            vocab,
            top_k: truncation.top_k.kept(vocab),
            counts: truncation.targets == Targets::Sampled,
            tail: truncation.missing == crate::spec::Missing::Bucket,
            aligned: false,
        }
    }

    /// This layout, aligned or not.
    pub fn aligned(self, aligned: bool) -> Layout {
        Layout { aligned, ..self }
    }

    /// Plain top-k entries, no tail.
    pub fn top_k(vocab: u64, top_k: u64) -> Layout {
        Layout {
            vocab,
            top_k,
            counts: false,
            tail: false,
            aligned: false,
        }
    }

    fn count_bits(&self) -> u32 {
        if self.counts {
            index_bits(self.top_k + 1)
        } else {
            0
        }
    }

    /// Bits of one position.
    pub fn position_bits(&self) -> u64 {
        let entry = u64::from(index_bits(self.vocab) + VALUE_BITS + self.count_bits());
        self.top_k * entry
            + if self.tail { u64::from(VALUE_BITS) } else { 0 }
            + if self.aligned {
                u64::from(NEXT_BITS + SPAN_BITS)
            } else {
                0
            }
    }

    /// Bytes of a block of `positions` positions.
    pub fn block_bytes(&self, positions: u64) -> u64 {
        (positions * self.position_bits()).div_ceil(8) + if self.aligned { 8 } else { 0 }
    }

    /// Predicted store bytes per token (position), rounded up to whole bytes.
    pub fn bytes_per_token(&self) -> u64 {
        self.position_bits().div_ceil(8)
    }
}

/// Predicted logit-store bytes per token for a store that keeps `kept` entries of a `vocab`-sized
/// distribution per position (stores keep exactly the top k): `kept` pairs of a ⌈log2 V⌉-bit id and
/// an 8-bit value, rounded up to whole bytes.
///
/// Blocks round to bytes once per step, not per token, so the payload is at most this; shard
/// headers and block tables add well under 1 %.
pub fn logit_bytes_per_token(vocab: u64, kept: u64) -> u64 {
    (kept * (index_bits(vocab) + VALUE_BITS) as u64).div_ceil(8)
}

const MAGIC: &[u8; 8] = b"PDSLGT02";
/// Bytes before a shard's JSON header: magic, header length, checksum.
const PREAMBLE: usize = 44;
/// Name of the value encoding written in every header.
pub(crate) const VALUE_ENCODING: &str = "u8 -log-prob, uniform over [0, 16] nats";
const VALUE_RANGE: f32 = 16.0;

/// What every shard says about the store it belongs to; a reader checks it against what it
/// expects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreHeader {
    /// The `logits` run that writes the store.
    pub logits_run: String,
    /// The teacher run.
    pub teacher_run: String,
    /// SHA-256 of the teacher checkpoint file the logits came from.
    pub teacher_checkpoint_sha256: String,
    /// Describes the corpus, tokenizer and windows (context); never a seed or a batch size.
    pub data_key: String,
    /// Vocabulary.
    pub vocab: u64,
    /// Nucleus mass kept.
    pub top_p: f64,
    /// Most tokens kept per position.
    pub top_k: u64,
    /// How values are encoded (`VALUE_ENCODING`).
    pub value_encoding: String,
    /// Positions per window (the context).
    pub window_positions: u64,
    /// `sampled`: k draws with counts instead of the top k (absent for top-k stores).
    #[serde(default, skip_serializing_if = "Targets::is_top_k")]
    pub targets: Targets,
    /// Each position keeps the teacher's mass outside its entries (absent when not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tail: bool,
    /// SHA-256 of the teacher's tokenizer (its `tokenizer.json`, or `byte`) in an aligned
    /// store, whose positions keep the next token and its bytes (absent when not aligned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_sha256: Option<String>,
    /// The arithmetic the teacher ran in (absent for f32; `bf16`: weights and products in
    /// bf16, sums in f32).
    #[serde(default, skip_serializing_if = "crate::spec::TeacherPrecision::is_f32")]
    pub precision: crate::spec::TeacherPrecision,
}

impl StoreHeader {
    /// How its blocks are packed.
    pub fn layout(&self) -> Layout {
        Layout {
            vocab: self.vocab,
            top_k: self.top_k,
            counts: self.targets == Targets::Sampled,
            tail: self.tail,
            aligned: self.tokenizer_sha256.is_some(),
        }
    }
}

/// A shard's header: the store's, and the windows this shard holds (ascending).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ShardHeader {
    #[serde(flatten)]
    store: StoreHeader,
    windows: Vec<u64>,
}

/// A shard could not be written or is not usable.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Writing failed.
    #[error("cannot write logit shard `{}`", path.display())]
    Write {
        /// The shard.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The shard is damaged or belongs to another store; it is never used.
    #[error("logit shard `{}` is refused\n\nhint: delete the store folder; the `logits` run writes it again", path.display())]
    Refused {
        /// The shard.
        path: PathBuf,
        /// Which check failed.
        #[source]
        source: Cause,
    },
    /// A student's positions could not be aligned with its teacher's (another tokenizer).
    #[error("cannot align the teacher's positions with the student's")]
    Align {
        /// Why.
        #[source]
        source: Cause,
    },
    /// A student asked for a window its store does not hold.
    #[error("the logit store `{}` holds no logits for window {window} (its logit pass covers the windows of the students it was planned for)\n\nhint: plan the sweep again (`pdsweep run` does): the logit pass then extends the store", dir.display())]
    Missing {
        /// The store folder.
        dir: PathBuf,
        /// The window.
        window: u64,
    },
}

/// Packs bits least significant first.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    used: u32,
}

impl BitWriter {
    fn put(&mut self, value: u64, bits: u32) {
        let mut value = value;
        let mut bits = bits;
        while bits > 0 {
            let take = bits.min(32);
            self.acc |= (value & ((1u64 << take) - 1)) << self.used;
            self.used += take;
            value >>= take;
            bits -= take;
            while self.used >= 8 {
                self.bytes.push(self.acc as u8);
                self.acc >>= 8;
                self.used -= 8;
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        if self.used > 0 {
            self.bytes.push(self.acc as u8);
        }
        self.bytes
    }
}

/// Reads bits least significant first.
struct BitReader<'a> {
    bytes: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    fn get(&mut self, bits: u32) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..bits as usize {
            let byte = *self.bytes.get((self.bit + i) / 8)?;
            value |= u64::from((byte >> ((self.bit + i) % 8)) & 1) << i;
        }
        self.bit += bits as usize;
        Some(value)
    }
}

/// Quantises −ln p (a value of [`VALUE_BITS`] bits over [0, 16] nats).
fn quantise(log_p: f32) -> u64 {
    let v = if log_p.is_nan() { VALUE_RANGE } else { -log_p };
    (v.clamp(0.0, VALUE_RANGE) / VALUE_RANGE * 255.0).round() as u64
}

fn dequantise(value: u64) -> f32 {
    -(value as f32) / 255.0 * VALUE_RANGE
}

/// Quantises an aligned position's next-token −ln p ([`NEXT_BITS`] over [0, 64] nats).
fn quantise_next(log_p: f32) -> u64 {
    let v = if log_p.is_nan() { NEXT_RANGE } else { -log_p };
    let top = ((1u64 << NEXT_BITS) - 1) as f32;
    (v.clamp(0.0, NEXT_RANGE) / NEXT_RANGE * top).round() as u64
}

fn dequantise_next(value: u64) -> f32 {
    -(value as f32) / ((1u64 << NEXT_BITS) - 1) as f32 * NEXT_RANGE
}

/// Encodes one block of positions in `layout`: top-k positions with exactly `top_k` entries
/// (the caller truncates with top-p 1 and top-k `top_k`, which always keeps `top_k` tokens
/// when `top_k` ≤ V), sampled ones with at most `top_k` distinct ids.
pub fn encode_block(positions: &[Kept], layout: &Layout) -> Vec<u8> {
    let ibits = index_bits(layout.vocab);
    let cbits = layout.count_bits();
    let n = layout.top_k as usize;
    let mut w = BitWriter::default();
    if layout.aligned {
        let first = positions.first().and_then(|k| k.next).map_or(0, |t| t.from);
        w.put(first, 64);
    }
    for kept in positions {
        for slot in 0..n {
            let (id, lp) = match (kept.ids.get(slot), kept.log_probs.get(slot)) {
                (Some(&id), Some(&lp)) => (id, lp),
                _ if layout.counts => (0, f32::NEG_INFINITY), // an unused slot: count 0
                _ => break, // a short position: caught by its size
            };
            w.put(u64::from(id), ibits);
            w.put(quantise(lp), VALUE_BITS);
            if layout.counts {
                w.put(
                    u64::from(kept.counts.get(slot).copied().unwrap_or(0)),
                    cbits,
                );
            }
        }
        if layout.tail {
            w.put(quantise(kept.tail_log_mass()), VALUE_BITS);
        }
        if layout.aligned {
            let next = kept.next.unwrap_or(TokenAfter {
                log_prob: f32::NEG_INFINITY,
                from: 0,
                to: 0,
            });
            w.put(quantise_next(next.log_prob), NEXT_BITS);
            w.put(
                next.to.saturating_sub(next.from).min(u32::MAX as u64),
                SPAN_BITS,
            );
        }
    }
    w.finish()
}

/// Decodes a block of `positions` positions in `layout` (values as stored, quantised).
pub fn decode_block(bytes: &[u8], positions: usize, layout: &Layout) -> Option<Vec<Kept>> {
    let ibits = index_bits(layout.vocab);
    let cbits = layout.count_bits();
    let mut r = BitReader { bytes, bit: 0 };
    let mut out = Vec::with_capacity(positions);
    let n = layout.top_k as usize;
    if bytes.len() as u64 != layout.block_bytes(positions as u64) {
        return None;
    }
    let mut at = if layout.aligned { r.get(64)? } else { 0 };
    for _ in 0..positions {
        let mut kept = Kept::new(Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let id = r.get(ibits)?;
            if id >= layout.vocab {
                return None;
            }
            let value = dequantise(r.get(VALUE_BITS)?);
            if layout.counts {
                let count = r.get(cbits)? as u32;
                if count == 0 {
                    continue;
                }
                kept.counts.push(count);
            }
            kept.ids.push(id as u32);
            kept.log_probs.push(value);
        }
        if layout.tail {
            kept.tail = Some(dequantise(r.get(VALUE_BITS)?));
        }
        if layout.aligned {
            let log_prob = dequantise_next(r.get(NEXT_BITS)?);
            let to = at + r.get(SPAN_BITS)?;
            kept.next = Some(TokenAfter {
                log_prob,
                from: at,
                to,
            });
            at = to;
        }
        out.push(kept);
    }
    Some(out)
}

/// Writes a shard holding the blocks of `windows` (ascending, already encoded, one each) to
/// `path`, atomically.
pub(crate) fn write_shard(
    path: &Path,
    header: &StoreHeader,
    windows: &[u64],
    blocks: &[Vec<u8>],
) -> Result<(), ShardError> {
    let fail = |reason: Cause| ShardError::Write {
        path: path.into(),
        source: reason,
    };
    if windows.len() != blocks.len() || windows.windows(2).any(|w| w[0] >= w[1]) {
        return Err(fail("windows must be ascending, one block each".into()));
    }
    let json = serde_json::to_vec(&ShardHeader {
        store: header.clone(),
        windows: windows.to_vec(),
    })
    .map_err(|e| fail(e.into()))?;
    let digests: Vec<u8> = blocks.iter().flat_map(Sha256::digest).collect();
    let mut hasher = Sha256::new();
    hasher.update(&json);
    hasher.update(&digests);
    let sha = hasher.finalize();
    let len = (json.len() as u32).to_le_bytes();
    let mut parts: Vec<&[u8]> = vec![MAGIC, &len, &sha, &json, &digests];
    parts.extend(blocks.iter().map(|b| b.as_slice()));
    write_atomic(path, &parts).map_err(|e| fail(e.into()))
}

/// A verified shard: its header and digest table; blocks are read on demand, one window at a time,
/// and each is checked against its digest before it is decoded.
///
/// The file is open only while its blocks are read ([`Shard::close`] lets it go), so a store of
/// thousands of shards does not hold thousands of file handles.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The store it belongs to.
    pub header: StoreHeader,
    /// The windows it holds, ascending.
    pub windows: Vec<u64>,
    digests: Vec<[u8; 32]>,
    payload_at: u64,
    block_bytes: u64,
    file: Option<std::fs::File>,
    path: PathBuf,
}

impl Shard {
    /// Opens `path` and checks its magic, header checksum and size, and that it belongs to the
    /// store `expected`.
    pub fn open(path: &Path, expected: &StoreHeader) -> Result<Shard, ShardError> {
        use std::io::Read;
        let refuse = |reason: Cause| ShardError::Refused {
            path: path.into(),
            source: reason,
        };
        let mut file = std::fs::File::open(path).map_err(|e| refuse(e.into()))?;
        let size = file.metadata().map_err(|e| refuse(e.into()))?.len();
        let mut preamble = [0u8; PREAMBLE];
        file.read_exact(&mut preamble)
            .map_err(|_| refuse("not a pdsweep logit shard (too short)".into()))?;
        if &preamble[..8] != MAGIC {
            return Err(refuse("not a pdsweep logit shard of this version (an older store is re-written by its logit pass: `pdsweep gc` removes it)".into()));
        }
        let h = u32::from_le_bytes([preamble[8], preamble[9], preamble[10], preamble[11]]) as u64;
        if PREAMBLE as u64 + h > size {
            return Err(refuse("truncated header".into()));
        }
        let mut json = vec![0u8; h as usize];
        file.read_exact(&mut json)
            .map_err(|e| refuse(crate::error::context("truncated header", e)))?;
        let header: ShardHeader = serde_json::from_slice(&json)
            .map_err(|e| refuse(crate::error::context("bad header", e)))?;
        let n = header.windows.len() as u64;
        let table_end = PREAMBLE as u64 + h + 32 * n;
        if table_end > size {
            return Err(refuse("truncated digest table".into()));
        }
        let mut table = vec![0u8; 32 * n as usize];
        file.read_exact(&mut table)
            .map_err(|e| refuse(crate::error::context("truncated digest table", e)))?;
        let mut hasher = Sha256::new();
        hasher.update(&json);
        hasher.update(&table);
        if hasher.finalize()[..] != preamble[12..44] {
            return Err(refuse("checksum mismatch (the file is damaged)".into()));
        }
        if &header.store != expected {
            return Err(refuse(
                format!("it was written for another store ({:?})", header.store).into(),
            ));
        }
        if header.windows.windows(2).any(|w| w[0] >= w[1]) {
            return Err(refuse("its windows are not ascending".into()));
        }
        let s = &header.store;
        let block_bytes = s.layout().block_bytes(s.window_positions);
        if size != table_end + n * block_bytes {
            return Err(refuse(
                format!(
                    "{size} bytes, not the {} of {n} windows of {} positions × top-{}",
                    table_end + n * block_bytes,
                    s.window_positions,
                    s.top_k
                )
                .into(),
            ));
        }
        let digests = table
            .chunks(32)
            .map(|c| c.try_into().unwrap_or([0u8; 32]))
            .collect();
        Ok(Shard {
            header: header.store,
            windows: header.windows,
            digests,
            payload_at: table_end,
            block_bytes,
            file: None, // closed: opened again when a block is read
            path: path.into(),
        })
    }

    /// Closes its file (a later [`Shard::block`] opens it again).
    pub fn close(&mut self) {
        self.file = None;
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads, verifies and decodes the `i`-th window this shard holds.
    pub fn block(&mut self, i: usize) -> Result<Vec<Kept>, ShardError> {
        use std::io::{Read, Seek, SeekFrom};
        let refuse = |reason: Cause| ShardError::Refused {
            path: self.path.clone(),
            source: reason,
        };
        let digest = self
            .digests
            .get(i)
            .ok_or_else(|| refuse(format!("no block {i}").into()))?;
        let mut bytes = vec![0u8; self.block_bytes as usize];
        let at = self.payload_at + i as u64 * self.block_bytes;
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(
                std::fs::File::open(&self.path)
                    .map_err(|e| refuse(crate::error::context("cannot open it again", e)))?,
            ),
        };
        file.seek(SeekFrom::Start(at))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| {
                refuse(crate::error::context(
                    format!("cannot read window {}", self.windows[i]),
                    e,
                ))
            })?;
        if Sha256::digest(&bytes)[..] != digest[..] {
            return Err(refuse(
                format!(
                    "window {} does not match its checksum (the file is damaged)",
                    self.windows[i]
                )
                .into(),
            ));
        }
        let h = &self.header;
        decode_block(&bytes, h.window_positions as usize, &h.layout())
            .ok_or_else(|| refuse(format!("window {} does not decode", self.windows[i]).into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_bits_match_log2() {
        assert_eq!(index_bits(256), 8);
        assert_eq!(index_bits(257), 9);
        assert_eq!(index_bits(32000), 15);
        assert_eq!(index_bits(151_936), 18);
        assert_eq!(index_bits(2), 1);
    }

    #[test]
    fn logit_bytes_for_reference_settings() {
        // Byte vocabulary, k = 50: 50·(8+8) bits -> 100 bytes (2 bytes per kept logit).
        assert_eq!(logit_bytes_per_token(256, 50), 100);
        // A 150k vocabulary with k = 100 (Peng et al.'s top-0.95-100): 100·(18+8) bits.
        assert_eq!(logit_bytes_per_token(151_936, 100), 325);
    }
    use crate::distill::truncate;
    use crate::spec::TopK;

    fn header() -> StoreHeader {
        StoreHeader {
            logits_run: "l".into(),
            teacher_run: "t".into(),
            teacher_checkpoint_sha256: "abc".into(),
            data_key: "d".into(),
            vocab: 256,
            top_p: 0.95,
            top_k: 32,
            value_encoding: VALUE_ENCODING.into(),
            window_positions: 3,
            targets: Targets::TopK,
            tail: false,
            tokenizer_sha256: None,
            precision: Default::default(),
        }
    }

    /// An aligned block keeps each position's next token: its ln p within 0.001 nats and its
    /// byte span exactly, a gap between documents included.
    #[test]
    fn aligned_blocks_keep_the_next_token() {
        let layout = Layout::top_k(256, 32).aligned(true);
        let mut kept = positions(3);
        let spans = [(1000u64, 1004u64), (1004, 1005), (1005, 90_000)];
        for (k, (from, to)) in kept.iter_mut().zip(spans) {
            k.next = Some(TokenAfter {
                log_prob: -((from % 7) as f32) * 0.37 - 0.01,
                from,
                to,
            });
        }
        let bytes = encode_block(&kept, &layout);
        assert_eq!(bytes.len() as u64, layout.block_bytes(3));
        assert_eq!(bytes.len(), 8 + 3 * (32 * 2 + 6));
        let back = decode_block(&bytes, 3, &layout).unwrap();
        for (a, b) in kept.iter().zip(&back) {
            let (x, y) = (a.next.unwrap(), b.next.unwrap());
            assert_eq!((x.from, x.to), (y.from, y.to));
            assert!((x.log_prob - y.log_prob).abs() < 0.001, "{x:?} {y:?}");
            assert_eq!(a.ids, b.ids);
        }
    }

    fn positions(seed: u32) -> Vec<Kept> {
        (0..3)
            .map(|p| {
                let z: Vec<f32> = (0..256u32)
                    .map(|i| ((i * 37 + p * 11 + seed) % 101) as f32 / 9.0)
                    .collect();
                truncate(&z, 1.0, TopK::Keep(32))
            })
            .collect()
    }

    #[test]
    fn blocks_round_trip_within_quantisation() {
        let kept = positions(1);
        let bytes = encode_block(&kept, &Layout::top_k(256, 32));
        let kept_entries: usize = kept.iter().map(|k| k.ids.len()).sum();
        assert_eq!(kept_entries, 3 * 32);
        assert_eq!(bytes.len(), kept_entries * 2, "2 bytes per kept logit");
        let back = decode_block(&bytes, 3, &Layout::top_k(256, 32)).unwrap();
        for (a, b) in kept.iter().zip(&back) {
            assert_eq!(a.ids, b.ids);
            for (x, y) in a.log_probs.iter().zip(&b.log_probs) {
                assert!(
                    (x.max(-16.0) - y).abs() <= 16.0 / 255.0 / 2.0 + 1e-6,
                    "{x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn sampled_blocks_with_a_tail_round_trip() {
        let z: Vec<f32> = (0..300u32)
            .map(|i| ((i * 37) % 101) as f32 / 20.0)
            .collect();
        let layout = Layout {
            vocab: 300,
            top_k: 16,
            counts: true,
            tail: true,
            aligned: false,
        };
        let mut sampled = truncate::sample(&z, 16, 7);
        sampled.tail = Some(-2.0);
        let top = truncate(&z, 1.0, TopK::Keep(16));
        let bytes = encode_block(&[sampled.clone(), top.clone()], &layout);
        // 16 slots of 9 id bits, 8 value bits and 5 count bits, and an 8-bit tail
        assert_eq!(bytes.len() as u64, (2 * (16 * 22 + 8) as u64).div_ceil(8));
        assert_eq!(layout.bytes_per_token(), 45);
        let back = decode_block(&bytes, 2, &layout).unwrap();
        assert_eq!(back[0].ids, sampled.ids, "unused slots are dropped");
        assert_eq!(back[0].counts, sampled.counts);
        assert_eq!(back[0].counts.iter().sum::<u32>(), 16);
        assert!((back[0].tail.unwrap() + 2.0).abs() <= 16.0 / 255.0 / 2.0 + 1e-6);
        // a top-k position's tail is its exact mass outside, not 1 − Σ quantised values
        let want = top.tail.unwrap();
        assert!((back[1].tail.unwrap() - want.max(-16.0)).abs() <= 16.0 / 255.0 / 2.0 + 1e-6);
    }

    #[test]
    fn a_flipped_byte_or_a_foreign_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard-a.bin");
        let blocks = vec![
            encode_block(&positions(1), &Layout::top_k(256, 32)),
            encode_block(&positions(2), &Layout::top_k(256, 32)),
        ];
        write_shard(&path, &header(), &[4, 9], &blocks).unwrap();
        let mut shard = Shard::open(&path, &header()).unwrap();
        assert_eq!(shard.windows, vec![4, 9]);
        assert_eq!(shard.block(1).unwrap()[0].ids, positions(2)[0].ids);
        assert!(write_shard(&path, &header(), &[9, 4], &blocks).is_err());
        let other = StoreHeader {
            top_k: 16,
            ..header()
        };
        assert!(
            crate::error::chain(&Shard::open(&path, &other).unwrap_err()).contains("another store")
        );
        // the same teacher run in bf16 wrote another store
        let bf16 = StoreHeader {
            precision: crate::spec::TeacherPrecision::Bf16,
            ..header()
        };
        assert!(Shard::open(&path, &bf16).is_err());
        // a flipped payload byte is caught when its window is read, not before
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 2] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let mut shard = Shard::open(&path, &header()).unwrap();
        assert!(shard.block(0).is_ok());
        let err = crate::error::chain(&shard.block(1).unwrap_err());
        assert!(
            err.contains("shard-a.bin") && err.contains("window 9") && err.contains("checksum"),
            "{err}"
        );
        // a flipped header byte: the whole shard
        bytes[n - 2] ^= 0x10;
        bytes[50] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let err = crate::error::chain(&Shard::open(&path, &header()).unwrap_err());
        assert!(
            err.contains("checksum mismatch") || err.contains("bad header"),
            "{err}"
        );
        std::fs::write(&path, &bytes[..100]).unwrap();
        assert!(Shard::open(&path, &header()).is_err());
    }
}
