//! Causal self-attention with rotary embeddings (rotate-half convention) and grouped-query
//! heads, forward and backward, straight from the projections' `[batch, seq, heads·head_dim]`
//! layout (no head transposes). Like flash attention it keeps one tile of score rows at a
//! time and only the log-normaliser of each row for the backward pass, which recomputes the
//! probabilities; the matmuls of a tile go to gemm (single-threaded, AVX-512/AVX2), skipping
//! the key blocks the causal mask hides, and work is split over the sequences of the batch.
//!
//! Per sequence, head h (key/value head g = h / (heads / kv_heads)), with q̃ = rope(q)/√hd,
//! k̃ = rope(k): s_ij = q̃_i·k̃_j for j ≤ i, p = softmax_j(s), o_i = Σ_j p_ij v_j.

use rayon::prelude::*;

use super::matmul::{View, matmul};
use super::simd::{LANES, dot, exp, exp_shift_sum, load, map, max, multiversion, store};

/// The shape of one attention call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    /// Sequences.
    pub batch: usize,
    /// Positions per sequence.
    pub seq: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (divides `heads`).
    pub kv_heads: usize,
    /// Width of a head (even).
    pub head_dim: usize,
}

impl Dims {
    fn q_len(&self) -> usize {
        self.seq * self.heads * self.head_dim
    }
    fn kv_len(&self) -> usize {
        self.seq * self.kv_heads * self.head_dim
    }
}

/// Rotary tables for positions `0..seq`, `[seq, head_dim]` each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rope<'a> {
    /// cos of the angles.
    pub cos: &'a [f32],
    /// sin of the angles.
    pub sin: &'a [f32],
}

/// Copies head `h` of one sequence (`x`: `[seq, n_heads, hd]`) rotated and scaled into
/// `out[t * hd + j]`.
#[inline(always)]
fn rope_head(
    x: &[f32],
    n_heads: usize,
    h: usize,
    hd: usize,
    rope: Rope,
    scale: f32,
    out: &mut [f32],
) {
    let half = hd / 2;
    let seq = out.len() / hd;
    for t in 0..seq {
        let src = &x[(t * n_heads + h) * hd..][..hd];
        let (c, s) = (&rope.cos[t * hd..][..hd], &rope.sin[t * hd..][..hd]);
        let dst = &mut out[t * hd..][..hd];
        for j in 0..half {
            dst[j] = (src[j] * c[j] - src[j + half] * s[j]) * scale;
            dst[j + half] = (src[j + half] * c[j + half] + src[j] * s[j + half]) * scale;
        }
    }
}

/// Transpose of [`rope_head`]'s rotation: adds scale·rotᵀ(g) for `g`: `[seq, hd]` into head
/// `h` of `out` (`[seq, n_heads, hd]`).
#[inline(always)]
fn unrope_head(
    g: &[f32],
    n_heads: usize,
    h: usize,
    hd: usize,
    rope: Rope,
    scale: f32,
    out: &mut [f32],
) {
    let half = hd / 2;
    let seq = g.len() / hd;
    for t in 0..seq {
        let src = &g[t * hd..][..hd];
        let (c, s) = (&rope.cos[t * hd..][..hd], &rope.sin[t * hd..][..hd]);
        let dst = &mut out[(t * n_heads + h) * hd..][..hd];
        for j in 0..half {
            dst[j] += (src[j] * c[j] + src[j + half] * s[j + half]) * scale;
            dst[j + half] += (src[j + half] * c[j + half] - src[j] * s[j]) * scale;
        }
    }
}

/// Query rows per tile: scores are computed tile by tile, each against the keys up to its
/// last row, so about half of the causal square is skipped.
const TILE: usize = 32;

/// Replaces row `s[..=i]` by e^{s − lse} and the rest of the row by 0.
#[inline(always)]
fn probabilities(s: &mut [f32], valid: usize, lse: f32) {
    let mut at = 0;
    while at < valid {
        let e = exp(map(load(&s[..valid], at, 0.0), |v| v - lse));
        store(&mut s[..valid], at, &e);
        at += LANES;
    }
    s[valid..].fill(0.0);
}

/// Per-sequence buffers.
struct Scratch {
    /// rope(q)/√hd of one head, `[seq, hd]`.
    q: Vec<f32>,
    /// rope(k) of one kv head, `[seq, hd]`.
    k: Vec<f32>,
    /// One tile of scores or probabilities, `[TILE, seq]`.
    s: Vec<f32>,
    /// One tile of dP, then dS, `[TILE, seq]`.
    ds: Vec<f32>,
}

impl Scratch {
    fn new(d: Dims) -> Self {
        Scratch {
            q: vec![0.0; d.seq * d.head_dim],
            k: vec![0.0; d.seq * d.head_dim],
            s: vec![0.0; TILE * d.seq],
            ds: vec![0.0; TILE * d.seq],
        }
    }
}

multiversion! {
    fn forward_seq(d: Dims, rope: Rope, q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], lse: &mut [f32]) {
        let (seq, hd) = (d.seq, d.head_dim);
        let group = d.heads / d.kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let mut w = Scratch::new(d);
        for g in 0..d.kv_heads {
            rope_head(k, d.kv_heads, g, hd, rope, 1.0, &mut w.k);
            for h in g * group..(g + 1) * group {
                rope_head(q, d.heads, h, hd, rope, scale, &mut w.q);
                for t0 in (0..seq).step_by(TILE) {
                    let rows = TILE.min(seq - t0);
                    let keys = t0 + rows;
                    // S = q̃[t0..] · k̃[..keys]ᵀ
                    matmul(&mut w.s, 0, seq, false, (rows, keys, hd),
                        View::of(&w.q, t0 * hd, rows, hd, hd, 1),
                        View::of(&w.k, 0, hd, keys, 1, hd));
                    for r in 0..rows {
                        let i = t0 + r;
                        let row = &mut w.s[r * seq..(r + 1) * seq];
                        let m = max(&row[..=i]);
                        let total = exp_shift_sum(&mut row[..=i], m);
                        lse[h * seq + i] = m + total.ln();
                        let inv = 1.0 / total;
                        row[..=i].iter_mut().for_each(|p| *p *= inv);
                        row[i + 1..].fill(0.0);
                    }
                    // O = P · v[..keys]
                    let ld = d.heads * hd;
                    matmul(out, t0 * ld + h * hd, ld, false, (rows, hd, keys),
                        View::of(&w.s, 0, rows, keys, seq, 1),
                        View::of(v, g * hd, keys, hd, d.kv_heads * hd, 1));
                }
            }
        }
    }
}
/// Attention output and the log-normaliser of every score row (for [`backward`]).
///
/// # Shapes
/// - `q`: `[batch, seq, heads·hd]`; `k`, `v`: `[batch, seq, kv_heads·hd]`
/// - returns: (`out [batch, seq, heads·hd]`, `lse [batch, heads, seq]`)
pub fn forward(d: Dims, rope: Rope, q: &[f32], k: &[f32], v: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut out = vec![0.0f32; d.batch * d.q_len()];
    let mut lse = vec![0.0f32; d.batch * d.heads * d.seq];
    out.par_chunks_mut(d.q_len())
        .zip(lse.par_chunks_mut(d.heads * d.seq))
        .enumerate()
        .for_each(|(b, (out, lse))| {
            let (qr, kr) = (
                b * d.q_len()..(b + 1) * d.q_len(),
                b * d.kv_len()..(b + 1) * d.kv_len(),
            );
            forward_seq(d, rope, &q[qr], &k[kr.clone()], &v[kr], out, lse);
        });
    (out, lse)
}

/// One sequence's inputs to the backward pass.
#[derive(Clone, Copy)]
struct SeqIn<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    out: &'a [f32],
    lse: &'a [f32],
    grad: &'a [f32],
}

/// One sequence's gradients.
struct SeqOut<'a> {
    dq: &'a mut [f32],
    dk: &'a mut [f32],
    dv: &'a mut [f32],
}

multiversion! {
    fn backward_seq(d: Dims, rope: Rope, x: SeqIn, g_out: SeqOut) {
        let (seq, hd) = (d.seq, d.head_dim);
        let group = d.heads / d.kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        let (ld_q, ld_kv) = (d.heads * hd, d.kv_heads * hd);
        let mut w = Scratch::new(d);
        let mut dq = vec![0.0f32; seq * hd];
        let mut dk = vec![0.0f32; seq * hd];
        let mut delta = vec![0.0f32; seq];
        for g in 0..d.kv_heads {
            rope_head(x.k, d.kv_heads, g, hd, rope, 1.0, &mut w.k);
            dk.fill(0.0);
            for h in g * group..(g + 1) * group {
                rope_head(x.q, d.heads, h, hd, rope, scale, &mut w.q);
                for (i, di) in delta.iter_mut().enumerate() {
                    let at = i * ld_q + h * hd;
                    *di = dot(&x.grad[at..at + hd], &x.out[at..at + hd]);
                }
                for t0 in (0..seq).step_by(TILE) {
                    let rows = TILE.min(seq - t0);
                    let keys = t0 + rows;
                    let shape_s = (rows, keys, hd);
                    matmul(&mut w.s, 0, seq, false, shape_s,
                        View::of(&w.q, t0 * hd, rows, hd, hd, 1),
                        View::of(&w.k, 0, hd, keys, 1, hd));
                    for r in 0..rows {
                        let i = t0 + r;
                        probabilities(&mut w.s[r * seq..(r + 1) * seq], i + 1, x.lse[h * seq + i]);
                    }
                    // dP = dO · v[..keys]ᵀ
                    matmul(&mut w.ds, 0, seq, false, shape_s,
                        View::of(x.grad, t0 * ld_q + h * hd, rows, hd, ld_q, 1),
                        View::of(x.v, g * hd, hd, keys, 1, ld_kv));
                    // dS = P ⊙ (dP − δ)
                    for r in 0..rows {
                        let dl = delta[t0 + r];
                        let (p, ds) = (&w.s[r * seq..r * seq + keys], &mut w.ds[r * seq..r * seq + keys]);
                        for j in 0..keys {
                            ds[j] = p[j] * (ds[j] - dl);
                        }
                    }
                    // dv[..keys] += Pᵀ · dO
                    matmul(g_out.dv, g * hd, ld_kv, true, (keys, hd, rows),
                        View::of(&w.s, 0, keys, rows, 1, seq),
                        View::of(x.grad, t0 * ld_q + h * hd, rows, hd, ld_q, 1));
                    // dq̃ = dS · k̃[..keys]
                    matmul(&mut dq, t0 * hd, hd, false, (rows, hd, keys),
                        View::of(&w.ds, 0, rows, keys, seq, 1),
                        View::of(&w.k, 0, keys, hd, hd, 1));
                    // dk̃[..keys] += dSᵀ · q̃
                    matmul(&mut dk, 0, hd, true, (keys, hd, rows),
                        View::of(&w.ds, 0, keys, rows, 1, seq),
                        View::of(&w.q, t0 * hd, rows, hd, hd, 1));
                }
                unrope_head(&dq, d.heads, h, hd, rope, scale, g_out.dq);
            }
            unrope_head(&dk, d.kv_heads, g, hd, rope, 1.0, g_out.dk);
        }
    }
}

/// Gradients of Σ grad · out with respect to `q`, `k` and `v`.
///
/// # Shapes
/// as [`forward`]; `grad` like `out`; returns (`dq`, `dk`, `dv`) like `q`, `k`, `v`.
#[allow(clippy::too_many_arguments)]
pub fn backward(
    d: Dims,
    rope: Rope,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
    lse: &[f32],
    grad: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut dq = vec![0.0f32; q.len()];
    let mut dk = vec![0.0f32; k.len()];
    let mut dv = vec![0.0f32; v.len()];
    let (ql, kl, ll) = (d.q_len(), d.kv_len(), d.heads * d.seq);
    dq.par_chunks_mut(ql)
        .zip(dk.par_chunks_mut(kl))
        .zip(dv.par_chunks_mut(kl))
        .enumerate()
        .for_each(|(b, ((dq, dk), dv))| {
            let x = SeqIn {
                q: &q[b * ql..(b + 1) * ql],
                k: &k[b * kl..(b + 1) * kl],
                v: &v[b * kl..(b + 1) * kl],
                out: &out[b * ql..(b + 1) * ql],
                lse: &lse[b * ll..(b + 1) * ll],
                grad: &grad[b * ql..(b + 1) * ql],
            };
            backward_seq(d, rope, x, SeqOut { dq, dk, dv });
        });
    (dq, dk, dv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain f64 attention of one sequence, from the definitions.
    fn reference(d: Dims, cos: &[f64], sin: &[f64], q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
        let (seq, hd) = (d.seq, d.head_dim);
        let half = hd / 2;
        let rope = |x: &[f64], t: usize| -> Vec<f64> {
            (0..hd)
                .map(|j| {
                    let rot = if j < half { -x[j + half] } else { x[j - half] };
                    x[j] * cos[t * hd + j] + rot * sin[t * hd + j]
                })
                .collect()
        };
        let mut out = vec![0.0; seq * d.heads * hd];
        for h in 0..d.heads {
            let g = h / (d.heads / d.kv_heads);
            for i in 0..seq {
                let qi = rope(&q[(i * d.heads + h) * hd..][..hd], i);
                let s: Vec<f64> = (0..=i)
                    .map(|j| {
                        let kj = rope(&k[(j * d.kv_heads + g) * hd..][..hd], j);
                        qi.iter().zip(&kj).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().copied().fold(f64::MIN, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for (j, sj) in s.iter().enumerate() {
                    let p = (sj - m).exp() / z;
                    for c in 0..hd {
                        out[(i * d.heads + h) * hd + c] += p * v[(j * d.kv_heads + g) * hd + c];
                    }
                }
            }
        }
        out
    }

    fn tables(seq: usize, hd: usize) -> (Vec<f64>, Vec<f64>) {
        let half = hd / 2;
        let (mut c, mut s) = (vec![], vec![]);
        for t in 0..seq {
            for j in 0..hd {
                let a = t as f64 * 10_000f64.powf(-2.0 * (j % half) as f64 / hd as f64);
                c.push(a.cos());
                s.push(a.sin());
            }
        }
        (c, s)
    }

    fn data(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + seed) * 0.731).sin()).collect()
    }

    fn f32s(x: &[f64]) -> Vec<f32> {
        x.iter().map(|&v| v as f32).collect()
    }

    #[test]
    fn forward_and_backward_match_f64_and_finite_differences() {
        for d in [
            Dims {
                batch: 1,
                seq: 19,
                heads: 2,
                kv_heads: 2,
                head_dim: 6,
            },
            Dims {
                batch: 1,
                seq: 21,
                heads: 4,
                kv_heads: 2,
                head_dim: 4,
            },
        ] {
            let (seq, hd) = (d.seq, d.head_dim);
            let (c, s) = tables(seq, hd);
            let q = data(d.q_len(), 0.0);
            let k = data(d.kv_len(), 5.0);
            let v = data(d.kv_len(), 11.0);
            let grad = data(d.q_len(), 17.0);
            let (c32, s32) = (f32s(&c), f32s(&s));
            let rope = Rope {
                cos: &c32,
                sin: &s32,
            };
            let (out, lse) = forward(d, rope, &f32s(&q), &f32s(&k), &f32s(&v));
            let want = reference(d, &c, &s, &q, &k, &v);
            for (a, b) in out.iter().zip(&want) {
                assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
            }
            let (dq, dk, dv) = backward(
                d,
                rope,
                &f32s(&q),
                &f32s(&k),
                &f32s(&v),
                &out,
                &lse,
                &f32s(&grad),
            );
            let objective = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
                reference(d, &c, &s, q, k, v)
                    .iter()
                    .zip(&grad)
                    .map(|(a, b)| a * b)
                    .sum()
            };
            let h = 1e-6;
            let check = |which: usize, got: &[f32]| {
                for i in (0..got.len()).step_by(7) {
                    let mut x = [q.clone(), k.clone(), v.clone()];
                    x[which][i] += h;
                    let up = objective(&x[0], &x[1], &x[2]);
                    x[which][i] -= 2.0 * h;
                    let down = objective(&x[0], &x[1], &x[2]);
                    let num = (up - down) / (2.0 * h);
                    assert!(
                        (got[i] as f64 - num).abs() < 1e-4,
                        "input {which} [{i}]: {} vs {num}",
                        got[i]
                    );
                }
            };
            check(0, &dq);
            check(1, &dk);
            check(2, &dv);
        }
    }
}
