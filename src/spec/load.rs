//! Reading a sweep file: parse with key paths and spans, then run the checks that need the
//! whole file.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::digest::hex;

use super::error::{Location, SpecError};
use super::schema::SweepFile;
use super::sweep::Sweep;
use super::validate;

impl Sweep {
    /// Reads and checks the sweep file at `path`.
    pub fn load(path: &Path) -> Result<Sweep, SpecError> {
        let source = std::fs::read_to_string(path).map_err(|e| SpecError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        Sweep::parse(path, source)
    }

    /// Parses and checks `source` as if read from `path`.
    pub fn parse(path: &Path, source: String) -> Result<Sweep, SpecError> {
        let file = deserialize(path, &source)?;
        let hash = hex(&Sha256::digest(source.as_bytes()));
        let sweep = Sweep {
            path: path.to_path_buf(),
            source,
            hash,
            file,
        };
        validate::check(&sweep)?;
        Ok(sweep)
    }
}

fn deserialize(path: &Path, source: &str) -> Result<SweepFile, SpecError> {
    let document =
        toml::Deserializer::parse(source).map_err(|e| toml_error(path, source, &e, None))?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        let key = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        toml_error(path, source, e.inner(), Some(key))
    })
}

fn toml_error(path: &Path, source: &str, err: &toml::de::Error, key: Option<String>) -> SpecError {
    let message = err.message().trim().to_string();
    let key = key
        .filter(|k| k != ".")
        .unwrap_or_else(|| "(document)".into());
    let key = refine_key(key, &message);
    let hint = hint_for(&message);
    let error = match err.span() {
        Some(span) => SpecError::at(
            Location::from_offset(path, source, span.start, key),
            message,
        ),
        None => SpecError::whole_file(path, format!("key `{key}`: {message}")),
    };
    match hint {
        Some(h) => error.with_hint(h),
        None => error,
    }
}

/// serde reports an unknown or missing field at its table; append the field to the key path.
fn refine_key(key: String, message: &str) -> String {
    let field = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next());
    match field {
        Some(f) if key == "(document)" => f.to_string(),
        Some(f) if !key.ends_with(f) => format!("{key}.{f}"),
        _ => key,
    }
}

fn hint_for(message: &str) -> Option<String> {
    if message.starts_with("unknown field") {
        Some("check the spelling; the sweep-file reference (docs/src/reference/sweep-file.md) lists every key".into())
    } else if message.starts_with("missing field `teachers`")
        || message.starts_with("missing field `students`")
    {
        Some(
            "a sweep needs a `[teachers]` and a `[students]` table with `sizes` or `[[...models]]`"
                .into(),
        )
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Sweep, SpecError> {
        Sweep::parse(Path::new("t.toml"), text.to_string())
    }

    const MINIMAL: &str =
        "name = \"t\"\n[teachers]\nsizes = [\"2M\"]\n[students]\nsizes = [\"1M\"]\n";

    #[test]
    fn minimal_sweep_parses() {
        let sweep = parse(MINIMAL).unwrap();
        assert_eq!(sweep.hash.len(), 64);
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let text = MINIMAL.replace("[students]\n", "[students]\nsizez = 3\n");
        let err = parse(&text).unwrap_err();
        let loc = err.location().expect("located");
        assert_eq!(loc.line, 5);
        assert_eq!(loc.key, "students.sizez");
        assert!(err.to_string().contains("unknown field `sizez`"), "{err}");
    }

    #[test]
    fn bad_value_names_its_element() {
        let text = MINIMAL.replace("[\"2M\"]", "[\"2M\", \"-4M\"]");
        let err = parse(&text).unwrap_err();
        let loc = err.location().expect("located");
        assert_eq!(loc.line, 3);
        assert_eq!(loc.key, "teachers.sizes[1]");
        assert!(err.to_string().contains("-4M"), "{err}");
    }

    #[test]
    fn synthetic_world_keys_are_checked() {
        let with = |corpus: &str| {
            MINIMAL.replace(
                "name = \"t\"\n",
                &format!("name = \"t\"\n[corpus]\n{corpus}\n"),
            )
        };
        assert!(parse(&with("sources = 1\ncopies = false")).is_ok());
        let err = parse(&with("sources = 5")).unwrap_err();
        assert_eq!(
            err.location().map(|l| l.key.as_str()),
            Some("corpus.sources")
        );
        assert!(err.to_string().contains("sources = 5"), "{err}");
        let err = parse(&with("kind = \"text\"\npath = \"x\"\ncopies = false")).unwrap_err();
        assert_eq!(
            err.location().map(|l| l.key.as_str()),
            Some("corpus.copies")
        );
        assert!(err.to_string().contains("not a `text` corpus"), "{err}");
    }

    #[test]
    fn syntax_error_is_located() {
        let err = parse("name = \"t\"\n[teachers\n").unwrap_err();
        assert_eq!(err.location().map(|l| l.line), Some(2));
    }
}
