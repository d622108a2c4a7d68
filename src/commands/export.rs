//! `pdsweep export`: a sweep's runs, metrics and fits as CSV, Parquet or JSON tables for
//! analysis elsewhere (default folder `results/NAME/export/`).

use std::path::PathBuf;

use pdsweep::report::export::ExportFormat;
use pdsweep::report::{self, load};
use pdsweep::store::SweepDb;

use super::locate::locate;

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
}

/// Runs `pdsweep export`.
pub fn export(cmd: ExportCommand) -> anyhow::Result<()> {
    let located = locate(cmd.sweep.as_deref(), &cmd.results)?;
    let db = SweepDb::open(&located.db_path)?;
    let source = located.sweep.as_ref().map(|s| load::SweepSource {
        path: &s.path,
        text: &s.source,
    });
    let data = load::gather(&db, source)?;
    let dir = cmd
        .out
        .unwrap_or_else(|| cmd.results.join(&located.name).join("export"));
    let files = report::export(&db, &data, cmd.format, &dir)?;
    for f in files {
        println!("{}", f.display());
    }
    Ok(())
}
