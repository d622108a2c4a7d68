//! Reading real text: a file or a folder of `.txt`, `.jsonl` (one JSON object per line with a
//! text field) or `.parquet` files (a text column, read with polars). Documents come back in
//! path order so the corpus is the same on every machine.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::DataError;
use crate::spec::CorpusKind;

/// One document of a corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it came from (`file` or `file:line`).
    pub source: String,
    /// Its text.
    pub text: String,
}

/// The files of a corpus at `path` (a file, or a folder searched recursively for the
/// extension of `kind`), sorted.
pub fn corpus_files(path: &Path, kind: CorpusKind) -> Result<Vec<PathBuf>, DataError> {
    let extension = match kind {
        CorpusKind::Text => "txt",
        CorpusKind::Jsonl => "jsonl",
        CorpusKind::Parquet => "parquet",
        CorpusKind::Synthetic => return Ok(Vec::new()),
    };
    let meta = fs::metadata(path).map_err(|e| DataError::Missing {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut files = Vec::new();
    if meta.is_file() {
        files.push(path.to_path_buf());
    } else {
        collect(path, extension, &mut files)?;
    }
    files.sort();
    if files.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            what: format!("no `.{extension}` files"),
        });
    }
    Ok(files)
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) -> Result<(), DataError> {
    let entries = fs::read_dir(dir).map_err(|e| DataError::Missing {
        path: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    for entry in entries {
        let path = entry
            .map_err(|e| DataError::Missing {
                path: dir.to_path_buf(),
                reason: e.to_string(),
            })?
            .path();
        if path.is_dir() {
            collect(&path, extension, out)?;
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads every document of the corpus files.
pub fn read_documents(
    files: &[PathBuf],
    kind: CorpusKind,
    column: &str,
) -> Result<Vec<Document>, DataError> {
    let mut docs = Vec::new();
    for file in files {
        match kind {
            CorpusKind::Text => docs.push(Document {
                source: file.display().to_string(),
                text: read_text(file)?,
            }),
            CorpusKind::Jsonl => docs.extend(read_jsonl(file, column)?),
            CorpusKind::Parquet => docs.extend(read_parquet(file, column)?),
            CorpusKind::Synthetic => {}
        }
    }
    if docs.iter().all(|d| d.text.is_empty()) {
        let path = files.first().cloned().unwrap_or_default();
        return Err(DataError::Empty {
            path,
            what: "no text in any document".into(),
        });
    }
    Ok(docs)
}

fn read_text(file: &Path) -> Result<String, DataError> {
    let bytes = fs::read(file).map_err(|e| DataError::Missing {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    String::from_utf8(bytes).map_err(|e| DataError::Invalid {
        path: file.to_path_buf(),
        reason: format!(
            "not UTF-8 text (first bad byte at offset {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

fn read_jsonl(file: &Path, field: &str) -> Result<Vec<Document>, DataError> {
    let text = read_text(file)?;
    let mut docs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let invalid = |reason: String| DataError::Invalid {
            path: file.to_path_buf(),
            reason: format!("line {}: {reason}", i + 1),
        };
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| invalid(e.to_string()))?;
        let text = value
            .get(field)
            .and_then(|v| v.as_str())
            .ok_or_else(|| invalid(format!("no string field `{field}`")))?;
        docs.push(Document {
            source: format!("{}:{}", file.display(), i + 1),
            text: text.to_string(),
        });
    }
    Ok(docs)
}

fn read_parquet(file: &Path, column: &str) -> Result<Vec<Document>, DataError> {
    use polars::prelude::{ParquetReader, SerReader};
    let invalid = |reason: String| DataError::Invalid {
        path: file.to_path_buf(),
        reason,
    };
    let handle = fs::File::open(file).map_err(|e| DataError::Missing {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    let frame = ParquetReader::new(handle)
        .finish()
        .map_err(|e| invalid(e.to_string()))?;
    let series = frame
        .column(column)
        .map_err(|_| invalid(format!("no column `{column}`")))?;
    let strings = series
        .str()
        .map_err(|_| invalid(format!("column `{column}` is not text")))?;
    Ok(strings
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.map(|s| Document {
                source: format!("{}[{i}]", file.display()),
                text: s.to_string(),
            })
        })
        .collect())
}
