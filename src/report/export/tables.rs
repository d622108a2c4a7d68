//! The exported tables as polars data frames: one row per run (with results, teacher and
//! gain), one per metric row, and the stored fits (empty until `pdsweep fit` has written any).

use polars::prelude::*;
use rusqlite::types::Value;

use crate::report::data::ReportData;
use crate::report::error::ReportError;
use crate::store::{RawTable, SweepDb};

/// The three exported tables.
pub struct Tables {
    /// One row per run of the current plan.
    pub runs: DataFrame,
    /// One row per recorded metric (training and held-out) of those runs.
    pub metrics: DataFrame,
    /// One row per stored fit (no columns when the database has no `fits` table yet).
    pub fits: DataFrame,
}

impl Tables {
    /// (name, table) for each table, in file order.
    pub fn named(&mut self) -> [(&'static str, &mut DataFrame); 3] {
        [
            ("runs", &mut self.runs),
            ("metrics", &mut self.metrics),
            ("fits", &mut self.fits),
        ]
    }
}

fn frame(table: &str, columns: Vec<Column>) -> Result<DataFrame, ReportError> {
    DataFrame::new_infer_height(columns).map_err(|e| ReportError::Export {
        table: table.to_string(),
        format: "a table",
        reason: e.to_string(),
    })
}

/// Builds the tables from `data` (runs) and `db` (metrics of the current plan, fits).
pub fn tables(db: &SweepDb, data: &ReportData) -> Result<Tables, ReportError> {
    let runs = &data.runs;
    let s = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<String>| {
        Column::new(
            name.into(),
            runs.iter().map(f).collect::<Vec<Option<String>>>(),
        )
    };
    let i = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<i64>| {
        Column::new(
            name.into(),
            runs.iter().map(f).collect::<Vec<Option<i64>>>(),
        )
    };
    let x = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<f64>| {
        Column::new(
            name.into(),
            runs.iter().map(f).collect::<Vec<Option<f64>>>(),
        )
    };
    let runs_df = frame(
        "runs",
        vec![
            s("id", &|r| Some(r.id.clone())),
            s("kind", &|r| Some(r.kind.to_string())),
            s("name", &|r| Some(r.name.clone())),
            s("state", &|r| Some(r.state.as_str().to_string())),
            s("model", &|r| Some(r.label.clone())),
            i("seed", &|r| i64::try_from(r.seed).ok()),
            i("params_total", &|r| i64::try_from(r.params_total).ok()),
            i("params_non_embedding", &|r| Some(r.n as i64)),
            i("tokens", &|r| Some(r.tokens as i64)),
            x("flops", &|r| Some(r.flops)),
            s("teacher", &|r| r.teacher.as_ref().map(|t| t.name.clone())),
            s("teacher_id", &|r| r.teacher.as_ref().map(|t| t.id.clone())),
            i("teacher_params_non_embedding", &|r| {
                r.teacher
                    .as_ref()
                    .filter(|t| t.n.is_finite())
                    .map(|t| t.n as i64)
            }),
            s("distill", &|r| {
                Some(r.distill.clone()).filter(|d| !d.is_empty())
            }),
            x("val_loss", &|r| r.val_loss),
            x("val_bpb", &|r| r.val_bpb.filter(|_| r.done())),
            x("tokens_per_s", &|r| r.tokens_per_s.filter(|_| r.done())),
            x("wall_s", &|r| r.wall_s.filter(|_| r.done())),
            x("agreement", &|r| r.agreement),
            x("kl_teacher_student", &|r| r.kl_teacher_student),
            x("gain", &|r| r.gain),
            s("error", &|r| r.error.clone()),
        ],
    )?;
    let plan_id = db.current_plan()?.unwrap_or_default();
    let m = db.metric_rows(plan_id)?;
    let metrics_df = frame(
        "metrics",
        vec![
            Column::new(
                "run_id".into(),
                m.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "kind".into(),
                m.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
            ),
            Column::new("step".into(), m.iter().map(|r| r.step).collect::<Vec<_>>()),
            Column::new(
                "tokens".into(),
                m.iter().map(|r| r.tokens).collect::<Vec<_>>(),
            ),
            Column::new("loss".into(), m.iter().map(|r| r.loss).collect::<Vec<_>>()),
            Column::new("bpb".into(), m.iter().map(|r| r.bpb).collect::<Vec<_>>()),
            Column::new("lr".into(), m.iter().map(|r| r.lr).collect::<Vec<_>>()),
            Column::new(
                "tokens_per_s".into(),
                m.iter().map(|r| r.tokens_per_s).collect::<Vec<_>>(),
            ),
            Column::new(
                "wall_s".into(),
                m.iter().map(|r| r.wall_s).collect::<Vec<_>>(),
            ),
        ],
    )?;
    let fits_df = raw_frame("fits", &db.raw_table("fits")?)?;
    Ok(Tables {
        runs: runs_df,
        metrics: metrics_df,
        fits: fits_df,
    })
}

/// A table read generically from SQLite: integer columns stay integers, columns with any real
/// become floats, anything else text (blobs as hex).
fn raw_frame(name: &str, t: &RawTable) -> Result<DataFrame, ReportError> {
    let columns = t
        .columns
        .iter()
        .enumerate()
        .map(|(c, col)| {
            let values = t.rows.iter().map(|r| r.get(c).unwrap_or(&Value::Null));
            let all = |f: fn(&Value) -> bool| t.rows.iter().all(|r| r.get(c).is_none_or(f));
            if all(|v| matches!(v, Value::Null | Value::Integer(_))) {
                Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Integer(i) => Some(*i),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                )
            } else if all(|v| matches!(v, Value::Null | Value::Integer(_) | Value::Real(_))) {
                Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Integer(i) => Some(*i as f64),
                            Value::Real(x) => Some(*x),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                )
            } else {
                Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Null => None,
                            Value::Integer(i) => Some(i.to_string()),
                            Value::Real(x) => Some(x.to_string()),
                            Value::Text(s) => Some(s.clone()),
                            Value::Blob(b) => Some(crate::spec::hex(b)),
                        })
                        .collect::<Vec<_>>(),
                )
            }
        })
        .collect();
    frame(name, columns)
}
