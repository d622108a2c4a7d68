//! Errors of the sweep database, each naming the database file.

use std::path::{Path, PathBuf};

/// A problem with the sweep database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The folder for the database could not be created.
    #[error("cannot create the results folder `{}`", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The schema could not be brought up to date.
    #[error("cannot migrate the sweep database `{}`\n\nhint: a database written by a newer pdsweep cannot be opened by an older one", path.display())]
    Migrate {
        /// The database.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rusqlite_migration::Error,
    },
    /// A statement failed.
    #[error("cannot {action} in the sweep database `{}`", path.display())]
    Sql {
        /// The database.
        path: PathBuf,
        /// What pdsweep was doing.
        action: &'static str,
        /// SQLite's error.
        #[source]
        sqlite: rusqlite::Error,
    },
    /// A value could not be encoded for storage.
    #[error("cannot encode a run configuration")]
    Encode {
        /// What went wrong.
        #[source]
        source: serde_json::Error,
    },
}

impl StoreError {
    pub(crate) fn sql(path: &Path, action: &'static str, source: rusqlite::Error) -> Self {
        StoreError::Sql {
            path: path.to_path_buf(),
            action,
            sqlite: source,
        }
    }
}
