//! Reports and exports: `pdsweep report` draws every figure ([`figures`], one module each) as
//! PNG and SVG and writes a self-contained `index.html` ([`html`]); `pdsweep export` writes
//! the runs, metrics, fits, similarity and degrees as tables ([`export`](mod@export)). Data comes from the
//! sweep database ([`load`]) into plain views ([`data`]); fitted pieces enter in one place
//! ([`fits`]); only [`write`](mod@write) writes files.

pub mod canvas;
pub mod data;
mod error;
pub mod export;
pub mod figures;
pub mod fits;
pub mod font_subset;
pub mod html;
pub mod load;
mod missing;
pub mod numbers;
pub mod render;
pub mod style;
pub mod write;

pub use error::ReportError;
pub use missing::missing;

use std::path::{Path, PathBuf};

use data::ReportData;
use figures::Planned;
use render::Rendered;
use write::OutputDir;

/// A figure left out of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// File stem.
    pub name: String,
    /// Title.
    pub title: String,
    /// What is missing.
    pub reason: String,
}

/// A drawn report, ready to write.
#[derive(Debug, Clone)]
pub struct Report {
    /// Drawn figures, in report order.
    pub figures: Vec<Rendered>,
    /// Figures left out, with the reason.
    pub skipped: Vec<Skipped>,
    /// What the report cannot show yet (failed runs, no fits, ...).
    pub missing: Vec<String>,
    /// The page.
    pub html: String,
}

/// Draws every figure that has data and builds the page.
pub fn build(data: &ReportData) -> Result<Report, ReportError> {
    let planned = figures::all(data);
    let mut drawn = Vec::new();
    let mut skipped = Vec::new();
    for p in &planned {
        match p {
            Planned::Draw(f) => drawn.push((f.as_ref(), render::render(f.as_ref())?)),
            Planned::Skip {
                name,
                title,
                reason,
            } => skipped.push(Skipped {
                name: name.to_string(),
                title: title.to_string(),
                reason: reason.clone(),
            }),
        }
    }
    let missing = missing(data);
    let page_figures: Vec<html::PageFigure> = drawn
        .iter()
        .map(|(figure, rendered)| html::PageFigure {
            figure: *figure,
            rendered,
        })
        .collect();
    let page_skips: Vec<html::PageSkip> = skipped
        .iter()
        .map(|s| html::PageSkip {
            title: &s.title,
            reason: &s.reason,
        })
        .collect();
    let html = html::page(data, &page_figures, &page_skips, &missing);
    Ok(Report {
        figures: drawn.into_iter().map(|(_, r)| r).collect(),
        skipped,
        missing,
        html,
    })
}

impl Report {
    /// Writes every figure (`NAME.png`, `NAME.svg`) and `index.html` into `dir`; returns the
    /// files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
        let mut out = OutputDir::create(dir)?;
        for f in &self.figures {
            out.write(&format!("{}.png", f.name), &f.png)?;
            out.write(&format!("{}.svg", f.name), f.svg_file().as_bytes())?;
        }
        out.write("index.html", self.html.as_bytes())?;
        Ok(out.written().to_vec())
    }
}

/// Builds the export tables and writes them in `format` into `dir`; returns the files written.
pub fn export(
    db: &crate::store::SweepDb,
    data: &ReportData,
    format: export::ExportFormat,
    dir: &Path,
) -> Result<Vec<PathBuf>, ReportError> {
    let mut tables = export::tables(db, data)?;
    let files = format.exporter().files(&mut tables)?;
    let mut out = OutputDir::create(dir)?;
    for (name, bytes) in files {
        out.write(&name, &bytes)?;
    }
    Ok(out.written().to_vec())
}
