//! The offline logit store: the truncated teacher distribution of every position of a student
//! token stream, packed tightly in checksummed shards.
//!
//! # Format
//!
//! A store is a folder of shards `shard-NNNNN.bin`. A shard holds whole *blocks*; block `b` is
//! optimiser step `b` of the students that read the store (`batch_seqs · context` positions, in
//! the order of `data::Batcher`), so a student reads one block per step. A shard is:
//!
//! | bytes | content |
//! |---|---|
//! | 8 | magic `PDSLGT01` |
//! | 4 | length `h` of the JSON header (u32, little-endian) |
//! | 32 | SHA-256 of everything after this field (header, offsets, payload) |
//! | h | JSON [`StoreHeader`]: teacher run and checkpoint hash, corpus and data order, vocab, top-p, top-k, value encoding, first block and block count |
//! | 8·(n+1) | byte offset of each block in the payload (u64), and the payload length |
//! | … | payload: the blocks, each starting on a byte boundary |
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
//! Shards are written to a temporary file and renamed. A shard whose magic, checksum, header or
//! block layout does not match what the reader expects is refused with its path.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::truncate::Kept;
use crate::atomic::write_atomic;

/// Bits that identify one of `vocab` tokens: ⌈log2 V⌉.
pub fn index_bits(vocab: u64) -> u32 {
    64 - (vocab.max(2) - 1).leading_zeros()
}

/// Bits of one stored teacher value (a quantised log-probability).
pub const VALUE_BITS: u32 = 8;

/// Predicted logit-store bytes per token for a store that keeps `kept` entries of a
/// `vocab`-sized distribution per position (stores keep exactly the top k): `kept` pairs of a ⌈log2 V⌉-bit id and an 8-bit value, rounded up to whole
/// bytes. Blocks round to bytes once per step, not per token, so the payload is at most this;
/// shard headers and block tables add well under 1 %.
pub fn logit_bytes_per_token(vocab: u64, kept: u64) -> u64 {
    (kept * (index_bits(vocab) + VALUE_BITS) as u64).div_ceil(8)
}

const MAGIC: &[u8; 8] = b"PDSLGT01";
/// Name of the value encoding written in every header.
pub const VALUE_ENCODING: &str = "u8 -log-prob, uniform over [0, 16] nats";
const VALUE_RANGE: f32 = 16.0;

/// What a shard says about itself; a reader checks it against what it expects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreHeader {
    /// The `logits` run that wrote it.
    pub logits_run: String,
    /// The teacher run.
    pub teacher_run: String,
    /// SHA-256 of the teacher checkpoint file the logits came from.
    pub teacher_checkpoint_sha256: String,
    /// Describes the corpus, tokenizer and data order (seed, context, batch).
    pub data_key: String,
    /// Vocabulary.
    pub vocab: u64,
    /// Nucleus mass kept.
    pub top_p: f64,
    /// Most tokens kept per position.
    pub top_k: u64,
    /// How values are encoded ([`VALUE_ENCODING`]).
    pub value_encoding: String,
    /// Positions per block.
    pub block_positions: u64,
    /// First block in this shard.
    pub first_block: u64,
    /// Blocks in this shard.
    pub blocks: u64,
}

/// A shard could not be written or is not usable.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Writing failed.
    #[error("cannot write logit shard `{}`: {reason}", path.display())]
    Write {
        /// The shard.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The shard is damaged or belongs to another store; it is never used.
    #[error("logit shard `{}` is refused: {reason}\n\nhint: delete the store folder; the `logits` run writes it again", path.display())]
    Refused {
        /// The shard.
        path: PathBuf,
        /// Which check failed.
        reason: String,
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

/// Bytes of one encoded block: `positions` × `top_k` entries of ⌈log2 V⌉ + 8 bits.
pub fn block_bytes(positions: u64, vocab: u64, top_k: u64) -> u64 {
    (positions * top_k * u64::from(index_bits(vocab) + VALUE_BITS)).div_ceil(8)
}

/// Encodes one block of positions, each with exactly `top_k` entries (the caller truncates
/// with top-p 1 and top-k `top_k`, which always keeps `top_k` tokens when `top_k` ≤ V).
pub fn encode_block(positions: &[Kept], vocab: u64, top_k: u64) -> Vec<u8> {
    let ibits = index_bits(vocab);
    let mut w = BitWriter::default();
    for kept in positions {
        let n = top_k as usize;
        for (id, lp) in kept.ids.iter().zip(&kept.log_probs).take(n) {
            let value = ((-lp).clamp(0.0, VALUE_RANGE) / VALUE_RANGE * 255.0).round() as u64;
            w.put(u64::from(*id), ibits);
            w.put(value, VALUE_BITS);
        }
    }
    w.finish()
}

/// Decodes a block of `positions` positions (log-probabilities as stored, quantised).
pub fn decode_block(bytes: &[u8], positions: usize, vocab: u64, top_k: u64) -> Option<Vec<Kept>> {
    let ibits = index_bits(vocab);
    let mut r = BitReader { bytes, bit: 0 };
    let mut out = Vec::with_capacity(positions);
    let n = top_k as usize;
    if bytes.len() as u64 != block_bytes(positions as u64, vocab, top_k) {
        return None;
    }
    for _ in 0..positions {
        let mut kept = Kept {
            ids: Vec::with_capacity(n),
            log_probs: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let id = r.get(ibits)?;
            if id >= vocab {
                return None;
            }
            kept.ids.push(id as u32);
            kept.log_probs
                .push(-(r.get(VALUE_BITS)? as f32) / 255.0 * VALUE_RANGE);
        }
        out.push(kept);
    }
    Some(out)
}

/// Writes a shard holding `blocks` (already encoded) to `path`.
pub fn write_shard(
    path: &Path,
    header: &StoreHeader,
    blocks: &[Vec<u8>],
) -> Result<(), ShardError> {
    let json = serde_json::to_vec(header).map_err(|e| ShardError::Write {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let mut offsets = Vec::with_capacity(8 * (blocks.len() + 1));
    let mut at = 0u64;
    for b in blocks {
        offsets.extend_from_slice(&at.to_le_bytes());
        at += b.len() as u64;
    }
    offsets.extend_from_slice(&at.to_le_bytes());
    let mut hasher = Sha256::new();
    hasher.update(&json);
    hasher.update(&offsets);
    for b in blocks {
        hasher.update(b);
    }
    let sha = hasher.finalize();
    let len = (json.len() as u32).to_le_bytes();
    let mut parts: Vec<&[u8]> = vec![MAGIC, &len, &sha, &json, &offsets];
    parts.extend(blocks.iter().map(|b| b.as_slice()));
    write_atomic(path, &parts).map_err(|e| ShardError::Write {
        path: path.into(),
        reason: e.to_string(),
    })
}

/// A verified shard in memory.
#[derive(Debug)]
pub struct Shard {
    /// Its header.
    pub header: StoreHeader,
    offsets: Vec<u64>,
    payload: Vec<u8>,
    path: PathBuf,
}

impl Shard {
    /// Reads `path` and checks its magic, checksum and layout, and that its header agrees with
    /// `expected` in everything but the block range.
    pub fn open(path: &Path, expected: &StoreHeader) -> Result<Shard, ShardError> {
        let refuse = |reason: String| ShardError::Refused {
            path: path.into(),
            reason,
        };
        let bytes = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
        if bytes.len() < 44 || &bytes[..8] != MAGIC {
            return Err(refuse("not a pdsweep logit shard".into()));
        }
        if Sha256::digest(&bytes[44..])[..] != bytes[12..44] {
            return Err(refuse("checksum mismatch (the file is damaged)".into()));
        }
        let h = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let json = bytes
            .get(44..44 + h)
            .ok_or_else(|| refuse("truncated header".into()))?;
        let header: StoreHeader =
            serde_json::from_slice(json).map_err(|e| refuse(format!("bad header: {e}")))?;
        let same = StoreHeader {
            first_block: expected.first_block,
            blocks: expected.blocks,
            ..header.clone()
        };
        if &same != expected {
            return Err(refuse(format!(
                "it was written for another store ({header:?})"
            )));
        }
        let table = 44 + h;
        let n = header.blocks as usize + 1;
        let raw = bytes
            .get(table..table + 8 * n)
            .ok_or_else(|| refuse("truncated block table".into()))?;
        let offsets: Vec<u64> = raw
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let payload = bytes[table + 8 * n..].to_vec();
        if offsets.windows(2).any(|w| w[0] > w[1])
            || offsets.last().copied() != Some(payload.len() as u64)
        {
            return Err(refuse("block table does not match the payload".into()));
        }
        let block_bytes = block_bytes(header.block_positions, header.vocab, header.top_k);
        if let Some(i) = offsets.windows(2).position(|w| w[1] - w[0] != block_bytes) {
            return Err(refuse(format!(
                "block {} holds {} bytes, not the {block_bytes} of {} positions × top-{}",
                header.first_block + i as u64,
                offsets[i + 1] - offsets[i],
                header.block_positions,
                header.top_k
            )));
        }
        Ok(Shard {
            header,
            offsets,
            payload,
            path: path.into(),
        })
    }

    /// Decodes block `block` (absolute numbering).
    pub fn block(&self, block: u64) -> Result<Vec<Kept>, ShardError> {
        let h = &self.header;
        let refuse = |reason: &str| ShardError::Refused {
            path: self.path.clone(),
            reason: reason.into(),
        };
        let i = block
            .checked_sub(h.first_block)
            .filter(|&i| i < h.blocks)
            .ok_or_else(|| refuse("block outside this shard"))? as usize;
        let bytes = &self.payload[self.offsets[i] as usize..self.offsets[i + 1] as usize];
        decode_block(bytes, h.block_positions as usize, h.vocab, h.top_k)
            .ok_or_else(|| refuse("block does not decode"))
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

    fn header(blocks: u64) -> StoreHeader {
        StoreHeader {
            logits_run: "l".into(),
            teacher_run: "t".into(),
            teacher_checkpoint_sha256: "abc".into(),
            data_key: "d".into(),
            vocab: 256,
            top_p: 0.95,
            top_k: 32,
            value_encoding: VALUE_ENCODING.into(),
            block_positions: 3,
            first_block: 0,
            blocks,
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
        let bytes = encode_block(&kept, 256, 32);
        let kept_entries: usize = kept.iter().map(|k| k.ids.len()).sum();
        assert_eq!(kept_entries, 3 * 32);
        assert_eq!(bytes.len(), kept_entries * 2, "2 bytes per kept logit");
        let back = decode_block(&bytes, 3, 256, 32).unwrap();
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
    fn a_flipped_byte_or_a_foreign_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard-00000.bin");
        let blocks = vec![
            encode_block(&positions(1), 256, 32),
            encode_block(&positions(2), 256, 32),
        ];
        write_shard(&path, &header(2), &blocks).unwrap();
        let shard = Shard::open(&path, &header(2)).unwrap();
        assert_eq!(shard.block(1).unwrap()[0].ids, positions(2)[0].ids);
        let other = StoreHeader {
            top_k: 16,
            ..header(2)
        };
        assert!(
            Shard::open(&path, &other)
                .unwrap_err()
                .to_string()
                .contains("another store")
        );
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 2] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        let err = Shard::open(&path, &header(2)).unwrap_err().to_string();
        assert!(
            err.contains("shard-00000.bin") && err.contains("checksum mismatch"),
            "{err}"
        );
    }
}
