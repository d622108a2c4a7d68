//! `pdsweep devices`: the wgpu adapters `--devices` can select, in index order.

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
    if cmd.json {
        let list: Vec<serde_json::Value> = adapters
            .iter()
            .map(|a| {
                serde_json::json!({"index": a.index, "name": a.name, "kind": a.kind, "driver": a.driver})
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return Ok(());
    }
    if !cfg!(feature = "wgpu") {
        println!("this pdsweep is built without wgpu (`cargo build --release --features wgpu`)");
        return Ok(());
    }
    if adapters.is_empty() {
        println!("no Vulkan device found (install a GPU driver's Vulkan ICD, or Mesa's lavapipe)");
    }
    for a in &adapters {
        println!("{:>3}  {}  [{}; {}]", a.index, a.name, a.kind, a.driver);
    }
    Ok(())
}
