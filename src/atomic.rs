//! Files written whole or not at all: each goes to a temporary name in its folder, is synced,
//! and is renamed into place, so a reader (or a process killed mid-write) never sees half a
//! file. Checkpoints, logit-store shards, token caches and result files are written this way.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write `{}`", path.display())]
pub struct WriteError {
    /// The file (or the folder that could not be made).
    pub path: PathBuf,
    /// What the operating system said.
    #[source]
    pub source: std::io::Error,
}

/// A temporary path beside `path` (`NAME.tmpPID-N`: its extension replaced), unique per process
/// and per call, so two threads writing the same file never share one; what a killed writer
/// leaves is found by its `.tmp` extension ([`is_temp_of`]).
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    path.with_extension(format!("tmp{}-{n}", std::process::id()))
}

/// Whether the file named `name` is a temporary file of [`temp_path`] for a file whose name
/// without extension is `stem`.
pub(crate) fn is_temp_of(name: &str, stem: &str) -> bool {
    name.strip_prefix(stem)
        .and_then(|rest| rest.strip_prefix(".tmp"))
        .is_some_and(|rest| {
            rest.split_once('-').is_some_and(|(pid, n)| {
                !pid.is_empty()
                    && pid.bytes().all(|b| b.is_ascii_digit())
                    && !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
            })
        })
}

/// Writes `parts` to `path` through a temporary file in the same folder, fsync and rename.
pub fn write_atomic(path: &Path, parts: &[&[u8]]) -> Result<(), WriteError> {
    let fail = |p: &Path, source: std::io::Error| WriteError {
        path: p.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    }
    let tmp = temp_path(path);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_are_recognised_by_their_stem() {
        let tmp = temp_path(Path::new("/c/tokens-ab12.bin"));
        let name = tmp.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(is_temp_of(name, "tokens-ab12"), "{name}");
        assert!(!is_temp_of(name, "tokens-ab1"), "another entry's stem");
        assert!(!is_temp_of("tokens-ab12.bin", "tokens-ab12"));
        assert!(!is_temp_of("tokens-ab12.tmpx-1", "tokens-ab12"));
        assert!(!is_temp_of("tokens-ab12.tmp12-", "tokens-ab12"));
    }
}
