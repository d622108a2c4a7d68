//! The fitting objective: the SUM over points of w_i · Huber_δ(log L̂_i − log L_i) (not the
//! mean, which stops L-BFGS early), with its analytic gradient in θ.

use super::laws::{Law, MAX_THETA, Point};

/// Huber_δ(r): r²/2 for |r| ≤ δ, δ(|r| − δ/2) beyond.
#[inline]
pub(crate) fn huber(r: f64, delta: f64) -> f64 {
    let a = r.abs();
    if a <= delta {
        0.5 * r * r
    } else {
        delta * (a - 0.5 * delta)
    }
}

/// dHuber_δ/dr.
#[inline]
pub fn huber_grad(r: f64, delta: f64) -> f64 {
    r.clamp(-delta, delta)
}

/// The objective at θ, writing its gradient into `grad` (length θ.len()).
pub(crate) fn value_and_grad<L: Law>(
    theta: &[f64],
    points: &[Point],
    delta: f64,
    grad: &mut [f64],
) -> f64 {
    let k = theta.len();
    grad.fill(0.0);
    let mut total = 0.0;
    let mut g = [0.0; MAX_THETA];
    for p in points {
        let r = L::log_pred_grad(theta, p, &mut g) - p.ln_loss;
        total += p.w * huber(r, delta);
        let s = p.w * huber_grad(r, delta);
        for (acc, gi) in grad.iter_mut().zip(&g[..k]) {
            *acc += s * gi;
        }
    }
    total
}

/// The objective at θ without the gradient.
pub fn value<L: Law>(theta: &[f64], points: &[Point], delta: f64) -> f64 {
    let mut g = [0.0; MAX_THETA];
    points
        .iter()
        .map(|p| p.w * huber(L::log_pred_grad(theta, p, &mut g) - p.ln_loss, delta))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::laws::{Busbridge, Chinchilla, DistillLaw};

    fn points() -> Vec<Point> {
        let mut out = Vec::new();
        for (i, n) in [1e7f64, 5e7, 2e8, 1e9].iter().enumerate() {
            for (j, d) in [1e9f64, 5e9, 3e10].iter().enumerate() {
                let lt = 2.0 + 0.3 * i as f64;
                out.push(Point {
                    ln_n: n.ln(),
                    ln_d: d.ln(),
                    ln_lt: f64::ln(lt),
                    ln_lsup: f64::ln(2.6 + 0.1 * j as f64),
                    ln_loss: f64::ln(2.5 + 0.1 * (i + j) as f64),
                    w: 1.0 + (i % 2) as f64,
                });
            }
        }
        out
    }

    /// The objective's analytic gradient matches finite differences, in both Huber regimes.
    fn check<L: Law>(theta: &[f64], delta: f64) {
        let pts = points();
        let mut g = vec![0.0; theta.len()];
        value_and_grad::<L>(theta, &pts, delta, &mut g);
        for i in 0..theta.len() {
            let h = 1e-6;
            let (mut up, mut down) = (theta.to_vec(), theta.to_vec());
            up[i] += h;
            down[i] -= h;
            let fd = (value::<L>(&up, &pts, delta) - value::<L>(&down, &pts, delta)) / (2.0 * h);
            assert!(
                (fd - g[i]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{:?} δ={delta} θ[{i}]: analytic {} vs finite difference {fd}",
                L::KIND,
                g[i]
            );
        }
    }

    #[test]
    fn objective_gradient_matches_finite_differences() {
        for delta in [1e-3, 10.0] {
            check::<Chinchilla>(&[6.0, 7.5, 0.6, 0.35, 0.37], delta);
            check::<Busbridge>(&[8.0, 9.8, 0.2, 0.4, 0.43, 0.45], delta);
            check::<DistillLaw>(&[7.7, 10.1, 0.32, 0.64, 0.76, 2.5, 6.2, -2.4, 0.27], delta);
        }
    }

    #[test]
    fn huber_is_quadratic_then_linear() {
        assert_eq!(huber(0.5e-3, 1e-3), 0.125e-6);
        assert!((huber(-3e-3, 1e-3) - 1e-3 * 2.5e-3).abs() < 1e-18);
        assert_eq!(huber_grad(5.0, 1e-3), 1e-3);
    }
}
