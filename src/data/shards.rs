//! Corpus shards, found and read as a stream.
//!
//! A corpus is a file, a folder (searched recursively) or a glob pattern (`shards/*.jsonl.gz`).
//! Its documents come one at a time, in path order so the corpus is the same on every machine:
//! a `.txt` file is one document; a `.jsonl` line is one (only its text field is parsed, the
//! rest is skipped unread); a `.parquet` row is one (only the text column is read, one row
//! group at a time). Text and JSON-lines shards may be compressed (`.gz`, `.zst`).
//!
//! What is held in memory is one document, one line or one row group, whatever the size of the
//! corpus: preparation streams the documents into the tokenizer (see [`super::scan`]).

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::error::DataError;
use crate::error::Cause;
use crate::spec::CorpusKind;

/// One document of a corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it came from (`file`, `file:line` or `file[row]`).
    pub source: String,
    /// Its text.
    pub text: String,
}

/// How a shard's bytes are compressed, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

/// The compression of `path` when its name is `*.{extension}[.gz|.zst]`, else `None`.
fn shard_compression(path: &Path, extension: &str) -> Option<Compression> {
    let name = path.file_name()?.to_str()?;
    let plain = format!(".{extension}");
    if name.ends_with(&plain) {
        return Some(Compression::None);
    }
    if extension == "parquet" {
        return None; // parquet compresses its pages itself
    }
    [(".gz", Compression::Gzip), (".zst", Compression::Zstd)]
        .into_iter()
        .find(|(suffix, _)| {
            name.strip_suffix(suffix)
                .is_some_and(|stem| stem.ends_with(&plain))
        })
        .map(|(_, c)| c)
}

fn extension_of(kind: CorpusKind) -> Option<&'static str> {
    match kind {
        CorpusKind::Text => Some("txt"),
        CorpusKind::Jsonl => Some("jsonl"),
        CorpusKind::Parquet => Some("parquet"),
        CorpusKind::Synthetic => None,
    }
}

fn missing(path: &Path, e: impl Into<Cause>) -> DataError {
    DataError::Missing {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// Whether `written` is a glob pattern rather than a path.
fn is_pattern(written: &Path) -> bool {
    written
        .to_str()
        .is_some_and(|s| s.contains(['*', '?', '[']))
}

/// The shards of a corpus at `path` — a file, a folder searched recursively, or a glob pattern
/// — whose names end in the extension of `kind` (`.txt`, `.jsonl`, `.parquet`; text and JSON
/// lines also compressed as `.gz` or `.zst`), sorted.
pub(crate) fn corpus_files(path: &Path, kind: CorpusKind) -> Result<Vec<PathBuf>, DataError> {
    let Some(extension) = extension_of(kind) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    if is_pattern(path) {
        let pattern = path.to_string_lossy();
        let matches = glob::glob(&pattern).map_err(|e| missing(path, e))?;
        for entry in matches {
            let found = entry.map_err(|e| {
                let path = e.path().to_path_buf();
                missing(&path, e)
            })?;
            if found.is_dir() {
                collect(&found, extension, &mut files)?;
            } else if shard_compression(&found, extension).is_some() {
                files.push(found);
            }
        }
    } else if fs::metadata(path).map_err(|e| missing(path, e))?.is_file() {
        files.push(path.to_path_buf());
    } else {
        collect(path, extension, &mut files)?;
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            what: format!("no `.{extension}` files (nor `.{extension}.gz`, `.{extension}.zst`)"),
        });
    }
    Ok(files)
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) -> Result<(), DataError> {
    for entry in fs::read_dir(dir).map_err(|e| missing(dir, e))? {
        let path = entry.map_err(|e| missing(dir, e))?.path();
        if path.is_dir() {
            collect(&path, extension, out)?;
        } else if shard_compression(&path, extension).is_some() {
            out.push(path);
        }
    }
    Ok(())
}

/// The documents of `files`, read one at a time.
pub(crate) struct Documents {
    files: std::vec::IntoIter<PathBuf>,
    kind: CorpusKind,
    column: String,
    open: Option<OpenShard>,
}

/// The shard being read.
enum OpenShard {
    /// JSON lines, with the number of the last line read.
    Lines {
        path: PathBuf,
        reader: Box<dyn BufRead + Send>,
        line: usize,
        buffer: String,
    },
    /// Parquet rows: the rows of the row group read last, and the groups still to read.
    Rows {
        path: PathBuf,
        rows: VecDeque<Document>,
        groups: VecDeque<(usize, usize)>,
    },
}

impl Documents {
    /// Reads the documents of `files` (corpus `kind`; `column` is the text field of JSON lines
    /// and the text column of parquet).
    pub fn new(files: &[PathBuf], kind: CorpusKind, column: &str) -> Documents {
        Documents {
            files: Vec::from(files).into_iter(),
            kind,
            column: column.to_string(),
            open: None,
        }
    }

    /// The next document of the open shard, if it has one left.
    fn next_in_shard(&mut self) -> Option<Result<Document, DataError>> {
        match self.open.as_mut()? {
            OpenShard::Lines {
                path,
                reader,
                line,
                buffer,
            } => loop {
                buffer.clear();
                *line += 1;
                match reader.read_line(buffer) {
                    Ok(0) => return None,
                    Ok(_) if buffer.trim().is_empty() => continue,
                    Ok(_) => return Some(json_line(path, *line, buffer, &self.column)),
                    Err(e) => {
                        return Some(Err(invalid(
                            path,
                            crate::error::context(format!("line {line}"), e),
                        )));
                    }
                }
            },
            OpenShard::Rows { path, rows, groups } => loop {
                if let Some(doc) = rows.pop_front() {
                    return Some(Ok(doc));
                }
                let (start, len) = groups.pop_front()?;
                match parquet_rows(path, &self.column, start, len) {
                    Ok(read) => *rows = read,
                    Err(e) => return Some(Err(e)),
                }
            },
        }
    }

    /// Opens the next shard; a text file is returned whole as its one document.
    fn open_next(&mut self) -> Option<Result<Option<Document>, DataError>> {
        let path = self.files.next()?;
        let opened = match self.kind {
            CorpusKind::Text => read_text(&path).map(|text| {
                Some(Document {
                    source: path.display().to_string(),
                    text,
                })
            }),
            CorpusKind::Jsonl => open_lines(&path).map(|reader| {
                self.open = Some(OpenShard::Lines {
                    path,
                    reader,
                    line: 0,
                    buffer: String::new(),
                });
                None
            }),
            CorpusKind::Parquet => row_groups(&path, &self.column).map(|groups| {
                self.open = Some(OpenShard::Rows {
                    path,
                    rows: VecDeque::new(),
                    groups,
                });
                None
            }),
            CorpusKind::Synthetic => Ok(None),
        };
        Some(opened)
    }
}

impl Iterator for Documents {
    type Item = Result<Document, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(doc) = self.next_in_shard() {
                return Some(doc);
            }
            self.open = None;
            match self.open_next()? {
                Ok(Some(doc)) => return Some(Ok(doc)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Reads every document of `files` into memory (small corpora, tests and tools; preparation
/// streams them instead).
#[cfg(test)]
pub fn read_documents(
    files: &[PathBuf],
    kind: CorpusKind,
    column: &str,
) -> Result<Vec<Document>, DataError> {
    let docs = Documents::new(files, kind, column).collect::<Result<Vec<_>, _>>()?;
    if docs.iter().all(|d| d.text.is_empty()) {
        let path = files.first().cloned().unwrap_or_default();
        return Err(DataError::Empty {
            path,
            what: "no text in any document".into(),
        });
    }
    Ok(docs)
}

fn invalid(path: &Path, source: impl Into<Cause>) -> DataError {
    DataError::Invalid {
        path: path.to_path_buf(),
        source: source.into(),
    }
}

/// The bytes of a shard, decompressed as its name says.
fn open_bytes(path: &Path) -> Result<Box<dyn Read + Send>, DataError> {
    let file = fs::File::open(path).map_err(|e| missing(path, e))?;
    let compression = ["txt", "jsonl"]
        .into_iter()
        .find_map(|ext| shard_compression(path, ext))
        .unwrap_or(Compression::None);
    Ok(match compression {
        Compression::None => Box::new(file),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file))),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(file)
                .map_err(|e| invalid(path, crate::error::context("not a zstd stream", e)))?,
        ),
    })
}

fn open_lines(path: &Path) -> Result<Box<dyn BufRead + Send>, DataError> {
    Ok(Box::new(BufReader::with_capacity(
        1 << 20,
        open_bytes(path)?,
    )))
}

fn read_text(path: &Path) -> Result<String, DataError> {
    let mut bytes = Vec::new();
    open_bytes(path)?
        .read_to_end(&mut bytes)
        .map_err(|e| invalid(path, crate::error::context("cannot be read", e)))?;
    String::from_utf8(bytes).map_err(|e| {
        invalid(
            path,
            format!(
                "not UTF-8 text (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// The text field of one JSON line; every other field is skipped without being built.
fn json_line(path: &Path, line: usize, text: &str, field: &str) -> Result<Document, DataError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let found = serde::de::DeserializeSeed::deserialize(TextField(field), &mut de)
        .and_then(|found| de.end().map(|()| found))
        .map_err(|e| invalid(path, crate::error::context(format!("line {line}"), e)))?;
    let text =
        found.ok_or_else(|| invalid(path, format!("line {line}: no string field `{field}`")))?;
    Ok(Document {
        source: format!("{}:{line}", path.display()),
        text,
    })
}

/// Reads one field of a JSON object as a string, skipping the others.
struct TextField<'f>(&'f str);

impl<'de> serde::de::DeserializeSeed<'de> for TextField<'_> {
    type Value = Option<String>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TextField<'_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.0 && found.is_none() {
                found = map.next_value::<Option<String>>()?;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// The row groups of a parquet file as (first row, rows), checking that `column` is text.
fn row_groups(path: &Path, column: &str) -> Result<VecDeque<(usize, usize)>, DataError> {
    use polars::prelude::{ParquetReader, SerReader};
    let file = fs::File::open(path).map_err(|e| missing(path, e))?;
    let mut reader = ParquetReader::new(file);
    let schema = reader
        .schema()
        .map_err(|e| invalid(path, crate::error::context("not a parquet file", e)))?;
    let field = schema
        .get(column)
        .ok_or_else(|| invalid(path, format!("no column `{column}`")))?;
    if !matches!(
        field.dtype(),
        polars::prelude::ArrowDataType::Utf8
            | polars::prelude::ArrowDataType::LargeUtf8
            | polars::prelude::ArrowDataType::Utf8View
    ) {
        return Err(invalid(path, format!("column `{column}` is not text")));
    }
    let metadata = reader.get_metadata().map_err(|e| invalid(path, e))?;
    let mut start = 0;
    Ok(metadata
        .row_groups
        .iter()
        .map(|g| {
            let group = (start, g.num_rows());
            start += g.num_rows();
            group
        })
        .filter(|&(_, len)| len > 0)
        .collect())
}

/// Rows `start..start + len` (one row group) of the text column of a parquet file; null rows
/// are skipped.
fn parquet_rows(
    path: &Path,
    column: &str,
    start: usize,
    len: usize,
) -> Result<VecDeque<Document>, DataError> {
    use polars::prelude::{ParquetReader, SerReader};
    let file = fs::File::open(path).map_err(|e| missing(path, e))?;
    let frame = ParquetReader::new(file)
        .with_columns(Some(vec![column.to_string()]))
        .with_slice(Some((start, len)))
        .finish()
        .map_err(|e| invalid(path, e))?;
    let strings = frame
        .column(column)
        .and_then(|c| c.str())
        .map_err(|_| invalid(path, format!("column `{column}` is not text")))?;
    Ok(strings
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.map(|s| Document {
                source: format!("{}[{}]", path.display(), start + i),
                text: s.to_string(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write_gz(path: &Path, text: &str) {
        let mut e = flate2::write::GzEncoder::new(
            fs::File::create(path).unwrap(),
            flate2::Compression::default(),
        );
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    }

    #[test]
    fn compressed_shards_are_found_and_read_like_plain_ones() {
        let dir = tempfile::tempdir().unwrap();
        let lines = "{\"id\": 1, \"meta\": {\"a\": [1, 2]}, \"text\": \"first\"}\n\n{\"text\": \"sec\\u00f6nd\", \"x\": null}\n";
        fs::write(dir.path().join("a.jsonl"), lines).unwrap();
        write_gz(&dir.path().join("b.jsonl.gz"), lines);
        let zst = zstd::encode_all(lines.as_bytes(), 3).unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/c.jsonl.zst"), zst).unwrap();
        fs::write(dir.path().join("notes.txt"), "not a shard").unwrap();
        let files = corpus_files(dir.path(), CorpusKind::Jsonl).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");
        let docs = read_documents(&files, CorpusKind::Jsonl, "text").unwrap();
        let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(texts, ["first", "secönd"].repeat(3));
        assert!(docs[1].source.ends_with("a.jsonl:3"), "{}", docs[1].source);
        let pattern = dir.path().join("*.jsonl*");
        assert_eq!(corpus_files(&pattern, CorpusKind::Jsonl).unwrap().len(), 2);
    }

    #[test]
    fn a_bad_line_names_its_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        fs::write(&path, "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n").unwrap();
        let err =
            crate::error::chain(&read_documents(&[path], CorpusKind::Jsonl, "text").unwrap_err());
        assert!(
            err.contains("x.jsonl") && err.contains("line 2") && err.contains("`text`"),
            "{err}"
        );
    }

    #[test]
    fn parquet_is_read_by_row_group_and_only_its_text_column() {
        use polars::prelude::*;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.parquet");
        let texts: Vec<String> = (0..25).map(|i| format!("document {i}")).collect();
        let mut frame = df!(
            "id" => (0..25i64).collect::<Vec<_>>(),
            "text" => texts.clone(),
        )
        .unwrap();
        ParquetWriter::new(fs::File::create(&path).unwrap())
            .with_row_group_size(Some(10))
            .finish(&mut frame)
            .unwrap();
        assert!(row_groups(&path, "text").unwrap().len() >= 2);
        let docs =
            read_documents(std::slice::from_ref(&path), CorpusKind::Parquet, "text").unwrap();
        let read: Vec<String> = docs.into_iter().map(|d| d.text).collect();
        assert_eq!(read, texts);
        let err =
            crate::error::chain(&read_documents(&[path], CorpusKind::Parquet, "id").unwrap_err());
        assert!(err.contains("is not text"), "{err}");
    }
}
