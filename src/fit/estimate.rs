//! One complete fit of a law to a set of points: the grid search, bootstrap confidence
//! intervals, residuals and the leave-largest-out extrapolation error, as plain data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bootstrap::{bootstrap_thetas, percentile_interval};
use super::data::{DataPoint, SupervisedSource, Support, check_fittable};
use super::error::FitError;
use super::fitter::{LocalFit, Optimiser, minimize, minimize_from_starts, minimize_grid};
use super::grid::StartGrid;
use super::laws::{Busbridge, Chinchilla, DistillLaw, Law, LawKind, Point};

/// What to fit and how.
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// L-BFGS settings, Huber δ included.
    pub optimiser: Optimiser,
    /// The start grid; `None` for the law's default.
    pub grid: Option<StartGrid>,
    /// Bootstrap resamples (0 = no confidence intervals).
    pub bootstrap: usize,
    /// Seed of the bootstrap.
    pub seed: u64,
    /// Distinct local optima of the full grid each bootstrap refit starts from.
    pub bootstrap_starts: usize,
    /// Confidence level of the intervals.
    pub ci_level: f64,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            optimiser: Optimiser::default(),
            grid: None,
            bootstrap: 1000,
            seed: 0,
            bootstrap_starts: 4,
            ci_level: 0.95,
        }
    }
}

/// One point's fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residual {
    /// The point.
    #[serde(flatten)]
    pub point: DataPoint,
    /// The law's prediction.
    pub predicted: f64,
    /// log predicted − log observed.
    pub log_residual: f64,
}

/// The leave-largest-out check: fit without the largest model size, predict it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extrapolation {
    /// The model size held out (the student's, for distillation).
    pub held_out_params: f64,
    /// Points held out.
    pub n_held_out: usize,
    /// Points the law was fitted to.
    pub n_fitted: usize,
    /// Mean of |predicted − observed| / observed over the held-out points.
    pub mean_abs_rel_error: f64,
    /// Largest such error.
    pub max_abs_rel_error: f64,
    /// (observed, predicted) of each held-out point.
    pub points: Vec<[f64; 2]>,
}

/// A fitted law with its uncertainty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The law.
    pub law: LawKind,
    /// Where the points came from (a file, or a sweep scope).
    pub source: String,
    /// Points fitted.
    pub n_points: usize,
    /// The objective at the optimum (sum of Huber losses).
    pub objective: f64,
    /// Natural parameters (E, A, B, alpha, beta, ...).
    pub params: BTreeMap<String, f64>,
    /// The optimum in the law's log-space parametrisation.
    pub theta: Vec<f64>,
    /// Percentile intervals of the natural parameters.
    pub ci: BTreeMap<String, [f64; 2]>,
    /// Their level (0.95).
    pub ci_level: f64,
    /// Bootstrap resamples asked for.
    pub bootstrap: usize,
    /// Resamples that gave a finite fit (the intervals use these).
    pub bootstrap_ok: usize,
    /// Huber δ.
    pub delta: f64,
    /// Bootstrap seed.
    pub seed: u64,
    /// Grid starts tried.
    pub starts: usize,
    /// Starts that ended finite.
    pub starts_finite: usize,
    /// Root mean square of the log residuals.
    pub rmse_log: f64,
    /// Per-point predictions.
    pub residuals: Vec<Residual>,
    /// Leave-largest-out extrapolation error (`None` when too few sizes remain).
    pub extrapolation: Option<Extrapolation>,
    /// Things the reader should know (e.g. unidentified parameters).
    pub warnings: Vec<String>,
    /// How many distinct points, sizes and budgets the fit rests on (replicates count once).
    #[serde(default)]
    pub support: Support,
    /// Parameters whose bootstrap interval is too wide to mean anything (spanning more than a
    /// factor `UNIDENTIFIED_RATIO`, or ten times the value's own size): the data do
    /// not pin them down, so their intervals are shown as "not identified".
    #[serde(default)]
    pub unidentified: Vec<String>,
    /// Natural parameters of each successful bootstrap resample (not part of the JSON output;
    /// the database stores them).
    #[serde(skip)]
    pub samples: Vec<Vec<f64>>,
}

impl Fit {
    /// The value of natural parameter `name`, or NaN.
    pub fn param(&self, name: &str) -> f64 {
        self.params.get(name).copied().unwrap_or(f64::NAN)
    }

    /// The fitted supervised law, if this is one.
    pub fn supervised(&self) -> Option<SupervisedSource> {
        match self.law {
            LawKind::Chinchilla => Some(SupervisedSource::Chinchilla(Chinchilla::from_theta(
                &self.theta,
            ))),
            LawKind::Busbridge => Some(SupervisedSource::Busbridge(Busbridge::from_theta(
                &self.theta,
            ))),
            LawKind::Distill => None,
        }
    }

    /// Bootstrap sample `i` (cyclically) of a supervised fit as a law; `None` for a distillation
    /// fit or one without samples.
    ///
    /// Samples hold natural parameters in the order of [`LawKind::param_names`].
    pub fn supervised_sample(&self, i: usize) -> Option<SupervisedSource> {
        let s = self.samples.get(i % self.samples.len().max(1))?;
        if s.len() < self.law.n_params() {
            return None; // a stored sample cut short (a damaged database): no law, not a panic
        }
        match self.law {
            LawKind::Chinchilla => Some(SupervisedSource::Chinchilla(Chinchilla {
                E: s[0],
                A: s[1],
                B: s[2],
                alpha: s[3],
                beta: s[4],
            })),
            LawKind::Busbridge => Some(SupervisedSource::Busbridge(Busbridge {
                E: s[0],
                A: s[1],
                B: s[2],
                alpha: s[3],
                beta: s[4],
                gamma: s[5],
            })),
            LawKind::Distill => None,
        }
    }

    /// The fitted distillation law, if this is one.
    pub fn distill(&self) -> Option<DistillLaw> {
        (self.law == LawKind::Distill).then(|| DistillLaw::from_theta(&self.theta))
    }

    /// Prediction at a data point.
    pub fn predict(&self, p: &DataPoint) -> f64 {
        self.law.log_predict(&self.theta, &p.to_point()).exp()
    }
}

/// Fits `law` to `points` (named `source` in messages): every start of the grid, then the
/// bootstrap, residuals and the extrapolation check.
pub fn fit(
    law: LawKind,
    source: &str,
    points: &[DataPoint],
    opts: &FitOptions,
) -> Result<Fit, FitError> {
    if !(opts.optimiser.delta > 0.0 && opts.optimiser.delta.is_finite()) {
        return Err(FitError::Invalid(format!(
            "the Huber delta must be a positive number, not `{}`\n\nhint: `--delta 1e-3`",
            opts.optimiser.delta
        )));
    }
    let (support, warnings) = check_fittable(law, source, points)?;
    let grid = match &opts.grid {
        Some(g) => g.clone(),
        None => law.default_grid(),
    };
    if grid.axes.len() != law.n_params() || grid.is_empty() {
        return Err(FitError::Invalid(format!(
            "the start grid has {} axes and {} starts; the {law} law needs {} axes and at least one start",
            grid.axes.len(),
            grid.len(),
            law.n_params()
        )));
    }
    match law {
        LawKind::Chinchilla => {
            fit_with::<Chinchilla>(source, points, &grid, opts, (support, warnings))
        }
        LawKind::Busbridge => {
            fit_with::<Busbridge>(source, points, &grid, opts, (support, warnings))
        }
        LawKind::Distill => {
            fit_with::<DistillLaw>(source, points, &grid, opts, (support, warnings))
        }
    }
}

fn fit_with<L: Law>(
    source: &str,
    data: &[DataPoint],
    grid: &StartGrid,
    opts: &FitOptions,
    (support, mut warnings): (Support, Vec<String>),
) -> Result<Fit, FitError> {
    let points: Vec<Point> = data.iter().map(DataPoint::to_point).collect();
    let opt = &opts.optimiser;
    let grid_fit = minimize_grid::<L>(&points, grid, opt, opts.bootstrap_starts.max(1) + 1)
        .ok_or_else(|| FitError::NoFit {
            law: L::KIND.to_string(),
            source_name: source.to_string(),
        })?;
    // Polish the distinct optima with tight tolerances (SciPy-style ones stop early when the
    // objective is small); bootstrap refits and the extrapolation check start from them too.
    let refit = Optimiser {
        tol_grad: opt.tol_grad * 1e-4,
        tol_cost: opt.tol_cost * 1e-4,
        ..opt.clone()
    };
    let optima = polished_optima::<L>(&points, &grid_fit.optima, &refit);
    let best = &optima[0];
    let starts: Vec<Vec<f64>> = optima.iter().map(|f| f.theta.clone()).collect();

    let names = L::NAMES;
    let natural = L::from_theta(&best.theta).natural();
    let params: BTreeMap<String, f64> = names
        .iter()
        .map(|n| n.to_string())
        .zip(natural.iter().copied())
        .collect();

    // Refits start next to an optimum, where SciPy-style tolerances would stop at once and
    // shrink the intervals; they are cheap, so they run to the tight tolerances too.
    let opt = &refit;
    let thetas = bootstrap_thetas::<L>(&points, &starts, opt, opts.bootstrap, opts.seed);
    let samples: Vec<Vec<f64>> = thetas
        .into_iter()
        .flatten()
        .map(|t| L::from_theta(&t).natural())
        .filter(|v| v.iter().all(|x| x.is_finite()))
        .collect();
    let ci = intervals(names, &samples, opts.ci_level);

    let unidentified = unidentified(names, &natural, &ci);
    if !unidentified.is_empty() {
        warnings.push(format!(
            "not identified by these data (95% interval spans more than a factor {UNIDENTIFIED_RATIO:.0}): {}",
            unidentified.join(", ")
        ));
    }
    if opts.bootstrap > 0 && samples.len() * 2 < opts.bootstrap {
        warnings.push(format!(
            "only {} of {} bootstrap resamples gave a finite fit: the intervals rest on few refits",
            samples.len(),
            opts.bootstrap
        ));
    }
    let residuals = residuals::<L>(data, &points, &best.theta);
    let rmse_log = rmse_log(&residuals);

    Ok(Fit {
        law: L::KIND,
        source: source.to_string(),
        n_points: data.len(),
        objective: best.objective,
        params,
        theta: best.theta.clone(),
        ci,
        ci_level: opts.ci_level,
        bootstrap: opts.bootstrap,
        bootstrap_ok: samples.len(),
        delta: opts.optimiser.delta,
        seed: opts.seed,
        starts: grid_fit.starts,
        starts_finite: grid_fit.finite,
        rmse_log,
        residuals,
        extrapolation: leave_largest_out::<L>(data, &points, &starts, opt),
        warnings,
        support,
        unidentified,
        samples,
    })
}

/// The grid's distinct optima polished with the tight `refit` tolerances (kept as they were
/// where polishing does not improve them), best first.
fn polished_optima<L: Law>(
    points: &[Point],
    optima: &[LocalFit],
    refit: &Optimiser,
) -> Vec<LocalFit> {
    let mut optima: Vec<LocalFit> = optima
        .iter()
        .map(|f| {
            minimize::<L>(points, &f.theta, refit)
                .filter(|g| g.objective <= f.objective)
                .unwrap_or_else(|| f.clone())
        })
        .collect();
    optima.sort_by(|a, b| a.objective.total_cmp(&b.objective));
    optima
}

/// The `level` percentile interval of each parameter over the bootstrap `samples` (none
/// without samples).
fn intervals(names: &[&str], samples: &[Vec<f64>], level: f64) -> BTreeMap<String, [f64; 2]> {
    if samples.is_empty() {
        BTreeMap::new()
    } else {
        names
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let column: Vec<f64> = samples.iter().map(|s| s[k]).collect();
                (n.to_string(), percentile_interval(&column, level))
            })
            .collect()
    }
}

/// Each data point's prediction at `theta` and its log residual.
fn residuals<L: Law>(data: &[DataPoint], points: &[Point], theta: &[f64]) -> Vec<Residual> {
    data.iter()
        .zip(points)
        .map(|(d, p)| {
            let log_pred = L::KIND.log_predict(theta, p);
            Residual {
                point: *d,
                predicted: log_pred.exp(),
                log_residual: log_pred - p.ln_loss,
            }
        })
        .collect()
}

/// The root mean square of the log residuals.
fn rmse_log(residuals: &[Residual]) -> f64 {
    (residuals
        .iter()
        .map(|r| r.log_residual.powi(2))
        .sum::<f64>()
        / residuals.len() as f64)
        .sqrt()
}

/// An interval wider than this factor (hi / lo, for a positive parameter) identifies nothing.
pub(crate) const UNIDENTIFIED_RATIO: f64 = 1000.0;

/// The parameters whose interval says the data do not determine them: a positive interval
/// spanning more than [`UNIDENTIFIED_RATIO`], or any interval wider than ten times the
/// larger of the value's size and 1.
fn unidentified(names: &[&str], values: &[f64], ci: &BTreeMap<String, [f64; 2]>) -> Vec<String> {
    names
        .iter()
        .zip(values)
        .filter(|(n, v)| {
            ci.get(**n).is_some_and(|&[lo, hi]| {
                !(lo.is_finite() && hi.is_finite())
                    || (lo > 0.0 && hi / lo > UNIDENTIFIED_RATIO)
                    || hi - lo > 10.0 * v.abs().max(1.0)
            })
        })
        .map(|(n, _)| n.to_string())
        .collect()
}

/// Refits without the largest model size (from the full fit's optima) and predicts it.
fn leave_largest_out<L: Law>(
    data: &[DataPoint],
    points: &[Point],
    starts: &[Vec<f64>],
    opt: &Optimiser,
) -> Option<Extrapolation> {
    let largest = data.iter().map(|p| p.params).fold(f64::MIN, f64::max);
    let is_largest = |p: &DataPoint| p.params >= largest * (1.0 - 1e-9);
    let train: Vec<DataPoint> = data.iter().filter(|p| !is_largest(p)).copied().collect();
    check_fittable(L::KIND, "", &train).ok()?;
    let train_points: Vec<Point> = data
        .iter()
        .zip(points)
        .filter(|(d, _)| !is_largest(d))
        .map(|(_, p)| *p)
        .collect();
    let LocalFit { theta, .. } = minimize_from_starts::<L>(&train_points, starts, opt)?;
    let held: Vec<[f64; 2]> = data
        .iter()
        .zip(points)
        .filter(|(d, _)| is_largest(d))
        .map(|(d, p)| [d.loss, L::KIND.log_predict(&theta, p).exp()])
        .collect();
    let errs: Vec<f64> = held.iter().map(|[o, p]| (p - o).abs() / o).collect();
    Some(Extrapolation {
        held_out_params: largest,
        n_held_out: held.len(),
        n_fitted: train_points.len(),
        mean_abs_rel_error: errs.iter().sum::<f64>() / errs.len() as f64,
        max_abs_rel_error: errs.iter().copied().fold(0.0, f64::max),
        points: held,
    })
}
