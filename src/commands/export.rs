//! `pdsweep export`: a sweep's runs, metrics, fits, similarity and degrees as CSV, Parquet or
//! JSON tables for analysis elsewhere (default folder `results/NAME/export/`).

use std::path::PathBuf;

use pdsweep::report;
use pdsweep::report::export::ExportFormat;

use super::locate::gather;

/// Options of `pdsweep export`.
#[derive(Debug, Clone)]
pub struct ExportCommand {
    /// The sweep file or name (the only sweep under `results` when absent).
    pub sweep: Option<PathBuf>,
    /// Results folder.
    pub results: PathBuf,
    /// Output format.
    pub format: ExportFormat,
    /// Output folder (default `results/NAME/export`).
    pub out: Option<PathBuf>,
    /// Write model folders here instead of tables.
    pub models: Option<PathBuf>,
    /// With `models`: only these runs (names or ids).
    pub runs: Vec<String>,
}

/// Runs `pdsweep export`.
pub fn export(cmd: ExportCommand) -> anyhow::Result<()> {
    if let Some(out) = &cmd.models {
        return super::export_models::export_models(
            cmd.sweep.as_deref(),
            &cmd.results,
            &cmd.runs,
            out,
        );
    }
    let (located, db, data) = gather(cmd.sweep.as_deref(), &cmd.results)?;
    let dir = cmd.out.unwrap_or_else(|| located.layout.export());
    let files = report::export(&db, &data, cmd.format, &dir)?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
