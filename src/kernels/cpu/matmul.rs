//! Matrix products through gemm (the crate burn's flex backend uses, with its AVX-512 and AVX2
//! kernels) on strided views, writing into buffers that are never zero-filled first.
//! Products are split over threads only along rows/columns of the output (never along the
//! summed dimension), so every element is summed in the same order whatever the pool.

/// A strided matrix view: element (r, c) at `ptr + r·rs + c·cs`.
#[derive(Debug, Clone, Copy)]
pub struct View {
    ptr: *const f32,
    rs: isize,
    cs: isize,
}

impl View {
    /// `rows × cols` of `x` from `offset`, with row stride `rs` and column stride `cs`;
    /// panics if it would reach past `x`.
    pub fn of(x: &[f32], offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> View {
        if rows > 0 && cols > 0 {
            assert!(offset + (rows - 1) * rs + (cols - 1) * cs < x.len());
        }
        View {
            ptr: x[offset..].as_ptr(),
            rs: rs as isize,
            cs: cs as isize,
        }
    }

    /// A row-major `rows × cols` matrix.
    pub fn rows(x: &[f32], rows: usize, cols: usize) -> View {
        View::of(x, 0, rows, cols, cols, 1)
    }

    /// The transpose of a row-major `rows × cols` matrix (a `cols × rows` view).
    pub fn transposed(x: &[f32], rows: usize, cols: usize) -> View {
        View::of(x, 0, cols, rows, 1, cols)
    }
}

/// Work (m·n·k) from which a product is split over the pool's threads.
const PARALLEL_WORK: usize = 1 << 20;

fn parallelism(m: usize, n: usize, k: usize, threaded: bool) -> gemm::Parallelism {
    let threads = rayon::current_num_threads();
    if threaded && threads > 1 && m.saturating_mul(n).saturating_mul(k) >= PARALLEL_WORK {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    }
}

/// # Safety
/// `dst` must be valid for writes (and reads when `acc`) of the m × n matrix with row
/// stride `ldd`; the views must be valid for their sizes and not overlap `dst`.
#[allow(clippy::too_many_arguments)]
unsafe fn raw(
    dst: *mut f32,
    ldd: usize,
    acc: bool,
    (m, n, k): (usize, usize, usize),
    a: View,
    b: View,
    par: gemm::Parallelism,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            ldd as isize,
            acc,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

/// `dst` (m × n, row stride `ldd`, from `offset`) = (`acc` ? dst : 0) + a (m × k) · b (k × n),
/// on this thread only (for callers that parallelise themselves).
pub fn matmul(
    dst: &mut [f32],
    offset: usize,
    ldd: usize,
    acc: bool,
    (m, n, k): (usize, usize, usize),
    a: View,
    b: View,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(offset + (m - 1) * ldd + n <= dst.len());
    // SAFETY: bounds checked above and by the views; `dst` is a separate buffer.
    unsafe {
        raw(
            dst[offset..].as_mut_ptr(),
            ldd,
            acc,
            (m, n, k),
            a,
            b,
            gemm::Parallelism::None,
        )
    };
}

/// A new row-major m × n matrix a · b, split over the current pool's threads when large.
pub fn product((m, n, k): (usize, usize, usize), a: View, b: View) -> Vec<f32> {
    let mut out = Vec::with_capacity(m * n);
    if m > 0 && n > 0 {
        // SAFETY: the buffer has room for m × n values, which gemm writes (it reads no
        // destination value when `acc` is false); then they are initialised.
        unsafe {
            raw(
                out.as_mut_ptr(),
                n,
                false,
                (m, n, k),
                a,
                b,
                parallelism(m, n, k, true),
            );
            out.set_len(m * n);
        }
    }
    out
}

/// `dst` (row-major m × n) = (`acc` ? dst : 0) + a (m × k) · b (k × n), split over the current
/// pool's threads when large.
pub fn product_into(
    dst: &mut [f32],
    acc: bool,
    (m, n, k): (usize, usize, usize),
    a: View,
    b: View,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(dst.len() >= m * n);
    // SAFETY: bounds checked above and by the views; `dst` is a separate buffer.
    unsafe {
        raw(
            dst.as_mut_ptr(),
            n,
            acc,
            (m, n, k),
            a,
            b,
            parallelism(m, n, k, true),
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_a_plain_loop_in_every_orientation() {
        let (m, n, k) = (37, 29, 53);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let want: Vec<f32> = (0..m * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum()
            })
            .collect();
        let got = product((m, n, k), View::rows(&a, m, k), View::rows(&b, k, n));
        for (x, y) in got.iter().zip(&want) {
            assert!((x - y).abs() < 1e-4);
        }
        // (aᵀ)ᵀ: a stored transposed and read back through a transposed view
        let at: Vec<f32> = (0..k * m).map(|lj| a[(lj % m) * k + lj / m]).collect();
        let got = product((m, n, k), View::transposed(&at, k, m), View::rows(&b, k, n));
        for (x, y) in got.iter().zip(&want) {
            assert!((x - y).abs() < 1e-4);
        }
    }
}
