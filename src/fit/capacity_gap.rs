//! The capacity gap (`docs/src/science/capacity-gap.md`): for one student size, budget and
//! distillation config, the student's loss against teacher size and against teacher loss, a
//! quadratic in the log fitted to each with its optimum and a bootstrap interval. An interior
//! optimum is reported only when the data support it (the best measured teacher, averaged over
//! seeds, is inside the grid and inside the interval, and the curve follows the points there);
//! otherwise the answer is "edge of grid" with the direction to extend it, or "not supported" with
//! the reason. Also: the optimum from the fitted distillation law, and T*(S) across student sizes
//! fitted as a line and as a power law.

use serde::{Deserialize, Serialize};

use super::bootstrap::{percentile_interval, resample_counts};
use super::data::SupervisedSource;
use super::laws::DistillLaw;

/// One distilled student in a capacity-gap group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GapPoint {
    /// Teacher parameters.
    pub teacher_params: f64,
    /// Teacher held-out loss.
    pub teacher_loss: f64,
    /// Student held-out loss.
    pub student_loss: f64,
    /// The student's seed (replicates of one teacher differ only in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Held-out loss of the baseline with the student's size, budget and seed (the same
    /// initial weights and data order): the student's pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_baseline: Option<f64>,
}

/// What a capacity-gap curve is fitted to: each student's loss, or, when every student has a
/// same-seed baseline, its paired loss: student − own baseline + mean of those baselines.
///
/// Pairing removes what a seed does to both runs alike (initial weights, data order), so the
/// curve's noise is the noise of the gain, not of the loss.
pub(crate) fn fitted_losses(points: &[GapPoint]) -> (Vec<f64>, bool) {
    let pairs: Option<Vec<f64>> = points.iter().map(|p| p.paired_baseline).collect();
    match pairs {
        Some(b) if !b.is_empty() => {
            let mean = b.iter().sum::<f64>() / b.len() as f64;
            let y = points
                .iter()
                .zip(&b)
                .map(|(p, b)| p.student_loss - b + mean)
                .collect();
            (y, true)
        }
        _ => (points.iter().map(|p| p.student_loss).collect(), false),
    }
}

/// The gain of distillation per teacher: baseline loss − student loss, each student against its
/// same-seed baseline (`paired_baseline`), as (teacher parameters, mean gain over seeds, their
/// sample standard deviation (`None` with one seed), seeds), sorted by teacher size.
///
/// Students without a pair are left out.
pub fn paired_gains(points: &[GapPoint]) -> Vec<(f64, f64, Option<f64>, usize)> {
    let mut by_teacher: Vec<(f64, Vec<f64>)> = Vec::new();
    for p in points {
        let Some(b) = p.paired_baseline else { continue };
        match by_teacher.iter_mut().find(|(t, _)| *t == p.teacher_params) {
            Some((_, g)) => g.push(b - p.student_loss),
            None => by_teacher.push((p.teacher_params, vec![b - p.student_loss])),
        }
    }
    by_teacher.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_teacher
        .into_iter()
        .map(|(t, g)| {
            let n = g.len();
            let mean = g.iter().sum::<f64>() / n as f64;
            let sd = (n >= 2).then(|| {
                (g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            });
            (t, mean, sd, n)
        })
        .collect()
}

/// Bootstrap weights of `points` for resample `i`: with students of two or more seeds, the
/// seeds are drawn with replacement and then, within each drawn seed, its students (a two-stage
/// cluster bootstrap, so intervals carry the run-to-run noise between seeds); with one seed,
/// the students are drawn with replacement.
pub(crate) fn seed_resample(points: &[GapPoint], seed: u64, i: usize) -> Vec<f64> {
    let mut seeds: Vec<u64> = points.iter().filter_map(|p| p.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    if seeds.len() < 2 || points.iter().any(|p| p.seed.is_none()) {
        return resample_counts(points.len(), seed, i)
            .into_iter()
            .map(f64::from)
            .collect();
    }
    let members: Vec<Vec<usize>> = seeds
        .iter()
        .map(|s| {
            (0..points.len())
                .filter(|&j| points[j].seed == Some(*s))
                .collect()
        })
        .collect();
    let mut weights = vec![0.0; points.len()];
    let drawn = resample_counts(seeds.len(), seed, i);
    let mut stage = 0usize;
    for (cluster, copies) in members.iter().zip(drawn) {
        for _ in 0..copies {
            stage += 1;
            let within = resample_counts(cluster.len(), seed ^ 0x5eed_c1a5, i * 1031 + stage);
            for (&j, w) in cluster.iter().zip(within) {
                weights[j] += f64::from(w);
            }
        }
    }
    weights
}

/// y = c0 + c1·x + c2·x² with x = ln(variable), fitted by least squares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quadratic {
    /// Coefficients c0, c1, c2.
    pub coef: [f64; 3],
    /// Root mean square residual of y.
    pub rmse: f64,
}

impl Quadratic {
    /// Least squares through `(x, y)` (x already logged); `None` with fewer than 3 distinct x.
    pub fn fit(points: &[(f64, f64)], weights: Option<&[f64]>) -> Option<Quadratic> {
        let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup_by(|a, b| (*a - *b).abs() < 1e-12);
        if xs.len() < 3 {
            return None;
        }
        let w = |i: usize| weights.map_or(1.0, |w| w[i]);
        let mean = points.iter().map(|p| p.0).sum::<f64>() / points.len() as f64;
        // Normal equations in the centred variable u = x − mean, for conditioning.
        let mut m = [[0.0; 3]; 3];
        let mut v = [0.0; 3];
        for (i, &(x, y)) in points.iter().enumerate() {
            let u = x - mean;
            let phi = [1.0, u, u * u];
            for r in 0..3 {
                v[r] += w(i) * phi[r] * y;
                for c in 0..3 {
                    m[r][c] += w(i) * phi[r] * phi[c];
                }
            }
        }
        let [d0, d1, d2] = solve3(m, v)?;
        // Back to x: d0 + d1 (x − μ) + d2 (x − μ)².
        let coef = [d0 - d1 * mean + d2 * mean * mean, d1 - 2.0 * d2 * mean, d2];
        let q = Quadratic { coef, rmse: 0.0 };
        let rmse = (points
            .iter()
            .map(|&(x, y)| (q.at(x) - y).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt();
        Some(Quadratic { coef, rmse })
    }

    /// The curve at x.
    pub fn at(&self, x: f64) -> f64 {
        self.coef[0] + self.coef[1] * x + self.coef[2] * x * x
    }

    /// The minimum's x when the curve is convex and its vertex lies in `[lo, hi]`.
    pub fn interior_min(&self, lo: f64, hi: f64) -> Option<f64> {
        if self.coef[2] <= 0.0 {
            return None;
        }
        let x = -self.coef[1] / (2.0 * self.coef[2]);
        (x >= lo && x <= hi).then_some(x)
    }
}

fn solve3(mut m: [[f64; 3]; 3], mut v: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let piv = (col..3).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[piv][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, piv);
        v.swap(col, piv);
        for r in col + 1..3 {
            let f = m[r][col] / m[col][col];
            let pivot_row = m[col];
            for (x, p) in m[r].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            v[r] -= f * v[col];
        }
    }
    let mut x = [0.0; 3];
    for r in (0..3).rev() {
        let s: f64 = (r + 1..3).map(|c| m[r][c] * x[c]).sum();
        x[r] = (v[r] - s) / m[r][r];
    }
    x.iter().all(|t| t.is_finite()).then_some(x)
}

/// Where a curve is lowest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Optimum {
    /// The fitted curve has its minimum inside the measured range.
    Interior {
        /// The optimal value of the variable (teacher size or loss).
        at: f64,
        /// The fitted student loss there.
        student_loss: f64,
        /// Bootstrap percentile interval of `at`, when there are enough points to resample.
        ci: Option<[f64; 2]>,
        /// Fraction of bootstrap resamples that also had an interior minimum.
        interior_fraction: Option<f64>,
    },
    /// No interior optimum: the best measured teacher (mean over seeds) is at an edge of the
    /// grid, so the optimum is there or beyond it.
    Boundary {
        /// The edge value of the variable.
        at: f64,
        /// `smallest` or `largest` (of the measured range).
        edge: String,
    },
    /// The best measured teacher is inside the grid, but the fitted curve does not support an
    /// optimum there (no minimum near it, passing above it, or an interval excluding it).
    Unsupported {
        /// The best measured value of the variable (mean over seeds).
        at: f64,
        /// Why the fitted optimum is not reported.
        reason: String,
    },
    /// Fewer than three distinct values: no curve fitted.
    TooFewPoints,
}

impl Optimum {
    /// The interior optimum's value, when the data support one.
    pub fn interior(&self) -> Option<f64> {
        match self {
            Optimum::Interior { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// For an optimum at the edge of the grid of `variable` (`teacher_params` or
    /// `teacher_loss`): "edge of grid: extend the grid toward larger teachers" and the like.
    pub fn edge_advice(&self, variable: &str) -> Option<String> {
        let Optimum::Boundary { edge, .. } = self else {
            return None;
        };
        let toward = match (variable, edge.as_str()) {
            ("teacher_loss", "smallest") => "stronger teachers (lower teacher loss)",
            ("teacher_loss", _) => "weaker teachers (higher teacher loss)",
            (_, "smallest") => "smaller teachers",
            _ => "larger teachers",
        };
        Some(format!("edge of grid: extend the grid toward {toward}"))
    }
}

/// The students of one value of the variable (one teacher): their mean loss over seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Level {
    /// The variable (teacher size or loss), as measured.
    pub value: f64,
    /// ln(variable).
    pub x: f64,
    /// Mean student loss.
    pub mean: f64,
    /// Students (seeds).
    pub n: usize,
    /// Standard error of the mean (0 with one seed).
    pub se: f64,
}

/// The points (variable, student loss) grouped by the variable, sorted, with means over
/// replicates.
pub(crate) fn levels(points: &[(f64, f64)]) -> Vec<Level> {
    let mut sorted: Vec<(f64, f64)> = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Level> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let value = sorted[i].0;
        let x = value.ln();
        let ys: Vec<f64> = sorted[i..]
            .iter()
            .take_while(|p| (p.0 - value).abs() <= 1e-12 * value.abs())
            .map(|p| p.1)
            .collect();
        let n = ys.len();
        let mean = ys.iter().sum::<f64>() / n as f64;
        let se = if n > 1 {
            let var = ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            (var / n as f64).sqrt()
        } else {
            0.0
        };
        out.push(Level {
            value,
            x,
            mean,
            n,
            se,
        });
        i += n;
    }
    out
}

/// The pooled standard deviation of one run within a level (replicates of one teacher), from
/// the levels with two or more seeds; `None` when no level has replicates.
fn pooled_sd(levels: &[Level]) -> Option<f64> {
    let (ss, df) = levels
        .iter()
        .filter(|l| l.n >= 2)
        .fold((0.0, 0usize), |(ss, df), l| {
            (
                ss + l.se * l.se * l.n as f64 * (l.n - 1) as f64,
                df + l.n - 1,
            )
        });
    (df > 0).then(|| (ss / df as f64).sqrt())
}

/// The levels whose mean is within the noise of the best one's (`b`): mean difference at most two
/// standard errors of the difference, from the pooled replicate spread.
///
/// Without replicates only the best level itself.
fn tied_with_best(levels: &[Level], b: usize) -> std::ops::RangeInclusive<usize> {
    let Some(sd) = pooled_sd(levels) else {
        return b..=b;
    };
    let best = levels[b];
    let tied = |l: &Level| {
        l.mean - best.mean <= 2.0 * sd * (1.0 / l.n as f64 + 1.0 / best.n as f64).sqrt()
    };
    let mut lo = b;
    while lo > 0 && tied(&levels[lo - 1]) {
        lo -= 1;
    }
    let mut hi = b;
    while hi + 1 < levels.len() && tied(&levels[hi + 1]) {
        hi += 1;
    }
    lo..=hi
}

/// The range of values (lowest, highest) of `levels` (sorted by x) tied with the best one by
/// [`tied_with_best`]: the best level and its contiguous neighbours whose mean loss is within
/// two standard errors of the difference from the best's, the standard error from the pooled
/// replicate spread. Not an equivalence test: a teacher in the range is one these seeds cannot
/// tell from the best. `None` without replicates or with fewer than 3 levels.
pub fn near_best(levels: &[Level]) -> Option<[f64; 2]> {
    if levels.len() < 3 {
        return None;
    }
    pooled_sd(levels)?;
    let b = (0..levels.len()).min_by(|&i, &j| levels[i].mean.total_cmp(&levels[j].mean))?;
    let tied = tied_with_best(levels, b);
    Some([levels[*tied.start()].value, levels[*tied.end()].value])
}

/// "every teacher from A to B is within the noise of the best", for a [`near_best`] range
/// wider than one teacher, values written by `fmt`; `None` otherwise.
pub(crate) fn near_best_phrase(
    range: Option<[f64; 2]>,
    fmt: impl Fn(f64) -> String,
) -> Option<String> {
    let [lo, hi] = range?;
    (lo < hi).then(|| {
        format!(
            "every teacher from {} to {} is within the noise of the best",
            fmt(lo),
            fmt(hi)
        )
    })
}

/// Whether the data support the fitted quadratic `q`'s minimum as the optimum of `levels` (sorted
/// by x, at least three).
///
/// The best measured level (lowest mean) must be inside the grid, else the optimum is at the edge
/// or beyond it. The levels tied with it within the noise (replicates' pooled spread; only the best
/// without replicates) form the measured optimum: the curve must have its minimum between their
/// outer neighbours, must not pass above the best level by more than half the depth of the measured
/// dip (or two standard errors of its mean), and the interval `ci` of the optimum, when there is
/// one, must contain one of them. With noisy replicates the best mean is often a neighbour of the
/// true optimum, which the quadratic through every point locates better; a single-seed grid keeps
/// the strict rule. `fmt` writes a value of the variable.
pub(crate) fn judge_optimum(
    levels: &[Level],
    q: &Quadratic,
    ci: Option<[f64; 2]>,
    interior_fraction: Option<f64>,
    fmt: &dyn Fn(f64) -> String,
) -> Optimum {
    if levels.len() < 3 {
        return Optimum::TooFewPoints;
    }
    let b = (0..levels.len())
        .min_by(|&i, &j| levels[i].mean.total_cmp(&levels[j].mean))
        .unwrap_or(0);
    let last = levels.len() - 1;
    if b == 0 || b == last {
        return Optimum::Boundary {
            at: levels[b].value,
            edge: if b == 0 { "smallest" } else { "largest" }.into(),
        };
    }
    let tied = tied_with_best(levels, b);
    let (first, end) = (*tied.start(), *tied.end());
    let (prev, best, next) = (levels[b - 1], levels[b], levels[b + 1]);
    let (outer_lo, outer_hi) = (levels[first.saturating_sub(1)], levels[(end + 1).min(last)]);
    let measured = if first == end {
        format!("the best measured teacher ({})", fmt(best.value))
    } else {
        format!(
            "the best measured teachers ({}–{}, within the noise of each other)",
            fmt(levels[first].value),
            fmt(levels[end].value)
        )
    };
    let unsupported = |reason: String| Optimum::Unsupported {
        at: best.value,
        reason,
    };
    let Some(x) = q.interior_min(outer_lo.x, outer_hi.x) else {
        let reason = if q.coef[2] <= 0.0 {
            "the fitted curve is not U-shaped (it has no minimum)".to_string()
        } else {
            format!(
                "the fitted curve's minimum ({}) is not next to {measured}; a quadratic does not describe these points",
                fmt((-q.coef[1] / (2.0 * q.coef[2])).exp()),
            )
        };
        return unsupported(reason);
    };
    let depth = prev.mean.min(next.mean) - best.mean;
    let se = pooled_sd(levels).map_or(best.se, |sd| sd / (best.n as f64).sqrt());
    let tolerance = (2.0 * se).max(0.5 * depth);
    let above = q.at(best.x) - best.mean;
    if above > tolerance {
        return unsupported(format!(
            "the fitted curve passes {above:.4} nats above the best measured point (mean over {} seed(s)), more than the {tolerance:.4} the dip and the noise allow",
            best.n
        ));
    }
    if let Some([lo, hi]) = ci {
        // A tenth of the grid step around a teacher absorbs rounding of the interval.
        let slack = 0.1 * (best.x - prev.x).min(next.x - best.x);
        let inside = |l: &Level| lo.ln() - slack <= l.x && l.x <= hi.ln() + slack;
        if !levels[tied].iter().any(inside) {
            return unsupported(format!(
                "the interval of the optimum [{}, {}] excludes {measured}",
                fmt(lo),
                fmt(hi),
            ));
        }
    }
    Optimum::Interior {
        at: x.exp(),
        student_loss: q.at(x),
        ci,
        interior_fraction,
    }
}

/// A fitted curve of student loss against ln(variable), with samples for plotting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapCurve {
    /// The variable: `teacher_params` or `teacher_loss`.
    pub variable: String,
    /// The quadratic in ln(variable), if fitted.
    pub fit: Option<Quadratic>,
    /// (variable, fitted student loss) at 50 points across the measured range.
    pub samples: Vec<[f64; 2]>,
    /// The optimum.
    pub optimum: Optimum,
    /// The measured values (lowest, highest) whose mean student loss is within the noise of the
    /// best one's (`near_best`): on a plateau, the answer "any teacher in this range" beside the
    /// fitted optimum.
    ///
    /// `None` without replicates or with fewer than 3 values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_best: Option<[f64; 2]>,
    /// The optimum's value in each bootstrap resample (`None` where the resample had no
    /// interior optimum); empty without a bootstrap. Not serialised.
    #[serde(skip)]
    pub draws: Vec<Option<f64>>,
}

/// The optimum from the fitted distillation law.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LawOptimum {
    /// L_T*: the teacher loss minimising the law at this student size and budget.
    pub teacher_loss: f64,
    /// Its bootstrap interval.
    pub teacher_loss_ci: Option<[f64; 2]>,
    /// The predicted student loss at L_T*.
    pub student_loss: f64,
    /// The teacher size reaching L_T* on the teachers' token budget, by the supervised law
    /// (`None` when the supervised law cannot reach it on that budget).
    pub teacher_params: Option<f64>,
    /// Its bootstrap interval.
    pub teacher_params_ci: Option<[f64; 2]>,
}

/// Everything about one (student size, budget, config) group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityGap {
    /// Student parameters.
    pub student_params: f64,
    /// Student tokens.
    pub student_tokens: f64,
    /// The tokens every trained teacher of the group saw, when the student distilled from
    /// teachers of several budgets and the group is one of them; `None` when the group holds
    /// all of the student's teachers (one budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_tokens: Option<f64>,
    /// The distillation config (a readable key).
    pub config: String,
    /// The matching no-teacher baseline's loss, if measured (the mean over its seeds).
    pub baseline_loss: Option<f64>,
    /// Baseline seeds that mean is over.
    #[serde(default)]
    pub baseline_seeds: usize,
    /// Distinct teachers (sizes) among the points.
    #[serde(default)]
    pub teachers: usize,
    /// Distinct student seeds among the points.
    #[serde(default)]
    pub seeds: usize,
    /// The noise floor: the sample standard deviation of the replicate baselines' losses (two
    /// or more seeds), the run-to-run noise a gain must exceed to mean anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<f64>,
    /// Whether the curves were fitted to paired losses (every student had a same-seed
    /// baseline; see `fitted_losses`).
    #[serde(default)]
    pub paired: bool,
    /// The students.
    pub points: Vec<GapPoint>,
    /// Student loss against teacher size.
    pub by_teacher_params: GapCurve,
    /// Student loss against teacher loss.
    pub by_teacher_loss: GapCurve,
    /// The optimum by the fitted distillation law, when one was fitted.
    pub from_law: Option<LawOptimum>,
}

/// Fits the curve of `student_loss` against ln(`var`) with a `bootstrap`-resample interval of
/// its optimum, and judges whether the data support that optimum ([`judge_optimum`]).
pub(crate) fn gap_curve(
    variable: &str,
    points: &[GapPoint],
    var: fn(&GapPoint) -> f64,
    bootstrap: usize,
    seed: u64,
) -> GapCurve {
    let (y, _) = fitted_losses(points);
    let xy: Vec<(f64, f64)> = points
        .iter()
        .zip(&y)
        .map(|(p, y)| (var(p).ln(), *y))
        .collect();
    let lo = xy.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let hi = xy.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let raw: Vec<(f64, f64)> = points.iter().zip(&y).map(|(p, y)| (var(p), *y)).collect();
    let levels = levels(&raw);
    let near_best = near_best(&levels);
    let fit = if levels.len() >= 3 {
        Quadratic::fit(&xy, None)
    } else {
        None
    };
    let Some(q) = fit else {
        return GapCurve {
            variable: variable.into(),
            fit: None,
            samples: Vec::new(),
            optimum: Optimum::TooFewPoints,
            near_best,
            draws: Vec::new(),
        };
    };
    let samples = (0..50)
        .map(|i| {
            let x = lo + (hi - lo) * i as f64 / 49.0;
            [x.exp(), q.at(x)]
        })
        .collect();
    let mut draws = Vec::new();
    // Resampling needs more points than the quadratic has coefficients.
    let (ci, frac) = if q.interior_min(lo, hi).is_some() && xy.len() > 3 && bootstrap > 0 {
        let mut hits = Vec::new();
        for i in 0..bootstrap {
            let w = seed_resample(points, seed, i);
            let (xs, ws): (Vec<(f64, f64)>, Vec<f64>) = xy
                .iter()
                .zip(&w)
                .filter(|(_, w)| **w > 0.0)
                .map(|(p, w)| (*p, *w))
                .unzip();
            let draw = Quadratic::fit(&xs, Some(&ws))
                .and_then(|q| q.interior_min(lo, hi))
                .map(f64::exp);
            hits.extend(draw);
            draws.push(draw);
        }
        let frac = hits.len() as f64 / bootstrap as f64;
        (
            (!hits.is_empty()).then(|| percentile_interval(&hits, 0.95)),
            Some(frac),
        )
    } else {
        (None, None)
    };
    let fmt: fn(f64) -> String = if variable == "teacher_loss" {
        |v| format!("{v:.4}")
    } else {
        crate::spec::units::format_count
    };
    let optimum = judge_optimum(&levels, &q, ci, frac, &fmt);
    if optimum.interior().is_none() {
        draws.clear();
    }
    GapCurve {
        variable: variable.into(),
        fit: Some(q),
        samples,
        optimum,
        near_best,
        draws,
    }
}

/// The teacher loss minimising `law` for a student of `n_s` parameters on `d_s` tokens whose
/// supervised loss is `l_sup`: a dense scan of ln L_T over [ln 0.01, ln 100] refined by golden
/// section; `None` when the minimum is at the edge of that range.
pub(crate) fn optimal_teacher_loss(
    law: &DistillLaw,
    n_s: f64,
    d_s: f64,
    l_sup: f64,
) -> Option<(f64, f64)> {
    let f = |x: f64| law.predict(n_s, d_s, x.exp(), l_sup);
    let (lo, hi, n) = (0.01f64.ln(), 100f64.ln(), 4000);
    let step = (hi - lo) / n as f64;
    let (mut best_i, mut best) = (0, f64::INFINITY);
    for i in 0..=n {
        let v = f(lo + step * i as f64);
        if v < best {
            best = v;
            best_i = i;
        }
    }
    if best_i == 0 || best_i == n || !best.is_finite() {
        return None;
    }
    let (mut a, mut b) = (
        lo + step * (best_i - 1) as f64,
        lo + step * (best_i + 1) as f64,
    );
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..100 {
        let (c, d) = (b - g * (b - a), a + g * (b - a));
        if f(c) < f(d) {
            b = d;
        } else {
            a = c;
        }
    }
    let x = (a + b) / 2.0;
    Some((x.exp(), f(x)))
}

/// The model size at which `law` reaches `loss` on `tokens` tokens (bisection in ln N over
/// [1e3, 1e15]); `None` when the law cannot reach it in that range.
pub(crate) fn size_for_loss(law: &SupervisedSource, loss: f64, tokens: f64) -> Option<f64> {
    let (mut lo, mut hi) = (1e3f64.ln(), 1e15f64.ln());
    let f = |x: f64| law.predict(x.exp(), tokens) - loss;
    if !(f(lo) > 0.0 && f(hi) < 0.0) {
        return None;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((0.5 * (lo + hi)).exp())
}

/// A two-parameter fit of T* against student size S.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TStarFit {
    /// `linear` (T* = a·S + b) or `power` (T* = c·S^k).
    pub form: String,
    /// (a, b) or (c, k).
    pub params: [f64; 2],
    /// Bootstrap intervals of each.
    pub ci: Option<[[f64; 2]; 2]>,
    /// Root mean square of ln(fitted) − ln(T*), the comparison criterion (both forms have two
    /// parameters, so this ranks them as AIC would).
    pub rmse_log: f64,
}

impl TStarFit {
    /// T* at student size `s`.
    pub fn at(&self, s: f64) -> f64 {
        match self.form.as_str() {
            "linear" => self.params[0] * s + self.params[1],
            _ => self.params[0] * s.powf(self.params[1]),
        }
    }
}

/// T*(S) across student sizes of one budget and config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TStarScaling {
    /// Student tokens.
    pub student_tokens: f64,
    /// The teachers' budget, when the students' teachers trained on several and this fit is
    /// across the groups of one of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_tokens: Option<f64>,
    /// The distillation config.
    pub config: String,
    /// (S, T*) of each student size with an interior optimum.
    pub points: Vec<[f64; 2]>,
    /// T* = a·S + b.
    pub linear: TStarFit,
    /// T* = c·S^k.
    pub power: TStarFit,
    /// The form with the lower `rmse_log`.
    pub better: String,
    /// What the reader should know (a T* that falls with S, few points).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The power law fitted without the largest student, predicting that student's T*.
    #[serde(default)]
    pub largest_held_out: Option<TStarPrediction>,
}

/// A T*(S) law fitted on the smaller students, predicting the largest one's T*.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TStarPrediction {
    /// The held-out (largest) student size.
    pub student_params: f64,
    /// Its T* from its own capacity-gap curve.
    pub measured: f64,
    /// Its T* from the power law fitted on the other sizes.
    pub predicted: f64,
    /// predicted / measured − 1.
    pub relative_error: f64,
}

/// The power law T* = c·S^k fitted on every point but the largest S, predicting its T*; needs
/// at least two other sizes.
pub fn predict_largest(points: &[[f64; 2]]) -> Option<TStarPrediction> {
    let largest = points
        .iter()
        .copied()
        .max_by(|a, b| a[0].total_cmp(&b[0]))?;
    let rest: Vec<[f64; 2]> = points
        .iter()
        .copied()
        .filter(|p| p[0] < largest[0])
        .collect();
    if rest.len() < 2 {
        return None;
    }
    let f = fit_form("power", &rest)?;
    let predicted = f.params[0] * largest[0].powf(f.params[1]);
    Some(TStarPrediction {
        student_params: largest[0],
        measured: largest[1],
        predicted,
        relative_error: predicted / largest[1] - 1.0,
    })
}

/// The fewest student sizes a T*(S) fit needs: both forms have two parameters, so with two
/// points either passes through both exactly (rms 0) and nothing tells them apart.
pub(crate) const TSTAR_MIN_SIZES: usize = 3;

fn line(points: &[[f64; 2]]) -> Option<[f64; 2]> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p[0]).sum::<f64>() / n;
    let my = points.iter().map(|p| p[1]).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p[0] - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p[0] - mx) * (p[1] - my)).sum();
    (sxx > 0.0).then(|| [sxy / sxx, my - sxy / sxx * mx])
}

fn fit_form(form: &str, points: &[[f64; 2]]) -> Option<TStarFit> {
    let params = match form {
        "linear" => line(points)?,
        _ => {
            let logs: Vec<[f64; 2]> = points.iter().map(|p| [p[0].ln(), p[1].ln()]).collect();
            let [k, lc] = line(&logs)?;
            [lc.exp(), k]
        }
    };
    let mut f = TStarFit {
        form: form.into(),
        params,
        ci: None,
        rmse_log: 0.0,
    };
    let sq: f64 = points
        .iter()
        .map(|p| {
            let v = f.at(p[0]);
            if v > 0.0 {
                (v.ln() - p[1].ln()).powi(2)
            } else {
                f64::INFINITY
            }
        })
        .sum();
    f.rmse_log = (sq / points.len() as f64).sqrt();
    Some(f)
}

/// Fits T*(S) as a line and as a power law to `points` (S, T*), with intervals from
/// `draws`: each draw is one bootstrap replicate of every T* (same order as `points`).
pub(crate) fn tstar_scaling(
    student_tokens: f64,
    config: &str,
    points: Vec<[f64; 2]>,
    draws: &[Vec<f64>],
) -> Option<TStarScaling> {
    if points.len() < TSTAR_MIN_SIZES {
        return None;
    }
    let mut linear = fit_form("linear", &points)?;
    let mut power = fit_form("power", &points)?;
    for f in [&mut linear, &mut power] {
        let reps: Vec<[f64; 2]> = draws
            .iter()
            .filter_map(|d| {
                let pts: Vec<[f64; 2]> = points.iter().zip(d).map(|(p, t)| [p[0], *t]).collect();
                fit_form(&f.form, &pts).map(|g| g.params)
            })
            .collect();
        if reps.len() >= 20 {
            let col = |k: usize| reps.iter().map(|r| r[k]).collect::<Vec<_>>();
            f.ci = Some([
                percentile_interval(&col(0), 0.95),
                percentile_interval(&col(1), 0.95),
            ]);
        }
    }
    let better = if power.rmse_log < linear.rmse_log {
        "power"
    } else {
        "linear"
    }
    .to_string();
    let mut warnings = Vec::new();
    if linear.params[0] <= 0.0 || power.params[1] <= 0.0 {
        warnings.push(
            "T* falls as the student grows: the opposite of every published result; treat the optima as noise"
                .to_string(),
        );
    }
    if points.len() < 2 * TSTAR_MIN_SIZES {
        warnings.push(format!(
            "{} student sizes for two parameters: the comparison of forms is weak",
            points.len()
        ));
    }
    Some(TStarScaling {
        student_tokens,
        teacher_tokens: None,
        config: config.into(),
        largest_held_out: predict_largest(&points),
        points,
        linear,
        power,
        better,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::laws::Busbridge;

    #[test]
    fn the_largest_students_tstar_is_predicted_from_the_others() {
        // T* = 3·S^0.9 exactly at the two smaller sizes; the largest measured 10 % above it
        let law = |s: f64| 3.0 * s.powf(0.9);
        let pts = [[1e4, law(1e4)], [2e4, law(2e4)], [4e4, law(4e4) * 1.1]];
        let p = predict_largest(&pts).unwrap();
        assert_eq!(p.student_params, 4e4);
        assert!((p.predicted - law(4e4)).abs() < 1e-6 * law(4e4));
        assert!((p.relative_error - (1.0 / 1.1 - 1.0)).abs() < 1e-9);
        assert!(predict_largest(&pts[1..]).is_none());
    }

    #[test]
    fn quadratic_finds_an_interior_optimum_with_an_interval() {
        // U-shape in ln T with its minimum at T = 1e8, plus a little deterministic noise.
        let pts: Vec<GapPoint> = [2e7, 4e7, 8e7, 1.6e8, 3.2e8, 6.4e8, 1e8, 5e7]
            .iter()
            .enumerate()
            .map(|(i, &t): (usize, &f64)| GapPoint {
                teacher_params: t,
                teacher_loss: 3.0,
                student_loss: 3.0
                    + 0.02 * (t.ln() - 1e8f64.ln()).powi(2)
                    + 0.002 * ((i % 3) as f64 - 1.0),
                seed: None,
                paired_baseline: None,
            })
            .collect();
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 200, 1);
        let Optimum::Interior { at, ci, .. } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        assert!((at / 1e8 - 1.0).abs() < 0.1, "{at}");
        let [lo, hi] = ci.unwrap();
        assert!(lo < at && at < hi, "{lo} {at} {hi}");
    }

    #[test]
    fn monotone_curves_report_the_boundary() {
        let pts: Vec<GapPoint> = [1e7, 2e7, 4e7, 8e7]
            .iter()
            .map(|&t: &f64| GapPoint {
                teacher_params: t,
                teacher_loss: 3.0,
                student_loss: 4.0 - 0.1 * t.ln(),
                seed: None,
                paired_baseline: None,
            })
            .collect();
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 100, 1);
        let Optimum::Boundary { at, edge } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        assert!((at / 8e7 - 1.0).abs() < 1e-9 && edge == "largest");
    }

    fn gap(points: &[(f64, f64)]) -> Vec<GapPoint> {
        points
            .iter()
            .enumerate()
            .map(|(i, &(t, l))| GapPoint {
                teacher_params: t,
                teacher_loss: 3.0,
                student_loss: l,
                seed: Some(1 + (i % 2) as u64),
                paired_baseline: None,
            })
            .collect()
    }

    #[test]
    fn vertex_from_one_bad_small_teacher_is_the_edge_of_the_grid() {
        // Issue 16: one bad small teacher bends the quadratic into a vertex inside the grid,
        // while the best teacher (two seeds each) is the largest one.
        let pts = gap(&[
            (5e3, 3.80),
            (5e3, 3.84),
            (2e4, 3.20),
            (2e4, 3.22),
            (6e4, 3.15),
            (6e4, 3.17),
            (2e5, 3.135),
            (2e5, 3.15),
        ]);
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 200, 1);
        let q = c.fit.expect("a curve");
        let lo = 5e3f64.ln();
        let hi = 2e5f64.ln();
        assert!(
            q.interior_min(lo, hi).is_some(),
            "the quadratic alone would claim an interior optimum"
        );
        let Optimum::Boundary { at, ref edge } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        assert_eq!((at, edge.as_str()), (2e5, "largest"));
        assert_eq!(
            c.optimum.edge_advice("teacher_params").as_deref(),
            Some("edge of grid: extend the grid toward larger teachers")
        );
        assert!(c.draws.is_empty(), "no T* draws feed T*(S)");
    }

    #[test]
    fn parabola_above_the_best_measured_points_is_not_an_optimum() {
        // The best teacher is inside the grid, but a steep edge pulls the quadratic so that it
        // passes well above the best point and puts its minimum elsewhere.
        let pts = gap(&[
            (1e3, 4.60),
            (3e3, 3.30),
            (1e4, 3.00),
            (3e4, 3.28),
            (1e5, 3.29),
            (3e5, 3.30),
        ]);
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 200, 1);
        let Optimum::Unsupported { at, ref reason } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        assert_eq!(at, 1e4);
        assert!(
            reason.contains("above the best measured point") || reason.contains("not next to"),
            "{reason}"
        );
    }

    #[test]
    fn a_supported_optimum_has_the_best_teacher_inside_its_interval() {
        let pts = gap(&[
            (1e4, 3.40),
            (1e4, 3.42),
            (3e4, 3.21),
            (3e4, 3.23),
            (1e5, 3.16),
            (1e5, 3.18),
            (3e5, 3.22),
            (3e5, 3.24),
            (1e6, 3.41),
            (1e6, 3.43),
        ]);
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 300, 1);
        let Optimum::Interior { at, ci, .. } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        let [lo, hi] = ci.expect("an interval");
        assert!(lo < at && at < hi, "{lo} {at} {hi}");
        assert!(
            lo > 5e4 && hi < 2e5 && (at / 1e5 - 1.0).abs() < 0.1,
            "{lo} {at} {hi}"
        );
    }

    #[test]
    fn tstar_through_two_points_is_refused() {
        // Issue 16: a two-parameter line through 2 points fits exactly (rms 0) and was called
        // the better fit.
        let two = vec![[1e4, 4e4], [3e4, 9e4]];
        assert!(tstar_scaling(1e9, "kl", two, &[]).is_none());
        let three = vec![[1e4, 4e4], [3e4, 9e4], [1e5, 2e5]];
        assert!(tstar_scaling(1e9, "kl", three, &[]).is_some());
    }

    #[test]
    fn size_for_loss_inverts_the_supervised_law() {
        let law = SupervisedSource::Busbridge(Busbridge::PUBLISHED);
        let n = size_for_loss(&law, law.predict(3e8, 1e10), 1e10).unwrap();
        assert!((n / 3e8 - 1.0).abs() < 1e-6);
        assert!(size_for_loss(&law, 1.0, 1e10).is_none());
    }

    #[test]
    fn tstar_forms_are_compared() {
        let pts: Vec<[f64; 2]> = [1e7, 3e7, 1e8, 3e8].iter().map(|&s| [s, 2.5 * s]).collect();
        let t = tstar_scaling(1e9, "kl", pts, &[]).unwrap();
        assert!((t.linear.params[0] - 2.5).abs() < 1e-9);
        assert!((t.power.params[1] - 1.0).abs() < 1e-9);
    }

    /// A simulated capacity-gap sweep: 7 teachers a factor 2 apart around a known T*, `seeds`
    /// seeds; a seed shifts its student and its baseline alike (`seed_sd`, shared initial
    /// weights and data order), every run adds its own noise (`run_sd`).
    fn simulated(
        rng: &mut rand::rngs::StdRng,
        tstar: f64,
        seeds: u64,
        seed_sd: f64,
        run_sd: f64,
    ) -> Vec<GapPoint> {
        use rand_distr::{Distribution, Normal};
        let seed_noise = Normal::new(0.0, seed_sd).unwrap();
        let run_noise = Normal::new(0.0, run_sd).unwrap();
        let mut out = Vec::new();
        for s in 0..seeds {
            let shared = seed_noise.sample(rng);
            let baseline = 3.2 + shared + run_noise.sample(rng);
            for k in -3..=3 {
                let t = tstar * 2f64.powi(k);
                out.push(GapPoint {
                    teacher_params: t,
                    teacher_loss: 3.0,
                    student_loss: 3.0
                        + 0.025 * (t / tstar).ln().powi(2)
                        + shared
                        + run_noise.sample(rng),
                    seed: Some(s),
                    paired_baseline: Some(baseline),
                });
            }
        }
        out
    }

    #[test]
    fn on_a_plateau_every_teacher_within_the_noise_of_the_best_is_named() {
        // Rise, then a plateau from 8K on: 1K–4K are far worse than the noise (±0.002 per seed,
        // six seeds), 8K–64K differ by 0.0002 at most.
        let mut raw = Vec::new();
        for seed in 0..6 {
            let noise = if seed % 2 == 0 { 0.002 } else { -0.002 };
            for k in 0..7 {
                let t = 1e3 * 2f64.powi(k);
                let rise = 0.14 * (8e3 / t).ln().max(0.0) / 2f64.ln();
                raw.push((t, 3.0 + rise + noise + 0.0002 * f64::from(k % 2)));
            }
        }
        let lv = levels(&raw);
        assert_eq!(near_best(&lv), Some([8e3, 6.4e4]));
        // One seed: no spread to judge ties by.
        let one: Vec<(f64, f64)> = raw.iter().take(7).copied().collect();
        assert_eq!(near_best(&levels(&one)), None);
        // A sharp U: only the best and its neighbours within the noise.
        let u: Vec<(f64, f64)> = raw
            .iter()
            .map(|&(t, y)| {
                (
                    t,
                    y - 0.14 * (8e3 / t).ln().max(0.0) / 2f64.ln() + 0.1 * (t / 8e3).ln().powi(2),
                )
            })
            .collect();
        assert_eq!(near_best(&levels(&u)), Some([8e3, 8e3]));
    }

    #[test]
    fn pairing_with_same_seed_baselines_removes_what_a_seed_does_to_both() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        // Seeds move losses by 0.1 nats, as much as the U is deep; runs by 0.005.
        let pts = simulated(&mut rng, 1e5, 3, 0.1, 0.005);
        let (paired, is_paired) = fitted_losses(&pts);
        assert!(is_paired);
        let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 200, 1);
        let Optimum::Interior { at, .. } = c.optimum else {
            panic!("{:?}", c.optimum)
        };
        assert!((at / 1e5).ln().abs() < 0.2, "T* = {at}");
        // Unpaired, the same points are noise around the curve.
        let raw: Vec<GapPoint> = pts
            .iter()
            .map(|p| GapPoint {
                paired_baseline: None,
                ..*p
            })
            .collect();
        let rmse = |c: &GapCurve| c.fit.map(|q| q.rmse).unwrap_or(f64::NAN);
        let unpaired = gap_curve("teacher_params", &raw, |p| p.teacher_params, 0, 1);
        assert!(
            rmse(&c) * 4.0 < rmse(&unpaired),
            "paired rms {} vs unpaired {}",
            rmse(&c),
            rmse(&unpaired)
        );
        // A missing pair anywhere falls back to raw losses for the whole group.
        let mut partial = pts.clone();
        partial[0].paired_baseline = None;
        assert!(!fitted_losses(&partial).1);
        assert_eq!(paired.len(), pts.len());
    }

    #[test]
    fn the_seed_bootstrap_interval_covers_the_true_optimum_at_its_nominal_rate() {
        // 100 simulated sweeps of 3 seeds × 7 teachers a factor 2 apart with a known T*, each
        // run 0.03 nats of its own noise (the U is 0.012 nats deep one step from T*): the 95 %
        // intervals of the two-stage seed bootstrap must contain it in at least 90 of them
        // (issue 15). A sweep whose optimum is judged unsupported counts as a miss. Measured:
        // 97 of 100, median width 1.76x.
        use rand::SeedableRng;
        let truth = 3.0e4f64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        let (mut covered, mut widths) = (0, Vec::new());
        for sweep in 0..100 {
            let pts = simulated(&mut rng, truth, 3, 0.1, 0.03);
            let c = gap_curve("teacher_params", &pts, |p| p.teacher_params, 200, sweep);
            let ci = match c.optimum {
                Optimum::Interior { ci, .. } => ci,
                _ => None,
            };
            if let Some([lo, hi]) = ci {
                widths.push(hi / lo);
                if lo <= truth && truth <= hi {
                    covered += 1;
                }
            }
        }
        widths.sort_by(f64::total_cmp);
        let median = widths.get(widths.len() / 2).copied().unwrap_or(f64::NAN);
        assert!(
            covered >= 90,
            "{covered} of 100 intervals contain T*; median width {median:.2}x"
        );
        // Honest but not vacuous: the intervals are not wider than the grid.
        assert!(median < 4.0, "median interval {median:.2}x");
    }
}
