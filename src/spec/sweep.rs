//! A parsed and checked sweep file ([`Sweep`], read by `load`): its content, and its source
//! kept so that later stages can point at a line.

use std::ops::Range;
use std::path::PathBuf;

use super::error::{Location, SpecError};
use super::schema::SweepFile;

/// A parsed and checked sweep file.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its text, for locating errors found later.
    pub source: String,
    /// SHA-256 of its bytes (hex).
    pub hash: String,
    /// The parsed content.
    pub file: SweepFile,
}

impl Sweep {
    /// An error at `span` (a byte range of the source) about `key`. An empty span means the
    /// value was a default, not written in the file, so the error names the key alone.
    pub fn error_at(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> SpecError {
        if span.is_empty() {
            SpecError::whole_file(&self.path, format!("key `{key}`: {}", message.into()))
        } else {
            SpecError::at(self.location(span.start, key), message)
        }
    }

    /// The location of byte `offset`.
    pub fn location(&self, offset: usize, key: &str) -> Location {
        Location::from_offset(&self.path, &self.source, offset, key)
    }
}
