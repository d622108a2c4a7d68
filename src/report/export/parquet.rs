//! Parquet export: `runs.parquet`, `metrics.parquet`, `fits.parquet`, `similarity.parquet`
//! and `degrees.parquet`, typed columns.

use polars::prelude::ParquetWriter;

use super::{Exporter, Tables};
use crate::report::error::ReportError;

/// Apache Parquet.
pub struct Parquet;

impl Exporter for Parquet {
    fn format(&self) -> &'static str {
        "parquet"
    }

    fn files(&self, tables: &mut Tables) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
        tables
            .named()
            .into_iter()
            .map(|(name, df)| {
                let mut bytes = Vec::new();
                ParquetWriter::new(&mut bytes)
                    .finish(df)
                    .map_err(|e| ReportError::Export {
                        table: name.to_string(),
                        format: "parquet",
                        source: e.into(),
                    })?;
                Ok((format!("{name}.parquet"), bytes))
            })
            .collect()
    }
}
