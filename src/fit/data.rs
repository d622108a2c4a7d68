//! Data to fit: supervised points (N, D, L) and distillation points (N_S, D_S, L_T, L̃_S, L_S),
//! read from any CSV with a column mapping and checked cell by cell, or built in code.

use crate::error::Cause;
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::FitError;
use super::laws::{Busbridge, Chinchilla, LawKind, Point};

/// One measured run: for supervised data `params`, `tokens`, `loss`; for distillation data the
/// student's `params` and `tokens`, the teacher's loss, the supervised law (or baseline) at the
/// student's size and budget, and the student's `loss`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DataPoint {
    /// Model parameters N (the student's, for distillation).
    pub params: f64,
    /// Training tokens D (the student's, for distillation).
    pub tokens: f64,
    /// Teacher loss L_T (distillation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_loss: Option<f64>,
    /// L̃_S: the supervised loss at the student's N and D (distillation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervised_loss: Option<f64>,
    /// Teacher parameters, when known (distillation only; used for capacity-gap curves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_params: Option<f64>,
    /// Teacher training tokens, when known (distillation only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_tokens: Option<f64>,
    /// The measured loss (the student's, for distillation).
    pub loss: f64,
}

impl DataPoint {
    /// A supervised point.
    pub fn supervised(params: f64, tokens: f64, loss: f64) -> DataPoint {
        DataPoint {
            params,
            tokens,
            teacher_loss: None,
            supervised_loss: None,
            teacher_params: None,
            teacher_tokens: None,
            loss,
        }
    }

    /// A distillation point.
    pub fn distill(
        student_params: f64,
        student_tokens: f64,
        teacher_loss: f64,
        supervised_loss: f64,
        student_loss: f64,
    ) -> DataPoint {
        DataPoint {
            params: student_params,
            tokens: student_tokens,
            teacher_loss: Some(teacher_loss),
            supervised_loss: Some(supervised_loss),
            teacher_params: None,
            teacher_tokens: None,
            loss: student_loss,
        }
    }

    /// The point in the fitter's log form (weight 1).
    pub fn to_point(&self) -> Point {
        Point {
            ln_n: self.params.ln(),
            ln_d: self.tokens.ln(),
            ln_lt: self.teacher_loss.map_or(0.0, f64::ln),
            ln_lsup: self.supervised_loss.map_or(0.0, f64::ln),
            ln_loss: self.loss.ln(),
            w: 1.0,
        }
    }
}

/// The columns a law reads, by role.
pub(crate) fn roles(law: LawKind) -> &'static [&'static str] {
    if law.is_distill() {
        &[
            "student_params",
            "student_tokens",
            "teacher_loss",
            "student_loss",
            "supervised_loss",
            "teacher_params",
        ]
    } else {
        &["params", "tokens", "loss", "flops"]
    }
}

/// Which CSV column plays which role: the defaults are the role names themselves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnMap(pub BTreeMap<String, String>);

impl ColumnMap {
    /// Parses `ROLE=COLUMN,ROLE=COLUMN` (column names may contain spaces) for `law`.
    pub fn parse(spec: &str, law: LawKind) -> Result<ColumnMap, FitError> {
        let known = roles(law);
        let mut map = BTreeMap::new();
        for entry in spec.split(',').filter(|e| !e.trim().is_empty()) {
            let bad = |reason: Cause| FitError::Columns {
                entry: entry.trim().to_string(),
                source: reason,
                roles: known.join(", "),
            };
            let (role, column) = entry.split_once('=').ok_or_else(|| bad("no `=`".into()))?;
            let (role, column) = (role.trim(), column.trim());
            if !known.contains(&role) {
                return Err(bad(format!(
                    "`{role}` is not a column role of the {law} law"
                )
                .into()));
            }
            if column.is_empty() {
                return Err(bad("empty column name".into()));
            }
            map.insert(role.to_string(), column.to_string());
        }
        Ok(ColumnMap(map))
    }

    /// The column name for `role`.
    pub fn column<'a>(&'a self, role: &'a str) -> &'a str {
        self.0.get(role).map_or(role, String::as_str)
    }
}

/// Where L̃_S comes from when a distillation CSV has no `supervised_loss` column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SupervisedSource {
    /// A Chinchilla law.
    Chinchilla(Chinchilla),
    /// A Busbridge supervised law (e.g. [`Busbridge::PUBLISHED`]).
    Busbridge(Busbridge),
}

impl SupervisedSource {
    /// L̃(N, D).
    pub fn predict(&self, n: f64, d: f64) -> f64 {
        match self {
            SupervisedSource::Chinchilla(l) => l.predict(n, d),
            SupervisedSource::Busbridge(l) => l.predict(n, d),
        }
    }
}

/// Reads the points of `law` from the CSV file `path`. Every used cell must be a finite
/// positive number; the first bad one is reported with its line and column.
pub fn read_csv(
    path: &Path,
    law: LawKind,
    columns: &ColumnMap,
    supervised: Option<SupervisedSource>,
) -> Result<Vec<DataPoint>, FitError> {
    let read_err = |reason: Cause| FitError::Read {
        path: path.to_path_buf(),
        source: reason,
    };
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::Headers)
        .from_path(path)
        .map_err(|e| read_err(e.into()))?;
    let header = Header {
        path,
        columns,
        names: reader
            .headers()
            .map_err(|e| read_err(e.into()))?
            .iter()
            .map(str::to_string)
            .collect(),
    };
    // Explicitly mapped optional columns must exist.
    for role in columns.0.keys() {
        header.need(role)?;
    }
    let cols = if law.is_distill() {
        header.distill_cols(supervised.is_some())?
    } else {
        header.supervised_cols()?
    };
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| read_err(e.into()))?;
        out.push(point_of(&header, &record, &cols, supervised)?);
    }
    Ok(out)
}

/// A data file's header, read against the column map.
struct Header<'a> {
    /// The file, for messages.
    path: &'a Path,
    /// Which column plays which role.
    columns: &'a ColumnMap,
    /// The column names, in order.
    names: Vec<String>,
}

/// Where each role's column is in a data file.
struct Cols {
    /// N (or N_S).
    n: usize,
    /// D (or D_S).
    d: Option<usize>,
    /// Compute C = 6ND, when D is not given.
    flops: Option<usize>,
    /// L_T.
    lt: Option<usize>,
    /// L̃_S.
    lsup: Option<usize>,
    /// N_T.
    nt: Option<usize>,
    /// The loss fitted.
    loss: usize,
}

impl Header<'_> {
    /// The index of `role`'s column, when the file has it.
    fn find(&self, role: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|h| h == self.columns.column(role))
    }

    /// The error for a missing `role` column, listing the columns the file has.
    fn missing(&self, role: &str) -> FitError {
        FitError::MissingColumn {
            path: self.path.to_path_buf(),
            column: self.columns.column(role).to_string(),
            role: role.to_string(),
            available: self
                .names
                .iter()
                .map(|h| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The index of `role`'s column, which the file must have.
    fn need(&self, role: &str) -> Result<usize, FitError> {
        self.find(role).ok_or_else(|| self.missing(role))
    }

    /// The columns of a distillation-law file; L̃_S may come from a supervised law instead
    /// (`has_supervised`).
    fn distill_cols(&self, has_supervised: bool) -> Result<Cols, FitError> {
        for role in [
            "student_params",
            "student_tokens",
            "teacher_loss",
            "student_loss",
        ] {
            self.need(role)?;
        }
        let lsup = self.find("supervised_loss");
        if lsup.is_none() && !has_supervised {
            return Err(FitError::Invalid(format!(
                "data file `{}` has no `{}` column (L̃_S, the supervised loss at the student's size and budget)\n\nhint: add that column, map it with `--columns \"supervised_loss=NAME\"`, or give `--supervised busbridge2025` or `--supervised \"E=..,A=..,B=..,alpha=..,beta=..[,gamma=..]\"`",
                self.path.display(),
                self.columns.column("supervised_loss")
            )));
        }
        Ok(Cols {
            n: self.need("student_params")?,
            d: Some(self.need("student_tokens")?),
            flops: None,
            lt: Some(self.need("teacher_loss")?),
            lsup,
            nt: self.find("teacher_params"),
            loss: self.need("student_loss")?,
        })
    }

    /// The columns of a supervised-law file: N, the loss, and D or else C.
    fn supervised_cols(&self) -> Result<Cols, FitError> {
        let d = self.find("tokens");
        let flops = self.find("flops");
        if d.is_none() && flops.is_none() {
            return Err(self.missing("tokens"));
        }
        Ok(Cols {
            n: self.need("params")?,
            d,
            flops: if d.is_some() { None } else { flops },
            lt: None,
            lsup: None,
            nt: None,
            loss: self.need("loss")?,
        })
    }
}

/// The positive, finite number in column `i` of `record`.
fn cell(header: &Header, record: &csv::StringRecord, i: usize) -> Result<f64, FitError> {
    let line = record.position().map_or(0, |p| p.line());
    let text = record.get(i).unwrap_or("").trim();
    let bad = |problem: &'static str| FitError::BadCell {
        path: header.path.to_path_buf(),
        line,
        column: header.names[i].clone(),
        value: text.to_string(),
        problem,
    };
    if text.is_empty() {
        return Err(bad("is empty"));
    }
    let v: f64 = text.parse().map_err(|_| bad("is not a number"))?;
    if !v.is_finite() {
        return Err(bad("is not a finite number"));
    }
    if v <= 0.0 {
        return Err(bad("must be positive"));
    }
    Ok(v)
}

/// One row's data point; L̃_S comes from `supervised` when the file has no column for it.
fn point_of(
    header: &Header,
    record: &csv::StringRecord,
    cols: &Cols,
    supervised: Option<SupervisedSource>,
) -> Result<DataPoint, FitError> {
    let cell = |i: usize| cell(header, record, i);
    let n = cell(cols.n)?;
    let d = match (cols.d, cols.flops) {
        (Some(i), _) => cell(i)?,
        (None, Some(i)) => cell(i)? / (6.0 * n),
        (None, None) => unreachable!("checked above"),
    };
    let loss = cell(cols.loss)?;
    let mut p = DataPoint::supervised(n, d, loss);
    if let Some(i) = cols.lt {
        p.teacher_loss = Some(cell(i)?);
        p.supervised_loss = Some(match (cols.lsup, supervised) {
            (Some(j), _) => cell(j)?,
            (None, Some(s)) => s.predict(n, d),
            (None, None) => unreachable!("checked above"),
        });
        p.teacher_params = cols.nt.map(cell).transpose()?;
    }
    Ok(p)
}

/// How much a set of points can say about a law's parameters: replicates (several seeds of one
/// size and budget) are counted once, since they repeat a point rather than add one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Support {
    /// Points (runs) given.
    pub runs: usize,
    /// Distinct inputs: (N, D) for a supervised law, (N_S, D_S, L_T) for the distillation law.
    pub distinct: usize,
    /// Distinct model sizes (student sizes for the distillation law).
    pub sizes: usize,
    /// Distinct token budgets.
    pub budgets: usize,
    /// Distinct teacher losses (distillation law only; 0 otherwise).
    pub teacher_losses: usize,
    /// The law's parameters.
    pub params: usize,
}

impl Support {
    /// Counts the distinct inputs of `points` for `law`.
    pub fn of(law: LawKind, points: &[DataPoint]) -> Support {
        let distinct = |keys: &dyn Fn(&DataPoint) -> Vec<f64>| {
            let mut v: Vec<Vec<f64>> = points.iter().map(keys).collect();
            v.sort_by(|a, b| {
                a.iter()
                    .zip(b)
                    .map(|(x, y)| x.total_cmp(y))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            v.dedup_by(|a, b| a.iter().zip(b.iter()).all(|(x, y)| same(*x, *y)));
            v.len()
        };
        let lt = |p: &DataPoint| p.teacher_loss.unwrap_or(0.0);
        Support {
            runs: points.len(),
            distinct: if law.is_distill() {
                distinct(&|p| vec![p.params, p.tokens, lt(p)])
            } else {
                distinct(&|p| vec![p.params, p.tokens])
            },
            sizes: distinct(&|p| vec![p.params]),
            budgets: distinct(&|p| vec![p.tokens]),
            teacher_losses: if law.is_distill() {
                distinct(&|p| vec![lt(p)])
            } else {
                0
            },
            params: law.n_params(),
        }
    }

    /// Fewer than two distinct points per parameter: the fit is under-determined and its
    /// intervals are not to be trusted.
    pub fn is_thin(&self) -> bool {
        self.distinct < 2 * self.params
    }

    /// `8 distinct points (16 runs)` or `8 points`.
    pub fn points_text(&self) -> String {
        if self.runs == self.distinct {
            format!("{} points", self.distinct)
        } else {
            format!(
                "{} distinct points ({} runs: repeats of one input, such as seeds, count once)",
                self.distinct, self.runs
            )
        }
    }
}

/// Equal within a relative 1e-9 (sizes and losses read back from JSON).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// A named set of points, checked to be fittable by `law`: more distinct inputs than the law has
/// parameters (replicates count once), at least two model sizes (and, for distillation, two teacher
/// losses).
///
/// Returns how much the points support (see [`Support`]) and warnings for parameters the points
/// cannot pin down.
pub(crate) fn check_fittable(
    law: LawKind,
    source: &str,
    points: &[DataPoint],
) -> Result<(Support, Vec<String>), FitError> {
    let too_little = |reason: Cause| FitError::TooLittleData {
        law: law.to_string(),
        source_name: source.to_string(),
        source: reason,
    };
    for p in points {
        let vals = [
            Some(p.params),
            Some(p.tokens),
            Some(p.loss),
            p.teacher_loss,
            p.supervised_loss,
        ];
        if vals.iter().flatten().any(|v| !v.is_finite() || *v <= 0.0) {
            return Err(too_little(
                format!("a point has a non-positive or non-finite value: {p:?}").into(),
            ));
        }
        if law.is_distill() && (p.teacher_loss.is_none() || p.supervised_loss.is_none()) {
            return Err(too_little(
                "a point has no teacher loss or supervised loss".into(),
            ));
        }
    }
    let s = Support::of(law, points);
    let k = s.params;
    if s.distinct <= k {
        return Err(too_little(
            format!(
                "{} for {k} parameters; at least {} distinct points are needed",
                s.points_text(),
                k + 1
            )
            .into(),
        ));
    }
    let size = if law.is_distill() {
        "student size"
    } else {
        "model size"
    };
    if s.sizes < 2 {
        return Err(too_little(
            format!("every point has the same {size}, so the size exponent cannot be fitted")
                .into(),
        ));
    }
    if law.is_distill() && s.teacher_losses < 2 {
        return Err(too_little(
            "every point has the same teacher loss, so the teacher terms cannot be fitted".into(),
        ));
    }
    let mut warnings = Vec::new();
    if s.is_thin() {
        warnings.push(format!(
            "UNDER-DETERMINED: {} for {k} parameters (fewer than 2 per parameter); the fit passes near every point whatever the truth, and its intervals are not reliable",
            s.points_text()
        ));
    }
    if s.sizes == 2 {
        warnings.push(format!(
            "only 2 {size}s: A and alpha (the size term) are not identified; at least 3 are needed"
        ));
    }
    if s.budgets < 2 {
        warnings.push(format!(
            "every point has the same token budget: B and beta are not identified (only their sum with {} is)",
            if law.is_distill() { "the other terms" } else { "E" }
        ));
    } else if s.budgets == 2 {
        warnings.push(
            "only 2 token budgets: B and beta are not identified separately; at least 3 are needed"
                .into(),
        );
    }
    if law.is_distill() && s.teacher_losses < 5 {
        warnings.push(format!(
            "only {} teacher losses: the capacity-gap terms (c0, c1, f1, d1) are not identified; at least 5 are needed",
            s.teacher_losses
        ));
    }
    Ok((s, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn csv(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn mapped_columns_with_spaces_and_flops() {
        let f = csv("Model Size,Training FLOP,loss\n1e6,6e15,3.5\n2e6,1.2e16,3.4\n");
        let map = ColumnMap::parse(
            "params=Model Size, flops=Training FLOP",
            LawKind::Chinchilla,
        )
        .unwrap();
        let pts = read_csv(f.path(), LawKind::Chinchilla, &map, None).unwrap();
        assert_eq!(pts.len(), 2);
        assert!((pts[0].tokens - 1e9).abs() < 1e-3);
    }

    #[test]
    fn bad_cells_name_line_and_column() {
        for (text, want) in [
            (
                "params,tokens,loss\n1e6,1e9,3\n1e6,1e9,nan\n",
                "line 3, column `loss`: `nan` is not a finite number",
            ),
            (
                "params,tokens,loss\n1e6,,3\n",
                "line 2, column `tokens`: `` is empty",
            ),
            (
                "params,tokens,loss\n-1,1e9,3\n",
                "column `params`: `-1` must be positive",
            ),
            ("params,tokens,loss\n1e6,1e9,abc\n", "`abc` is not a number"),
        ] {
            let f = csv(text);
            let err = crate::error::chain(
                &read_csv(f.path(), LawKind::Chinchilla, &ColumnMap::default(), None).unwrap_err(),
            );
            assert!(err.contains(want), "{err}");
        }
        let f = csv("params,tokens,lossy\n1,1,1\n");
        let err = crate::error::chain(
            &read_csv(f.path(), LawKind::Chinchilla, &ColumnMap::default(), None).unwrap_err(),
        );
        assert!(
            err.contains("no column `loss`") && err.contains("hint:"),
            "{err}"
        );
    }

    #[test]
    fn degenerate_sets_are_refused() {
        let pts: Vec<_> = (0..4)
            .map(|i| DataPoint::supervised(1e6 * (i + 1) as f64, 1e9, 3.0))
            .collect();
        assert!(check_fittable(LawKind::Chinchilla, "x", &pts).is_err());
        let pts: Vec<_> = (0..10)
            .map(|i| DataPoint::supervised(1e6, 1e9 * (i + 1) as f64, 3.0))
            .collect();
        let err = crate::error::chain(&check_fittable(LawKind::Chinchilla, "x", &pts).unwrap_err());
        assert!(err.contains("same model size"), "{err}");
    }
}
