//! `pdsweep export`: the sweep's runs, metrics, fits, similarity and degrees as polars tables,
//! written by one [`Exporter`] per format (CSV, Parquet, JSON); and with `--models`, finished
//! runs as Hugging Face model folders with a model card ([`export_models`]).

mod card;
mod csv;
mod json;
mod models;
mod parquet;
mod tables;

pub use csv::Csv;
pub use json::Json;

pub use models::{ExportPaths, export_models};
pub use parquet::Parquet;
pub(crate) use tables::Tables;
pub use tables::tables;

use super::error::ReportError;

/// One output format: turns the tables into named files (bytes); `write.rs` writes them.
pub trait Exporter {
    /// The format's name (`csv`).
    fn format(&self) -> &'static str;
    /// The files of this format: (file name, bytes).
    fn files(&self, tables: &mut Tables) -> Result<Vec<(String, Vec<u8>)>, ReportError>;
}

/// The formats `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// `runs.csv`, `metrics.csv`, `fits.csv`, `similarity.csv`, `degrees.csv`.
    Csv,
    /// `runs.parquet`, `metrics.parquet`, `fits.parquet`, `similarity.parquet`,
    /// `degrees.parquet`.
    Parquet,
    /// `export.json`: one array of row objects per table (`runs`, `metrics`, `fits`,
    /// `similarity`, `degrees`).
    Json,
}

impl ExportFormat {
    /// The exporter of this format.
    pub fn exporter(self) -> Box<dyn Exporter> {
        match self {
            ExportFormat::Csv => Box::new(Csv),
            ExportFormat::Parquet => Box::new(Parquet),
            ExportFormat::Json => Box::new(Json),
        }
    }
}
