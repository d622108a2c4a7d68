//! Errors of the data layer, each naming the file it is about.

use std::path::PathBuf;

/// A problem reading, tokenising or caching a corpus.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The corpus path (or a file in it) cannot be read.
    #[error("cannot read corpus `{}`: {reason}\n\nhint: check `[corpus] path` (relative to the sweep file)", path.display())]
    Missing {
        /// The path.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
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
    #[error("corpus file `{}` is invalid: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Training or applying the tokenizer failed.
    #[error("tokenizer failed: {0}")]
    Tokenizer(String),
    /// A cache file is damaged; it is refused (delete it to rebuild).
    #[error("token cache `{}` is corrupt: {reason}\n\nhint: delete the file; it is rebuilt from the corpus", path.display())]
    CorruptCache {
        /// The cache file.
        path: PathBuf,
        /// What check failed.
        reason: String,
    },
    /// Writing a cache file failed.
    #[error("cannot write `{}`: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
    },
    /// `[corpus] path` (or `val_path`) cannot be used.
    #[error("`[corpus] {key}` = `{written}` cannot be used: {reason} (resolved to `{}`)\n\nhint: `{key}` is relative to the folder of the sweep file", resolved.display())]
    CorpusPath {
        /// `path` or `val_path`.
        key: &'static str,
        /// The path as written in the sweep file.
        written: String,
        /// The path it resolves to.
        resolved: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The corpus is too small for the run.
    #[error("{0}")]
    TooSmall(String),
}

impl DataError {
    /// The reason without the path (for messages that name the path themselves).
    pub fn short_reason(&self) -> String {
        match self {
            DataError::Missing { reason, .. } => reason.clone(),
            DataError::Empty { what, .. } => what.clone(),
            other => other.to_string(),
        }
    }
}

impl From<crate::atomic::WriteError> for DataError {
    fn from(e: crate::atomic::WriteError) -> Self {
        DataError::Write {
            path: e.path,
            reason: e.reason,
        }
    }
}
