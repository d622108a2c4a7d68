//! Errors that stop an execution (a single run's failure does not: it is recorded and the
//! others go on), and errors of the places results are recorded.

use crate::error::Cause;
use std::path::PathBuf;

use crate::spec::Backend;
use crate::store::StoreError;
use crate::train::BackendError;

/// Errors that stop the whole execution.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Results could not be recorded.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The sweep asks for a backend this binary lacks.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A stored run configuration cannot be read (written by another version?).
    #[error("run `{id}` has an unreadable configuration in the sweep database")]
    Config {
        /// Run id.
        id: String,
        /// Why.
        #[source]
        source: Cause,
    },
    /// `--devices` was given for a backend that has no device indices.
    #[error(
        "`--devices` selects GPUs, but the sweep's backend is `{backend}`\n\nhint: use `--jobs N` to run several runs at once on the CPU"
    )]
    DevicesOnCpu {
        /// The sweep's backend.
        backend: Backend,
    },
}

/// A metric, heartbeat or result could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The sweep database failed (local runs record there directly).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A run's own result file could not be written or read (Slurm jobs record there).
    #[error("cannot {action} `{}`", path.display())]
    File {
        /// What pdsweep was doing.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system (or the parser) said.
        #[source]
        source: Cause,
    },
}

impl RecordError {
    pub(crate) fn file(
        action: &'static str,
        path: &std::path::Path,
        source: impl Into<Cause>,
    ) -> Self {
        RecordError::File {
            action,
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}
