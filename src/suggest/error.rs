//! Why `suggest` could not make a suggestion.

/// Why no suggestion could be made.
#[derive(Debug, thiserror::Error)]
pub enum SuggestError {
    /// The sweep file could not be edited.
    #[error("cannot edit the sweep file: {0}")]
    Edit(String),
    /// The sweep file does not parse as TOML, so it cannot be edited.
    #[error("cannot edit the sweep file: it is not valid TOML")]
    Parse(#[source] toml_edit::TomlError),
    /// Nothing to go on.
    #[error("{0}")]
    Nothing(String),
}
