//! Choosing the compute device once, at the edge: the sweep's `backend` and a `--devices`
//! index become a burn `Device`, or a clear error when this binary was built without that
//! backend or the machine has no such device.
//!
//! wgpu devices are pinned to Vulkan (Metal on macOS), so that kernels are SPIR-V (tensor cores
//! through cooperative matrices where the driver has them) and never silently OpenGL. Index `i`
//! is the i-th GPU (discrete, then integrated, then virtual, each in the driver's order); a
//! machine whose only adapter is a software rasteriser (Mesa's lavapipe) has it as index 0.
//!
//! cuda devices are the driver's ordinals. Before burn is handed one, `super::cuda::probe`
//! checks the driver, NVRTC and the CUDA headers, so that a machine without them fails the run
//! with one message naming what is missing instead of a panic inside burn.

use burn::tensor::Device;

use super::cuda::CudaUnavailable;
use crate::spec::Backend;

/// The device a run asked for cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The requested backend is not in this binary.
    #[error(
        "backend `{backend}` is not built into this pdsweep\n\nhint: rebuild with `cargo build --release --features {backend}`, or set `backend = \"cpu\"`"
    )]
    Missing {
        /// The backend asked for.
        backend: Backend,
    },
    /// wgpu found no adapter at all.
    #[error(
        "backend `wgpu` found no Vulkan device on this machine\n\nhint: install a Vulkan driver: the GPU vendor's (NVIDIA: the driver's Vulkan ICD, `nvidia_icd.json`) or, to run on the CPU, Mesa's lavapipe (Debian: `apt-get install mesa-vulkan-drivers`); `pdsweep devices` lists what is found"
    )]
    NoAdapter,
    /// `--devices` named an index past the devices found.
    #[error(
        "`--devices {index}`: this machine has {count} {backend} device(s), numbered from 0\n\nhint: `pdsweep devices` lists them"
    )]
    NoSuchDevice {
        /// The backend whose devices were counted.
        backend: Backend,
        /// The index asked for.
        index: usize,
        /// How many there are.
        count: usize,
    },
    /// The cuda backend is built in, but this machine lacks the driver, NVRTC or the CUDA
    /// headers it needs (everything missing, and where it was looked for).
    #[error(transparent)]
    CudaUnavailable(#[from] CudaUnavailable),
}

/// The plain (no autodiff) device of `backend`; `index` selects the GPU.
pub fn device_for(backend: Backend, index: usize) -> Result<Device, BackendError> {
    let _ = index;
    match backend {
        Backend::Cpu => Ok(Device::flex()),
        #[cfg(feature = "cuda")]
        Backend::Cuda => cuda_device(index),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => wgpu_device(index),
        #[allow(unreachable_patterns)]
        other => Err(BackendError::Missing { backend: other }),
    }
}

/// The burn device of CUDA device `index`, once the machine is known to have what the backend
/// needs (burn would panic on the first tensor otherwise).
#[cfg(feature = "cuda")]
fn cuda_device(index: usize) -> Result<Device, BackendError> {
    let runtime = super::cuda::probe()?;
    if index >= runtime.devices.len() {
        return Err(BackendError::NoSuchDevice {
            backend: Backend::Cuda,
            index,
            count: runtime.devices.len(),
        });
    }
    Ok(Device::cuda(index))
}

/// One adapter wgpu reports on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapter {
    /// The index `--devices` takes.
    pub index: usize,
    /// The adapter's name (e.g. `NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`).
    pub name: String,
    /// `discrete GPU`, `integrated GPU`, `virtual GPU`, `software (CPU)` or `other`.
    pub kind: &'static str,
    /// The driver and its version, as the driver reports them.
    pub driver: String,
}

/// The GPU kinds in index order, then the software rasteriser.
#[cfg(feature = "wgpu")]
const ORDER: [&str; 4] = [
    "discrete GPU",
    "integrated GPU",
    "virtual GPU",
    "software (CPU)",
];

/// The wgpu adapters of this machine in `--devices` order, without opening any of them. Empty
/// in a build without wgpu.
pub fn wgpu_adapters() -> Vec<Adapter> {
    #[cfg(feature = "wgpu")]
    {
        use burn::backend::wgpu::wgpu;
        let api = if cfg!(target_os = "macos") {
            wgpu::Backends::METAL
        } else {
            wgpu::Backends::VULKAN
        };
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: api,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let mut found: Vec<Adapter> = block_on(instance.enumerate_adapters(api))
            .iter()
            .map(|a| {
                let info = a.get_info();
                let kind = match info.device_type {
                    wgpu::DeviceType::DiscreteGpu => ORDER[0],
                    wgpu::DeviceType::IntegratedGpu => ORDER[1],
                    wgpu::DeviceType::VirtualGpu => ORDER[2],
                    wgpu::DeviceType::Cpu => ORDER[3],
                    wgpu::DeviceType::Other => "other",
                };
                Adapter {
                    index: 0,
                    name: info.name,
                    kind,
                    driver: format!("{} {}", info.driver, info.driver_info)
                        .trim()
                        .to_string(),
                }
            })
            .collect();
        let rank = |kind: &str| ORDER.iter().position(|k| *k == kind).unwrap_or(ORDER.len());
        found.sort_by_key(|a| rank(a.kind)); // stable: the driver's order within a kind
        let gpus = found.iter().filter(|a| rank(a.kind) < 3).count();
        if gpus > 0 {
            found.retain(|a| rank(a.kind) < 3); // as cubecl does: a software adapter only alone
        }
        for (i, a) in found.iter_mut().enumerate() {
            a.index = i;
        }
        found
    }
    #[cfg(not(feature = "wgpu"))]
    Vec::new()
}

/// The burn device of wgpu adapter `index` (see the module doc for the numbering).
#[cfg(feature = "wgpu")]
fn wgpu_device(index: usize) -> Result<Device, BackendError> {
    use burn::tensor::DeviceKind;
    let adapters = wgpu_adapters();
    let Some(adapter) = adapters.get(index) else {
        return Err(if adapters.is_empty() {
            BackendError::NoAdapter
        } else {
            BackendError::NoSuchDevice {
                backend: Backend::Wgpu,
                index,
                count: adapters.len(),
            }
        });
    };
    let within = adapters[..index]
        .iter()
        .filter(|a| a.kind == adapter.kind)
        .count();
    let kind = match adapter.kind {
        "discrete GPU" => DeviceKind::DiscreteGpu(within),
        "integrated GPU" => DeviceKind::IntegratedGpu(within),
        "virtual GPU" => DeviceKind::VirtualGpu(within),
        "software (CPU)" => DeviceKind::Cpu,
        _ => DeviceKind::DefaultDevice,
    };
    #[cfg(target_os = "macos")]
    return Ok(Device::wgpu(kind));
    #[cfg(not(target_os = "macos"))]
    Ok(Device::vulkan(kind))
}

/// Runs a future that completes without waiting (wgpu's native adapter enumeration) to its end.
#[cfg(feature = "wgpu")]
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}

/// A short description of `device` for results and benchmarks: the adapter's name on a GPU
/// backend (e.g. `NVIDIA H200`, `llvmpipe (LLVM 15.0.6, 256 bits)`), `cpu` on the CPU.
pub fn device_label(device: &Device) -> String {
    if *device == Device::flex() || device.clone().without_autodiff() == Device::flex() {
        return "cpu".into();
    }
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    if let Some(identity) = device.identity() {
        return identity.name;
    }
    format!("{device:?}")
}
