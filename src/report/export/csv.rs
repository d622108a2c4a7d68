//! CSV export: `runs.csv`, `metrics.csv`, `fits.csv`, `similarity.csv` and `degrees.csv`, with
//! a header row each.

use polars::prelude::{CsvWriter, SerWriter};

use super::{Exporter, Tables};
use crate::report::error::ReportError;

/// Comma-separated values.
pub struct Csv;

impl Exporter for Csv {
    fn format(&self) -> &'static str {
        "csv"
    }

    fn files(&self, tables: &mut Tables) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
        tables
            .named()
            .into_iter()
            .map(|(name, df)| {
                let mut bytes = Vec::new();
                CsvWriter::new(&mut bytes)
                    .include_header(true)
                    .finish(df)
                    .map_err(|e| ReportError::Export {
                        table: name.to_string(),
                        format: "csv",
                        source: e.into(),
                    })?;
                Ok((format!("{name}.csv"), bytes))
            })
            .collect()
    }
}
