//! A linear layer without bias, y = x · W, forward and backward, as whole-batch products on
//! gemm: the rows of every sequence of the batch go through one matmul.

use super::matmul::{View, product};

/// x · W.
///
/// # Shapes
/// - `x`: `[rows, d_in]`; `w`: `[d_in, d_out]`; returns `[rows, d_out]`
pub fn forward(x: &[f32], w: &[f32], rows: usize, d_in: usize, d_out: usize) -> Vec<f32> {
    product(
        (rows, d_out, d_in),
        View::rows(x, rows, d_in),
        View::rows(w, d_in, d_out),
    )
}

/// Gradients of Σ grad · (x · W): (dy · Wᵀ, xᵀ · dy).
///
/// # Shapes
/// as [`forward`]; `grad`: `[rows, d_out]`; returns (`dx [rows, d_in]`, `dw [d_in, d_out]`)
pub fn backward(
    x: &[f32],
    w: &[f32],
    grad: &[f32],
    (rows, d_in, d_out): (usize, usize, usize),
    need: (bool, bool),
) -> (Option<Vec<f32>>, Option<Vec<f32>>) {
    let dx = need.0.then(|| {
        product(
            (rows, d_in, d_out),
            View::rows(grad, rows, d_out),
            View::transposed(w, d_in, d_out),
        )
    });
    let dw = need.1.then(|| {
        product(
            (d_in, d_out, rows),
            View::transposed(x, rows, d_in),
            View::rows(grad, rows, d_out),
        )
    });
    (dx, dw)
}
