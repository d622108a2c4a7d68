//! JSON export: one file, `export.json`, holding one array of row objects per table:
//! `{"runs": [...], "metrics": [...], "fits": [...], "similarity": [...], "degrees": [...]}`.

use crate::error::Cause;
use polars::prelude::{JsonFormat, JsonWriter, SerWriter};
use serde_json::{Map, Value};

use super::{Exporter, Tables};
use crate::report::error::ReportError;

/// One JSON object of row arrays.
pub struct Json;

impl Exporter for Json {
    fn format(&self) -> &'static str {
        "json"
    }

    fn files(&self, tables: &mut Tables) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
        let mut object = Map::new();
        for (name, df) in tables.named() {
            let fail = |reason: Cause| ReportError::Export {
                table: name.to_string(),
                format: "json",
                source: reason,
            };
            let rows = if df.width() == 0 || df.height() == 0 {
                Value::Array(Vec::new())
            } else {
                let mut bytes = Vec::new();
                JsonWriter::new(&mut bytes)
                    .with_json_format(JsonFormat::Json)
                    .finish(df)
                    .map_err(|e| fail(e.into()))?;
                serde_json::from_slice(&bytes).map_err(|e| fail(e.into()))?
            };
            object.insert(name.to_string(), rows);
        }
        let text =
            serde_json::to_vec_pretty(&Value::Object(object)).map_err(|e| ReportError::Export {
                table: "all".into(),
                format: "json",
                source: e.into(),
            })?;
        Ok(vec![("export.json".to_string(), text)])
    }
}
