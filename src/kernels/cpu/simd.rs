//! Vector code without a SIMD crate: the kernels are written over fixed 16-lane arrays, which
//! LLVM turns into AVX-512 or AVX2 instructions when the body is compiled with those target
//! features. [`multiversion!`] compiles a kernel once per instruction set and picks one at run
//! time, so the binary stays portable. Also the vectorised `exp` every kernel uses.
//!
//! Every arithmetic step is the same on every instruction set (16 lanes, fused multiply-adds,
//! the same reduction order), so a kernel's result does not depend on which path ran.

use std::sync::OnceLock;

/// Lanes of every vector loop (one AVX-512 register of f32, two AVX2 registers).
pub const LANES: usize = 16;

/// A vector of [`LANES`] floats.
pub type V = [f32; LANES];

/// The instruction sets a kernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512 F/VL/DQ/BW with FMA (x86-64-v4).
    Avx512,
    /// AVX2 with FMA (x86-64-v3).
    Avx2,
    /// Whatever the target baseline gives.
    Portable,
}

/// The best instruction set of this CPU, detected once. `PDSWEEP_ISA=avx2|portable` lowers it
/// (for testing the other paths).
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let best = detect();
        match std::env::var("PDSWEEP_ISA").as_deref() {
            Ok("portable") => Isa::Portable,
            Ok("avx2") if best != Isa::Portable => Isa::Avx2,
            _ => best,
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("fma")
    {
        Isa::Avx512
    } else if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        Isa::Avx2
    } else {
        Isa::Portable
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Isa {
    Isa::Portable
}

/// Defines `fn NAME(args) -> ret` whose body is compiled three times (AVX-512, AVX2, portable) and
/// chosen at run time by [`isa`].
///
/// Helpers the body calls must be `#[inline(always)]` so they are compiled with the same features.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn imp($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
            unsafe fn v4($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn v3($($arg: $ty),*) $(-> $ret)? { imp($($arg),*) }
            match $crate::kernels::cpu::simd::isa() {
                // SAFETY: `isa()` detected these features on this CPU.
                #[cfg(target_arch = "x86_64")]
                $crate::kernels::cpu::simd::Isa::Avx512 => unsafe { v4($($arg),*) },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                $crate::kernels::cpu::simd::Isa::Avx2 => unsafe { v3($($arg),*) },
                _ => imp($($arg),*),
            }
        }
    };
}
pub(crate) use multiversion;

/// Loads up to [`LANES`] values from `x[at..]`, padding with `fill`.
#[inline(always)]
pub fn load(x: &[f32], at: usize, fill: f32) -> V {
    let mut v = [fill; LANES];
    if at + LANES <= x.len() {
        v.copy_from_slice(&x[at..at + LANES]); // a fixed size: one vector load, no memcpy call
    } else {
        for (d, s) in v.iter_mut().zip(&x[at..]) {
            *d = *s;
        }
    }
    v
}

/// Stores the first `min(LANES, len - at)` lanes of `v` at `x[at..]`.
#[inline(always)]
pub fn store(x: &mut [f32], at: usize, v: &V) {
    if at + LANES <= x.len() {
        x[at..at + LANES].copy_from_slice(v);
    } else {
        for (d, s) in x[at..].iter_mut().zip(v) {
            *d = *s;
        }
    }
}

/// Lane-wise map.
#[inline(always)]
pub fn map(v: V, f: impl Fn(f32) -> f32) -> V {
    let mut out = [0.0; LANES];
    for i in 0..LANES {
        out[i] = f(v[i]);
    }
    out
}

/// The maximum of a slice (−∞ for an empty one).
#[inline(always)]
pub fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for i in 0..LANES {
            acc[i] = acc[i].max(c[i]);
        }
    }
    let mut m = f32::NEG_INFINITY;
    for v in chunks.remainder().iter().chain(acc.iter()) {
        m = m.max(*v);
    }
    m
}

/// Sum of the lanes in a fixed order (pairwise).
#[inline(always)]
pub fn hsum(v: V) -> f32 {
    let mut h = [0.0f32; 8];
    for i in 0..8 {
        h[i] = v[i] + v[i + 8];
    }
    let q = [h[0] + h[4], h[1] + h[5], h[2] + h[6], h[3] + h[7]];
    (q[0] + q[2]) + (q[1] + q[3])
}

/// Σ exp(x − shift) over a slice.
#[inline(always)]
pub fn sum_exp(x: &[f32], shift: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut at = 0;
    while at + LANES <= x.len() {
        let e = exp(map(load(x, at, 0.0), |v| v - shift));
        for i in 0..LANES {
            acc[i] += e[i];
        }
        at += LANES;
    }
    if at < x.len() {
        let e = exp(map(load(x, at, f32::NEG_INFINITY), |v| v - shift));
        for i in 0..LANES {
            acc[i] += e[i];
        }
    }
    hsum(acc)
}

/// Replaces x by e^{x − shift} and returns the sum of the new values.
#[inline(always)]
pub fn exp_shift_sum(x: &mut [f32], shift: f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut at = 0;
    while at < x.len() {
        let fill = if at + LANES <= x.len() {
            0.0
        } else {
            f32::NEG_INFINITY
        };
        let e = exp(map(load(x, at, fill), |v| v - shift));
        store(x, at, &e);
        for i in 0..LANES {
            acc[i] += e[i];
        }
        at += LANES;
    }
    hsum(acc)
}

/// Σ a·b over two slices of equal length.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut at = 0;
    while at + LANES <= a.len() {
        for i in 0..LANES {
            acc[i] = a[at + i].mul_add(b[at + i], acc[i]);
        }
        at += LANES;
    }
    for i in 0..a.len() - at {
        acc[i] = a[at + i].mul_add(b[at + i], acc[i]);
    }
    hsum(acc)
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that n·LN2_HI is exact for the |n| ≤ 128 used here.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5·2^23: adding it rounds a float of magnitude < 2^22 to an integer, kept in the low bits.
const ROUND: f32 = 12_582_912.0;
/// Below this, e^x is under the smallest normal float and the result is 0.
const EXP_LO: f32 = -87.336_55;
/// Above this, e^x overflows.
const EXP_HI: f32 = 88.722_83;

/// e^x lane-wise: range reduction x = n·ln 2 + r, |r| ≤ ln2/2, and Cephes' degree-6 polynomial for
/// e^r (relative error about 1e-7, within 2 ulp of libm).
///
/// Returns exactly 0 below −87.3 (and for −∞), +∞ above 88.7, NaN for NaN.
#[inline(always)]
#[allow(clippy::excessive_precision)] // Cephes' coefficients, written as published
pub fn exp(x: V) -> V {
    let mut out = [0.0f32; LANES];
    for i in 0..LANES {
        let v = x[i];
        let c = v.clamp(EXP_LO, EXP_HI);
        let t = c.mul_add(LOG2E, ROUND);
        let n = t - ROUND;
        let r = n.mul_add(-LN2_HI, c);
        let r = n.mul_add(-LN2_LO, r);
        let z = r * r;
        let p = 1.987_569_1e-4f32
            .mul_add(r, 1.398_199_9e-3)
            .mul_add(r, 8.333_452e-3)
            .mul_add(r, 4.166_579_6e-2)
            .mul_add(r, 1.666_666_5e-1)
            .mul_add(r, 5.000_000_1e-1);
        let e = p.mul_add(z, r) + 1.0;
        // 2^n from the integer in t's low mantissa bits.
        // 2^n as two factors, each a normal float for every n in [−126, 128]
        let k = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
        let k1 = k >> 1;
        let k2 = k.wrapping_sub(k1);
        let s1 = f32::from_bits((k1.wrapping_add(127) << 23) as u32);
        let s2 = f32::from_bits((k2.wrapping_add(127) << 23) as u32);
        let y = e * s1 * s2;
        out[i] = if v < EXP_LO {
            0.0
        } else if v > EXP_HI {
            f32::INFINITY
        } else if v.is_nan() {
            v
        } else {
            y
        };
    }
    out
}

/// e^x of one value, with the same arithmetic as [`exp`].
#[inline(always)]
pub fn exp1(x: f32) -> f32 {
    exp([x; LANES])[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// e^x over a slice, in place.
    #[inline(always)]
    fn exp_slice(x: &mut [f32]) {
        let mut at = 0;
        while at < x.len() {
            let e = exp(load(x, at, 0.0));
            store(x, at, &e);
            at += LANES;
        }
    }

    multiversion! {
        fn exp_inplace(x: &mut [f32]) {
            exp_slice(x)
        }
    }

    #[test]
    fn exp_is_within_two_ulp_of_libm_over_the_whole_range() {
        let mut worst = 0.0f64;
        let mut x = -87.3f32;
        while x < 88.7 {
            let got = exp1(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
    }

    #[test]
    fn exp_handles_the_edges() {
        assert_eq!(exp1(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp1(-1e4), 0.0);
        assert_eq!(exp1(-100.0), 0.0);
        assert_eq!(exp1(100.0), f32::INFINITY);
        assert_eq!(exp1(f32::INFINITY), f32::INFINITY);
        assert!(exp1(f32::NAN).is_nan());
        assert_eq!(exp1(0.0), 1.0);
        assert!((exp1(1.0) - std::f32::consts::E).abs() < 1e-6);
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        let xs: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.173).collect();
        let mut fast = xs.clone();
        exp_inplace(&mut fast);
        let mut portable = xs.clone();
        exp_slice(&mut portable);
        assert_eq!(fast, portable);
    }

    #[test]
    fn reductions_match_plain_sums() {
        let x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let m = max(&x);
        assert_eq!(m, x.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        let s = sum_exp(&x, m) as f64;
        let want: f64 = x.iter().map(|v| ((v - m) as f64).exp()).sum();
        assert!((s - want).abs() < 1e-5 * want);
        let d = dot(&x, &x) as f64;
        let want: f64 = x.iter().map(|v| (*v as f64) * (*v as f64)).sum();
        assert!((d - want).abs() < 1e-5 * want);
    }
}
