//! The one place that writes report and export files: each file goes to a temporary name in
//! its folder and is renamed into place, so a reader never sees half a figure or table.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::error::ReportError;

/// An output folder and the files written to it.
#[derive(Debug)]
pub(crate) struct OutputDir {
    dir: PathBuf,
    written: Vec<PathBuf>,
}

impl OutputDir {
    /// Creates `dir` (and its parents) if needed.
    pub fn create(dir: &Path) -> Result<OutputDir, ReportError> {
        std::fs::create_dir_all(dir).map_err(|e| ReportError::Write {
            path: dir.to_path_buf(),
            source: e.into(),
        })?;
        Ok(OutputDir {
            dir: dir.to_path_buf(),
            written: Vec::new(),
        })
    }

    /// The folder.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `bytes` to `name` in the folder atomically (temporary file, sync, rename).
    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<PathBuf, ReportError> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let fail = |p: &Path, e: std::io::Error| ReportError::Write {
            path: p.to_path_buf(),
            source: e.into(),
        };
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(&path, e));
        }
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(&path, e)
        })?;
        self.written.push(path.clone());
        Ok(path)
    }

    /// Every file written so far, in order.
    pub fn written(&self) -> &[PathBuf] {
        &self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_files_and_leave_no_temporaries() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let Ok(dir) = dir else { return };
        let mut out = OutputDir::create(&dir.path().join("a/b")).expect("create");
        out.write("x.txt", b"one").expect("first write");
        out.write("x.txt", b"two").expect("second write");
        let names: Vec<_> = std::fs::read_dir(out.path())
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["x.txt"]);
        assert_eq!(
            std::fs::read(out.path().join("x.txt")).expect("read"),
            b"two"
        );
        assert_eq!(out.written().len(), 2);
    }
}
