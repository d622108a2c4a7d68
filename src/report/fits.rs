//! The integration point between stored fits (`pdsweep fit`, the `fits` table) and the
//! report's views: the one place that turns fitted laws into [`FitViews`] fields.
//!
//! It reads the table's JSON columns by field name (the `result_json` of each fit, as
//! `src/fit/store.rs` writes it: a `Fit`, a `CapacityGap` or a `TStarScaling`), so the report
//! does not depend on the fitting code's Rust types, and a fit it cannot read is reported as
//! such rather than failing the report.

use std::collections::BTreeMap;

use rusqlite::types::Value as Sql;
use serde_json::Value;

use super::data::{
    CapacityGapView, Estimate, FitViews, GapVerdict, LawView, OptimalPoint, ReportData, TrendForm,
    TrendView,
};
use super::error::ReportError;
use crate::fit::{SCOPE_SUMMARY, current_call_floor};
use crate::store::SweepDb;

/// One stored fit: the newest row of its (scope, key, law).
#[derive(Debug, Clone)]
struct Stored {
    law: String,
    scope: String,
    key: String,
    created_at: String,
    result: Value,
}

/// Reads the newest fit of each (scope, key, law) from the `fits` table (none without one).
fn stored(db: &SweepDb) -> Result<(Vec<Stored>, usize), ReportError> {
    let table = db.raw_table("fits")?;
    let col = |name: &str| table.columns.iter().position(|c| c == name);
    let (Some(id), Some(law), Some(scope), Some(key), Some(result)) = (
        col("id"),
        col("law"),
        col("scope"),
        col("key"),
        col("result_json"),
    ) else {
        return Ok((Vec::new(), table.rows.len()));
    };
    let created = col("created_at");
    let text = |row: &[Sql], i: usize| match row.get(i) {
        Some(Sql::Text(s)) => s.clone(),
        _ => String::new(),
    };
    let row_id = |row: &[Sql]| match row.get(id) {
        Some(Sql::Integer(i)) => *i,
        _ => 0,
    };
    // Only the newest `pdsweep fit` call's rows: older calls' fits of groups it no longer
    // fits (a budget dropped from the sweep file) are history.
    let floor = current_call_floor(
        table
            .rows
            .iter()
            .filter(|row| text(row, scope) == SCOPE_SUMMARY)
            .map(|row| row_id(row)),
    );
    let mut newest: BTreeMap<(String, String, String), (i64, Stored)> = BTreeMap::new();
    let mut unreadable = 0;
    for row in table.rows.iter().filter(|row| row_id(row) > floor) {
        let row_id = row_id(row);
        let Ok(result) = serde_json::from_str::<Value>(&text(row, result)) else {
            unreadable += 1;
            continue;
        };
        let fit = Stored {
            law: text(row, law),
            scope: text(row, scope),
            key: text(row, key),
            created_at: created.map(|c| text(row, c)).unwrap_or_default(),
            result,
        };
        let k = (fit.scope.clone(), fit.key.clone(), fit.law.clone());
        if newest.get(&k).is_none_or(|(old, _)| *old < row_id) {
            newest.insert(k, (row_id, fit));
        }
    }
    Ok((newest.into_values().map(|(_, f)| f).collect(), unreadable))
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

fn pair(v: &Value) -> Option<(f64, f64)> {
    Some((num(v.get(0)?)?, num(v.get(1)?)?))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The supervised law of a stored `Fit`.
fn law_view(fit: &Stored) -> Option<LawView> {
    let r = &fit.result;
    let params: BTreeMap<String, f64> = r["params"]
        .as_object()?
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), num(v)?)))
        .collect();
    let ci = r["ci"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), pair(v)?)))
                .collect()
        })
        .unwrap_or_default();
    let law = r["law"].as_str().unwrap_or(&fit.law).to_string();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let support: Option<crate::fit::Support> = serde_json::from_value(r["support"].clone())
        .ok()
        .filter(|s: &crate::fit::Support| s.runs > 0);
    Some(LawView {
        law,
        params,
        ci,
        extrapolation_error: num(&r["extrapolation"]["mean_abs_rel_error"]),
        warnings: strings(&r["warnings"]),
        unidentified: strings(&r["unidentified"]),
        support: support.map(|s| s.points_text()),
        thin: support.is_some_and(|s| s.is_thin()),
    })
}

/// Fills `view`'s fitted curve and T* from a stored `CapacityGap`; `false` when the fit is of
/// other runs (a stale fit).
fn fill_gap(view: &mut CapacityGapView, gap: &Value) -> bool {
    let mut stored: Vec<(f64, f64)> = gap["points"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| Some((num(&p["teacher_params"])?, num(&p["student_loss"])?)))
                .collect()
        })
        .unwrap_or_default();
    let mut ours: Vec<(f64, f64)> = view
        .points
        .iter()
        .map(|p| (p.teacher_n, p.student_loss))
        .collect();
    stored.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    ours.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let same = stored.len() == ours.len()
        && stored
            .iter()
            .zip(&ours)
            .all(|(a, b)| close(a.0, b.0) && close(a.1, b.1));
    if !same {
        return false;
    }
    let curve = &gap["by_teacher_params"];
    let samples: Vec<(f64, f64)> = curve["samples"]
        .as_array()
        .map(|s| s.iter().filter_map(pair).collect())
        .unwrap_or_default();
    if samples.len() >= 2 {
        view.fitted = Some(samples);
    }
    view.near_best = curve["near_best"]
        .as_array()
        .and_then(|r| Some([num(r.first()?)?, num(r.get(1)?)?]));
    let optimum = &curve["optimum"];
    let at = num(&optimum["at"]).unwrap_or(f64::NAN);
    match optimum["kind"].as_str() {
        Some("interior") => match rejudge(view, curve) {
            crate::fit::Optimum::Interior { at, ci, .. } => {
                let (lo, hi) = ci.map_or((at, at), |[a, b]| (a, b));
                view.t_star = Some(Estimate { value: at, lo, hi });
            }
            crate::fit::Optimum::TooFewPoints => {
                view.verdict = Some(GapVerdict::Unsupported {
                    at: view.grid_best().map_or(f64::NAN, |b| b.0),
                    reason: "fewer than 3 teachers: no curve can locate an optimum between them"
                        .into(),
                })
            }
            other => view.verdict = verdict(&other),
        },
        Some("boundary") => {
            let edge = optimum["edge"].as_str().unwrap_or("largest").to_string();
            view.verdict = verdict(&crate::fit::Optimum::Boundary { at, edge });
        }
        Some("unsupported") => {
            view.verdict = Some(GapVerdict::Unsupported {
                at,
                reason: optimum["reason"].as_str().unwrap_or("").to_string(),
            })
        }
        _ => {}
    }
    true
}

/// The stored interior optimum judged again against the view's points by the rule `pdsweep
/// fit` now applies (a fit stored by an older pdsweep may report an optimum the data do not
/// support).
fn rejudge(view: &CapacityGapView, curve: &Value) -> crate::fit::Optimum {
    let optimum = &curve["optimum"];
    let at = num(&optimum["at"]).unwrap_or(f64::NAN);
    let ci = pair(&optimum["ci"]).map(|(a, b)| [a, b]);
    let stored = crate::fit::Optimum::Interior {
        at,
        student_loss: num(&optimum["student_loss"]).unwrap_or(f64::NAN),
        ci,
        interior_fraction: num(&optimum["interior_fraction"]),
    };
    let coef = &curve["fit"]["coef"];
    let (Some(c0), Some(c1), Some(c2)) = (num(&coef[0]), num(&coef[1]), num(&coef[2])) else {
        return stored;
    };
    let q = crate::fit::Quadratic {
        coef: [c0, c1, c2],
        rmse: 0.0,
    };
    let xy: Vec<(f64, f64)> = view
        .points
        .iter()
        .map(|p| (p.teacher_n, p.student_loss))
        .collect();
    crate::fit::judge_optimum(
        &crate::fit::levels(&xy),
        &q,
        ci,
        num(&optimum["interior_fraction"]),
        &|v| super::numbers::si(v),
    )
}

/// The view's verdict for an optimum that is not a supported interior one.
fn verdict(o: &crate::fit::Optimum) -> Option<GapVerdict> {
    match o {
        crate::fit::Optimum::Boundary { at, edge } => Some(GapVerdict::Edge {
            at: *at,
            edge: edge.clone(),
            advice: o.edge_advice("teacher_params").unwrap_or_default(),
        }),
        crate::fit::Optimum::Unsupported { at, reason } => Some(GapVerdict::Unsupported {
            at: *at,
            reason: reason.clone(),
        }),
        _ => None,
    }
}

/// A T*(S) fit of a stored `TStarScaling`.
fn trend(fit: &Value) -> Option<TrendView> {
    let (p0, p1) = pair(&fit["params"])?;
    let form = match fit["form"].as_str()? {
        "linear" => TrendForm::Linear { a: p0, b: p1 },
        _ => TrendForm::Power { c: p0, k: p1 },
    };
    let names = match form {
        TrendForm::Linear { .. } => ["a", "b"],
        TrendForm::Power { .. } => ["c", "k"],
    };
    let ci = fit["ci"]
        .as_array()
        .map(|cis| {
            names
                .iter()
                .zip(cis)
                .filter_map(|(n, c)| Some((n.to_string(), pair(c)?)))
                .collect()
        })
        .unwrap_or_default();
    Some(TrendView {
        form,
        ci,
        r2: None,
        band: Vec::new(),
    })
}

/// Fills the fitted pieces of `data.fits` (the supervised law, fitted capacity-gap curves with T*
/// and its interval, T*(S) fits) from the fits stored in `db`, and says in `data.fits.notes` what
/// could not be used.
///
/// The recommendation is not stored by `pdsweep fit` (`pdsweep recommend` computes it for a student
/// size), so it stays empty here.
pub fn attach(db: &SweepDb, data: &mut ReportData) -> Result<(), ReportError> {
    let (fits, unreadable) = stored(db)?;
    let f = &mut data.fits;
    if unreadable > 0 {
        f.notes.push(format!(
            "{unreadable} stored fit(s) could not be read (see `pdsweep export`)"
        ));
    }
    if fits.is_empty() {
        return Ok(());
    }
    let newest = fits
        .iter()
        .map(|s| s.created_at.as_str())
        .max()
        .unwrap_or("");
    f.source = Some(format!("`pdsweep fit` (newest fit {newest})"));
    attach_laws(f, &fits);
    attach_summary(f, &fits);
    attach_capacity_gaps(f, &fits);
    attach_fitted_optima(f);
    attach_tstar(f, &fits);
    Ok(())
}

/// The supervised law (the Busbridge form when both were fitted: it nests Chinchilla's) and the
/// distillation law per configuration.
fn attach_laws(f: &mut FitViews, fits: &[Stored]) {
    let supervised: Vec<&Stored> = fits.iter().filter(|s| s.scope == "supervised").collect();
    let best = supervised
        .iter()
        .find(|s| s.law == "busbridge")
        .or_else(|| supervised.first());
    if let Some(law) = best.and_then(|s| law_view(s)) {
        f.supervised.law = Some(law);
    }
    f.distill = fits
        .iter()
        .filter(|s| s.scope == "distill")
        .filter_map(|s| Some((s.key.clone(), law_view(s)?)))
        .collect();
}

/// From the fit's summary: the released teachers' checks and what could not be fitted (the
/// first line of each reason).
fn attach_summary(f: &mut FitViews, fits: &[Stored]) {
    let Some(summary) = fits.iter().find(|s| s.scope == "summary") else {
        return;
    };
    f.released = serde_json::from_value(summary.result["released"].clone()).unwrap_or_default();
    f.skipped = summary.result["skipped"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| {
                    Some((
                        k["what"].as_str()?.to_string(),
                        k["reason"].as_str()?.lines().next()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
}

/// Each stored capacity-gap fit onto the curve of its student and budget; a fit no finished
/// curve matches is stale, and the notes say to fit again.
fn attach_capacity_gaps(f: &mut FitViews, fits: &[Stored]) {
    let (mut stale, mut per_budget) = (0, 0);
    for gap in fits.iter().filter(|s| s.scope == "capacity_gap") {
        let r = &gap.result;
        let (Some(s), Some(d)) = (num(&r["student_params"]), num(&r["student_tokens"])) else {
            continue;
        };
        let matched = f
            .capacity_gap
            .iter_mut()
            .filter(|v| close(v.student_n, s) && close(v.budget, d) && v.fitted.is_none())
            .any(|view| fill_gap(view, r));
        // a fit of one teacher budget's teachers (a teacher-budget sweep) has no curve of its
        // own here: the report draws one per student over every teacher
        match (matched, num(&r["teacher_tokens"])) {
            (true, _) => {}
            (false, Some(_)) => per_budget += 1,
            (false, None) => stale += 1,
        }
    }
    if per_budget > 0 {
        f.notes.push(format!(
            "{per_budget} capacity-gap fit(s) of one teacher budget each are not drawn: the report draws one curve per student over the teachers of every budget (`pdsweep fit` prints each budget's optimum)"
        ));
    }
    if stale > 0 {
        f.notes.push(format!(
            "{stale} stored capacity-gap fit(s) are of other runs than the finished ones: run `pdsweep fit` again"
        ));
    }
}

/// A fitted T* replaces the grid's best teacher where the curve has an interior optimum.
fn attach_fitted_optima(f: &mut FitViews) {
    for view in &f.capacity_gap {
        if let Some(t) = view.t_star {
            let label = view.label();
            f.optimal_teacher.points.retain(|p| p.label != label);
            f.optimal_teacher.points.push(OptimalPoint {
                student_n: view.student_n,
                label,
                t_star: t.value,
                ci: (t.lo < t.hi).then_some((t.lo, t.hi)),
                fitted: true,
                at_edge: false,
                edge: None,
            });
        }
    }
    f.optimal_teacher
        .points
        .sort_by(|a, b| a.student_n.total_cmp(&b.student_n));
}

/// The T*(S) fit over the most students (the notes say when several are stored).
fn attach_tstar(f: &mut FitViews, fits: &[Stored]) {
    let tstars: Vec<&Stored> = fits.iter().filter(|s| s.scope == "tstar").collect();
    let Some(t) = tstars
        .iter()
        .max_by_key(|s| s.result["points"].as_array().map_or(0, |p| p.len()))
    else {
        return;
    };
    f.optimal_teacher.linear = trend(&t.result["linear"]);
    f.optimal_teacher.power = trend(&t.result["power"]);
    f.optimal_teacher.better = t.result["better"].as_str().map(str::to_string);
    f.optimal_teacher.fitted_points = t.result["points"]
        .as_array()
        .map(|p| p.iter().filter_map(pair).collect())
        .unwrap_or_default();
    f.optimal_teacher.warnings = t.result["warnings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if tstars.len() > 1 {
        f.notes.push(format!(
            "{} T*(S) fits are stored (one per budget and config); the figure shows `{}`",
            tstars.len(),
            t.key
        ));
    }
}
