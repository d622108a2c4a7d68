//! `pdsweep bench`: training (or logit-pass) throughput and MFU of one shape on one device.

use pdsweep::spec::Backend;
use pdsweep::train::bench::{BenchSpec, run_bench};
use pdsweep::train::{device_for, device_label};

/// Options of `pdsweep bench`.
#[derive(Debug, Clone)]
pub struct BenchCommand {
    /// Where to run.
    pub backend: Backend,
    /// Which device of the backend.
    pub device: usize,
    /// What to measure.
    pub spec: BenchSpec,
    /// JSON output.
    pub json: bool,
}

/// Runs `pdsweep bench`.
pub fn bench(cmd: BenchCommand) -> anyhow::Result<()> {
    let device = device_for(cmd.backend, cmd.device)?;
    let name = device_label(&device);
    let scratch = tempfile_dir()?;
    let result = run_bench(&cmd.spec, &device, cmd.backend, &name, scratch.path());
    let result = result?;
    if cmd.json {
        println!("{}", serde_json::to_string(&result)?);
        return Ok(());
    }
    let pct = |v: Option<f64>| {
        v.map_or_else(
            || "n/a (unknown peak)".into(),
            |m| format!("{:.1} %", 100.0 * m),
        )
    };
    println!("device        {} ({})", result.device, result.backend);
    println!(
        "model         {} parameters, context {}, {} tokens per step, {}",
        result.params_total, result.context, result.tokens_per_step, result.precision
    );
    println!(
        "{:<13} {:.0} tokens/s (median step {:.3} s over {} steps; warm-up {:.1} s)",
        result.mode, result.tokens_per_s, result.step_s_median, result.steps, result.warmup_s
    );
    println!(
        "model FLOP/s  {:.3e} ({:.3e} FLOPs per token)",
        result.model_flops_per_s, result.model_flops_per_token
    );
    println!("MFU           {}", pct(result.mfu));
    if let Some(truncation) = &result.truncation {
        println!("truncation    {truncation}");
    }
    Ok(())
}

/// A scratch folder removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> anyhow::Result<Scratch> {
    let dir = std::env::temp_dir().join(format!("pdsweep-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(Scratch(dir))
}
