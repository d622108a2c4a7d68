//! Reading a logit store window by window: every shard of the store folder is opened (its
//! header and digest table verified) and indexed once, then each window's block is read from
//! its shard, checked against its digest and decoded when a student's batch asks for it. At
//! most `OPEN_SHARDS` shard files are open at once (the least recently read is closed), so a
//! store of thousands of shards stays far inside the open-file limit. A window the index lacks
//! sends the reader back to the folder once (another process may have extended the store
//! since) before it is an error naming the window.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::store::{Shard, ShardError, StoreHeader};
use super::truncate::Kept;

/// File name of the shard holding `windows` (ascending): a hash of the list, so two writers of
/// the same windows write the same file.
pub(crate) fn shard_name(windows: &[u64]) -> String {
    let mut hasher = Sha256::new();
    for w in windows {
        hasher.update(w.to_le_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("shard-{hex}.bin")
}

/// Windows per shard for `block_bytes` bytes per window: shards of about 64 MiB.
pub(crate) fn windows_per_shard(block_bytes: u64) -> u64 {
    ((64u64 << 20) / block_bytes.max(1)).max(1)
}

/// Shard files a reader keeps open at once: a batch's windows are spread over the shards at
/// random, so a few handles save reopening without growing with the store.
pub(crate) const OPEN_SHARDS: usize = 4;

/// A reader over a store folder.
pub struct StoreReader {
    dir: PathBuf,
    expected: StoreHeader,
    shards: Vec<Shard>,
    /// The shards whose files are open, the most recently read last.
    open: VecDeque<usize>,
    /// Window → (shard, position within it).
    index: HashMap<u64, (usize, usize)>,
    indexed: bool,
}

impl StoreReader {
    /// A reader of the store in `dir` whose shards must all belong to `expected`; nothing is
    /// read until a window is asked for.
    pub fn new(dir: &Path, expected: StoreHeader) -> StoreReader {
        StoreReader {
            dir: dir.to_path_buf(),
            expected,
            shards: Vec::new(),
            open: VecDeque::new(),
            index: HashMap::new(),
            indexed: false,
        }
    }

    /// The windows the store holds (opening and verifying every shard's header).
    pub fn held(&mut self) -> Result<BTreeSet<u64>, ShardError> {
        self.ensure_indexed()?;
        Ok(self.index.keys().copied().collect())
    }

    /// The kept teacher support of every position of `windows`, in order (each window's
    /// `context` positions).
    pub fn windows(&mut self, windows: &[u64]) -> Result<Vec<Kept>, ShardError> {
        self.ensure_indexed()?;
        if windows.iter().any(|w| !self.index.contains_key(w)) {
            self.refresh()?;
        }
        let mut out = Vec::new();
        for &w in windows {
            let &(shard, i) = self.index.get(&w).ok_or_else(|| ShardError::Missing {
                dir: self.dir.clone(),
                window: w,
            })?;
            out.extend(self.shards[shard].block(i)?);
            self.touch(shard);
        }
        Ok(out)
    }

    /// Marks `shard` as the most recently read, closing the least recently read beyond
    /// [`OPEN_SHARDS`].
    fn touch(&mut self, shard: usize) {
        if self.open.back() == Some(&shard) {
            return;
        }
        self.open.retain(|&s| s != shard);
        self.open.push_back(shard);
        while self.open.len() > OPEN_SHARDS {
            if let Some(oldest) = self.open.pop_front() {
                self.shards[oldest].close();
            }
        }
    }

    /// Bytes of the store's shards on disk.
    pub fn bytes(&mut self) -> Result<u64, ShardError> {
        self.ensure_indexed()?;
        Ok(self
            .shards
            .iter()
            .map(|s| std::fs::metadata(s.path()).map_or(0, |m| m.len()))
            .sum())
    }

    fn ensure_indexed(&mut self) -> Result<(), ShardError> {
        if !self.indexed {
            self.refresh()?;
        }
        Ok(())
    }

    /// Opens the shards of the folder not opened yet (written since, by this or another
    /// process) and adds their windows to the index.
    pub fn refresh(&mut self) -> Result<(), ShardError> {
        let mut paths = shard_paths(&self.dir)?;
        paths.retain(|p| self.shards.iter().all(|s| s.path() != p.as_path()));
        for path in paths {
            let shard = Shard::open(&path, &self.expected)?;
            let n = self.shards.len();
            for (i, w) in shard.windows.iter().enumerate() {
                self.index.entry(*w).or_insert((n, i));
            }
            self.shards.push(shard);
        }
        self.indexed = true;
        Ok(())
    }
}

/// The shard files of a store folder, by name (none when the folder does not exist yet).
fn shard_paths(dir: &Path) -> Result<Vec<PathBuf>, ShardError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ShardError::Refused {
                path: dir.into(),
                source: crate::error::context("cannot list the store folder", e),
            });
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("shard-") && n.ends_with(".bin"))
        })
        .collect();
    paths.sort();
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distill::store::{Layout, VALUE_ENCODING, encode_block, write_shard};

    const POSITIONS: u64 = 4;

    fn header() -> StoreHeader {
        StoreHeader {
            logits_run: "l".into(),
            teacher_run: "t".into(),
            teacher_checkpoint_sha256: "sha".into(),
            data_key: "corpus".into(),
            vocab: 40,
            top_p: 1.0,
            top_k: 2,
            value_encoding: VALUE_ENCODING.into(),
            window_positions: POSITIONS,
            targets: Default::default(),
            tail: false,
            tokenizer_sha256: None,
            precision: Default::default(),
        }
    }

    /// Window `w`'s positions: token `w % 40` first, then `(w + 1) % 40`.
    fn block(w: u64) -> Vec<Kept> {
        (0..POSITIONS)
            .map(|_| Kept {
                ids: vec![(w % 40) as u32, ((w + 1) % 40) as u32],
                log_probs: vec![-0.5, -2.0],
                counts: Vec::new(),
                tail: None,
                next: None,
            })
            .collect()
    }

    /// Shard files of `dir` this process has open, read from `/proc/self/fd`.
    fn open_in(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .map(|fds| {
                fds.filter_map(Result::ok)
                    .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                    .filter(|target| target.starts_with(dir))
                    .count()
            })
            .unwrap_or(0)
    }

    /// A store of 40 shards read in a scattered order keeps at most [`OPEN_SHARDS`] of them open
    /// (counted by the kernel, through /proc), and every window still reads back as written.
    #[test]
    fn a_store_of_many_shards_keeps_few_files_open() {
        if !Path::new("/proc/self/fd").is_dir() {
            eprintln!("skipped: no /proc/self/fd on this system");
            return;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let header = header();
        let layout = Layout::top_k(40, 2);
        for shard in 0..40u64 {
            let windows: Vec<u64> = (shard * 3..shard * 3 + 3).collect();
            let blocks: Vec<Vec<u8>> = windows
                .iter()
                .map(|&w| encode_block(&block(w), &layout))
                .collect();
            write_shard(
                &dir.path().join(shard_name(&windows)),
                &header,
                &windows,
                &blocks,
            )
            .expect("shard written");
        }
        let mut reader = StoreReader::new(dir.path(), header);
        assert_eq!(reader.held().expect("indexed").len(), 120);
        assert_eq!(open_in(dir.path()), 0, "indexing leaves no shard open");
        let mut most = 0;
        for step in 0..60u64 {
            let windows: Vec<u64> = (0..3).map(|i| (step * 37 + i * 53) % 120).collect();
            let kept = reader.windows(&windows).expect("windows read");
            let want: Vec<Kept> = windows.iter().flat_map(|&w| block(w)).collect();
            assert_eq!(kept.len(), want.len());
            for (k, w) in kept.iter().zip(&want) {
                assert_eq!(k.ids, w.ids, "step {step}");
            }
            most = most.max(open_in(dir.path()));
        }
        assert!(
            (1..=OPEN_SHARDS).contains(&most),
            "{most} shard files open at once"
        );
    }
}
