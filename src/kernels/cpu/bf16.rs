//! Matrix products with bf16 weights, for teachers that run in bf16: C (f32) = A · B where A
//! (f32 activations) is rounded to bf16 (nearest, ties to even), B is stored in bf16, and
//! every product is summed in f32 — the arithmetic of a bf16 matrix unit.
//!
//! On x86-64 with AVX512-BF16 each `vdpbf16ps` multiplies 32 bf16 pairs and adds them into 16
//! f32 sums (twice an f32 FMA's work per instruction): A is converted once into pairs of
//! consecutive columns, B is packed panel by panel (32 columns × every pair of rows, zero-padded)
//! and a 12 × 32 register tile is accumulated over the whole inner dimension. Elsewhere the same
//! rounded values go through gemm in f32 (equal products, another summation order). Products are
//! split over threads by column panels only, so a value is summed in the same order whatever the
//! pool.

use half::bf16;
use rayon::prelude::*;

/// A strided bf16 matrix: element (r, c) at `data[offset + r·rs + c·cs]`.
#[derive(Debug, Clone, Copy)]
pub struct BView<'a> {
    data: &'a [bf16],
    offset: usize,
    rs: usize,
    cs: usize,
}

impl<'a> BView<'a> {
    /// A row-major `rows × cols` matrix.
    pub fn rows(data: &'a [bf16], rows: usize, cols: usize) -> BView<'a> {
        assert_eq!(data.len(), rows * cols, "bf16 matrix of {rows} × {cols}");
        BView {
            data,
            offset: 0,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose of a row-major `rows × cols` matrix (a `cols × rows` view).
    pub fn transposed(data: &'a [bf16], rows: usize, cols: usize) -> BView<'a> {
        assert_eq!(data.len(), rows * cols, "bf16 matrix of {rows} × {cols}");
        BView {
            data,
            offset: 0,
            rs: 1,
            cs: cols,
        }
    }

    fn at(&self, r: usize, c: usize) -> bf16 {
        self.data[self.offset + r * self.rs + c * self.cs]
    }
}

/// Rows of one register tile.
const MR: usize = 12;
/// Columns of one register tile (two 16-lane vectors).
const NR: usize = 32;
/// Largest column panel one task packs (k × 256 bf16: 1 MiB at k = 2,048, inside L2).
const MAX_PANEL: usize = 256;

/// Whether this CPU has AVX512-BF16 (checked once).
pub fn native() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bf16")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A new row-major m × n matrix: `a` (row-major m × k, rounded to bf16) · `b`, summed in f32,
/// split over the current pool's threads by column panels.
pub fn product((m, n, k): (usize, usize, usize), a: &[f32], b: BView) -> Vec<f32> {
    assert_eq!(a.len(), m * k, "left matrix of {m} × {k}");
    let mut out = vec![0.0f32; m * n];
    if m == 0 || n == 0 {
        return out;
    }
    let pairs = k.div_ceil(2);
    let a_pairs = pack_a(a, m, k);
    let panel = panel_width(n);
    let out_ptr = SendPtr(out.as_mut_ptr());
    (0..n.div_ceil(panel)).into_par_iter().for_each(|p| {
        let first = p * panel;
        let cols = panel.min(n - first);
        let ptr = out_ptr;
        // SAFETY: each panel writes only columns first..first + cols of every row of `out`,
        // which no other panel writes; `out` outlives the loop.
        unsafe { panel_product(ptr.0, n, (m, cols, k, pairs), &a_pairs, b, first) };
    });
    out
}

/// A raw pointer that may cross threads (each task writes its own columns).
#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: tasks write disjoint elements (see `product`).
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}

/// Columns per task: enough panels to keep every thread busy, a multiple of [`NR`], at most
/// [`MAX_PANEL`].
fn panel_width(n: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    (n.div_ceil(threads * 4))
        .next_multiple_of(NR)
        .clamp(NR, MAX_PANEL)
}

/// Each row of `a` as pairs of consecutive bf16 values in one u32 (the even column in the low
/// half), the last pair zero-padded when k is odd.
fn pack_a(a: &[f32], m: usize, k: usize) -> Vec<u32> {
    let pairs = k.div_ceil(2);
    let mut out = vec![0u32; m * pairs];
    out.par_chunks_mut(pairs.max(1))
        .zip(a.par_chunks(k.max(1)))
        .for_each(|(dst, row)| {
            for (j, d) in dst.iter_mut().enumerate() {
                let lo = bf16::from_f32(row[2 * j]).to_bits();
                let hi = row
                    .get(2 * j + 1)
                    .map_or(0, |&v| bf16::from_f32(v).to_bits());
                *d = u32::from(lo) | (u32::from(hi) << 16);
            }
        });
    out
}

/// Columns `first..first + cols` of `b` packed for the tile kernel: for each block of [`NR`]
/// columns and each pair of rows, NR u32 values (row 2p in the low half, 2p + 1 in the high),
/// zero beyond the matrix.
fn pack_b(b: BView, (cols, k, pairs): (usize, usize, usize), first: usize) -> Vec<u32> {
    let blocks = cols.div_ceil(NR);
    let mut out = vec![0u32; blocks * pairs * NR];
    for blk in 0..blocks {
        let c0 = blk * NR;
        let width = NR.min(cols - c0);
        let dst = &mut out[blk * pairs * NR..(blk + 1) * pairs * NR];
        if b.rs == 1 {
            // a transposed matrix (a tied head, `[vocab, d]`): each column's rows are
            // consecutive, so a pair is read whole along the column
            for i in 0..width {
                let start = b.offset + (first + c0 + i) * b.cs;
                let column = &b.data[start..start + k];
                for (p, two) in column.chunks(2).enumerate() {
                    let lo = two[0].to_bits();
                    let hi = two.get(1).map_or(0, |v| v.to_bits());
                    dst[p * NR + i] = u32::from(lo) | (u32::from(hi) << 16);
                }
            }
            continue;
        }
        for p in 0..pairs {
            let row = &mut dst[p * NR..p * NR + width];
            for (i, d) in row.iter_mut().enumerate() {
                let c = first + c0 + i;
                let lo = b.at(2 * p, c).to_bits();
                let hi = if 2 * p + 1 < k {
                    b.at(2 * p + 1, c).to_bits()
                } else {
                    0
                };
                *d = u32::from(lo) | (u32::from(hi) << 16);
            }
        }
    }
    out
}

/// One column panel: packs it, then every row tile against it.
///
/// # Safety
/// `dst` must be valid for writes of an `m × ldd` row-major matrix, with columns
/// `first..first + cols` written by no other thread.
unsafe fn panel_product(
    dst: *mut f32,
    ldd: usize,
    (m, cols, k, pairs): (usize, usize, usize, usize),
    a_pairs: &[u32],
    b: BView,
    first: usize,
) {
    let packed = pack_b(b, (cols, k, pairs), first);
    if native() {
        #[cfg(target_arch = "x86_64")]
        for r0 in (0..m).step_by(MR) {
            let rows = MR.min(m - r0);
            for blk in 0..cols.div_ceil(NR) {
                let width = NR.min(cols - blk * NR);
                let tile = &packed[blk * pairs * NR..(blk + 1) * pairs * NR];
                // SAFETY: native() checked the CPU; the tile lies inside `dst` (rows r0.. of
                // m, columns first + blk·NR.. of this panel).
                unsafe {
                    avx512::tile(
                        &a_pairs[r0 * pairs..(r0 + rows) * pairs],
                        tile,
                        pairs,
                        (rows, width),
                        dst.add(r0 * ldd + first + blk * NR),
                        ldd,
                    )
                };
            }
        }
        return;
    }
    // portable: the same bf16 values widened to f32, one gemm product for the panel
    let a_f32: Vec<f32> = a_pairs.iter().flat_map(|&w| widen_pair(w)).collect();
    let b_f32: Vec<f32> = (0..k)
        .flat_map(|r| (0..cols).map(move |c| (r, c)))
        .map(|(r, c)| b.at(r, first + c).to_f32())
        .collect();
    let kp = 2 * pairs;
    let mut out = vec![0.0f32; m * cols];
    super::matmul::matmul(
        &mut out,
        0,
        cols,
        false,
        (m, cols, k),
        super::matmul::View::of(&a_f32, 0, m, k, kp, 1),
        super::matmul::View::rows(&b_f32, k, cols),
    );
    for (r, row) in out.chunks(cols.max(1)).enumerate() {
        // SAFETY: row r, columns first..first + cols of `dst`, owned by this panel.
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.add(r * ldd + first), cols) };
    }
}

/// The two bf16 values of a packed pair, as f32.
fn widen_pair(w: u32) -> [f32; 2] {
    [
        bf16::from_bits(w as u16).to_f32(),
        bf16::from_bits((w >> 16) as u16).to_f32(),
    ]
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    /// `rows × width` of C (row stride `ldd`) = the tile's rows of A · one packed block of B.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX512-BF16; `dst` must be valid for the tile;
    /// `a` holds `rows × pairs` values and `b` `pairs × NR`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn tile(
        a: &[u32],
        b: &[u32],
        pairs: usize,
        (rows, width): (usize, usize),
        dst: *mut f32,
        ldd: usize,
    ) {
        debug_assert!(a.len() >= rows * pairs && b.len() >= pairs * NR);
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let ap = a.as_ptr();
        if rows == MR {
            for p in 0..pairs {
                // SAFETY: p < pairs, so both vectors lie inside `b`.
                let (b0, b1) = unsafe { load_pair(b, p) };
                for (r, row) in acc.iter_mut().enumerate() {
                    // SAFETY: r < rows and p < pairs: inside `a`.
                    let x = bh(_mm512_set1_epi32(unsafe { *ap.add(r * pairs + p) } as i32));
                    row[0] = _mm512_dpbf16_ps(row[0], x, b0);
                    row[1] = _mm512_dpbf16_ps(row[1], x, b1);
                }
            }
        } else {
            for p in 0..pairs {
                // SAFETY: as above.
                let (b0, b1) = unsafe { load_pair(b, p) };
                for (r, row) in acc.iter_mut().enumerate().take(rows) {
                    // SAFETY: as above.
                    let x = bh(_mm512_set1_epi32(unsafe { *ap.add(r * pairs + p) } as i32));
                    row[0] = _mm512_dpbf16_ps(row[0], x, b0);
                    row[1] = _mm512_dpbf16_ps(row[1], x, b1);
                }
            }
        }
        let lanes = |n: usize| -> __mmask16 { if n >= 16 { 0xffff } else { (1u16 << n) - 1 } };
        let (m0, m1) = (lanes(width), lanes(width.saturating_sub(16)));
        for (r, row) in acc.iter().enumerate().take(rows) {
            // SAFETY: the caller guarantees `dst` holds the tile; masks stop at `width`.
            unsafe {
                let out = dst.add(r * ldd);
                _mm512_mask_storeu_ps(out, m0, row[0]);
                _mm512_mask_storeu_ps(out.add(16), m1, row[1]);
            }
        }
        debug_assert!(width <= NR);
    }

    /// The two 16-column vectors of pair `p`.
    ///
    /// # Safety
    /// `b` must hold at least `(p + 1) · NR` values.
    #[inline(always)]
    unsafe fn load_pair(b: &[u32], p: usize) -> (__m512bh, __m512bh) {
        // SAFETY: see the contract; unaligned loads.
        unsafe {
            let ptr = b.as_ptr().add(p * NR);
            (
                bh(_mm512_loadu_si512(ptr as *const _)),
                bh(_mm512_loadu_si512(ptr.add(16) as *const _)),
            )
        }
    }

    #[inline(always)]
    fn bh(x: __m512i) -> __m512bh {
        // SAFETY: both are 512-bit plain-data vectors.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(x) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32 values rounded to bf16 (nearest, ties to even).
    fn round(x: &[f32]) -> Vec<bf16> {
        x.iter().map(|&v| bf16::from_f32(v)).collect()
    }

    /// The product in f64 of the bf16-rounded values.
    fn reference(a: &[f32], b: &[bf16], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
        let ar = round(a);
        (0..m * n)
            .map(|ij| {
                let (i, j) = (ij / n, ij % n);
                (0..k)
                    .map(|l| f64::from(ar[i * k + l].to_f32()) * f64::from(b[l * n + j].to_f32()))
                    .sum()
            })
            .collect()
    }

    #[test]
    fn products_equal_f64_sums_of_the_rounded_values_at_every_edge() {
        // odd k, rows not a multiple of MR, columns not a multiple of NR or of a panel
        for &(m, n, k) in &[
            (1, 1, 1),
            (13, 33, 7),
            (25, 70, 64),
            (12, 300, 129),
            (40, 517, 96),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
            let b: Vec<bf16> = (0..k * n)
                .map(|i| bf16::from_f32((i as f32 * 0.11).cos()))
                .collect();
            let want = reference(&a, &b, (m, n, k));
            let got = product((m, n, k), &a, BView::rows(&b, k, n));
            let scale = (k as f64).sqrt() * 3.0;
            for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*x) - y).abs() <= 1e-5 * scale,
                    "{m}×{n}×{k} at {i}: {x} vs {y}"
                );
            }
            // the same matrix stored transposed and read through a transposed view
            let bt: Vec<bf16> = (0..n * k).map(|ji| b[(ji % k) * n + ji / k]).collect();
            let got_t = product((m, n, k), &a, BView::transposed(&bt, n, k));
            assert_eq!(got, got_t, "{m}×{n}×{k}: transposed view");
        }
    }

    #[test]
    fn activations_are_rounded_to_bf16_not_kept_in_f32() {
        // 1 + 2^-10 is not a bf16 value (8 bits of mantissa): it rounds to 1
        let a = [1.0 + 2f32.powi(-10), 0.0];
        let b = [bf16::from_f32(1.0), bf16::from_f32(1.0)];
        let got = product((1, 1, 2), &a, BView::rows(&b, 2, 1));
        assert_eq!(got, vec![1.0]);
    }
}
