//! Errors of the data layer, each naming the file it is about.

use std::path::PathBuf;

use crate::error::Cause;

/// A problem reading, tokenising or caching a corpus.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The corpus path (or a file in it) cannot be read.
    #[error("cannot read corpus `{}`\n\nhint: check `[corpus] path` (relative to the sweep file)", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Cause,
    },
    /// The corpus holds nothing usable.
    #[error("corpus `{}` is empty: {what}", path.display())]
    Empty {
        /// The path.
        path: PathBuf,
        /// What is missing.
        what: String,
    },
    /// A file is not what its kind says.
    #[error("corpus file `{}` is invalid", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong: the parser's error, or the check that failed.
        #[source]
        source: Cause,
    },
    /// Training or applying the tokenizer failed.
    #[error("tokenizer failed")]
    Tokenizer(#[source] Cause),
    /// A cache file is damaged; it is refused (delete it to rebuild).
    #[error("token cache `{}` is corrupt\n\nhint: delete the file; it is rebuilt from the corpus", path.display())]
    CorruptCache {
        /// The cache file.
        path: PathBuf,
        /// What check failed.
        #[source]
        source: Cause,
    },
    /// Writing a cache file failed.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Cause,
    },
    /// `[corpus] path` (or `val_path`) cannot be used.
    #[error("`[corpus] {key}` = `{written}` (resolved to `{}`) cannot be used\n\nhint: `{key}` is relative to the folder of the sweep file", resolved.display())]
    CorpusPath {
        /// `path` or `val_path`.
        key: &'static str,
        /// The path as written in the sweep file.
        written: String,
        /// The path it resolves to.
        resolved: PathBuf,
        /// What is wrong.
        #[source]
        source: Cause,
    },
    /// The corpus is too small for the run.
    #[error("{0}")]
    TooSmall(String),
}

impl DataError {
    /// What is wrong without the path, as a cause for a message that names the path itself:
    /// the operating system's error of a corpus that cannot be read, this error otherwise.
    pub fn into_cause(self) -> Cause {
        match self {
            DataError::Missing { source, .. } => source,
            DataError::Empty { what, .. } => what.into(),
            other => Box::new(other),
        }
    }
}

impl From<crate::atomic::WriteError> for DataError {
    fn from(e: crate::atomic::WriteError) -> Self {
        DataError::Write {
            path: e.path,
            source: Box::new(e.source),
        }
    }
}
