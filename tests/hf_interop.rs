//! Interop with the real `transformers` library: tiny random LLaMA models saved with
//! `save_pretrained` (GQA and multi-head, untied and tied, non-default θ and ε, sharded bf16)
//! load as pdsweep teachers with the same logits; a config transformers writes for a model
//! pdsweep cannot run is refused by key; and models pdsweep trained, exported with
//! `pdsweep export --models`, load in transformers with the same logits.
//!
//! Python comes from `PDSWEEP_PYTHON`, else `python3` if it imports transformers and torch.
//! Without one the tests print why and pass, unless `PDSWEEP_REQUIRE_TRANSFORMERS=1` (set by
//! `.ci/run`), which makes a missing Python a failure: CI never skips them silently.

use std::path::{Path, PathBuf};
use std::process::Command;

use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::hf::{PretrainedModel, load_model};
use pdsweep::model::TransformerConfig;

/// Largest difference allowed between pdsweep's and transformers' logits.
const TOLERANCE: f32 = 1e-4;

fn reference_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hf/reference.py")
}

/// A Python with transformers and torch, or `None` (with the reason printed) when there is none
/// and none is required.
fn python() -> Option<PathBuf> {
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
    let out = Command::new(python)
        .arg(reference_script())
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_VERBOSITY", "error")
        .output()
        .expect("python starts");
    assert!(
        out.status.success(),
        "reference.py {args:?} failed:\n{}",
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

fn logits(model: &pdsweep::model::Transformer, tokens: &[Vec<i64>], device: &Device) -> Vec<f32> {
    let (rows, cols) = (tokens.len(), tokens[0].len());
    let flat: Vec<i64> = tokens.iter().flatten().copied().collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(flat, [rows, cols]), device);
    model.forward(input).into_data().try_to_vec().unwrap()
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
            rope_theta: pretrained.config.rope_theta,
            norm_eps: pretrained.config.norm_eps,
            ..TransformerConfig::new(shape, 24)
        };
        let model = load_model(&folder, &config, &pretrained.config_sha256, &device).unwrap();
        let tokens: Vec<Vec<i64>> = serde_json::from_value(meta["tokens"].clone()).unwrap();
        let ours = logits(&model, &tokens, &device);
        let (shape, theirs) = read_tensor(&folder.join("logits.safetensors"), "logits");
        assert_eq!(shape, vec![2, 24, pretrained.config.vocab as usize]);
        let spread = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = max_difference(&ours, &theirs);
        eprintln!("{name}: max |Δlogit| = {diff:.2e} (logits up to {spread:.1})");
        assert!(
            spread > 1.0,
            "{name}: the logits are too flat to test anything"
        );
        assert!(diff <= TOLERANCE, "{name}: logits differ by {diff}");
    }
    let biased = PretrainedModel::read(&dir.path().join("biased")).unwrap_err();
    let message = biased.to_string();
    assert!(
        message.contains("`attention_bias`") && message.contains("config.json"),
        "{message}"
    );
}
