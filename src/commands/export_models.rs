//! `pdsweep export --models DIR`: every finished teacher, student and baseline as a Hugging
//! Face model folder.

use std::path::Path;

use pdsweep::report::export::{ExportPaths, export_models as export};
use pdsweep::store::SweepDb;

use super::locate::locate;

/// Writes the model folders of the sweep `sweep` (file or name; the only sweep under
/// `results` when absent) into `out`: every finished run, or those named or numbered in `runs`.
pub fn export_models(
    sweep: Option<&Path>,
    results: &Path,
    runs: &[String],
    out: &Path,
) -> anyhow::Result<()> {
    let located = locate(sweep, results)?;
    let db = SweepDb::open(&located.db_path())?;
    let layout = located.with_sweep_dir(&db)?;
    let paths = ExportPaths {
        layout: &layout,
        out,
    };
    let summary = export(&db, &paths, runs, &mut |_, dir| {
        println!("{}", dir.display())
    })?;
    for (name, reason) in &summary.skipped {
        eprintln!("skipped {name}: {reason}");
    }
    if summary.written.is_empty() {
        eprintln!("no model written: no finished teacher, student or baseline to export");
    }
    Ok(())
}
