//! The token cache: a corpus tokenised once into a binary file that every run of the sweep
//! memory-maps.
//!
//! Layout (little-endian): a 64-byte header — magic `PDSTOK01`, format version (u32), token
//! width in bytes (u32: 2 or 4), token count (u64), training-split length (u64), vocabulary
//! (u64), UTF-8 bytes of the held-out split (u64), the first 16 bytes of SHA-256 over the
//! payload — then the tokens. Written to a temporary file and renamed, so a crash never leaves
//! a half-written cache; a file whose header or checksum does not match is refused.

use std::fs;
use std::path::Path;

use memmap2::Mmap;
use sha2::{Digest, Sha256};

use super::error::DataError;
use crate::atomic::write_atomic;

const MAGIC: &[u8; 8] = b"PDSTOK01";
const VERSION: u32 = 1;
const HEADER: usize = 64;

/// A memory-mapped token file.
#[derive(Debug)]
pub struct TokenFile {
    map: Mmap,
    width: usize,
    len: usize,
    /// Tokens `0..train_len` are the training split, the rest held out.
    pub train_len: usize,
    /// Vocabulary size.
    pub vocab: u64,
    /// UTF-8 bytes of the held-out text.
    pub val_bytes: u64,
}

impl TokenFile {
    /// Writes `tokens` atomically to `path`.
    pub fn write(
        path: &Path,
        tokens: &[u32],
        train_len: usize,
        vocab: u64,
        val_bytes: u64,
    ) -> Result<(), DataError> {
        let width = if vocab <= 1 << 16 { 2 } else { 4 };
        let mut payload = Vec::with_capacity(tokens.len() * width);
        for &t in tokens {
            if width == 2 {
                payload.extend_from_slice(&(t as u16).to_le_bytes());
            } else {
                payload.extend_from_slice(&t.to_le_bytes());
            }
        }
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(width as u32).to_le_bytes());
        header.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
        header.extend_from_slice(&(train_len as u64).to_le_bytes());
        header.extend_from_slice(&vocab.to_le_bytes());
        header.extend_from_slice(&val_bytes.to_le_bytes());
        header.extend_from_slice(&Sha256::digest(&payload)[..16]);
        Ok(write_atomic(path, &[&header, &payload])?)
    }

    /// Opens and verifies the file at `path`.
    pub fn open(path: &Path) -> Result<TokenFile, DataError> {
        let corrupt = |reason: &str| DataError::CorruptCache {
            path: path.to_path_buf(),
            reason: reason.into(),
        };
        let file = fs::File::open(path).map_err(|e| DataError::Missing {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        // SAFETY: the cache is written once by rename and never modified in place.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| DataError::Missing {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if map.len() < HEADER || &map[..8] != MAGIC {
            return Err(corrupt("not a pdsweep token file"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(map[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(map[i..i + 8].try_into().unwrap_or_default());
        if u32_at(8) != VERSION {
            return Err(corrupt("unknown format version"));
        }
        let width = u32_at(12) as usize;
        let len = u64_at(16) as usize;
        if !(width == 2 || width == 4) || map.len() != HEADER + len.saturating_mul(width) {
            return Err(corrupt("its length does not match its header"));
        }
        if Sha256::digest(&map[HEADER..])[..16] != map[48..64] {
            return Err(corrupt("checksum mismatch"));
        }
        let train_len = u64_at(24) as usize;
        if train_len > len {
            return Err(corrupt("training split longer than the file"));
        }
        Ok(TokenFile {
            width,
            len,
            train_len,
            vocab: u64_at(32),
            val_bytes: u64_at(40),
            map,
        })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the file holds no tokens.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Token `i` (`i < len`).
    pub fn get(&self, i: usize) -> u32 {
        let at = HEADER + i * self.width;
        if self.width == 2 {
            u16::from_le_bytes([self.map[at], self.map[at + 1]]) as u32
        } else {
            u32::from_le_bytes([
                self.map[at],
                self.map[at + 1],
                self.map[at + 2],
                self.map[at + 3],
            ])
        }
    }

    /// Tokens `start..end` copied out.
    pub fn slice(&self, start: usize, end: usize) -> Vec<u32> {
        (start..end.min(self.len)).map(|i| self.get(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let tokens: Vec<u32> = (0..1000).map(|i| i % 300).collect();
        TokenFile::write(&path, &tokens, 900, 300, 100).unwrap();
        let file = TokenFile::open(&path).unwrap();
        assert_eq!(file.len(), 1000);
        assert_eq!(file.train_len, 900);
        assert_eq!(file.slice(0, 1000), tokens);
        drop(file);
        let mut bytes = fs::read(&path).unwrap();
        bytes[HEADER + 10] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let err = TokenFile::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("checksum mismatch") && err.contains("t.bin"),
            "{err}"
        );
    }

    #[test]
    fn wide_vocabularies_use_four_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.bin");
        TokenFile::write(&path, &[70_000, 1, 2], 2, 100_000, 1).unwrap();
        assert_eq!(
            TokenFile::open(&path).unwrap().slice(0, 3),
            vec![70_000, 1, 2]
        );
    }
}
