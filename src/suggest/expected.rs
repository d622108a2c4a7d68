//! The expected width of a T* interval under a design, by simulation: sweeps drawn from the
//! fitted capacity-gap curve with the measured run-to-run noise, each fitted and bootstrapped
//! exactly as `pdsweep fit` does ([`gap_curve`]), the median width taken. A design is the
//! (teacher size, seed) of every student of one student size and budget.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};

use crate::fit::{GapPoint, Optimum, Quadratic, fitted_losses, gap_curve, levels};

/// Simulated sweeps per design and bootstrap resamples per sweep: enough to rank designs (the
/// median of 24 widths moves by a few per cent between seeds of the simulation).
const SIMULATIONS: usize = 24;
const RESAMPLES: usize = 100;

/// What a group's simulation needs: its fitted curve (student loss against ln teacher size)
/// and the noise of one run around it.
#[derive(Debug, Clone, Copy)]
pub struct CurveModel {
    /// The fitted quadratic in ln(teacher parameters).
    pub curve: Quadratic,
    /// Standard deviation of one student's (paired) loss around the curve.
    pub noise: f64,
    /// The smallest and largest teacher measured: a simulated sweep without a supported
    /// interval counts as twice this span, the same for every design compared.
    pub grid: [f64; 2],
}

impl CurveModel {
    /// The model of a group's points, when their fitted curve is U-shaped: the noise is the
    /// pooled spread of replicates of one teacher (paired losses when pairs exist), else the
    /// curve's residual.
    pub fn of(points: &[GapPoint], curve: Option<Quadratic>) -> Option<CurveModel> {
        let curve = curve.filter(|q| q.coef[2] > 0.0)?;
        let (y, _) = fitted_losses(points);
        let xy: Vec<(f64, f64)> = points
            .iter()
            .zip(&y)
            .map(|(p, y)| (p.teacher_params, *y))
            .collect();
        let (ss, df) = levels(&xy)
            .iter()
            .filter(|l| l.n >= 2)
            .fold((0.0, 0usize), |(ss, df), l| {
                (ss + l.se * l.se * (l.n * (l.n - 1)) as f64, df + l.n - 1)
            });
        let noise = if df > 0 {
            (ss / df as f64).sqrt()
        } else {
            curve.rmse
        };
        let lo = points
            .iter()
            .map(|p| p.teacher_params)
            .fold(f64::INFINITY, f64::min);
        let hi = points.iter().map(|p| p.teacher_params).fold(0.0, f64::max);
        Some(CurveModel {
            curve,
            noise: noise.max(1e-4),
            grid: [lo, hi],
        })
    }

    /// The fitted optimum T* (the curve's vertex).
    pub fn optimum(&self) -> f64 {
        (-self.curve.coef[1] / (2.0 * self.curve.coef[2])).exp()
    }
}

/// The expected T* interval under `design`: the median over simulated sweeps of the interval's
/// width as a ratio (97.5th / 2.5th percentile), and the fraction of sweeps whose optimum the data
/// support.
///
/// A sweep without a supported interval counts as twice the measured grid's span (the model's, not
/// the design's: a design that adds a teacher beyond the grid must not make its own failures look
/// worse), so a design that often fails ranks below one that rarely does.
pub fn expected_width(model: &CurveModel, design: &[(f64, u64)], seed: u64) -> (f64, f64) {
    let [lo, hi] = model.grid;
    let penalty = 2.0 * (hi / lo).ln().max(std::f64::consts::LN_2);
    let noise = Normal::new(0.0, model.noise).unwrap_or_else(|_| Normal::new(0.0, 1e-4).unwrap());
    let mut widths = Vec::with_capacity(SIMULATIONS);
    let mut supported = 0;
    for sim in 0..SIMULATIONS {
        // Common random numbers: a run's noise depends only on the simulation, its teacher and
        // its seed, so two designs differ in simulation `sim` only by the runs one of them adds
        // and the comparison of their widths is not drowned by fresh draws for the shared runs.
        let points: Vec<GapPoint> = design
            .iter()
            .map(|&(t, s)| {
                let mut rng = StdRng::seed_from_u64(point_seed(seed, sim, t, s));
                GapPoint {
                    teacher_params: t,
                    teacher_loss: f64::NAN,
                    student_loss: model.curve.at(t.ln()) + noise.sample(&mut rng),
                    seed: Some(s),
                    paired_baseline: None,
                }
            })
            .collect();
        let c = gap_curve(
            "teacher_params",
            &points,
            |p| p.teacher_params,
            RESAMPLES,
            sim as u64,
        );
        match c.optimum {
            Optimum::Interior {
                ci: Some([a, b]), ..
            } => {
                supported += 1;
                widths.push((b / a).ln());
            }
            _ => widths.push(penalty),
        }
    }
    widths.sort_by(f64::total_cmp);
    (
        widths[widths.len() / 2].exp(),
        supported as f64 / SIMULATIONS as f64,
    )
}

/// The seed of one simulated run's noise: a mix (SplitMix64 finaliser) of the simulation's
/// seed and index, the teacher size and the run's seed.
fn point_seed(seed: u64, sim: usize, teacher: f64, run_seed: u64) -> u64 {
    let mut z = seed
        ^ (sim as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ teacher.to_bits().rotate_left(17)
        ^ run_seed.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> CurveModel {
        // Minimum at 30K, 0.025 nats per (ln step)².
        let x0 = 3e4f64.ln();
        CurveModel {
            curve: Quadratic {
                coef: [3.0 + 0.025 * x0 * x0, -0.05 * x0, 0.025],
                rmse: 0.0,
            },
            noise: 0.03,
            grid: [7.5e3, 1.2e5],
        }
    }

    fn grid(teachers: &[f64], seeds: u64) -> Vec<(f64, u64)> {
        (0..seeds)
            .flat_map(|s| teachers.iter().map(move |&t| (t, s)))
            .collect()
    }

    #[test]
    fn more_seeds_and_teachers_near_the_optimum_narrow_the_expected_interval() {
        let m = model();
        assert!((m.optimum() / 3e4 - 1.0).abs() < 1e-9);
        let base = [7.5e3, 1.5e4, 3e4, 6e4, 1.2e5];
        let (w2, _) = expected_width(&m, &grid(&base, 2), 1);
        let (w4, _) = expected_width(&m, &grid(&base, 4), 1);
        assert!(w4 < w2, "4 seeds {w4:.2}x vs 2 seeds {w2:.2}x");
        let near = [7.5e3, 1.5e4, 2.1e4, 3e4, 4.2e4, 6e4, 1.2e5];
        let far = [1.9e3, 3.7e3, 7.5e3, 1.5e4, 3e4, 6e4, 1.2e5];
        let (wn, _) = expected_width(&m, &grid(&near, 2), 1);
        let (wf, _) = expected_width(&m, &grid(&far, 2), 1);
        assert!(wn < wf, "near T* {wn:.2}x vs far from it {wf:.2}x");
    }

    #[test]
    fn a_failed_simulation_costs_the_same_whatever_teacher_the_design_adds() {
        // noise so large that no simulated sweep supports an interval
        let m = CurveModel {
            noise: 50.0,
            ..model()
        };
        let base = [7.5e3, 1.5e4, 3e4, 6e4, 1.2e5];
        let (w, supported) = expected_width(&m, &grid(&base, 2), 1);
        let mut wider = grid(&base, 2);
        wider.push((1e6, 0));
        let (w_far, _) = expected_width(&m, &wider, 1);
        // twice the measured grid's span (16×): 256×, not (1e6 / 7.5e3)² for the wider design
        assert!(supported < 0.5, "{supported}");
        assert!((w / 256.0 - 1.0).abs() < 1e-9, "{w}");
        assert!((w_far / 256.0 - 1.0).abs() < 1e-9, "{w_far}");
    }
}
