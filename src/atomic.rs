//! Files written whole or not at all: each goes to a temporary name in its folder, is synced,
//! and is renamed into place, so a reader (or a process killed mid-write) never sees half a
//! file. Checkpoints, logit-store shards, token caches and result files are written this way.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A file that could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot write `{}`: {reason}", path.display())]
pub struct WriteError {
    /// The file (or the folder that could not be made).
    pub path: PathBuf,
    /// What the operating system said.
    pub reason: String,
}

/// Writes `parts` to `path` through a temporary file in the same folder, fsync and rename.
pub fn write_atomic(path: &Path, parts: &[&[u8]]) -> Result<(), WriteError> {
    let fail = |p: &Path, e: std::io::Error| WriteError {
        path: p.to_path_buf(),
        reason: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    }
    // Unique per process and per call, so two threads writing the same file never share one.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp: PathBuf = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        for part in parts {
            file.write_all(part)?;
        }
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(fail(path, e));
    }
    Ok(())
}
