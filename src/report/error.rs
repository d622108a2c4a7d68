//! Errors of `report` and `export`, each naming the file or figure involved.

use crate::error::Cause;
use std::path::PathBuf;

use crate::store::StoreError;

/// A problem while gathering, drawing, exporting or writing a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The sweep database could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The database has no plan to report on.
    #[error("the sweep database `{}` has no plan yet\n\nhint: run `pdsweep plan SWEEP.toml` or `pdsweep run SWEEP.toml` first", path.display())]
    NoPlan {
        /// The database.
        path: PathBuf,
    },
    /// A figure could not be drawn.
    #[error("cannot draw the figure `{figure}`")]
    Draw {
        /// The figure's name.
        figure: String,
        /// What plotters said.
        #[source]
        source: Cause,
    },
    /// The embedded font could not be loaded.
    #[error("cannot load the embedded font")]
    Font {
        /// What went wrong.
        #[source]
        source: Cause,
    },
    /// A PNG could not be encoded.
    #[error("cannot encode the figure `{figure}` as PNG")]
    Encode {
        /// The figure's name.
        figure: String,
        /// What the encoder said.
        #[source]
        source: Cause,
    },
    /// A table could not be built or serialised.
    #[error("cannot export the `{table}` table as {format}")]
    Export {
        /// runs, metrics or fits.
        table: String,
        /// csv, parquet or json.
        format: &'static str,
        /// What polars said.
        #[source]
        source: Cause,
    },
    /// An output file or folder could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Cause,
    },
}

impl ReportError {
    /// A drawing error of figure `figure`.
    pub fn draw(figure: &str, reason: impl std::fmt::Display) -> ReportError {
        ReportError::Draw {
            figure: figure.to_string(),
            source: reason.to_string().into(),
        }
    }
}
