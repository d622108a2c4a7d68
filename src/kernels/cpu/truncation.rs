//! Row scans of a teacher's truncation (`crate::distill::truncate`): the maximum, Σ e^{z −
//! max} in f64 over f32 lanes, and a block test for the top-k selection, compiled per
//! instruction set ([`super::simd`]). The arithmetic is the same on every path (no fused
//! multiply-adds, one summation order), so a store's bytes do not depend on the CPU.

use super::simd::multiversion;

/// Lanes of the exp sum (its summation order: 16 values in f32, then f64).
const LANES: usize = 16;

multiversion! {
    /// The largest value of `z` (−∞ for an empty row; NaNs are passed over).
    pub fn row_max(z: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let mut chunks = z.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (a, &v) in acc.iter_mut().zip(chunk) {
                *a = a.max(v);
            }
        }
        let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
        acc.iter().copied().fold(tail, f32::max)
    }
}

multiversion! {
    /// Σ e^{z − max} over `z` (every value ≤ `max`), in f64 over f32 lanes: a polynomial exp
    /// (Cephes' `expf`, relative error about 2e-7) that vectorises, where `f64::exp` per value
    /// made truncation at V = 49,152 slower than the teacher's forward pass.
    pub fn exp_sum_f64(z: &[f32], max: f32) -> f64 {
        let mut total = 0.0f64;
        let mut chunks = z.chunks_exact(LANES);
        for chunk in &mut chunks {
            let mut acc = [0.0f32; LANES];
            for (a, &v) in acc.iter_mut().zip(chunk) {
                *a = exp_nonpositive(v - max);
            }
            total += acc.iter().map(|&a| f64::from(a)).sum::<f64>();
        }
        total
            + chunks
                .remainder()
                .iter()
                .map(|&v| f64::from(exp_nonpositive(v - max)))
                .sum::<f64>()
    }
}

/// Whether every value of `block` is below `threshold` (false when any equals it or is NaN,
/// so ties are left to the caller's exact comparison).
#[inline]
pub(crate) fn none_above(block: &[f32], threshold: f32) -> bool {
    block.iter().fold(true, |all, &v| all & (v < threshold))
}

/// e^x for x ≤ 0 (x below −87 gives about 1.6e-38; NaN gives a NaN-free tiny value).
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
    let x = x.clamp(-87.0, 0.0);
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = p * r * r + r + 1.0;
    let exponent = (t.to_bits() as i32 - ROUND.to_bits() as i32 + 127) as u32;
    e * f32::from_bits(exponent << 23)
}
