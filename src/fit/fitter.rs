//! Minimising the Huber objective: argmin's L-BFGS with a Moré–Thuente line search from one
//! start, from every start of a grid in parallel (rayon), keeping the best and the distinct
//! local optima (which seed the bootstrap and the extrapolation check).

use std::cell::RefCell;
use std::marker::PhantomData;

use argmin::core::{CostFunction, Error as ArgminError, Executor, Gradient, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::grid::StartGrid;
use super::laws::{Law, Point};
use super::objective::value_and_grad;

/// How to run the optimiser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Optimiser {
    /// Huber δ on log residuals.
    pub delta: f64,
    /// Stop when ‖∇‖₂ falls below this.
    pub tol_grad: f64,
    /// Stop when one iteration lowers the objective by less than this (absolute, like SciPy's
    /// `ftol` for objectives below 1).
    pub tol_cost: f64,
    /// Most L-BFGS iterations per start.
    pub max_iters: u64,
    /// L-BFGS history length.
    pub memory: usize,
}

impl Default for Optimiser {
    /// δ = 1e-3, and SciPy's L-BFGS-B defaults otherwise (gtol 1e-5, ftol 2.2e-9, m = 10).
    fn default() -> Self {
        Optimiser {
            delta: 1e-3,
            tol_grad: 1e-5,
            tol_cost: 2.220446049250313e-9,
            max_iters: 1000,
            memory: 10,
        }
    }
}

/// The end of one L-BFGS run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalFit {
    /// θ at the end.
    pub theta: Vec<f64>,
    /// The objective there.
    pub objective: f64,
    /// Iterations taken.
    pub iters: u64,
}

/// The objective of one fit as argmin sees it; value and gradient are computed together and
/// cached, since the line search asks for both at the same θ.
struct Problem<'a, L> {
    points: &'a [Point],
    delta: f64,
    cache: RefCell<(Vec<f64>, f64, Vec<f64>)>,
    law: PhantomData<L>,
}

impl<L: Law> Problem<'_, L> {
    fn eval(&self, theta: &[f64]) -> (f64, Vec<f64>) {
        let mut cache = self.cache.borrow_mut();
        if cache.0.as_slice() != theta {
            cache.0.clear();
            cache.0.extend_from_slice(theta);
            cache.2.resize(theta.len(), 0.0);
            cache.1 = value_and_grad::<L>(theta, self.points, self.delta, &mut cache.2);
        }
        (cache.1, cache.2.clone())
    }
}

impl<L: Law> CostFunction for Problem<'_, L> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, theta: &Vec<f64>) -> Result<f64, ArgminError> {
        let (v, _) = self.eval(theta);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(argmin::core::ArgminError::InvalidParameter {
                text: "non-finite objective".into(),
            }
            .into())
        }
    }
}

impl<L: Law> Gradient for Problem<'_, L> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, theta: &Vec<f64>) -> Result<Vec<f64>, ArgminError> {
        Ok(self.eval(theta).1)
    }
}

/// Runs L-BFGS from `start`; `None` when the objective is not finite there.
pub(crate) fn minimize<L: Law>(
    points: &[Point],
    start: &[f64],
    opt: &Optimiser,
) -> Option<LocalFit> {
    let problem = Problem::<L> {
        points,
        delta: opt.delta,
        cache: RefCell::new((Vec::new(), f64::NAN, Vec::new())),
        law: PhantomData,
    };
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), opt.memory)
        .with_tolerance_grad(opt.tol_grad)
        .ok()?
        .with_tolerance_cost(opt.tol_cost)
        .ok()?;
    let result = Executor::new(problem, solver)
        .configure(|s| s.param(start.to_vec()).max_iters(opt.max_iters))
        .timer(false)
        .run()
        .ok()?;
    let state = result.state();
    let theta = state.get_best_param()?.clone();
    let objective = state.get_best_cost();
    (objective.is_finite() && theta.iter().all(|t| t.is_finite())).then(|| LocalFit {
        theta,
        objective,
        iters: state.get_iter(),
    })
}

/// The best of several starts, run one after the other (used inside parallel loops).
pub fn minimize_from_starts<L: Law>(
    points: &[Point],
    starts: &[Vec<f64>],
    opt: &Optimiser,
) -> Option<LocalFit> {
    starts
        .iter()
        .filter_map(|s| minimize::<L>(points, s, opt))
        .min_by(|a, b| a.objective.total_cmp(&b.objective))
}

/// Every start of a grid, fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct GridFit {
    /// The lowest objective (the first such start in grid order on ties).
    pub best: LocalFit,
    /// Distinct local optima, best first (at most `keep`), `best` included.
    pub optima: Vec<LocalFit>,
    /// Starts tried.
    pub starts: usize,
    /// Starts that ended with a finite objective.
    pub finite: usize,
}

/// Fits from every start of `grid` in parallel; `None` when no start gives a finite fit.
/// Keeps up to `keep` distinct optima (θ differing by more than 1e-3 in some coordinate).
pub fn minimize_grid<L: Law>(
    points: &[Point],
    grid: &StartGrid,
    opt: &Optimiser,
    keep: usize,
) -> Option<GridFit> {
    let fits: Vec<Option<LocalFit>> = (0..grid.len())
        .into_par_iter()
        .map(|i| minimize::<L>(points, &grid.start(i), opt))
        .collect();
    let starts = fits.len();
    let mut ok: Vec<LocalFit> = fits.into_iter().flatten().collect();
    let finite = ok.len();
    // Stable sort: ties keep grid order, so the result does not depend on thread timing.
    ok.sort_by(|a, b| a.objective.total_cmp(&b.objective));
    let best = ok.first()?.clone();
    let mut optima: Vec<LocalFit> = Vec::new();
    for f in ok {
        if optima.len() >= keep.max(1) {
            break;
        }
        let distinct = optima.iter().all(|o| {
            o.theta
                .iter()
                .zip(&f.theta)
                .any(|(x, y)| (x - y).abs() > 1e-3 * (1.0 + x.abs()))
        });
        if distinct {
            optima.push(f);
        }
    }
    Some(GridFit {
        best,
        optima,
        starts,
        finite,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::laws::Chinchilla;

    #[test]
    fn recovers_an_exact_chinchilla_law_from_one_start() {
        let truth = Chinchilla {
            E: 1.7,
            A: 400.0,
            B: 2000.0,
            alpha: 0.34,
            beta: 0.28,
        };
        let mut points = Vec::new();
        for n in [1e7, 3e7, 1e8, 3e8, 1e9, 3e9] {
            for d in [1e9, 3e9, 1e10, 3e10, 1e11] {
                points.push(Point {
                    ln_n: f64::ln(n),
                    ln_d: f64::ln(d),
                    ln_loss: truth.predict(n, d).ln(),
                    w: 1.0,
                    ..Point::default()
                });
            }
        }
        let opt = Optimiser {
            tol_grad: 1e-12,
            tol_cost: 0.0,
            ..Optimiser::default()
        };
        let fit = minimize::<Chinchilla>(&points, &[5.0, 5.0, 0.5, 0.5, 0.5], &opt).unwrap();
        let got = Chinchilla::from_theta(&fit.theta);
        assert!(fit.objective < 1e-12, "{fit:?}");
        assert!(
            (got.E - 1.7).abs() < 1e-3 && (got.alpha - 0.34).abs() < 1e-3,
            "{got:?}"
        );
    }
}
