//! Choosing the compute device once, at the edge: the sweep's `backend` becomes a burn
//! `Device`, or a clear error when this binary was built without that backend.

use burn::tensor::Device;

use crate::spec::Backend;

/// The requested backend is not in this binary.
#[derive(Debug, thiserror::Error)]
#[error(
    "backend `{backend}` is not built into this pdsweep\n\nhint: rebuild with `cargo build --release --features {backend}`, or set `backend = \"cpu\"`"
)]
pub struct MissingBackend {
    /// The backend asked for.
    pub backend: Backend,
}

/// The plain (no autodiff) device of `backend`; `index` selects the GPU.
pub fn device_for(backend: Backend, index: usize) -> Result<Device, MissingBackend> {
    let _ = index;
    match backend {
        Backend::Cpu => Ok(Device::flex()),
        #[cfg(feature = "cuda")]
        Backend::Cuda => Ok(Device::cuda(index)),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => Ok(Device::wgpu(match index {
            0 => burn::tensor::DeviceKind::DefaultDevice,
            i => burn::tensor::DeviceKind::DiscreteGpu(i),
        })),
        #[allow(unreachable_patterns)]
        other => Err(MissingBackend { backend: other }),
    }
}
