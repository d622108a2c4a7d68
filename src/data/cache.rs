//! The token cache: a corpus tokenised once into a binary file that every run of the sweep
//! memory-maps.
//!
//! Layout (little-endian): a 64-byte header — magic `PDSTOK02`, format version (u32), token
//! width in bytes (u32: 2 or 4), token count (u64), training-split length (u64), vocabulary
//! (u64), UTF-8 bytes of the held-out split (u64), tokens per chunk (u64), the XXH3 of the
//! chunk table (u64) — then the tokens, then the chunk table: the XXH3-64 of each chunk of
//! tokens. The file is written as a stream ([`TokenWriter`], memory independent of its size)
//! to a temporary name, checked whole once, and renamed, so a crash never leaves a
//! half-written cache. Opening reads the header and the table only (a file of a billion tokens
//! opens as fast as a small one); [`TokenFile::verify`] checks the chunks.
//!
//! Version 1 files (`PDSTOK01`: the same header up to the held-out bytes, then the first 16
//! bytes of SHA-256 over the payload, no table) still open, checked whole as before.

use std::fs;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::xxh3_64;

use super::error::DataError;

const MAGIC_V1: &[u8; 8] = b"PDSTOK01";
const MAGIC: &[u8; 8] = b"PDSTOK02";
const VERSION: u32 = 2;
const HEADER: usize = 64;
/// Tokens per checksummed chunk (4 MiB of 4-byte tokens).
const CHUNK_TOKENS: u64 = 1 << 20;

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
    /// Tokens per chunk and each chunk's XXH3 (empty for a version 1 file).
    chunks: (u64, Vec<u64>),
    /// Which chunks this process has checked (all, after [`TokenFile::verify`]); a chunk is
    /// checked the first time [`TokenFile::slice`] reads from it.
    checked: Vec<std::sync::atomic::AtomicBool>,
    path: PathBuf,
    file: fs::File,
}

/// Writes a token file as a stream: tokens are appended as they come, each chunk hashed as it
/// fills; [`TokenWriter::finish`] writes the table and header, checks the file and renames it
/// into place.
pub struct TokenWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: BufWriter<fs::File>,
    width: usize,
    vocab: u64,
    len: u64,
    chunk: Vec<u8>,
    table: Vec<u64>,
}

fn write_error(path: &Path, e: impl Into<crate::error::Cause>) -> DataError {
    DataError::Write {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

impl TokenWriter {
    /// Starts the file that will be `path` for tokens of a `vocab`-token vocabulary.
    pub fn create(path: &Path, vocab: u64) -> Result<TokenWriter, DataError> {
        let tmp = crate::atomic::temp_path(path);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
        }
        let mut out = BufWriter::with_capacity(
            1 << 20,
            fs::File::create(&tmp).map_err(|e| write_error(&tmp, e))?,
        );
        out.write_all(&[0u8; HEADER])
            .map_err(|e| write_error(&tmp, e))?;
        let width = if vocab <= 1 << 16 { 2 } else { 4 };
        Ok(TokenWriter {
            path: path.to_path_buf(),
            tmp,
            out,
            width,
            vocab,
            len: 0,
            chunk: Vec::with_capacity(CHUNK_TOKENS as usize * width),
            table: Vec::new(),
        })
    }

    /// Appends `tokens`.
    pub fn push(&mut self, tokens: &[u32]) -> Result<(), DataError> {
        for &t in tokens {
            if self.width == 2 {
                self.chunk.extend_from_slice(&(t as u16).to_le_bytes());
            } else {
                self.chunk.extend_from_slice(&t.to_le_bytes());
            }
            if self.chunk.len() == CHUNK_TOKENS as usize * self.width {
                self.flush_chunk()?;
            }
        }
        self.len += tokens.len() as u64;
        Ok(())
    }

    /// Tokens written so far.
    pub fn written(&self) -> u64 {
        self.len
    }

    fn flush_chunk(&mut self) -> Result<(), DataError> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        self.table.push(xxh3_64(&self.chunk));
        self.out
            .write_all(&self.chunk)
            .map_err(|e| write_error(&self.tmp, e))?;
        self.chunk.clear();
        Ok(())
    }

    /// Ends the file: the first `train_len` tokens are the training split and the held-out
    /// text is `val_bytes` bytes long. The whole file is checked once, synced and renamed.
    pub fn finish(mut self, train_len: u64, val_bytes: u64) -> Result<(), DataError> {
        let result = self.finish_inner(train_len, val_bytes);
        if result.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        result
    }

    fn finish_inner(&mut self, train_len: u64, val_bytes: u64) -> Result<(), DataError> {
        self.flush_chunk()?;
        let table: Vec<u8> = self.table.iter().flat_map(|h| h.to_le_bytes()).collect();
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(self.width as u32).to_le_bytes());
        for v in [self.len, train_len, self.vocab, val_bytes, CHUNK_TOKENS] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&xxh3_64(&table).to_le_bytes());
        let tmp = self.tmp.clone();
        let fail = |e: std::io::Error| write_error(&tmp, e);
        self.out.write_all(&table).map_err(fail)?;
        self.out.flush().map_err(fail)?;
        let file = self.out.get_mut();
        file.seek(SeekFrom::Start(0)).map_err(fail)?;
        file.write_all(&header).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        TokenFile::open(&self.tmp)?.verify()?;
        fs::rename(&self.tmp, &self.path).map_err(|e| write_error(&self.path, e))?;
        // checked just now: later opens (every run, every Slurm job) trust the stamp
        TokenFile::open(&self.path)?.stamp();
        Ok(())
    }
}

/// The file beside a cache that records its check: its size, modification time and inode when
/// it was verified whole. A cache whose stamp matches is not hashed again when opened.
fn stamp_path(path: &Path) -> PathBuf {
    path.with_extension("verified")
}

/// What the stamp of the file behind `file` says: size, modification time (ns), inode.
fn stamp_of(file: &fs::File) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(format!(
        "pdsweep token cache verified: {} bytes, modified {} ns, inode {}\n",
        meta.len(),
        modified.as_nanos(),
        meta.ino()
    ))
}

impl TokenFile {
    /// Writes `tokens` to `path` (see [`TokenWriter`] for writing a stream).
    pub fn write(
        path: &Path,
        tokens: &[u32],
        train_len: usize,
        vocab: u64,
        val_bytes: u64,
    ) -> Result<(), DataError> {
        let mut writer = TokenWriter::create(path, vocab)?;
        writer.push(tokens)?;
        writer.finish(train_len as u64, val_bytes)
    }

    /// Opens the file at `path`, checking its header and length (and, for a version 1 file,
    /// its checksum); [`TokenFile::verify`] checks the tokens of a version 2 file.
    pub fn open(path: &Path) -> Result<TokenFile, DataError> {
        let corrupt = |check: &str| DataError::CorruptCache {
            path: path.to_path_buf(),
            source: check.to_string().into(),
        };
        let file = fs::File::open(path).map_err(|e| DataError::Missing {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        // SAFETY: the cache is written once by rename and never modified in place.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| DataError::Missing {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        let version = match map.get(..8) {
            Some(m) if m == MAGIC => 2,
            Some(m) if m == MAGIC_V1 => 1,
            _ => return Err(corrupt("not a pdsweep token file")),
        };
        if map.len() < HEADER {
            return Err(corrupt("shorter than its header"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(map[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(map[i..i + 8].try_into().unwrap_or_default());
        if u32_at(8) != version {
            return Err(corrupt("unknown format version"));
        }
        let width = u32_at(12) as usize;
        let len = u64_at(16) as usize;
        let payload = len.saturating_mul(width);
        let chunks = if version == 1 {
            if !(width == 2 || width == 4) || map.len() != HEADER + payload {
                return Err(corrupt("its length does not match its header"));
            }
            if Sha256::digest(&map[HEADER..])[..16] != map[48..64] {
                return Err(corrupt("checksum mismatch"));
            }
            (0, Vec::new())
        } else {
            let per = u64_at(48).max(1);
            let count = (len as u64).div_ceil(per) as usize;
            if !(width == 2 || width == 4) || map.len() != HEADER + payload + 8 * count {
                return Err(corrupt(
                    "its length does not match its header (a partial copy?)",
                ));
            }
            let table = &map[HEADER + payload..];
            if xxh3_64(table) != u64_at(56) {
                return Err(corrupt("its chunk table is damaged"));
            }
            let hashes = table
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            (per, hashes)
        };
        let train_len = u64_at(24) as usize;
        if train_len > len {
            return Err(corrupt("training split longer than the file"));
        }
        let checked = (0..chunks.1.len())
            .map(|_| std::sync::atomic::AtomicBool::new(false))
            .collect();
        Ok(TokenFile {
            width,
            len,
            train_len,
            vocab: u64_at(32),
            val_bytes: u64_at(40),
            chunks,
            checked,
            map,
            path: path.to_path_buf(),
            file,
        })
    }

    /// Checks every chunk of tokens against its checksum unless the file was checked whole since it
    /// was last changed (its stamp, written by the check, matches its size, modification time and
    /// inode): the cache is hashed once after it is written, not on every open of every run.
    ///
    /// Damage that leaves the file's metadata as it was is not seen here.
    pub fn verify_once(&self) -> Result<(), DataError> {
        let stamp = stamp_of(&self.file);
        if stamp.is_some() && fs::read_to_string(stamp_path(&self.path)).ok() == stamp {
            return Ok(());
        }
        self.verify()?;
        self.stamp();
        Ok(())
    }

    /// Records that the file was checked (best effort: a read-only folder keeps no stamp, and
    /// the file is checked on every open there).
    fn stamp(&self) {
        if let Some(stamp) = stamp_of(&self.file) {
            let _ = crate::atomic::write_atomic(&stamp_path(&self.path), &[stamp.as_bytes()]);
        }
    }

    /// Checks every chunk of tokens against its checksum (version 2; a version 1 file was checked
    /// whole when opened).
    ///
    /// The chunks are read into a buffer rather than through the map, so checking a large file does
    /// not add it to this process's resident memory.
    pub fn verify(&self) -> Result<(), DataError> {
        use std::os::unix::fs::FileExt;
        let (per, hashes) = &self.chunks;
        let chunk_bytes = *per as usize * self.width;
        let payload = (self.len * self.width) as u64;
        let mut buffer = vec![0u8; chunk_bytes.min(payload as usize)];
        for (i, &want) in hashes.iter().enumerate() {
            let start = i as u64 * chunk_bytes as u64;
            let n = (payload - start).min(chunk_bytes as u64) as usize;
            let read = self
                .file
                .read_exact_at(&mut buffer[..n], HEADER as u64 + start);
            let source: crate::error::Cause = match read {
                Err(e) => Box::new(ChunkUnreadable {
                    chunk: i,
                    source: e,
                }),
                Ok(()) if xxh3_64(&buffer[..n]) != want => format!(
                    "chunk {i} (tokens from {}) does not match its checksum",
                    i as u64 * per
                )
                .into(),
                Ok(()) => continue,
            };
            return Err(DataError::CorruptCache {
                path: self.path.clone(),
                source,
            });
        }
        for c in &self.checked {
            c.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Checks chunk `i` against its checksum unless this process already has: what every read of a
    /// cache whose whole check was skipped (its stamp matched) costs, once per chunk, so damage
    /// that kept the file's size, time and inode is still caught before its tokens are trained on.
    ///
    /// `Err` names the file and the chunk.
    fn check_chunk(&self, i: usize) -> Result<(), DataError> {
        use std::sync::atomic::Ordering;
        let (Some(done), Some(&want)) = (self.checked.get(i), self.chunks.1.get(i)) else {
            return Ok(());
        };
        if done.load(Ordering::Relaxed) {
            return Ok(());
        }
        use std::os::unix::fs::FileExt;
        let per = self.chunks.0 as usize;
        let first = i * per;
        let end = ((i + 1) * per).min(self.len);
        // read, not mapped: a checked chunk does not stay in this process's resident memory
        let mut bytes = vec![0u8; (end - first) * self.width];
        let read = self
            .file
            .read_exact_at(&mut bytes, (HEADER + first * self.width) as u64);
        let source: crate::error::Cause = match read {
            Err(e) => Box::new(ChunkUnreadable { chunk: i, source: e }),
            Ok(()) if xxh3_64(&bytes) != want => format!(
                "chunk {i} (tokens from {first}) does not match its checksum (found on reading it; delete the file to rebuild the cache)"
            )
            .into(),
            Ok(()) => {
                done.store(true, Ordering::Relaxed);
                return Ok(());
            }
        };
        Err(DataError::CorruptCache {
            path: self.path.clone(),
            source,
        })
    }

    /// Tokens `start..end` copied out, after checking the chunks they lie in (each once per
    /// process, see [`TokenFile::check_chunk`]).
    pub fn try_slice(&self, start: usize, end: usize) -> Result<Vec<u32>, DataError> {
        let end = end.min(self.len);
        if start < end && self.chunks.0 > 0 {
            let per = self.chunks.0 as usize;
            for i in start / per..=(end - 1) / per {
                self.check_chunk(i)?;
            }
        }
        Ok((start..end).map(|i| self.get(i)).collect())
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

    /// Tokens `start..end` copied out, their chunks checked on first read.
    ///
    /// A chunk that fails its check is a damaged cache under a running run: the run stops with the
    /// message (a panic, which the executor records as the run's failure; its checkpoint is kept).
    pub fn slice(&self, start: usize, end: usize) -> Vec<u32> {
        self.try_slice(start, end).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// A chunk of a token cache that the operating system could not read.
#[derive(Debug, thiserror::Error)]
#[error("chunk {chunk} cannot be read")]
struct ChunkUnreadable {
    chunk: usize,
    #[source]
    source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let tokens: Vec<u32> = (0..3_000_000).map(|i| i % 300).collect();
        TokenFile::write(&path, &tokens, 2_900_000, 300, 100).unwrap();
        let file = TokenFile::open(&path).unwrap();
        assert_eq!(file.len(), 3_000_000);
        assert_eq!(file.train_len, 2_900_000);
        assert_eq!(file.chunks.1.len(), 3, "three chunks of 2^20 tokens");
        assert_eq!(file.slice(0, 3_000_000), tokens);
        file.verify().unwrap();
        drop(file);
        let mut bytes = fs::read(&path).unwrap();
        bytes[HEADER + 2 * 2_500_000] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let err = crate::error::chain(&TokenFile::open(&path).unwrap().verify().unwrap_err());
        assert!(err.contains("chunk 2") && err.contains("t.bin"), "{err}");
        bytes.truncate(bytes.len() - 5);
        fs::write(&path, &bytes).unwrap();
        let err = crate::error::chain(&TokenFile::open(&path).unwrap_err());
        assert!(err.contains("partial copy"), "{err}");
    }

    /// Damage that keeps the file's size, modification time and inode passes the stamp (the
    /// whole check is skipped), and is caught when the damaged chunk is first read; the
    /// chunks around it read as before.
    #[test]
    fn damage_the_stamp_cannot_see_is_caught_on_reading_its_chunk() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let tokens: Vec<u32> = (0..3_000_000).map(|i| i % 300).collect();
        TokenFile::write(&path, &tokens, 2_900_000, 300, 100).unwrap();
        TokenFile::open(&path).unwrap().verify_once().unwrap();
        let modified = fs::metadata(&path).unwrap().modified().unwrap();
        let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start((HEADER + 2 * 2_500_000) as u64))
            .unwrap();
        f.write_all(&[7, 0]).unwrap();
        f.set_modified(modified).unwrap();
        drop(f);
        let file = TokenFile::open(&path).unwrap();
        file.verify_once().unwrap(); // the stamp still matches
        assert_eq!(file.try_slice(0, 1000).unwrap(), tokens[..1000]);
        let err = crate::error::chain(&file.try_slice(2_400_000, 2_400_064).unwrap_err());
        assert!(
            err.contains("chunk 2") && err.contains("t.bin") && err.contains("on reading"),
            "{err}"
        );
    }

    /// A cache written by an earlier pdsweep (version 1) still opens, checked whole.
    #[test]
    fn version_1_files_still_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.bin");
        let payload: Vec<u8> = [5u16, 6, 7].iter().flat_map(|t| t.to_le_bytes()).collect();
        let mut bytes = MAGIC_V1.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&2u32.to_le_bytes());
        for v in [3u64, 2, 300, 9] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        bytes.extend_from_slice(&Sha256::digest(&payload)[..16]);
        bytes.extend_from_slice(&payload);
        fs::write(&path, &bytes).unwrap();
        let file = TokenFile::open(&path).unwrap();
        assert_eq!(
            (file.slice(0, 3), file.train_len, file.val_bytes),
            (vec![5, 6, 7], 2, 9)
        );
        bytes[HEADER] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(crate::error::chain(&TokenFile::open(&path).unwrap_err()).contains("checksum"));
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
