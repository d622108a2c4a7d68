//! Teachers of every released family (LLaMA with Llama 3's and linear RoPE scaling, Qwen2,
//! Qwen3, Mistral, Gemma 2, Gemma 3, GPT-NeoX with and without the parallel residual, GPT-2,
//! OLMo 2, and the transformers-4 layouts of released configs): tiny random models built and
//! saved by the real `transformers` (`families_reference.py`, no download) load as pdsweep
//! teachers with their exact parameter counts and transformers' logits to relative 1e-5.
//!
//! Python as in `hf_interop` (`PDSWEEP_PYTHON`; required where `PDSWEEP_REQUIRE_TRANSFORMERS=1`).

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::hf::{PretrainedModel, load_model};
use pdsweep::model::{LanguageModel, TransformerConfig};

use crate::hf_interop::{python, run_script};

/// Largest |Δlogit| allowed, relative to the largest |logit|.
const RELATIVE: f32 = 1e-5;

const VARIANTS: [&str; 14] = [
    "llama-llama3",
    "llama-llama3-legacy",
    "llama-linear",
    "qwen2",
    "qwen3",
    "mistral",
    "gemma2",
    "gemma3",
    "gemma3-legacy",
    "gpt_neox",
    "gpt_neox-sequential",
    "gpt_neox-legacy",
    "gpt2",
    "olmo2",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/families_reference.py")
}

fn reference_logits(folder: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(folder.join("logits.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("logits").unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::F32);
    let data = t
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (t.shape().to_vec(), data)
}

#[test]
fn every_family_loads_with_transformers_logits() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    run_script(&python, &script(), &["make", dir.path().to_str().unwrap()]);
    let device = Device::flex();
    for name in VARIANTS {
        let folder = dir.path().join(name);
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(folder.join("meta.json")).unwrap())
                .unwrap();
        let pretrained = PretrainedModel::read(&folder).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            pretrained.config.family().model_type(),
            meta["family"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            pretrained.config.params().total,
            meta["params"].as_u64().unwrap(),
            "{name}: parameter count ({})",
            pretrained.config.arch.summary()
        );
        let config = TransformerConfig::new(pretrained.shape(), 24);
        let model = load_model(&folder, &config, &pretrained.config_sha256, &device)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let tokens: Vec<i64> = serde_json::from_value::<Vec<Vec<i64>>>(meta["tokens"].clone())
            .unwrap()
            .concat();
        let input = Tensor::<2, Int>::from_data(TensorData::new(tokens, [2, 24]), &device);
        let ours: Vec<f32> = model.logits(input).into_data().try_to_vec().unwrap();
        let (shape, theirs) = reference_logits(&folder);
        assert_eq!(
            shape,
            vec![2, 24, pretrained.config.arch.vocab as usize],
            "{name}"
        );
        let spread = theirs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let diff = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!("{name}: max |Δlogit| = {diff:.2e} of logits up to {spread:.1}");
        assert!(
            spread > 1.0,
            "{name}: the logits are too flat to test anything"
        );
        assert!(
            diff <= RELATIVE * spread,
            "{name}: logits differ by {diff:.3e} (relative {:.2e})",
            diff / spread
        );
    }
}
