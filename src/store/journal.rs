//! Which SQLite journal mode a sweep database uses. WAL (the default) needs a shared-memory
//! index that every process maps, so "all processes using a database must be on the same host"
//! and "WAL does not work over a network filesystem" (sqlite.org/wal.html). On a network
//! filesystem (NFS, Lustre, GPFS, BeeGFS, CephFS, SMB, ...) the database uses the rollback
//! journal (`DELETE`), which needs only file locks; with one writer (the Slurm coordinator,
//! which holds the sweep's lease) it cannot be corrupted even where those locks are weak.

use std::path::Path;

/// The journal modes pdsweep uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JournalMode {
    /// Write-ahead log: readers never block the writer; one host only.
    Wal,
    /// Rollback journal: safe on a network filesystem.
    Delete,
}

impl JournalMode {
    /// The value of `PRAGMA journal_mode`.
    pub fn pragma(self) -> &'static str {
        match self {
            JournalMode::Wal => "WAL",
            JournalMode::Delete => "DELETE",
        }
    }
}

/// The environment variable that forces a journal mode (`wal` or `delete`), for a filesystem
/// pdsweep misjudges.
pub(crate) const JOURNAL_ENV: &str = "PDSWEEP_SQLITE_JOURNAL";

/// The journal mode for a database in folder `dir`: `$PDSWEEP_SQLITE_JOURNAL` if set, else
/// `DELETE` on a network filesystem and WAL elsewhere.
pub(crate) fn journal_mode_for(dir: &Path) -> JournalMode {
    match std::env::var(JOURNAL_ENV).map(|v| v.to_ascii_lowercase()) {
        Ok(v) if v == "wal" => return JournalMode::Wal,
        Ok(v) if v == "delete" => return JournalMode::Delete,
        _ => {}
    }
    if filesystem_magic(dir).is_some_and(is_network_filesystem) {
        JournalMode::Delete
    } else {
        JournalMode::Wal
    }
}

/// Whether a filesystem type (statfs `f_type`, see `man 2 statfs`) is shared over a network.
pub fn is_network_filesystem(magic: i64) -> bool {
    const NETWORK: [i64; 14] = [
        0x6969,      // NFS
        0x517B,      // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x0BD0_0BD0, // Lustre
        0x4750_4653, // GPFS
        0x1983_0326, // BeeGFS
        0x00C3_6400, // CephFS
        0x5346_414F, // AFS
        0x6B41_4653, // kAFS
        0x0102_1997, // 9p
        0xAAD7_AAEA, // PanFS
        0x7461_636F, // OCFS2 (a disk shared between hosts)
        0x6573_5546, // FUSE (sshfs, GlusterFS, s3fs, ...: treated as network)
    ];
    NETWORK.contains(&magic)
}

/// The `f_type` of the filesystem holding `dir` (or its nearest existing ancestor).
#[cfg(target_os = "linux")]
fn filesystem_magic(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = dir.ancestors().find(|p| p.exists())?;
    let existing = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let c_path = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated path and `stat` is large enough for statfs.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statfs returned 0, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast)]
    Some(stat.f_type as i64 & 0xFFFF_FFFF)
}

#[cfg(not(target_os = "linux"))]
fn filesystem_magic(_dir: &Path) -> Option<i64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_filesystems_are_recognised_and_local_ones_are_not() {
        for magic in [0x6969, 0x0BD0_0BD0, 0x4750_4653, 0xFF53_4D42, 0x6573_5546] {
            assert!(is_network_filesystem(magic), "{magic:#x}");
        }
        // ext4, xfs, btrfs, tmpfs, overlayfs
        for magic in [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630] {
            assert!(!is_network_filesystem(magic), "{magic:#x}");
        }
    }

    #[test]
    fn a_local_folder_gets_wal() {
        if std::env::var(JOURNAL_ENV).is_ok() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let magic = filesystem_magic(dir.path()).unwrap();
        assert_eq!(
            journal_mode_for(dir.path()) == JournalMode::Delete,
            is_network_filesystem(magic)
        );
    }
}
