//! SwiGLU, silu(gate)·up, forward and backward in one pass each, with the vectorised `exp`.

use super::rows::{for_blocks, for_blocks2};
use super::simd::{LANES, V, exp, load, map, multiversion, store};

/// σ(x) = 1 / (1 + e^{−x}) lane-wise.
#[inline(always)]
fn sigmoid(x: V) -> V {
    let e = exp(map(x, |v| -v));
    map(e, |e| 1.0 / (1.0 + e))
}

multiversion! {
    fn forward_block(gate: &[f32], up: &[f32], out: &mut [f32]) {
        let mut at = 0;
        while at < out.len() {
            let g = load(gate, at, 0.0);
            let u = load(up, at, 0.0);
            let s = sigmoid(g);
            let mut y = [0.0f32; LANES];
            for i in 0..LANES {
                y[i] = g[i] * s[i] * u[i];
            }
            store(out, at, &y);
            at += LANES;
        }
    }
}

/// Elements per parallel block.
const BLOCK: usize = 1 << 14;

/// silu(gate) · up, element-wise.
///
/// # Shapes
/// `gate`, `up`: any shape, the same; returns the same shape (flattened).
pub fn forward(gate: &[f32], up: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; gate.len()];
    for_blocks(&mut out, 1, BLOCK, |first, o| {
        let r = first..first + o.len();
        forward_block(&gate[r.clone()], &up[r], o);
    });
    out
}

multiversion! {
    fn backward_block(gate: &[f32], up: &[f32], grad: &[f32], d_gate: &mut [f32], d_up: &mut [f32]) {
        let mut at = 0;
        while at < d_gate.len() {
            let g = load(gate, at, 0.0);
            let u = load(up, at, 0.0);
            let dy = load(grad, at, 0.0);
            let s = sigmoid(g);
            let (mut dg, mut du) = ([0.0f32; LANES], [0.0f32; LANES]);
            for i in 0..LANES {
                let silu = g[i] * s[i];
                du[i] = dy[i] * silu;
                // d silu / dg = σ + g·σ·(1 − σ) = σ·(1 + g·(1 − σ))
                dg[i] = dy[i] * u[i] * s[i] * g[i].mul_add(1.0 - s[i], 1.0);
            }
            store(d_gate, at, &dg);
            store(d_up, at, &du);
            at += LANES;
        }
    }
}

/// Gradients of Σ grad · silu(gate) · up with respect to `gate` and `up`.
///
/// # Shapes
/// all the same; returns (`d_gate`, `d_up`).
pub fn backward(gate: &[f32], up: &[f32], grad: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let n = gate.len();
    let (mut d_gate, mut d_up) = (vec![0.0f32; n], vec![0.0f32; n]);
    for_blocks2(&mut d_gate, 1, &mut d_up, 1, BLOCK, |first, dg, du| {
        let r = first..first + dg.len();
        backward_block(&gate[r.clone()], &up[r.clone()], &grad[r], dg, du);
    });
    (d_gate, d_up)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silu(g: f64) -> f64 {
        g / (1.0 + (-g).exp())
    }

    #[test]
    fn forward_and_backward_match_f64_and_finite_differences() {
        let n = 1000;
        let gate: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 6.0).collect();
        let up: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos() * 2.0).collect();
        let grad: Vec<f32> = (0..n).map(|i| (i as f32 * 0.05).sin()).collect();
        let y = forward(&gate, &up);
        let (dg, du) = backward(&gate, &up, &grad);
        for i in 0..n {
            let (g, u, dy) = (gate[i] as f64, up[i] as f64, grad[i] as f64);
            assert!((y[i] as f64 - silu(g) * u).abs() < 1e-5);
            let h = 1e-6;
            let num_g = dy * u * (silu(g + h) - silu(g - h)) / (2.0 * h);
            assert!(
                (dg[i] as f64 - num_g).abs() < 1e-5,
                "{i}: {} vs {num_g}",
                dg[i]
            );
            assert!((du[i] as f64 - dy * silu(g)).abs() < 1e-5);
        }
    }
}
