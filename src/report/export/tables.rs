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
    /// One row per model measured against its teacher (`pdsweep fit`), with a student's
    /// per-seed distillation degrees against its baseline.
    pub similarity: DataFrame,
    /// One row per student setting: its degrees over seeds with 95 % intervals.
    pub degrees: DataFrame,
}

impl Tables {
    /// (name, table) for each table, in file order.
    pub fn named(&mut self) -> [(&'static str, &mut DataFrame); 5] {
        [
            ("runs", &mut self.runs),
            ("metrics", &mut self.metrics),
            ("fits", &mut self.fits),
            ("similarity", &mut self.similarity),
            ("degrees", &mut self.degrees),
        ]
    }
}

fn frame(table: &str, columns: Vec<Column>) -> Result<DataFrame, ReportError> {
    DataFrame::new_infer_height(columns).map_err(|e| ReportError::Export {
        table: table.to_string(),
        format: "a table",
        source: e.into(),
    })
}

/// Builds the tables from `data` (runs) and `db` (metrics of the current plan, fits).
pub fn tables(db: &SweepDb, data: &ReportData) -> Result<Tables, ReportError> {
    let runs: Vec<&crate::report::data::RunView> =
        data.runs.iter().chain(&data.teacher_candidates).collect();
    let s = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<String>| {
        Column::new(
            name.into(),
            runs.iter().map(|r| f(r)).collect::<Vec<Option<String>>>(),
        )
    };
    let i = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<i64>| {
        Column::new(
            name.into(),
            runs.iter().map(|r| f(r)).collect::<Vec<Option<i64>>>(),
        )
    };
    let x = |name: &str, f: &dyn Fn(&crate::report::data::RunView) -> Option<f64>| {
        Column::new(
            name.into(),
            runs.iter().map(|r| f(r)).collect::<Vec<Option<f64>>>(),
        )
    };
    let runs_df = frame(
        "runs",
        vec![
            s("id", &|r| Some(r.id.to_string())),
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
            s("teacher_id", &|r| {
                r.teacher.as_ref().map(|t| t.id.to_string())
            }),
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
            x("fidelity_kl", &|r| r.fidelity_kl),
            x("fidelity_kept_mass", &|r| r.fidelity_kept_mass),
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
    let fits_df = raw_frame("fits", &db.raw_table("fits")?, &declared_types(db, "fits")?)?;
    Ok(Tables {
        runs: runs_df,
        metrics: metrics_df,
        fits: fits_df,
        similarity: similarity_frame(data)?,
        degrees: degrees_frame(data)?,
    })
}

/// The `similarity` table: every measured model, its teacher, and for a student its degrees
/// against its same-seed baseline.
fn similarity_frame(data: &ReportData) -> Result<DataFrame, ReportError> {
    use crate::similarity::Record;
    let recs = &data.similarity.records;
    let all: Vec<&crate::report::data::RunView> =
        data.runs.iter().chain(&data.teacher_candidates).collect();
    let view = |id: &crate::plan::RunId| all.iter().find(|r| &r.id == id).copied();
    let degrees: Vec<Option<crate::similarity::Degree>> = recs
        .iter()
        .map(|r| {
            data.similarity
                .by_student
                .iter()
                .find(|(id, _)| *id == r.run_id)
                .map(|(_, d)| *d)
        })
        .collect();
    let text = |name: &str, f: &dyn Fn(&Record) -> Option<String>| {
        Column::new(
            name.into(),
            recs.iter().map(f).collect::<Vec<Option<String>>>(),
        )
    };
    // a measure that does not apply (NaN: the token measures across tokenizers) is a null
    let finite = |x: f64| x.is_finite().then_some(x);
    let num = |name: &str, f: &dyn Fn(&Record) -> f64| {
        Column::new(
            name.into(),
            recs.iter()
                .map(|r| finite(f(r)))
                .collect::<Vec<Option<f64>>>(),
        )
    };
    let deg = |name: &str, f: fn(&crate::similarity::Degree) -> f64| {
        Column::new(
            name.into(),
            degrees
                .iter()
                .map(|d| d.as_ref().map(f).and_then(finite))
                .collect::<Vec<Option<f64>>>(),
        )
    };
    let mut columns = vec![
        text("run_id", &|r| Some(r.run_id.to_string())),
        text("name", &|r| view(&r.run_id).map(|v| v.name.clone())),
        text("kind", &|r| view(&r.run_id).map(|v| v.kind.to_string())),
        Column::new(
            "seed".into(),
            recs.iter()
                .map(|r| view(&r.run_id).and_then(|v| i64::try_from(v.seed).ok()))
                .collect::<Vec<Option<i64>>>(),
        ),
        text("teacher_id", &|r| Some(r.reference_id.to_string())),
        text("teacher", &|r| {
            view(&r.reference_id).map(|v| v.name.clone())
        }),
        num("agreement", &|r| r.similarity.agreement),
        num("jsd", &|r| r.similarity.jsd),
        num("chrf", &|r| r.similarity.chrf),
    ];
    for n in 0..crate::similarity::ngram::MAX_N {
        columns.push(Column::new(
            format!("precision_{}", n + 1).into(),
            recs.iter()
                .map(|r| r.similarity.precision[n])
                .collect::<Vec<f64>>(),
        ));
        columns.push(Column::new(
            format!("recall_{}", n + 1).into(),
            recs.iter()
                .map(|r| r.similarity.recall[n])
                .collect::<Vec<f64>>(),
        ));
    }
    columns.push(num("self_similarity", &|r| r.similarity.self_similarity));
    columns.push(num("teacher_self_similarity", &|r| {
        r.similarity.reference_self_similarity
    }));
    for n in 0..crate::similarity::ngram::MAX_N {
        columns.push(Column::new(
            format!("distinct_{}", n + 1).into(),
            recs.iter()
                .map(|r| r.similarity.distinct[n])
                .collect::<Vec<f64>>(),
        ));
    }
    columns.push(deg("degree_agreement", |d| d.agreement));
    columns.push(deg("degree_jsd", |d| d.jsd));
    columns.push(deg("degree_chrf", |d| d.chrf));
    columns.push(deg("degree_homogenisation", |d| d.homogenisation));
    frame("similarity", columns)
}

/// The `degrees` table: per student setting, each degree's mean and interval over its seeds.
fn degrees_frame(data: &ReportData) -> Result<DataFrame, ReportError> {
    use crate::similarity::{GroupDegree, Interval};
    let g = &data.similarity.groups;
    let mut columns = vec![
        Column::new(
            "student".into(),
            g.iter().map(|x| x.group.clone()).collect::<Vec<_>>(),
        ),
        Column::new(
            "teacher".into(),
            g.iter().map(|x| x.teacher.clone()).collect::<Vec<_>>(),
        ),
        Column::new(
            "student_params_non_embedding".into(),
            g.iter().map(|x| x.student_params).collect::<Vec<_>>(),
        ),
        Column::new(
            "teacher_params_non_embedding".into(),
            g.iter().map(|x| x.teacher_params).collect::<Vec<_>>(),
        ),
        Column::new(
            "seeds".into(),
            g.iter().map(|x| x.summary.seeds as i64).collect::<Vec<_>>(),
        ),
    ];
    type Part = (&'static str, fn(&GroupDegree) -> Interval);
    let parts: [Part; 4] = [
        ("agreement", |x| x.summary.agreement),
        ("jsd", |x| x.summary.jsd),
        ("chrf", |x| x.summary.chrf),
        ("homogenisation", |x| x.summary.homogenisation),
    ];
    for (name, f) in parts {
        columns.push(Column::new(
            format!("degree_{name}").into(),
            g.iter()
                .map(|x| Some(f(x).mean).filter(|m| m.is_finite()))
                .collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            format!("degree_{name}_lo").into(),
            g.iter().map(|x| f(x).lo).collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            format!("degree_{name}_hi").into(),
            g.iter().map(|x| f(x).hi).collect::<Vec<_>>(),
        ));
    }
    columns.push(Column::new(
        "student_chrf".into(),
        g.iter().map(|x| x.student_chrf).collect::<Vec<_>>(),
    ));
    columns.push(Column::new(
        "baseline_chrf".into(),
        g.iter().map(|x| x.baseline_chrf).collect::<Vec<_>>(),
    ));
    frame("degrees", columns)
}

/// The declared SQLite type of each column of `table` (`INTEGER`, `REAL`, `TEXT`, ...), by
/// name; empty when the table does not exist.
fn declared_types(db: &SweepDb, table: &str) -> Result<Vec<(String, String)>, ReportError> {
    let fail = |e: rusqlite::Error| {
        ReportError::from(crate::store::StoreError::sql(
            db.path(),
            "read a table's columns",
            e,
        ))
    };
    let mut stmt = db
        .conn()
        .prepare("SELECT name, type FROM pragma_table_info(?1)")
        .map_err(fail)?;
    let rows = stmt
        .query_map([table], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    Ok(rows)
}

/// The column type a table gets in the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Int,
    Float,
    Text,
}

/// The type of column `c`: its declared SQLite type (by SQLite's affinity rules) when every
/// value fits it, so an empty table has the same schema as a full one; otherwise what the
/// values hold (integers stay integers, any real makes floats, anything else text).
fn column_type(t: &RawTable, c: usize, declared: Option<&str>) -> ColumnType {
    let all = |f: fn(&Value) -> bool| t.rows.iter().all(|r| r.get(c).is_none_or(f));
    let ints = all(|v| matches!(v, Value::Null | Value::Integer(_)));
    let numbers = all(|v| matches!(v, Value::Null | Value::Integer(_) | Value::Real(_)));
    let declared = declared.map(str::to_ascii_uppercase).unwrap_or_default();
    let by_affinity = if declared.contains("INT") {
        Some(ColumnType::Int)
    } else if declared.contains("CHAR") || declared.contains("CLOB") || declared.contains("TEXT") {
        Some(ColumnType::Text)
    } else if declared.contains("REAL") || declared.contains("FLOA") || declared.contains("DOUB") {
        Some(ColumnType::Float)
    } else {
        None
    };
    match by_affinity {
        Some(ColumnType::Int) if ints => ColumnType::Int,
        Some(ColumnType::Float) if numbers => ColumnType::Float,
        Some(ColumnType::Text) => ColumnType::Text,
        _ if t.rows.is_empty() => ColumnType::Text,
        _ if ints => ColumnType::Int,
        _ if numbers => ColumnType::Float,
        _ => ColumnType::Text,
    }
}

/// A table read generically from SQLite, typed by [`column_type`] (blobs as hex text).
fn raw_frame(
    name: &str,
    t: &RawTable,
    declared: &[(String, String)],
) -> Result<DataFrame, ReportError> {
    let columns = t
        .columns
        .iter()
        .enumerate()
        .map(|(c, col)| {
            let values = t.rows.iter().map(|r| r.get(c).unwrap_or(&Value::Null));
            let decl = declared
                .iter()
                .find(|(n, _)| n == col)
                .map(|(_, d)| d.as_str());
            match column_type(t, c, decl) {
                ColumnType::Int => Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Integer(i) => Some(*i),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                ColumnType::Float => Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Integer(i) => Some(*i as f64),
                            Value::Real(x) => Some(*x),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                ),
                ColumnType::Text => Column::new(
                    col.as_str().into(),
                    values
                        .map(|v| match v {
                            Value::Null => None,
                            Value::Integer(i) => Some(i.to_string()),
                            Value::Real(x) => Some(x.to_string()),
                            Value::Text(s) => Some(s.clone()),
                            Value::Blob(b) => Some(crate::digest::hex(b)),
                        })
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect();
    frame(name, columns)
}
