//! Interop with the real `transformers` library: tiny random LLaMA models saved with
//! `save_pretrained` (GQA and multi-head, untied and tied, non-default θ and ε, sharded bf16)
//! load as pdsweep teachers with the same logits; a LLaMA with biases reads as a released
//! decoder rather than pdsweep's own transformer; and models pdsweep trained, exported with
//! `pdsweep export --models`, load in transformers with the same logits.
//!
//! Python comes from `PDSWEEP_PYTHON`, else `python3` if it imports transformers and torch.
//! Without one the tests print why and pass, unless `PDSWEEP_REQUIRE_TRANSFORMERS=1` (set by
//! `.ci/run`), which makes a missing Python a failure: CI never skips them silently.

use crate::hf_fixture as fixture;

use std::path::{Path, PathBuf};
use std::process::Command;

use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::hf::{PretrainedModel, load_model};
use pdsweep::model::{LanguageModel, TransformerConfig};
use pdsweep::plan::RunConfig;
use pdsweep::store::SweepDb;
use pdsweep::train::checkpoint;

/// Largest difference allowed between pdsweep's and transformers' logits.
const TOLERANCE: f32 = 1e-4;

fn reference_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/hf_reference.py")
}

/// A Python with transformers and torch, or `None` (with the reason printed) when there is none
/// and none is required.
pub(crate) fn python() -> Option<PathBuf> {
    let required = std::env::var("PDSWEEP_REQUIRE_TRANSFORMERS").is_ok_and(|v| v == "1");
    let candidates: Vec<PathBuf> = match std::env::var_os("PDSWEEP_PYTHON") {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![PathBuf::from("python3")],
    };
    for python in &candidates {
        let ok = Command::new(python)
            .args(["-c", "import transformers, torch, safetensors"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python.clone());
        }
    }
    let reason =
        format!("no Python with transformers and torch (tried {candidates:?}; set PDSWEEP_PYTHON)");
    assert!(!required, "PDSWEEP_REQUIRE_TRANSFORMERS=1 but {reason}");
    eprintln!("skipped: {reason}");
    None
}

fn run_python(python: &Path, args: &[&str]) {
    run_script(python, &reference_script(), args);
}

/// Runs the Python `script` with `args` offline (no Hugging Face Hub), failing the test with
/// its standard error when it fails.
pub(crate) fn run_script(python: &Path, script: &Path, args: &[&str]) {
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_VERBOSITY", "error")
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A tensor of `file` as f32 values with its shape.
fn read_tensor(file: &Path, name: &str) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(file).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor(name).unwrap();
    let data = match t.dtype() {
        safetensors::Dtype::F32 => t
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        safetensors::Dtype::I64 => t
            .data()
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
            .collect(),
        other => panic!("unexpected dtype {other:?}"),
    };
    (t.shape().to_vec(), data)
}

fn logits(model: &dyn LanguageModel, tokens: &[Vec<i64>], device: &Device) -> Vec<f32> {
    let (rows, cols) = (tokens.len(), tokens[0].len());
    let flat: Vec<i64> = tokens.iter().flatten().copied().collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(flat, [rows, cols]), device);
    model.logits(input).into_data().try_to_vec().unwrap()
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn transformers_llamas_load_as_teachers_with_equal_logits() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    run_python(&python, &["make", dir.path().to_str().unwrap()]);
    let device = Device::flex();
    for name in ["gqa-untied", "tied-mha", "sharded-bf16"] {
        let folder = dir.path().join(name);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(folder.join("meta.json")).unwrap())
                .unwrap();
        let pretrained = PretrainedModel::read(&folder).unwrap();
        let shape = pretrained.shape();
        shape.validate().unwrap();
        assert_eq!(
            shape.params().total,
            meta["params"].as_u64().unwrap(),
            "{name}: parameter count"
        );
        let config = TransformerConfig {
            rope_theta: pretrained.config.as_llama().unwrap().rope_theta,
            norm_eps: pretrained.config.as_llama().unwrap().norm_eps,
            ..TransformerConfig::new(shape, 24)
        };
        let model = load_model(&folder, &config, &pretrained.config_sha256, &device).unwrap();
        let tokens: Vec<Vec<i64>> = serde_json::from_value(meta["tokens"].clone()).unwrap();
        let ours = logits(&model, &tokens, &device);
        let (shape, theirs) = read_tensor(&folder.join("logits.safetensors"), "logits");
        assert_eq!(shape, vec![2, 24, pretrained.config.arch.vocab as usize]);
        let spread = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = max_difference(&ours, &theirs);
        eprintln!("{name}: max |Δlogit| = {diff:.2e} (logits up to {spread:.1})");
        assert!(
            spread > 1.0,
            "{name}: the logits are too flat to test anything"
        );
        assert!(diff <= TOLERANCE, "{name}: logits differ by {diff}");
    }
    // a LLaMA with biases is not pdsweep's own transformer: the released decoder runs it
    // (tests/it/families.rs checks its logits)
    let biased = PretrainedModel::read(&dir.path().join("biased")).unwrap();
    assert!(biased.config.as_llama().is_none());
    assert!(biased.config.arch.qkv_bias && biased.config.arch.o_bias);
}

#[test]
fn models_pdsweep_trained_and_exported_load_in_transformers_with_equal_logits() {
    let Some(python) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture::corpus_and_tokenizer(dir);
    fixture::train_and_export(dir);
    let vocab = pdsweep::hf::TokenizerFile::read(&dir.join("tok/tokenizer.json"))
        .unwrap()
        .vocab as i64;
    let tokens: Vec<Vec<i64>> = (0..2)
        .map(|r| (0..24).map(|i| (7 * (r * 24 + i) + 3) % vocab).collect())
        .collect();
    std::fs::write(
        dir.join("models/batch.json"),
        serde_json::to_string(&tokens).unwrap(),
    )
    .unwrap();
    let db = SweepDb::open(&dir.join("results/teach/sweep.db")).unwrap();
    let runs: Vec<_> = db
        .runs()
        .unwrap()
        .into_iter()
        .filter(|r| dir.join("models").join(&r.name).is_dir())
        .collect();
    assert_eq!(runs.len(), 2, "the teacher and the student are exported");
    let folders: Vec<String> = runs
        .iter()
        .map(|r| dir.join("models").join(&r.name).display().to_string())
        .collect();
    let mut args = vec!["logits"];
    args.extend(folders.iter().map(String::as_str));
    run_python(&python, &args);
    let device = Device::flex();
    for run in &runs {
        let folder = dir.join("models").join(&run.name);
        let config: RunConfig = serde_json::from_str(&run.config_json).unwrap();
        let ckpt = dir.join(format!("results/teach/checkpoints/{}.ckpt", run.id));
        let loaded = checkpoint::load(&ckpt, run.id.as_str()).unwrap().unwrap();
        let model = loaded.model(config.init_model(&device)).unwrap();
        let ours = logits(&model, &tokens, &device);
        let reference = folder.join("reference_logits.safetensors");
        let (shape, theirs) = read_tensor(&reference, "logits");
        assert_eq!(shape, vec![2, 24, config.model.shape.vocab as usize]);
        let diff = max_difference(&ours, &theirs);
        eprintln!("{}: max |Δlogit| = {diff:.2e}", run.name);
        assert!(diff <= TOLERANCE, "{}: logits differ by {diff}", run.name);
        // transformers reads the tokenizer as pdsweep does
        let (_, ids) = read_tensor(&reference, "tokenizer_ids");
        let mut ours = Vec::new();
        pdsweep::data::Tokenizer::from_file(&folder.join("tokenizer.json"))
            .unwrap()
            .encode_plain("the quick brown fox", &mut ours)
            .unwrap();
        let ours: Vec<f32> = ours.iter().map(|&i| i as f32).collect();
        assert_eq!(ours, ids, "{}: token ids", run.name);
    }
    let card = std::fs::read_to_string(dir.join("models/student-20K-from-t/README.md")).unwrap();
    for needle in [
        "library_name: transformers",
        "teacher-t",
        "Held-out results",
        "\"distill\"",
    ] {
        assert!(card.contains(needle), "`{needle}` not in the model card");
    }
}
