//! Real corpora: the Shakespeare texts in `../shared/data/shakespeare`, a jsonl file and a
//! parquet file written here with polars; byte and BPE tokenizers; the token cache.

use std::path::{Path, PathBuf};

use pdsweep::data::{DataError, prepare};
use pdsweep::plan::DataConfig;
use pdsweep::spec::{CorpusKind, TokenizerKind};

fn config(
    kind: CorpusKind,
    path: &str,
    tokenizer: TokenizerKind,
    vocab: u64,
    val: u64,
) -> DataConfig {
    DataConfig {
        corpus: kind,
        path: Some(path.into()),
        text_column: None,
        tokenizer: Some(tokenizer),
        tokenizer_file: None,
        vocab,
        val_tokens: val,
        corpus_seed: 0,
        context: 64,
        batch_seqs: 4,
        seed: 1,
    }
}

fn shakespeare() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/shakespeare");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} is not there (it ships beside the repository)",
            dir.display()
        );
        None
    }
}

#[test]
fn shakespeare_is_tokenised_once_and_cached() {
    let Some(dir) = shakespeare() else { return };
    let cache = tempfile::tempdir().unwrap();
    let cfg = config(
        CorpusKind::Text,
        dir.to_str().unwrap(),
        TokenizerKind::Byte,
        256,
        100_000,
    );
    let first = prepare(&cfg, Path::new("/"), cache.path(), 1000).unwrap();
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let files = std::fs::read_dir(&dir).unwrap().count() as u64;
    assert_eq!(
        first.train.len() as u64 + first.val.len() as u64,
        bytes + 2 * files,
        "every byte plus a blank line per play"
    );
    assert_eq!(first.val.len(), 100_000);
    assert_eq!(first.info.val_bytes_per_token, 1.0);
    assert!(
        first.info.unigram_entropy_nats > 2.5 && first.info.unigram_entropy_nats < 3.5,
        "{}",
        first.info.unigram_entropy_nats
    );
    let cached: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let again = prepare(&cfg, Path::new("/"), cache.path(), 1000).unwrap();
    assert_eq!(again.val.slice(0, 50), first.val.slice(0, 50));
    // flip one token byte: the cache is refused with its path, never used
    let mut bytes = std::fs::read(&cached[0]).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x01;
    std::fs::write(&cached[0], bytes).unwrap();
    let err = prepare(&cfg, Path::new("/"), cache.path(), 1000).unwrap_err();
    assert!(matches!(err, DataError::CorruptCache { .. }), "{err}");
    assert!(err.to_string().contains("tokens-"), "{err}");
}

#[test]
fn bpe_on_shakespeare_compresses_and_reports_bytes_per_token() {
    let Some(dir) = shakespeare() else { return };
    let one_play = dir.join("macbeth_gut.txt");
    let cache = tempfile::tempdir().unwrap();
    let cfg = config(
        CorpusKind::Text,
        one_play.to_str().unwrap(),
        TokenizerKind::Bpe,
        512,
        5_000,
    );
    let data = prepare(&cfg, Path::new("/"), cache.path(), 1000).unwrap();
    let total = (data.train.len() + data.val.len()) as f64;
    assert!(
        total < 103_427.0 * 0.7,
        "512 BPE tokens compress English well below a byte per token: {total}"
    );
    assert!(
        data.info.val_bytes_per_token > 1.5,
        "{}",
        data.info.val_bytes_per_token
    );
    assert!(data.val.slice(0, 5000).iter().all(|&t| t < 512));
    assert!(std::fs::read_dir(cache.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("tokenizer-")
    }));
}

#[test]
fn jsonl_reads_the_text_field_and_names_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..400)
        .map(|i| format!("{{\"id\": {i}, \"body\": \"document number {i} says hello\"}}"))
        .collect();
    std::fs::write(dir.path().join("a.jsonl"), lines.join("\n")).unwrap();
    let mut cfg = config(
        CorpusKind::Jsonl,
        "a.jsonl",
        TokenizerKind::Byte,
        256,
        1_000,
    );
    cfg.text_column = Some("body".into());
    let data = prepare(&cfg, dir.path(), &dir.path().join("cache"), 100).unwrap();
    assert!(data.train.len() > 10_000);
    std::fs::write(
        dir.path().join("b.jsonl"),
        "{\"body\": \"fine\"}\n{\"other\": 1}\n",
    )
    .unwrap();
    let cfg = DataConfig {
        path: Some("b.jsonl".into()),
        ..cfg
    };
    let err = prepare(&cfg, dir.path(), &dir.path().join("cache"), 100)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("b.jsonl") && err.contains("line 2") && err.contains("`body`"),
        "{err}"
    );
}

#[test]
fn parquet_written_with_polars_is_read_back() {
    use polars::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<String> = (0..300)
        .map(|i| format!("row {i}: the quick brown fox jumps over the lazy dog"))
        .collect();
    let mut frame = df!("id" => (0..300).collect::<Vec<i32>>(), "text" => texts.clone()).unwrap();
    let file = std::fs::File::create(dir.path().join("c.parquet")).unwrap();
    ParquetWriter::new(file).finish(&mut frame).unwrap();
    let cfg = config(
        CorpusKind::Parquet,
        "c.parquet",
        TokenizerKind::Byte,
        256,
        1_000,
    );
    let data = prepare(&cfg, dir.path(), &dir.path().join("cache"), 100).unwrap();
    let expected: usize = texts.iter().map(|t| t.len() + 2).sum();
    assert_eq!(data.train.len() + data.val.len(), expected);
    let first: Vec<u8> = data
        .train
        .slice(0, 6)
        .into_iter()
        .map(|t| t as u8)
        .collect();
    assert_eq!(first, b"row 0:");
    let cfg = DataConfig {
        text_column: Some("missing".into()),
        ..cfg
    };
    let err = prepare(&cfg, dir.path(), &dir.path().join("cache2"), 100)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("c.parquet") && err.contains("`missing`"),
        "{err}"
    );
}

#[test]
fn a_missing_corpus_names_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        CorpusKind::Text,
        "no/such/folder",
        TokenizerKind::Byte,
        256,
        1_000,
    );
    let err = prepare(&cfg, dir.path(), dir.path(), 100)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no/such/folder") && err.contains("hint"),
        "{err}"
    );
}
