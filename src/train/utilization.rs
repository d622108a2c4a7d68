//! Model FLOPs and model FLOPs utilisation (MFU): what a step of this shape computes, and which
//! share of the accelerator's peak a measured throughput is.
//!
//! MFU follows PaLM (Chowdhery et al. 2022, appendix B), as nanoGPT's `estimate_mfu` and llm.c
//! do: per trained token 6·N_matmul + 12·L·d·T, where N_matmul counts every weight that enters
//! a matrix product (the non-embedding weights and the output head, tied or not) and the second
//! term is attention's two T×T products (causal masking not subtracted). A forward pass alone is
//! a third of that. The peak is the accelerator's dense bf16/f16 tensor-core peak for every
//! precision, so f32 and bf16 rows of a table compare against one yardstick. (The plan's cost
//! model, 6·N·D, is the scaling-law convention and leaves the head and attention out.)

use crate::model::ModelShape;

/// Training FLOPs per token of `shape` at sequence length `context` (forward and backward).
pub(crate) fn train_flops_per_token(shape: &ModelShape, context: u64) -> f64 {
    3.0 * forward_flops_per_token(shape, context)
}

/// Forward-pass FLOPs per token of `shape` at sequence length `context`.
pub(crate) fn forward_flops_per_token(shape: &ModelShape, context: u64) -> f64 {
    let params = shape.params();
    let matmul = params.non_embedding as f64 + (shape.vocab * shape.d_model) as f64;
    2.0 * matmul + 4.0 * (shape.n_layers * shape.d_model * context) as f64
}

/// Dense bf16/f16 tensor peaks (FLOP/s, no sparsity) of accelerators by a part of their name,
/// most specific first (vendors' data sheets, SXM parts unless the name says otherwise).
const PEAKS: [(&str, f64); 8] = [
    ("H200", 989.4e12),
    ("H100 PCIe", 756.0e12),
    ("H100", 989.4e12),
    ("A100", 312.0e12),
    ("L40S", 362.1e12),
    ("L4", 121.0e12),
    ("RTX 4090", 165.2e12),
    ("A10", 125.0e12),
];

/// The environment variable that sets the peak (FLOP/s) for an accelerator not in the table.
pub(crate) const PEAK_ENV: &str = "PDSWEEP_PEAK_FLOPS";

/// The dense bf16 peak of the device named `device`: `PDSWEEP_PEAK_FLOPS` when set to a
/// positive number, else the table above, else `None` (MFU is then not reported).
pub(crate) fn peak_flops_per_s(device: &str) -> Option<f64> {
    if let Some(v) = std::env::var(PEAK_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
    {
        return Some(v);
    }
    PEAKS
        .iter()
        .find(|(part, _)| device.contains(part))
        .map(|&(_, peak)| peak)
}

/// Throughput and utilisation of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Utilization {
    /// Model FLOPs per token (training or forward, as measured).
    pub flops_per_token: f64,
    /// Model FLOP/s achieved.
    pub flops_per_s: f64,
    /// The peak compared against, if known.
    pub peak_flops_per_s: Option<f64>,
    /// `flops_per_s / peak`, if the peak is known.
    pub mfu: Option<f64>,
}

impl Utilization {
    /// Utilisation of `tokens_per_s` at `flops_per_token` on the device named `device`.
    pub fn of(tokens_per_s: f64, flops_per_token: f64, device: &str) -> Utilization {
        let flops_per_s = tokens_per_s * flops_per_token;
        let peak = peak_flops_per_s(device);
        Utilization {
            flops_per_token,
            flops_per_s,
            peak_flops_per_s: peak,
            mfu: peak.map(|p| flops_per_s / p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpt2_small() -> ModelShape {
        ModelShape {
            d_model: 768,
            n_layers: 12,
            n_heads: 12,
            n_kv_heads: 12,
            d_ff: 2048,
            vocab: 50257,
            tie_embeddings: true,
        }
    }

    #[test]
    fn gpt2_small_flops_match_the_palm_formula_by_hand() {
        let s = gpt2_small();
        // non-embedding: 12·(4·768² + 3·768·2048 + 2·768) + 768 = 84,953,856; head 38,597,376
        assert_eq!(s.params().non_embedding, 84_953_856);
        let by_hand = 6.0 * (84_953_856.0 + 50257.0 * 768.0) + 12.0 * 12.0 * 768.0 * 1024.0;
        assert_eq!(train_flops_per_token(&s, 1024), by_hand);
        assert!((by_hand / 1e6 - 855.0).abs() < 1.0, "{by_hand}"); // ≈ 855 MFLOP per token
    }

    #[test]
    fn peaks_prefer_the_specific_name_and_mfu_follows() {
        assert_eq!(peak_flops_per_s("NVIDIA H200"), Some(989.4e12));
        assert_eq!(peak_flops_per_s("NVIDIA H100 PCIe"), Some(756.0e12));
        assert_eq!(peak_flops_per_s("NVIDIA L40S"), Some(362.1e12));
        assert_eq!(peak_flops_per_s("llvmpipe (LLVM 15.0.6, 256 bits)"), None);
        let u = Utilization::of(100_000.0, 1e9, "NVIDIA H200");
        assert!((u.mfu.unwrap() - 1e14 / 989.4e12).abs() < 1e-12);
        assert_eq!(Utilization::of(1.0, 1.0, "cpu").mfu, None);
    }
}
