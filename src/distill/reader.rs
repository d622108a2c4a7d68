//! Reading a logit store window by window: every shard of the store folder is opened (its
//! header and digest table verified) and indexed once, then each window's block is read from
//! its shard, checked against its digest and decoded when a student's batch asks for it. A
//! window the index lacks sends the reader back to the folder once (another process may have
//! extended the store since) before it is an error naming the window.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::store::{Shard, ShardError, StoreHeader};
use super::truncate::Kept;

/// File name of the shard holding `windows` (ascending): a hash of the list, so two writers of
/// the same windows write the same file.
pub fn shard_name(windows: &[u64]) -> String {
    let mut hasher = Sha256::new();
    for w in windows {
        hasher.update(w.to_le_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("shard-{hex}.bin")
}

/// Windows per shard for `block_bytes` bytes per window: shards of about 64 MiB.
pub fn windows_per_shard(block_bytes: u64) -> u64 {
    ((64u64 << 20) / block_bytes.max(1)).max(1)
}

/// A reader over a store folder.
pub struct StoreReader {
    dir: PathBuf,
    expected: StoreHeader,
    shards: Vec<Shard>,
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
        }
        Ok(out)
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
                reason: format!("cannot list the store folder: {e}"),
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
