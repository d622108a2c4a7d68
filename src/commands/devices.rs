//! `pdsweep devices`: the GPUs `--devices` can select, per backend in index order: the wgpu
//! adapters, then the CUDA devices (or which of the driver, NVRTC and the CUDA headers this
//! machine lacks for them).

use pdsweep::train::cuda::{self, CudaRuntime, CudaUnavailable};
use pdsweep::train::wgpu_adapters;

/// Options of `pdsweep devices`.
#[derive(Debug, Clone)]
pub struct DevicesCommand {
    /// JSON output.
    pub json: bool,
}

/// Runs `pdsweep devices`.
pub fn devices(cmd: DevicesCommand) -> anyhow::Result<()> {
    let adapters = wgpu_adapters();
    let cuda = cuda::probe();
    if cmd.json {
        let wgpu: Vec<serde_json::Value> = adapters
            .iter()
            .map(|a| {
                serde_json::json!({"index": a.index, "name": a.name, "kind": a.kind, "driver": a.driver})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "wgpu": wgpu,
                "wgpu_built": cfg!(feature = "wgpu"),
                "cuda": cuda_json(&cuda),
            })
        );
        return Ok(());
    }
    println!("wgpu devices (backend = \"wgpu\"):");
    if !cfg!(feature = "wgpu") {
        println!(
            "  none: this pdsweep is built without wgpu (`cargo build --release --features wgpu`)"
        );
    } else if adapters.is_empty() {
        println!(
            "  none: no Vulkan device found (install a GPU driver's Vulkan ICD, or Mesa's lavapipe)"
        );
    }
    for a in &adapters {
        println!("{:>3}  {}  [{}; {}]", a.index, a.name, a.kind, a.driver);
    }
    println!("cuda devices (backend = \"cuda\"):");
    match &cuda {
        Ok(runtime) => {
            for d in &runtime.devices {
                println!(
                    "{:>3}  {}  [compute capability {}.{}; {:.0} GiB; driver for CUDA {}; NVRTC {}.{} ({}); headers {}]",
                    d.index,
                    d.name,
                    d.compute_capability.0,
                    d.compute_capability.1,
                    d.memory_bytes as f64 / (1u64 << 30) as f64,
                    cuda_version(runtime.driver_version),
                    runtime.nvrtc_version.0,
                    runtime.nvrtc_version.1,
                    runtime.nvrtc_library,
                    runtime.include_dir.display()
                );
            }
        }
        Err(e) => println!("  none: {}", e.short()),
    }
    Ok(())
}

/// `13000` as `13.0`, as `cuDriverGetVersion` encodes it.
fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn cuda_json(cuda: &Result<CudaRuntime, CudaUnavailable>) -> serde_json::Value {
    match cuda {
        Ok(r) => serde_json::json!({
            "devices": r.devices.iter().map(|d| serde_json::json!({
                "index": d.index,
                "name": d.name,
                "compute_capability": format!("{}.{}", d.compute_capability.0, d.compute_capability.1),
                "memory_bytes": d.memory_bytes,
            })).collect::<Vec<_>>(),
            "driver_library": r.driver_library,
            "driver_cuda_version": cuda_version(r.driver_version),
            "nvrtc_library": r.nvrtc_library,
            "nvrtc_version": format!("{}.{}", r.nvrtc_version.0, r.nvrtc_version.1),
            "include_dir": r.include_dir.display().to_string(),
            "unavailable": null,
        }),
        Err(e) => serde_json::json!({
            "devices": [],
            "unavailable": e.to_string(),
        }),
    }
}
