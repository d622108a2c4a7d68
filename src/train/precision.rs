//! Mixed precision: which float dtype a training step computes in, whether the device can, and
//! the dynamic loss scale that keeps f16 gradients from underflowing.
//!
//! burn 0.22 has no autocast. What it has is a per-tensor dtype, a differentiable
//! `Tensor::cast` (its gradient is cast back to the input's dtype) and
//! `Device::supports_dtype`. So the model keeps f32 parameters and casts them to the compute
//! dtype at each matrix product (`crate::model::Transformer::forward_in`); the gradients that
//! reach the parameters, AdamW's moments and the update are f32 ("master weights").
//!
//! The device decides (`check_supported` asks `Device::supports_dtype`). burn 0.22's cuda
//! backend computes in bf16 and f16 (cubecl-cpp registers both for every CUDA device; on GPUs
//! before compute capability 8.0 bf16 kernels would not compile); its wgpu backend stores bf16
//! on Vulkan but cannot compute in it, so there bf16 is refused with that reason.

use burn::tensor::{Device, FloatDType};

use crate::spec::{Backend, Precision, TeacherPrecision};

/// The burn dtype of the matrix products for `precision`.
pub fn compute_dtype(precision: Precision) -> FloatDType {
    match precision {
        Precision::F32 => FloatDType::F32,
        Precision::Bf16 => FloatDType::BF16,
        Precision::F16 => FloatDType::F16,
    }
}

/// The device cannot compute in the requested precision.
#[derive(Debug, thiserror::Error)]
#[error(
    "`[train] precision = \"{precision}\"` is not supported by backend `{backend}` on this device{why}\n\nhint: {hint}"
)]
pub struct UnsupportedPrecision {
    /// The precision asked for.
    pub precision: Precision,
    /// The sweep's backend.
    pub backend: Backend,
    /// What is known about why (starts with `: ` when not empty).
    pub why: String,
    /// What to do instead.
    pub hint: String,
}

/// Checks that `device` can compute in `precision` (f32 always can).
pub(crate) fn check_supported(
    device: &Device,
    backend: Backend,
    precision: Precision,
) -> Result<(), UnsupportedPrecision> {
    if precision.is_f32() || device.supports_dtype(compute_dtype(precision)) {
        return Ok(());
    }
    let (why, hint) = refusal(backend, precision);
    Err(UnsupportedPrecision {
        precision,
        backend,
        why: why.into(),
        hint: hint.into(),
    })
}

/// Why `backend` may refuse `precision`, and what to do instead (the message's two halves).
fn refusal(backend: Backend, precision: Precision) -> (&'static str, &'static str) {
    match (backend, precision) {
        (Backend::Wgpu, Precision::Bf16) => (
            ": burn 0.22's wgpu backend can store bf16 on Vulkan but not compute in it (WGSL has no bf16 at all)",
            "use `precision = \"f16\"` on wgpu (same tensor-core peak on NVIDIA GPUs), or bf16 with `backend = \"cuda\"`",
        ),
        (Backend::Wgpu, Precision::F16) => (
            ": the adapter lacks 16-bit float shaders (Vulkan `shaderFloat16` and 16-bit storage)",
            "use `precision = \"f32\"`",
        ),
        // burn 0.22's cuda backend registers both for every device: a refusal here would be a
        // newer burn being stricter about old GPUs.
        (Backend::Cuda, _) => (
            ": this GPU's CUDA kernels cannot compute in it (bf16 needs compute capability 8.0, Ampere, or newer)",
            "use `precision = \"f16\"` or `\"f32\"`",
        ),
        _ => ("", "use `precision = \"f32\"`"),
    }
}

/// The dtype of a bf16 teacher's activations on `backend`: f32 on the CPU, whose kernels
/// round them to bf16 at every product (`crate::kernels::cpu::bf16`), bf16 on a GPU.
pub(crate) fn teacher_activations(backend: Backend) -> FloatDType {
    match backend {
        Backend::Cpu => FloatDType::F32,
        Backend::Wgpu | Backend::Cuda => FloatDType::BF16,
    }
}

/// Checks that `device` can run a teacher in `precision`; `Err` is the message.
pub(crate) fn check_teacher(
    device: &Device,
    backend: Backend,
    precision: TeacherPrecision,
) -> Result<(), String> {
    let activations = teacher_activations(backend);
    if precision.is_f32() || device.supports_dtype(activations) {
        return Ok(());
    }
    let (why, hint) = refusal(backend, Precision::Bf16);
    Err(format!(
        "`[distill] teacher_precision = \"{precision}\"` is not supported by backend `{backend}` on this device{why}\n\nhint: {}",
        hint.replace("precision", "teacher_precision")
    ))
}

/// Dynamic loss scaling for f16 (the scheme of PyTorch's `GradScaler`): the loss is multiplied
/// by `scale` before the backward pass so that small gradients survive f16's range; a step whose
/// gradients overflow is skipped and the scale halved; after `GROWTH_INTERVAL` clean steps in a
/// row the scale doubles. bf16 has f32's exponent range and needs none of this.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LossScale {
    /// The current factor.
    pub scale: f64,
    /// Clean steps since the last change.
    pub good_steps: u64,
}

/// Clean steps before the scale doubles.
const GROWTH_INTERVAL: u64 = 2000;
/// The starting scale (2^16, PyTorch's default).
const INITIAL_SCALE: f64 = 65_536.0;
/// The scale never falls below this (a run that overflows even at 1 is diverging).
const MIN_SCALE: f64 = 1.0;

impl LossScale {
    /// The scale a run starts with in `precision` (`None` when it needs none).
    pub fn initial(precision: Precision) -> Option<LossScale> {
        (precision == Precision::F16).then_some(LossScale {
            scale: INITIAL_SCALE,
            good_steps: 0,
        })
    }

    /// Records whether the gradients of the last step were finite; returns whether the step
    /// should be applied.
    pub fn update(&mut self, finite: bool) -> bool {
        if finite {
            self.good_steps += 1;
            if self.good_steps >= GROWTH_INTERVAL {
                self.scale *= 2.0;
                self.good_steps = 0;
            }
            true
        } else {
            self.scale = (self.scale / 2.0).max(MIN_SCALE);
            self.good_steps = 0;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_halves_on_overflow_and_doubles_after_a_clean_stretch() {
        assert_eq!(LossScale::initial(Precision::Bf16), None);
        assert_eq!(LossScale::initial(Precision::F32), None);
        let mut s = LossScale::initial(Precision::F16).unwrap();
        assert!(!s.update(false));
        assert_eq!(s.scale, 32_768.0);
        for _ in 0..GROWTH_INTERVAL - 1 {
            assert!(s.update(true));
        }
        assert_eq!(s.scale, 32_768.0);
        assert!(s.update(true));
        assert_eq!((s.scale, s.good_steps), (65_536.0, 0));
        for _ in 0..40 {
            s.update(false);
        }
        assert_eq!(s.scale, MIN_SCALE);
    }

    #[test]
    fn f32_is_supported_everywhere_and_named_in_errors() {
        let cpu = Device::flex();
        assert!(check_supported(&cpu, Backend::Cpu, Precision::F32).is_ok());
        let e = UnsupportedPrecision {
            precision: Precision::Bf16,
            backend: Backend::Wgpu,
            why: String::new(),
            hint: "use f16".into(),
        };
        assert!(e.to_string().contains("`[train] precision = \"bf16\"`"));
    }

    #[test]
    fn bf16_is_refused_with_its_reason_on_wgpu_and_its_hint_points_to_cuda() {
        let (why, hint) = refusal(Backend::Wgpu, Precision::Bf16);
        assert!(why.contains("wgpu backend can store bf16"), "{why}");
        assert!(hint.contains("backend = \"cuda\""), "{hint}");
        // On cuda the device is asked (burn computes bf16 there); a refusal would name the GPU.
        let (why, _) = refusal(Backend::Cuda, Precision::Bf16);
        assert!(why.contains("compute capability"), "{why}");
    }
}
