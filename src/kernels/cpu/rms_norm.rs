//! RMSNorm, y = x · γ / √(mean(x²) + ε) over the last dimension, forward and backward.

use super::rows::{block_rows, for_blocks2};
use super::simd::{dot, multiversion};

multiversion! {
    fn forward_block(x: &[f32], gamma: &[f32], eps: f32, y: &mut [f32], inv_rms: &mut [f32]) {
        let d = gamma.len();
        for (r, (x, y)) in x.chunks_exact(d).zip(y.chunks_exact_mut(d)).enumerate() {
            let inv = 1.0 / (dot(x, x) / d as f32 + eps).sqrt();
            inv_rms[r] = inv;
            for j in 0..d {
                y[j] = x[j] * inv * gamma[j];
            }
        }
    }
}

/// The normalised rows and each row's 1/rms (for [`backward`]).
///
/// # Shapes
/// - `x`: `[rows, d]`; `gamma`: `[d]`
/// - returns: (`y [rows, d]`, `inv_rms [rows]`)
pub fn forward(x: &[f32], gamma: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>) {
    let d = gamma.len();
    let rows = x.len() / d.max(1);
    let (mut y, mut inv_rms) = (vec![0.0f32; x.len()], vec![0.0f32; rows]);
    let block = block_rows(rows, 2 * d);
    for_blocks2(&mut y, d, &mut inv_rms, 1, block, |first, y, inv| {
        let n = inv.len();
        forward_block(&x[first * d..(first + n) * d], gamma, eps, y, inv);
    });
    (y, inv_rms)
}

multiversion! {
    fn backward_block(x: &[f32], gamma: &[f32], inv_rms: &[f32], grad: &[f32], dx: &mut [f32], d_gamma: &mut [f32]) {
        let d = gamma.len();
        d_gamma.fill(0.0);
        let rows = x.chunks_exact(d).zip(grad.chunks_exact(d)).zip(dx.chunks_exact_mut(d));
        for (r, ((x, dy), dx)) in rows.enumerate() {
            let inv = inv_rms[r];
            // mean over j of dy_j·γ_j·x̂_j, x̂ = x·inv
            let mut acc = 0.0f32;
            for j in 0..d {
                acc = (dy[j] * gamma[j]).mul_add(x[j], acc);
            }
            let c = acc * inv * inv / d as f32;
            for j in 0..d {
                dx[j] = inv * (dy[j] * gamma[j] - x[j] * c);
                d_gamma[j] = (dy[j] * x[j]).mul_add(inv, d_gamma[j]);
            }
        }
    }
}

/// Gradients of Σ grad · y with respect to `x` and `gamma`.
///
/// # Shapes
/// - `x`, `grad`: `[rows, d]`; `gamma`: `[d]`; `inv_rms`: `[rows]`
/// - returns: (`dx [rows, d]`, `d_gamma [d]`)
pub fn backward(x: &[f32], gamma: &[f32], inv_rms: &[f32], grad: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let d = gamma.len();
    let rows = inv_rms.len();
    let block = block_rows(rows, 4 * d);
    let blocks = rows.div_ceil(block.max(1));
    let mut dx = vec![0.0f32; x.len()];
    let mut partial = vec![0.0f32; blocks * d];
    // one "row" of the loop below is a block of rows, with its own partial Σ for d_gamma
    for_blocks2(&mut dx, block * d, &mut partial, d, 1, |b, dx, part| {
        let (first, n) = (b * block, dx.len() / d);
        let r = first * d..(first + n) * d;
        backward_block(
            &x[r.clone()],
            gamma,
            &inv_rms[first..first + n],
            &grad[r],
            dx,
            part,
        );
    });
    let mut d_gamma = vec![0.0f32; d];
    for part in partial.chunks_exact(d) {
        for (g, p) in d_gamma.iter_mut().zip(part) {
            *g += p;
        }
    }
    (dx, d_gamma)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f64], gamma: &[f64], eps: f64) -> Vec<f64> {
        let d = gamma.len();
        x.chunks(d)
            .flat_map(|row| {
                let ms = row.iter().map(|v| v * v).sum::<f64>() / d as f64;
                let inv = 1.0 / (ms + eps).sqrt();
                row.iter()
                    .zip(gamma)
                    .map(move |(v, g)| v * inv * g)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn matches_f64_and_finite_differences() {
        let (rows, d) = (37, 24);
        let x: Vec<f32> = (0..rows * d)
            .map(|i| (i as f32 * 0.37).sin() * 2.0)
            .collect();
        let gamma: Vec<f32> = (0..d).map(|i| 1.0 + (i as f32 * 0.3).cos() * 0.5).collect();
        let grad: Vec<f32> = (0..rows * d).map(|i| (i as f32 * 0.05).cos()).collect();
        let eps = 1e-5;
        let (y, inv) = forward(&x, &gamma, eps);
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let g64: Vec<f64> = gamma.iter().map(|&v| v as f64).collect();
        let want = reference(&x64, &g64, eps as f64);
        for (a, b) in y.iter().zip(&want) {
            assert!((*a as f64 - b).abs() < 1e-5);
        }
        let (dx, dg) = backward(&x, &gamma, &inv, &grad);
        let objective = |x: &[f64], g: &[f64]| -> f64 {
            reference(x, g, eps as f64)
                .iter()
                .zip(&grad)
                .map(|(y, w)| y * *w as f64)
                .sum()
        };
        let h = 1e-6;
        for i in [0, 5, 100, 500, rows * d - 1] {
            let (mut up, mut down) = (x64.clone(), x64.clone());
            up[i] += h;
            down[i] -= h;
            let num = (objective(&up, &g64) - objective(&down, &g64)) / (2.0 * h);
            assert!(
                (dx[i] as f64 - num).abs() < 1e-4,
                "dx[{i}] {} vs {num}",
                dx[i]
            );
        }
        for j in 0..d {
            let (mut up, mut down) = (g64.clone(), g64.clone());
            up[j] += h;
            down[j] -= h;
            let num = (objective(&x64, &up) - objective(&x64, &down)) / (2.0 * h);
            assert!(
                (dg[j] as f64 - num).abs() < 1e-3,
                "dγ[{j}] {} vs {num}",
                dg[j]
            );
        }
    }
}
