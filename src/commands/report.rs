//! `pdsweep report`: draws every figure of a sweep (PNG at 300 dpi and SVG) and a
//! self-contained `index.html` into `reports/NAME/`, and says what is missing.

use std::path::PathBuf;

use pdsweep::report;

use super::locate::gather;

/// Options of `pdsweep report`.
#[derive(Debug, Clone)]
pub struct ReportCommand {
    /// The sweep file or name (the only sweep under `results` when absent).
    pub sweep: Option<PathBuf>,
    /// Results folder.
    pub results: PathBuf,
    /// Output folder (default `reports/NAME`).
    pub out: Option<PathBuf>,
}

/// Runs `pdsweep report`.
pub fn report(cmd: ReportCommand) -> anyhow::Result<()> {
    let (located, _db, data) = gather(cmd.sweep.as_deref(), &cmd.results)?;
    let drawn = report::build(&data)?;
    let dir = cmd
        .out
        .unwrap_or_else(|| PathBuf::from("reports").join(&located.name));
    drawn.write(&dir)?;
    let done = data.runs.iter().filter(|r| r.done()).count();
    println!(
        "report of sweep `{}` ({done} of {} runs done) in {}/",
        located.name,
        data.runs.len(),
        dir.display()
    );
    println!("  index.html");
    for f in &drawn.figures {
        println!(
            "  {0}.png ({1}×{2} px, 300 dpi), {0}.svg",
            f.name, f.size_px.0, f.size_px.1
        );
    }
    for s in &drawn.skipped {
        println!("  not drawn: {} ({})", s.name, s.reason);
    }
    let plateau = report::data::near_unigram(&data);
    if let Some((_, line)) = plateau.first() {
        eprintln!(
            "warning: {} run(s) ended near the unigram entropy (held-out loss above {line:.3} nats): {}",
            plateau.len(),
            plateau
                .iter()
                .map(|(r, _)| format!("`{}`", r.name))
                .collect::<Vec<_>>()
                .join(", ")
        );
        eprintln!(
            "  hint: their losses measure when they left the plateau, not what they can learn; give them more optimiser steps (`tokens`, or a smaller `[train] batch_tokens`)"
        );
    }
    if !drawn.missing.is_empty() {
        println!("missing:");
        for m in &drawn.missing {
            println!("  - {m}");
        }
    }
    Ok(())
}
