//! Errors about a sweep file, each pointing at the file, line, column and key to fix.

use crate::error::Cause;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a sweep file something is: the file, 1-based line and column, the dotted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The sweep file.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column number.
    pub column: usize,
    /// Dotted key path such as `teachers.sizes[1]`.
    pub key: String,
    /// The text of that line, for the snippet under the message.
    pub source_line: String,
}

impl Location {
    /// Finds the line and column of byte offset `offset` in `source`.
    pub fn from_offset(path: &Path, source: &str, offset: usize, key: impl Into<String>) -> Self {
        let offset = offset.min(source.len());
        let before = &source[..floor_char_boundary(source, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let source_line = source[line_start..]
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        Location {
            path: path.to_path_buf(),
            line,
            column,
            key: key.into(),
            source_line,
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A problem with a sweep file.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read at all.
    #[error("cannot read sweep file `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Cause,
    },
    /// The file was read but something in it is wrong.
    #[error("{0}")]
    Invalid(Box<Invalid>),
}

/// A located problem: what is wrong, where, and how to fix it.
#[derive(Debug)]
pub struct Invalid {
    /// Where the problem is; `None` when the file as a whole is at fault.
    pub location: Option<Location>,
    /// The file, used when there is no location.
    pub path: PathBuf,
    /// Lower-case description, with offending values in backticks.
    pub message: String,
    /// What the user can change, naming the key or flag.
    pub hint: Option<String>,
}

impl SpecError {
    /// An error at `location`.
    pub fn at(location: Location, message: impl Into<String>) -> Self {
        SpecError::Invalid(Box::new(Invalid {
            path: location.path.clone(),
            location: Some(location),
            message: message.into(),
            hint: None,
        }))
    }

    /// An error about the file `path` as a whole.
    pub fn whole_file(path: &Path, message: impl Into<String>) -> Self {
        SpecError::Invalid(Box::new(Invalid {
            path: path.to_path_buf(),
            location: None,
            message: message.into(),
            hint: None,
        }))
    }

    /// Adds a `hint:` line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        if let SpecError::Invalid(inner) = &mut self {
            inner.hint = Some(hint.into());
        }
        self
    }

    /// The location, if this error has one.
    pub fn location(&self) -> Option<&Location> {
        match self {
            SpecError::Invalid(inner) => inner.location.as_ref(),
            SpecError::Read { .. } => None,
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match &self.location {
            Some(loc) => {
                write!(
                    f,
                    "{}:{}:{}: key `{}`: {}",
                    loc.path.display(),
                    loc.line,
                    loc.column,
                    loc.key,
                    self.message
                )?;
                let gutter = loc.line.to_string().len();
                write!(f, "\n{:gutter$} |\n{} | {}", "", loc.line, loc.source_line)?;
                write!(f, "\n{:gutter$} | {:>col$}", "", "^", col = loc.column)?;
            }
            None => write!(f, "{}: {}", self.path.display(), self.message)?,
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n\nhint: {hint}")?;
        }
        Ok(())
    }
}
