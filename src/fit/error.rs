//! Errors of fitting: bad input data (naming the file, column and row), too little data for a
//! law, and failures of the optimiser or the database behind a sweep fit.

use crate::error::Cause;
use std::path::PathBuf;

/// A problem fitting a law or answering a recommendation.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// The data file could not be read or parsed as CSV.
    #[error("cannot read data file `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Cause,
    },
    /// A column the law needs is not in the file.
    #[error("data file `{}` has no column `{column}` (needed as `{role}`); its columns are {available}\n\nhint: map it with `--columns \"{role}=NAME\"`", path.display())]
    MissingColumn {
        /// The file.
        path: PathBuf,
        /// The column looked for.
        column: String,
        /// What the law uses it for (`params`, `tokens`, ...).
        role: String,
        /// The header, quoted.
        available: String,
    },
    /// A cell is not a finite positive number.
    #[error("data file `{}`, line {line}, column `{column}`: `{value}` {problem}", path.display())]
    BadCell {
        /// The file.
        path: PathBuf,
        /// 1-based line of the file (the header is line 1).
        line: u64,
        /// The column.
        column: String,
        /// The cell as written.
        value: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `--columns` could not be understood.
    #[error(
        "cannot read `--columns` entry `{entry}`\n\nhint: write `ROLE=COLUMN` pairs separated by commas, e.g. `--columns \"params=Model Size,tokens=Training Tokens,loss=loss\"`; roles: {roles}"
    )]
    Columns {
        /// The offending entry.
        entry: String,
        /// What is wrong.
        #[source]
        source: Cause,
        /// The roles the law accepts.
        roles: String,
    },
    /// Too few points (or too few distinct sizes) to fit the law.
    #[error("cannot fit the {law} law to {source_name}")]
    TooLittleData {
        /// The law.
        law: String,
        /// The file or scope the points came from.
        source_name: String,
        /// What is missing.
        #[source]
        source: Cause,
    },
    /// A setting (grid, delta, size) is out of range.
    #[error("{0}")]
    Invalid(String),
    /// No start of the grid produced a finite fit.
    #[error(
        "no start of the {law} grid gave a finite fit to {source_name}\n\nhint: check the data for outliers, or widen the start grid"
    )]
    NoFit {
        /// The law.
        law: String,
        /// The data's name.
        source_name: String,
    },
    /// The sweep database could not be read or written.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// A stored fit could not be decoded.
    #[error("cannot decode stored fit `{key}`")]
    Decode {
        /// The fit's scope key.
        key: String,
        /// What went wrong.
        #[source]
        source: Cause,
    },
}

impl FitError {
    /// Whether the user must change their input (file, columns, flags) rather than something
    /// having failed underneath.
    pub fn is_user_input(&self) -> bool {
        !matches!(self, FitError::Store(_) | FitError::Decode { .. })
    }
}
