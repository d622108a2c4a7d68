//! Real corpora: the Shakespeare texts in `../shared/data/shakespeare`, a jsonl file and a
//! parquet file written here with polars; byte and BPE tokenizers; the token cache.

use std::path::{Path, PathBuf};

use pdsweep::data::DataConfig;
use pdsweep::data::{DataError, prepare};
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
        separator: Default::default(),
        val_tokens: val,
        corpus_seed: 0,
        synthetic_sources: None,
        synthetic_copies: None,
        context: 64,
        batch_seqs: 4,
        seed: 1,
        val_path: None,
        split: 2,
        follow: None,
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
        "every byte plus a blank line per play (no play is a duplicate)"
    );
    assert_eq!(first.val.len(), 100_000);
    assert_eq!(first.info.files, files);
    assert!(first.info.duplicate_groups.is_empty());
    assert!(
        first.info.val_split.contains("chosen by content hash"),
        "{}",
        first.info.val_split
    );
    // Plays share a few stock passages (about 0.05 % of 64-byte windows); far below the 1 %
    // at which `plan` warns.
    let overlap = first.info.val_overlap.unwrap();
    assert!(overlap < 0.005, "{overlap}");
    assert_eq!(first.info.val_bytes_per_token, 1.0);
    assert!(
        first.info.unigram_entropy_nats > 2.5 && first.info.unigram_entropy_nats < 3.5,
        "{}",
        first.info.unigram_entropy_nats
    );
    let cached: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let again = prepare(&cfg, Path::new("/"), cache.path(), 1000).unwrap();
    assert_eq!(again.val.slice(0, 50), first.val.slice(0, 50));
    // flip one token byte: the cache is refused with its path, never used
    let mut bytes = std::fs::read(&cached[0]).unwrap();
    let at = bytes.len() / 2;
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
    let err = pdsweep::error::chain(
        &prepare(&cfg, dir.path(), &dir.path().join("cache"), 100).unwrap_err(),
    );
    assert!(
        err.contains("b.jsonl") && err.contains("line 2") && err.contains("`body`"),
        "{err}"
    );
}

/// The same documents as one JSON-lines file, as shards compressed three ways (gzip, zstd,
/// none) in nested folders, as parquet files of several row groups with extra columns, and
/// (as text) as plain and compressed `.txt` files: every layout prepares to the same tokens.
#[test]
fn sharded_and_compressed_corpora_prepare_to_the_same_tokens() {
    use polars::prelude::*;
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let texts: Vec<String> = (0..240)
        .map(|i| format!("Document {i}: the quick brown fox jumps over {} lazy dogs.\nLine two of {i}, é ü 日本.", i * 7 % 13))
        .collect();
    let line = |t: &String| {
        format!(
            "{{\"id\": 1, \"meta\": {{\"x\": [1, 2]}}, \"text\": {}}}\n",
            serde_json::to_string(t).unwrap()
        )
    };
    let jsonl = |range: std::ops::Range<usize>| texts[range].iter().map(line).collect::<String>();
    std::fs::write(root.join("one.jsonl"), jsonl(0..240)).unwrap();
    std::fs::create_dir_all(root.join("shards/b")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(root.join("shards/a.jsonl.gz")).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(jsonl(0..100).as_bytes()).unwrap();
    gz.finish().unwrap();
    std::fs::write(
        root.join("shards/b/b.jsonl.zst"),
        zstd::encode_all(jsonl(100..200).as_bytes(), 3).unwrap(),
    )
    .unwrap();
    std::fs::write(root.join("shards/c.jsonl"), jsonl(200..240)).unwrap();
    std::fs::create_dir_all(root.join("parquet")).unwrap();
    for (name, range) in [("p1", 0..150), ("p2", 150..240)] {
        let n = range.len();
        let mut frame = df!(
            "id" => (0..n as i64).collect::<Vec<_>>(),
            "text" => texts[range].to_vec(),
            "url" => vec!["https://example.org"; n],
        )
        .unwrap();
        ParquetWriter::new(
            std::fs::File::create(root.join(format!("parquet/{name}.parquet"))).unwrap(),
        )
        .with_row_group_size(Some(40))
        .finish(&mut frame)
        .unwrap();
    }
    std::fs::create_dir_all(root.join("txt")).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let path = root.join(format!("txt/{i:03}.txt"));
        match i % 3 {
            0 => std::fs::write(path, t).unwrap(),
            1 => std::fs::write(
                path.with_extension("txt.zst"),
                zstd::encode_all(t.as_bytes(), 1).unwrap(),
            )
            .unwrap(),
            _ => {
                let mut gz = flate2::write::GzEncoder::new(
                    std::fs::File::create(path.with_extension("txt.gz")).unwrap(),
                    flate2::Compression::fast(),
                );
                gz.write_all(t.as_bytes()).unwrap();
                gz.finish().unwrap();
            }
        }
    }
    let tokens = |kind, path: &str| {
        let cfg = config(kind, path, TokenizerKind::Bpe, 300, 1_000);
        let data = prepare(
            &cfg,
            root,
            &root.join(format!("cache-{}", path.replace(['/', '*'], "_"))),
            100,
        )
        .unwrap();
        (
            data.train.slice(0, data.train.len()),
            data.val.slice(0, data.val.len()),
            data.info.documents,
        )
    };
    let one = tokens(CorpusKind::Jsonl, "one.jsonl");
    assert_eq!(one.2, 240);
    assert!(
        one.0.len() + one.1.len() < texts.iter().map(|t| t.len()).sum::<usize>(),
        "BPE merges"
    );
    assert_eq!(
        tokens(CorpusKind::Jsonl, "shards"),
        one,
        "gzip, zstd and plain shards"
    );
    assert_eq!(
        tokens(CorpusKind::Jsonl, "shards/**/*.jsonl*"),
        one,
        "a glob"
    );
    assert_eq!(
        tokens(CorpusKind::Parquet, "parquet"),
        one,
        "parquet row groups"
    );
    assert_eq!(
        tokens(CorpusKind::Text, "txt"),
        one,
        "text files, compressed or not"
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
    let err = pdsweep::error::chain(
        &prepare(&cfg, dir.path(), &dir.path().join("cache2"), 100).unwrap_err(),
    );
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
        err.contains("`[corpus] path` = `no/such/folder`")
            && err.contains(&dir.path().join("no/such/folder").display().to_string())
            && err.contains("hint"),
        "{err}"
    );
}

/// Byte-identical files were both read, and the held-out tail fell inside one whose copy was in
/// training: the held-out loss measured memorised text. Copies are now dropped and held-out text
/// never occurs in training (checked by hashing every 64-byte window).
#[test]
fn a_duplicated_file_never_puts_held_out_text_in_training() {
    let Some(shakespeare) = shakespeare() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("books");
    std::fs::create_dir_all(corpus.join("copies")).unwrap();
    let plays = [
        "macbeth_gut.txt",
        "hamlet_gut.txt",
        "tempest_gut.txt",
        "othello_gut.txt",
    ];
    for play in plays {
        std::fs::copy(shakespeare.join(play), corpus.join(play)).unwrap();
    }
    for play in plays {
        std::fs::copy(shakespeare.join(play), corpus.join("copies").join(play)).unwrap();
    }
    for val in [20_000, 60_000, 100_000] {
        let cfg = config(CorpusKind::Text, "books", TokenizerKind::Byte, 256, val);
        let data = prepare(&cfg, dir.path(), &dir.path().join("cache"), 100).unwrap();
        assert_eq!(data.info.documents, 8);
        assert_eq!(
            data.info.duplicate_groups.len(),
            4,
            "{:?}",
            data.info.duplicate_groups
        );
        let train = data.train.slice(0, data.train.len());
        let held = data.val.slice(0, data.val.len());
        assert_eq!(held.len() as u64, val);
        let windows = |t: &[u32]| -> std::collections::HashSet<Vec<u32>> {
            t.windows(64).map(<[u32]>::to_vec).collect()
        };
        let train_windows = windows(&train);
        let shared = windows(&held)
            .iter()
            .filter(|w| train_windows.contains(*w))
            .count();
        assert_eq!(
            shared, 0,
            "val {val}: {shared} held-out windows occur in training"
        );
        assert_eq!(data.info.val_overlap, Some(0.0));
    }
}

#[test]
fn a_separate_validation_folder_is_the_held_out_split() {
    let Some(shakespeare) = shakespeare() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("train")).unwrap();
    std::fs::create_dir_all(dir.path().join("val")).unwrap();
    for play in ["macbeth_gut.txt", "hamlet_gut.txt"] {
        std::fs::copy(shakespeare.join(play), dir.path().join("train").join(play)).unwrap();
    }
    std::fs::copy(
        shakespeare.join("othello_gut.txt"),
        dir.path().join("val/othello_gut.txt"),
    )
    .unwrap();
    let mut cfg = config(CorpusKind::Text, "train", TokenizerKind::Byte, 256, 30_000);
    cfg.val_path = Some("val".into());
    let data = prepare(&cfg, dir.path(), &dir.path().join("cache"), 100).unwrap();
    let othello = std::fs::read(shakespeare.join("othello_gut.txt")).unwrap();
    let held: Vec<u8> = data
        .val
        .slice(0, 100)
        .into_iter()
        .map(|t| t as u8)
        .collect();
    assert_eq!(held, othello[..100]);
    assert_eq!(data.val.len(), 30_000);
    assert!(
        data.info.val_split.contains("validation set"),
        "{}",
        data.info.val_split
    );
    let macbeth = std::fs::metadata(shakespeare.join("macbeth_gut.txt"))
        .unwrap()
        .len();
    let hamlet = std::fs::metadata(shakespeare.join("hamlet_gut.txt"))
        .unwrap()
        .len();
    assert_eq!(data.train.len() as u64, macbeth + hamlet + 4);
}

/// Re-provisioning the same texts (a copy, new modification times) makes a new token cache
/// but keeps the corpus's identity, so logit stores made from the old one stay valid; other
/// text gets another identity.
#[test]
fn touched_texts_keep_their_identity_and_changed_texts_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("texts");
    std::fs::create_dir_all(&corpus).unwrap();
    let text = |seed: u64| -> String {
        (0..4000)
            .map(|i| format!("word{} ", (i * 7919 + seed * 13) % 97))
            .collect()
    };
    for (name, seed) in [("a.txt", 1), ("b.txt", 2), ("c.txt", 3)] {
        std::fs::write(corpus.join(name), text(seed)).unwrap();
    }
    let cfg = config(CorpusKind::Text, "texts", TokenizerKind::Byte, 256, 2000);
    let cache = dir.path().join("cache");
    let first = prepare(&cfg, dir.path(), &cache, 100).unwrap().info.key;
    let touch = |name: &str, secs: u64| {
        let f = std::fs::File::options()
            .write(true)
            .open(corpus.join(name))
            .unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    };
    touch("a.txt", 1_000_000);
    let again = prepare(&cfg, dir.path(), &cache, 100).unwrap();
    let caches = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("tokens-") && name.ends_with(".bin")
        })
        .count();
    assert_eq!(caches, 2, "a touched file is noticed (a new cache entry)");
    assert_eq!(again.info.key, first, "but the tokens are the same corpus");
    // a second open reads the recorded alias, and still agrees
    assert_eq!(
        prepare(&cfg, dir.path(), &cache, 100).unwrap().info.key,
        first
    );

    std::fs::write(corpus.join("b.txt"), text(5)).unwrap();
    let changed = prepare(&cfg, dir.path(), &cache, 100).unwrap().info.key;
    assert_ne!(changed, first, "other text is another corpus");
}

/// `plan --dry-run`'s estimate of a corpus (its files' sizes and a sample of four of them)
/// against the tokens preparing it gives: within 2 % for bytes, within 10 % for a BPE
/// tokenizer trained on the sample instead of the whole corpus.
#[test]
fn a_sampled_estimate_is_close_to_the_prepared_corpus() {
    let Some(dir) = shakespeare() else { return };
    for (tokenizer, vocab, tolerance) in [
        (TokenizerKind::Byte, 256, 0.02),
        (TokenizerKind::Bpe, 1024, 0.10),
    ] {
        let cfg = config(
            CorpusKind::Text,
            dir.to_str().unwrap(),
            tokenizer,
            vocab,
            20_000,
        );
        let (estimate, _) = pdsweep::data::estimate(&cfg, Path::new("/")).unwrap();
        assert_eq!(estimate.files, 42);
        assert_eq!(estimate.sample_files, 4);
        let cache = tempfile::tempdir().unwrap();
        let data = prepare(&cfg, Path::new("/"), cache.path(), 0).unwrap();
        let prepared = (data.train.len() + data.val.len()) as f64;
        let error = (estimate.tokens() as f64 - prepared).abs() / prepared;
        eprintln!(
            "{tokenizer:?}: estimated {} tokens, prepared {prepared}",
            estimate.tokens()
        );
        assert!(
            error < tolerance,
            "{tokenizer:?}: {error:.3} off ({} vs {prepared})",
            estimate.tokens()
        );
        let info = estimate.info(&cfg, &dir);
        assert_eq!(info.val_tokens, 20_000);
        assert!(
            info.description.contains("estimated, not read"),
            "{}",
            info.description
        );
    }
}

/// Held-out documents are the lowest by content hash, so adding a shard never moves a training
/// document into the held-out split: a model trained on the corpus before the shard came is
/// never scored on its own training text after. (Added documents that hash below the cut
/// enter the held-out split and push the highest-hashed held-out ones back into training.)
#[test]
fn adding_a_shard_never_holds_out_a_training_document() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("corpus")).unwrap();
    let shard = |name: &str, from: usize, to: usize| -> Vec<String> {
        let mut hashes = Vec::new();
        let mut lines = String::new();
        for i in from..to {
            let text = format!(
                "document {i}: {}",
                "the student reads the teacher. ".repeat(3 + i % 7)
            );
            hashes.push(pdsweep::digest::hex(&Sha256::digest(text.as_bytes())));
            lines.push_str(&serde_json::json!({ "text": text }).to_string());
            lines.push('\n');
        }
        std::fs::write(dir.path().join("corpus").join(name), lines).unwrap();
        hashes
    };
    let split = || {
        let cfg = config(CorpusKind::Jsonl, "corpus", TokenizerKind::Byte, 256, 3_000);
        let cache = dir.path().join("cache");
        prepare(&cfg, dir.path(), &cache, 0).unwrap();
        pdsweep::data::split_record(&cfg, dir.path(), &cache).unwrap()
    };
    shard("a.jsonl", 0, 200);
    let before = split();
    let added = shard("b.jsonl", 200, 300);
    let after = split();
    let whole: std::collections::HashSet<&String> = before.held.iter().chain(&added).collect();
    for h in &after.held {
        assert!(
            whole.contains(h),
            "{h} was training text before the shard was added"
        );
    }
    if let Some(b) = &after.boundary {
        let was_cut = before.boundary.as_ref().is_some_and(|o| o.hash == b.hash);
        assert!(
            whole.contains(&b.hash) || was_cut,
            "{} was training text before",
            b.hash
        );
    }
    assert!(
        after.held.iter().any(|h| added.contains(h)),
        "some added documents are held out"
    );
    assert!(
        after.held.iter().any(|h| before.held.contains(h)),
        "most held-out documents stay"
    );
}
