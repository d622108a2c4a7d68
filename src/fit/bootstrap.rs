//! The bootstrap: resample the points (runs) with replacement, refit, and take percentile
//! intervals. Kept cheap in two ways: a resample is stored as the distinct points it drew with
//! their multiplicities as weights (about 63% of the points), and each refit starts only from
//! the full-data optimum and the few other distinct local optima the full grid found, not from
//! the whole grid. Resamples run in parallel (rayon), each with its own seeded RNG, so the
//! result does not depend on the number of threads.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;

use super::fitter::{Optimiser, minimize_from_starts};
use super::laws::{Law, Point};

/// The RNG of resample `i` under `seed`.
pub fn resample_rng(seed: u64, i: usize) -> StdRng {
    StdRng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Draws `points.len()` points with replacement; returns the distinct ones drawn, each
/// weighted by how often it was drawn (times its own weight).
pub fn resample(points: &[Point], rng: &mut StdRng) -> Vec<Point> {
    let n = points.len();
    let mut counts = vec![0u32; n];
    for _ in 0..n {
        counts[rng.random_range(0..n)] += 1;
    }
    points
        .iter()
        .zip(&counts)
        .filter(|(_, c)| **c > 0)
        .map(|(p, c)| Point {
            w: p.w * f64::from(*c),
            ..*p
        })
        .collect()
}

/// Indices drawn for resample `i` (the same draw as `resample` makes), for bootstraps of
/// other statistics over the same points.
pub fn resample_counts(n: usize, seed: u64, i: usize) -> Vec<u32> {
    let mut rng = resample_rng(seed, i);
    let mut counts = vec![0u32; n];
    for _ in 0..n {
        counts[rng.random_range(0..n)] += 1;
    }
    counts
}

/// θ of each of `n` resamples (`None` where no start gave a finite fit).
pub fn bootstrap_thetas<L: Law>(
    points: &[Point],
    starts: &[Vec<f64>],
    opt: &Optimiser,
    n: usize,
    seed: u64,
) -> Vec<Option<Vec<f64>>> {
    (0..n)
        .into_par_iter()
        .map(|i| {
            let mut rng = resample_rng(seed, i);
            let sample = resample(points, &mut rng);
            minimize_from_starts::<L>(&sample, starts, opt).map(|f| f.theta)
        })
        .collect()
}

/// The `q` quantile (0..=1) of `values` by linear interpolation; NaN for no values.
pub(crate) fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// The central `level` percentile interval of `values`.
pub(crate) fn percentile_interval(values: &[f64], level: f64) -> [f64; 2] {
    let tail = (1.0 - level) / 2.0;
    [quantile(values, tail), quantile(values, 1.0 - tail)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resample_keeps_total_weight_and_is_seeded() {
        let pts: Vec<Point> = (0..50)
            .map(|i| Point {
                ln_n: i as f64,
                w: 1.0,
                ..Point::default()
            })
            .collect();
        let a = resample(&pts, &mut resample_rng(7, 3));
        let b = resample(&pts, &mut resample_rng(7, 3));
        assert_eq!(a, b);
        assert_eq!(a.iter().map(|p| p.w).sum::<f64>(), 50.0);
        assert!(a.len() < 50 && a.len() > 20);
        let counts = resample_counts(50, 7, 3);
        assert_eq!(counts.iter().filter(|c| **c > 0).count(), a.len());
    }

    #[test]
    fn quantiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0, f64::NAN];
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert_eq!(percentile_interval(&v, 1.0), [1.0, 4.0]);
    }
}
