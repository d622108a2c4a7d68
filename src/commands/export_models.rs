//! `pdsweep export --models DIR`: every finished teacher, student and baseline as a Hugging
//! Face model folder.

use std::path::{Path, PathBuf};

use anyhow::Context;
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
    let db = SweepDb::open(&located.db_path)?;
    // Paths in run configurations are relative to the sweep file: the one named, else the
    // one the plan was made from.
    let sweep_file = match &located.sweep {
        Some(s) => s.path.clone(),
        None => {
            let plan = db.current_plan()?.context("the sweep has no plan")?;
            let info = db.plan_info(plan)?.context("the sweep's plan is missing")?;
            PathBuf::from(info.sweep_path)
        }
    };
    let sweep_dir = sweep_file.parent().map(PathBuf::from).unwrap_or_default();
    let results_dir = located
        .db_path
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let paths = ExportPaths {
        sweep_dir: &sweep_dir,
        results_dir: &results_dir,
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
