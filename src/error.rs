//! How an error reads: what failed, then each cause in turn, then the hints.
//!
//! Errors in pdsweep keep their causes as values (`#[source]`), never as text: a corpus that
//! cannot be read holds the operating system's `io::Error`, a checkpoint that cannot be written
//! holds the write's error, and so on down. This module turns such a chain into the one message a
//! user sees, once, at the edge (the CLI, a run's recorded failure):
//!
//! ```text
//! cannot read corpus `data/x`: No such file or directory (os error 2)
//!
//! hint: check `[corpus] path` (relative to the sweep file)
//! ```
//!
//! An error's own message may end in hints after a blank line; [`chain`] moves every hint after
//! the causes, so the line that says what failed stays one line.

use std::error::Error;

/// A cause kept as a value: another error, or (where a check failed and no error exists) the
/// check's own words, boxed with `"...".into()`.
pub type Cause = Box<dyn Error + Send + Sync + 'static>;

/// Words about where a cause happened ("line 3", "not a zstd stream"), in front of it.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct Context {
    /// Where, or what pdsweep was doing.
    pub context: String,
    /// What went wrong there.
    #[source]
    pub source: Cause,
}

/// `source` with `context` in front of it, as a [`Cause`].
pub fn context(context: impl Into<String>, source: impl Into<Cause>) -> Cause {
    Box::new(Context {
        context: context.into(),
        source: source.into(),
    })
}

/// `err` and all its causes as one message: the first line of each, outermost first, joined by
/// ": ", then every hint (what follows a blank line in any of them).
pub fn chain(err: &(dyn Error + 'static)) -> String {
    let mut errors = vec![err];
    let mut next = err.source();
    while let Some(e) = next {
        errors.push(e);
        next = e.source();
    }
    render(errors)
}

/// [`chain`] for an iterator of errors, outermost first (what `anyhow::Error::chain` yields).
pub fn render<'a>(errors: impl IntoIterator<Item = &'a (dyn Error + 'static)>) -> String {
    let mut heads: Vec<String> = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    for err in errors {
        let text = err.to_string();
        let (head, hint) = match text.split_once("\n\n") {
            Some((head, hint)) => (head, Some(hint)),
            None => (text.as_str(), None),
        };
        // an error whose own message already ends with its cause's (a wrapper that prints its
        // source) is not repeated
        let repeated = heads.last().is_some_and(|last| last.ends_with(head));
        if !head.is_empty() && !repeated {
            heads.push(head.to_string());
        }
        if let Some(hint) = hint.filter(|h| !hints.iter().any(|seen| seen == h)) {
            hints.push(hint.to_string());
        }
    }
    let mut out = heads.join(": ");
    for hint in hints {
        out.push_str("\n\n");
        out.push_str(&hint);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read corpus `x`\n\nhint: check `[corpus] path`")]
    struct Outer {
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("run `r1` failed")]
    struct Run {
        #[source]
        source: Outer,
    }

    #[test]
    fn causes_follow_the_message_and_hints_come_last() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = Run {
            source: Outer { source: io },
        };
        assert_eq!(
            chain(&err),
            "run `r1` failed: cannot read corpus `x`: no such file\n\nhint: check `[corpus] path`"
        );
    }

    #[test]
    fn a_cause_the_message_already_prints_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot open the store: {source}")]
        struct Prints {
            #[source]
            source: std::io::Error,
        }
        let err = Prints {
            source: std::io::Error::other("disk full"),
        };
        assert_eq!(chain(&err), "cannot open the store: disk full");
    }

    #[test]
    fn a_check_in_words_is_a_cause_too() {
        #[derive(Debug, thiserror::Error)]
        #[error("token cache `c.bin` is corrupt")]
        struct Corrupt {
            #[source]
            source: Cause,
        }
        let err = Corrupt {
            source: "length 7 is not a multiple of 4".into(),
        };
        assert_eq!(
            chain(&err),
            "token cache `c.bin` is corrupt: length 7 is not a multiple of 4"
        );
    }
}
