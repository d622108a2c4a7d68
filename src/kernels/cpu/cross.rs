//! The output head fused with the cross-tokenizer distillation losses (ULD, and GOLD's hybrid
//! of exact KL and ULD), structured like [`super::head`]: chunks of positions, one product for
//! the logits, their gradient made in place in the forward pass, two products for ∂h and ∂W.
//!
//! # The maths
//!
//! Rows r = 0..R are student positions of a batch (`[batch·context]` flattened), each with
//! logits z_r = h_r·W over the student vocabulary V and its next token y_r. A temperature τ;
//! P_r = softmax(z_r/τ).
//!
//! Rows are grouped into **units** by `span[r]`: `span[b] = n > 0` marks a unit's *base row* b,
//! whose unit is rows b..b+n (the base row and n−1 *later rows*, each with `span = 0`);
//! `span = −1` is a row outside any unit (no distillation term). Units never overlap and later
//! rows directly follow their base row. For a unit u with base b and later rows
//! L_u = {b+1, …, b+n−1}:
//!
//! - ln M_u = Σ_{r∈L_u} ln P_r[y_r] (GOLD's "observed" span merge on the student side; M_u = 1
//!   for n = 1), and q_j = M_u·P_b[j] for every student id j (merged, unnormalised).
//! - The teacher's entries at the base row: `width` entries e with `mask[b,e] ≠ 0`, of value
//!   t_e = exp(`log_t[b,e]`) (merged and tempered by the caller), and `matched[b,e]`, the
//!   student id with the same bytes, or −1.
//! - **ULD part** (Boizard et al. 2024, top-k of each): the teacher's ULD entries are every
//!   valid entry (kind Uld) or the valid entries with matched = −1 (Gold), sorted descending,
//!   the first k = `top_k` kept, padded with zeros to k. The student's candidates are every id
//!   (Uld) or the ids j with `student_matched[j] = 0` (Gold); S = the k largest q_j among them
//!   (ties to the lower id), sorted q_(1) ≥ … ≥ q_(k) (zeros past the candidates).
//!   L_U = Σ_{i≤k} |q_(i) − t_(i)|, g_i = sign(q_(i) − t_(i)) (0 if equal), G_U = Σ_i g_i q_(i);
//!   ∂L_U/∂z_b[j] = (1/τ)(g_j q_j − P_b[j]·G_U) (g_j = 0 for j ∉ S) and ∂L_U/∂ln M_u = G_U.
//! - **KL part** (Gold only): L_K = Σ_{valid e, matched_e ≥ 0} t_e (ln t_e − ln q_{matched_e}),
//!   T_K the sum of those t_e; ∂L_K/∂z_b[j] = (1/τ)(T_K·P_b[j] − Σ_{e: matched_e = j} t_e) and
//!   ∂L_K/∂ln M_u = −T_K.
//! - The unit's loss L_u = L_U (Uld) or w_m·L_K + w_u·L_U (Gold, `gold_weights = (w_m, w_u)`),
//!   and C_u = ∂L_u/∂ln M_u.
//! - A later row r ∈ L_u: ∂L_u/∂z_r[j] = C_u·(1/τ)(δ_{j,y_r} − P_r[j]).
//!
//! The loss is Σ_r a_ce·CE_r + a_kd·Σ_u L_u, with CE_r = −ln softmax(z_r)[y_r] (τ = 1, every
//! row); there is no τ² factor on the cross-tokenizer terms. Since ∂L_u/∂z_b has the dense part
//! −(C_u/τ)·P_b (w_m·T_K − w_u·G_U = −C_u), every row's gradient is a·softmax(z) +
//! b·softmax(z/τ) plus a few sparse entries: a = a_ce, b = −a_kd·C_u/τ for the rows of a unit
//! (0 outside), −a_ce at y_r, +a_kd·C_u/τ at y_r for a later row, and for a base row the ULD
//! entries a_kd·w_u·g_j q_j/τ at S and the KL entries −a_kd·w_m·t_e/τ at the matched ids.
//!
//! # Passes
//!
//! Chunks hold about `chunk` rows; a boundary that would fall inside a unit moves forward to
//! the next row whose span ≠ 0. Per chunk, after the logits' product: (A) per row, the
//! log-normalisers at τ = 1 and at τ, CE_r and ln P_r[y_r]; (B) per unit, ln M_u, the student's
//! top k by one scan of the base row against a running threshold (a buffer of 2k compacted by
//! selection, never a sort of V), L_u, C_u and the base row's sparse coefficients; (C) per row,
//! the gradient in place of the logits. Rows (A, C) and units (B) are spread over the rayon
//! pool in blocks whose sizes depend only on the shapes, so the result does not depend on the
//! number of threads.

use rayon::prelude::*;

use super::head::{Dims, HeadOut, Layout, over_chunks, softmax_pair, softmax_times};
use super::rows::{block_rows, for_blocks, for_blocks2};
use super::simd::{LANES, load, multiversion};
use super::softmax::{log_sum_exp, scaled_lse};
use crate::spec::CrossTokenizer;

/// One unit of rows: its base row and how many rows it has (the base row and the later rows
/// right after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// The base row.
    pub base: usize,
    /// Rows in the unit, ≥ 1.
    pub rows: usize,
}

/// A `span` vector that does not describe units.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpanError {
    /// A value other than a length, 0 or −1.
    #[error("span `{value}` at row {row} is neither a unit's length (> 0), 0 nor -1")]
    Value {
        /// The row.
        row: usize,
        /// Its span.
        value: i32,
    },
    /// A unit longer than the rows left.
    #[error("the unit at row {base} has `{len}` rows but the batch ends after {left}")]
    PastEnd {
        /// Its base row.
        base: usize,
        /// Its length.
        len: usize,
        /// Rows from its base to the end.
        left: usize,
    },
    /// A later row (span 0) outside a unit, or a unit's row whose span is not 0.
    #[error("row {row} has span `{value}`, which does not fit the units around it")]
    Misplaced {
        /// The row.
        row: usize,
        /// Its span.
        value: i32,
    },
}

/// The units of `span` (see the module's maths), in order.
///
/// # Shapes
/// - `span`: `[rows]`
pub fn units(span: &[i32]) -> Result<Vec<Unit>, SpanError> {
    let mut out = Vec::new();
    let mut r = 0;
    while r < span.len() {
        match span[r] {
            -1 => r += 1,
            0 => return Err(SpanError::Misplaced { row: r, value: 0 }),
            value if value > 0 => {
                let len = value as usize;
                let left = span.len() - r;
                if len > left {
                    return Err(SpanError::PastEnd { base: r, len, left });
                }
                if let Some(row) = (r + 1..r + len).find(|&l| span[l] != 0) {
                    let value = span[row];
                    return Err(SpanError::Misplaced { row, value });
                }
                out.push(Unit { base: r, rows: len });
                r += len;
            }
            value => return Err(SpanError::Value { row: r, value }),
        }
    }
    Ok(out)
}

/// Chunks `(first, n)` of about `chunk` rows covering `span`'s rows in order, each boundary
/// moved forward past later rows (span 0) so that no unit is split.
pub fn chunk_bounds(span: &[i32], chunk: usize) -> Vec<(usize, usize)> {
    let (rows, chunk) = (span.len(), chunk.max(1));
    let mut out = Vec::new();
    let mut first = 0;
    while first < rows {
        let mut end = (first + chunk).min(rows);
        while end < rows && span[end] == 0 {
            end += 1;
        }
        out.push((first, end - first));
        first = end;
    }
    out
}

/// The teacher's side at every row and the loss's settings.
///
/// # Shapes
/// - `log_t`, `matched`, `mask`: `[rows, width]`; `student_matched`: `[vocab]`
#[derive(Debug, Clone, Copy)]
pub struct Cross<'a> {
    /// The units of rows ([`units`]).
    pub units: &'a [Unit],
    /// ln t_e, merged and tempered, sorted descending among valid entries (read at base rows).
    pub log_t: &'a [f32],
    /// The student id with the entry's bytes, or −1 (each `< vocab`).
    pub matched: &'a [i32],
    /// ≠ 0 for a real entry, 0 for padding.
    pub mask: &'a [f32],
    /// Entries per row.
    pub width: usize,
    /// 1 for a student id some teacher token matches (kept out of Gold's ULD part), else 0.
    pub student_matched: &'a [f32],
    /// ULD, or GOLD's hybrid.
    pub kind: CrossTokenizer,
    /// The student's temperature τ.
    pub tau: f32,
    /// k of ULD's top k.
    pub top_k: usize,
    /// Gold's (w_m, w_u): the weights of the KL and the ULD parts.
    pub gold_weights: (f32, f32),
}

/// What the head is scored against and how the two terms are weighed.
#[derive(Debug, Clone, Copy)]
pub struct Terms<'a> {
    /// The next token at every position (each `< vocab`).
    pub targets: &'a [u32],
    /// The cross-tokenizer term.
    pub cross: Cross<'a>,
    /// a_ce: the weight of every position's cross-entropy.
    pub ce_weight: f32,
    /// a_kd: the weight of every unit's loss.
    pub kd_weight: f32,
}

/// Values read per row in pass A: ln Σ e^z, ln Σ e^{z/τ}, ln P[y].
const STATS: usize = 3;

/// The head's cross-entropy at every row and L_u at every unit's base row (`kd`; 0 at other
/// rows), over `h` (`[rows, d]`) and `w` (in `layout`), in chunks of about `chunk` rows that
/// never split a unit, with the gradients of Σ_r a_ce·CE_r + a_kd·Σ_u L_u when `grads` is set.
pub fn head_loss(
    h: &[f32],
    w: &[f32],
    layout: Layout,
    dims: Dims,
    terms: Terms,
    chunk: usize,
    grads: bool,
) -> HeadOut {
    let Dims { rows, vocab, .. } = dims;
    let c = terms.cross;
    assert_eq!(terms.targets.len(), rows, "one target per position");
    assert_eq!(
        c.log_t.len(),
        rows * c.width,
        "one teacher row per position"
    );
    assert_eq!(
        c.matched.len(),
        rows * c.width,
        "one teacher row per position"
    );
    assert_eq!(c.mask.len(), rows * c.width, "one teacher row per position");
    assert_eq!(c.student_matched.len(), vocab, "one student flag per id");
    let mut span = vec![-1i32; rows];
    for u in c.units {
        assert!(
            u.rows >= 1 && u.base + u.rows <= rows,
            "unit {u:?} outside the rows"
        );
        span[u.base] = 1;
        span[u.base + 1..u.base + u.rows].fill(0);
    }
    let bounds = chunk_bounds(&span, chunk);
    let mut out = HeadOut::zeros(dims, true, grads);
    let mut stats = Vec::new();
    let (mut unit_terms, mut ids, mut coefs) = (Vec::new(), Vec::new(), Vec::new());
    let mut next_unit = 0;
    over_chunks(
        h,
        w,
        layout,
        dims,
        bounds.into_iter(),
        &mut out,
        |z, first, out| {
            let n = z.len() / vocab;
            let start = next_unit;
            while next_unit < c.units.len() && c.units[next_unit].base < first + n {
                next_unit += 1;
            }
            let units = &c.units[start..next_unit];
            // (A)
            stats.resize(n * STATS, 0.0);
            row_pass(
                z,
                vocab,
                first,
                &terms,
                &mut out.ce[first..first + n],
                &mut stats,
            );
            // (B)
            let cap = (c.top_k + c.width).max(1);
            unit_terms.clear();
            unit_terms.resize(units.len(), UnitTerms::default());
            ids.resize(units.len() * cap, 0);
            coefs.resize(units.len() * cap, 0.0);
            let chunk = ChunkUnits {
                z: &*z,
                vocab,
                first,
                stats: &stats,
                units,
                grads,
            };
            units_pass(&chunk, &c, cap, &mut unit_terms, &mut ids, &mut coefs);
            for (u, t) in units.iter().zip(&unit_terms) {
                out.kd[u.base] = t.loss;
            }
            // (C)
            if grads {
                let mut roles = vec![Role::Outside; n];
                for (i, u) in units.iter().enumerate() {
                    roles[u.base - first] = Role::Base(i);
                    roles[u.base - first + 1..u.base - first + u.rows].fill(Role::Later(i));
                }
                let plan = GradPlan {
                    vocab,
                    first,
                    stats: &stats,
                    roles: &roles,
                    units: &unit_terms,
                    ids: &ids,
                    coefs: &coefs,
                    cap,
                    terms: &terms,
                };
                for_blocks(z, vocab, block_rows(n, 3 * vocab), |r, zb| {
                    gradient_rows(zb, r, &plan)
                });
            }
        },
    );
    out
}

/// Pass A over one chunk's rows: CE_r into `ce`, and [`STATS`] values per row into `stats`.
fn row_pass(
    z: &[f32],
    vocab: usize,
    first: usize,
    terms: &Terms,
    ce: &mut [f32],
    stats: &mut [f32],
) {
    let n = ce.len();
    let inv_tau = 1.0 / terms.cross.tau;
    let targets = &terms.targets[first..first + n];
    for_blocks2(
        ce,
        1,
        stats,
        STATS,
        block_rows(n, 2 * vocab),
        |r, ce, stats| {
            let m = ce.len();
            row_stats(
                &z[r * vocab..(r + m) * vocab],
                vocab,
                &targets[r..r + m],
                inv_tau,
                ce,
                stats,
            )
        },
    );
}

multiversion! {
    fn row_stats(z: &[f32], vocab: usize, targets: &[u32], inv_tau: f32, ce: &mut [f32], stats: &mut [f32]) {
        for (r, (row, s)) in z.chunks_exact(vocab).zip(stats.chunks_exact_mut(STATS)).enumerate() {
            let y = targets[r] as usize;
            let lse = log_sum_exp(row);
            let lse_t = if inv_tau == 1.0 { lse } else { scaled_lse(row, inv_tau) };
            ce[r] = lse - row[y];
            s[0] = lse;
            s[1] = lse_t;
            s[2] = row[y] * inv_tau - lse_t;
        }
    }
}

/// One unit's results of pass B.
#[derive(Debug, Clone, Copy, Default)]
struct UnitTerms {
    /// L_u.
    loss: f32,
    /// C_u = ∂L_u/∂ln M_u.
    c: f32,
    /// How many sparse coefficients of the base row it wrote.
    sparse: usize,
}

/// A chunk's logits and the units whose rows it holds.
struct ChunkUnits<'a> {
    z: &'a [f32],
    vocab: usize,
    /// The chunk's first row.
    first: usize,
    /// Pass A's values of the chunk's rows.
    stats: &'a [f32],
    units: &'a [Unit],
    /// Whether to write the base rows' sparse coefficients.
    grads: bool,
}

/// Buffers a unit's pass B reuses.
#[derive(Debug, Default)]
struct Scratch {
    /// The teacher's ULD entries.
    teacher: Vec<f64>,
    /// The student's top candidates (logit, id).
    student: Vec<(f32, u32)>,
}

/// Pass B over one chunk's units (in parallel): their terms, and (for gradients) up to `cap`
/// sparse coefficients of each base row (ids into `ids`, values into `coefs`, `cap` per unit).
fn units_pass(
    chunk: &ChunkUnits,
    cross: &Cross,
    cap: usize,
    terms: &mut [UnitTerms],
    ids: &mut [u32],
    coefs: &mut [f32],
) {
    let work = |scratch: &mut Scratch, (i, ((t, ids), coefs)): (usize, UnitTermsSlot)| {
        *t = unit(chunk, i, cross, scratch, ids, coefs);
    };
    let min = block_rows(chunk.units.len(), chunk.vocab);
    if chunk.units.len() <= min || rayon::current_num_threads() == 1 {
        let mut scratch = Scratch::default();
        let slots = terms
            .iter_mut()
            .zip(ids.chunks_mut(cap))
            .zip(coefs.chunks_mut(cap));
        slots.enumerate().for_each(|s| work(&mut scratch, s));
    } else {
        terms
            .par_iter_mut()
            .zip(ids.par_chunks_mut(cap))
            .zip(coefs.par_chunks_mut(cap))
            .enumerate()
            .with_min_len(min)
            .for_each_init(Scratch::default, work);
    }
}

/// A unit's terms and its sparse coefficients' slots.
type UnitTermsSlot<'a> = ((&'a mut UnitTerms, &'a mut [u32]), &'a mut [f32]);

/// Unit `i` of `chunk`: ln M_u from pass A, then its terms.
fn unit(
    chunk: &ChunkUnits,
    i: usize,
    cross: &Cross,
    scratch: &mut Scratch,
    ids: &mut [u32],
    coefs: &mut [f32],
) -> UnitTerms {
    let u = chunk.units[i];
    let b = u.base - chunk.first;
    let ln_m: f64 = (b + 1..b + u.rows)
        .map(|r| f64::from(chunk.stats[r * STATS + 2]))
        .sum();
    let z = &chunk.z[b * chunk.vocab..(b + 1) * chunk.vocab];
    let base = BaseRow {
        z,
        lse_t: chunk.stats[b * STATS + 1],
        ln_m,
        row: u.base,
        grads: chunk.grads,
    };
    unit_terms(&base, cross, scratch, ids, coefs)
}

/// A unit's base row: its logits, ln Σ e^{z/τ}, ln M_u and its index among all rows.
struct BaseRow<'a> {
    z: &'a [f32],
    lse_t: f32,
    ln_m: f64,
    row: usize,
    /// Whether to write the sparse coefficients.
    grads: bool,
}

multiversion! {
    /// L_u, C_u and (with `base.grads`) the base row's sparse coefficients of ∂L_u/∂z_b
    /// (without a_kd): w_u·g_j q_j/τ at the student's top k, −w_m·t_e/τ at matched ids.
    fn unit_terms(base: &BaseRow, cross: &Cross, scratch: &mut Scratch, ids: &mut [u32], coefs: &mut [f32]) -> UnitTerms {
        let inv_tau = 1.0 / f64::from(cross.tau);
        let gold = cross.kind == CrossTokenizer::Gold;
        let (w_m, w_u) = if gold {
            (f64::from(cross.gold_weights.0), f64::from(cross.gold_weights.1))
        } else {
            (0.0, 1.0)
        };
        let k = cross.top_k;
        let e = base.row * cross.width..(base.row + 1) * cross.width;
        let (log_t, matched, mask) = (&cross.log_t[e.clone()], &cross.matched[e.clone()], &cross.mask[e]);
        // ln q_j = ln M_u + z_j/τ − ln Σ e^{z/τ}
        let ln_q = |j: usize| base.ln_m + (f64::from(base.z[j]) * inv_tau - f64::from(base.lse_t));
        let teacher = &mut scratch.teacher;
        teacher.clear();
        for j in 0..cross.width {
            if mask[j] != 0.0 && (!gold || matched[j] < 0) {
                teacher.push(f64::from(log_t[j]).exp());
            }
        }
        teacher.sort_unstable_by(|a, b| b.total_cmp(a));
        teacher.truncate(k);
        let excluded = gold.then_some(cross.student_matched);
        top_candidates(base.z, excluded, k, &mut scratch.student);
        let student = &scratch.student;
        let grads = base.grads;
        let mut sparse = 0;
        let (mut l_u, mut g_u) = (0.0f64, 0.0f64);
        for i in 0..teacher.len().max(student.len()) {
            let t = teacher.get(i).copied().unwrap_or(0.0);
            let Some(&(_, j)) = student.get(i) else {
                l_u += t;
                continue;
            };
            let q = ln_q(j as usize).exp();
            let g = if q > t { 1.0 } else if q < t { -1.0 } else { 0.0 };
            l_u += (q - t).abs();
            g_u += g * q;
            if grads && g != 0.0 {
                ids[sparse] = j;
                coefs[sparse] = (w_u * g * q * inv_tau) as f32;
                sparse += 1;
            }
        }
        let (mut l_k, mut t_k) = (0.0f64, 0.0f64);
        if gold {
            for e in 0..cross.width {
                if mask[e] == 0.0 || matched[e] < 0 {
                    continue;
                }
                let t = f64::from(log_t[e]).exp();
                if t == 0.0 {
                    continue;
                }
                let j = matched[e] as usize;
                l_k += t * (f64::from(log_t[e]) - ln_q(j));
                t_k += t;
                if grads {
                    ids[sparse] = j as u32;
                    coefs[sparse] = (-w_m * t * inv_tau) as f32;
                    sparse += 1;
                }
            }
        }
        UnitTerms {
            loss: (w_m * l_k + w_u * l_u) as f32,
            c: (w_u * g_u - w_m * t_k) as f32,
            sparse,
        }
    }
}

/// The `k` largest logits of `z` and their ids, sorted (larger first, ties to the lower id),
/// skipping ids whose `excluded` flag is not 0; fewer when fewer ids are left.
///
/// One pass over `z` against a running threshold: a block of [`LANES`] logits is looked at one by
/// one only when its largest passes the threshold, and the buffer is cut back to its best k by
/// selection whenever it holds 2k.
#[inline(always)]
fn top_candidates(z: &[f32], excluded: Option<&[f32]>, k: usize, buf: &mut Vec<(f32, u32)>) {
    buf.clear();
    if k == 0 {
        return;
    }
    let rank = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let full = (2 * k).max(2 * LANES);
    // entries must be above it: the k-th best so far once there were k, else −∞ (a logit of
    // −∞ or NaN is never a candidate)
    let mut threshold = f32::NEG_INFINITY;
    let mut at = 0;
    while at < z.len() {
        let v = load(z, at, f32::NEG_INFINITY);
        let mut top = f32::NEG_INFINITY;
        for x in v {
            top = top.max(x);
        }
        if top > threshold {
            for (i, &x) in v.iter().enumerate().take(z.len() - at) {
                let j = at + i;
                if x > threshold && excluded.is_none_or(|e| e[j] == 0.0) {
                    buf.push((x, j as u32));
                    if buf.len() == full {
                        buf.select_nth_unstable_by(k - 1, rank);
                        buf.truncate(k);
                        threshold = buf[k - 1].0;
                    }
                }
            }
        }
        at += LANES;
    }
    buf.sort_unstable_by(rank);
    buf.truncate(k);
}

/// A row's part in the distillation term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Outside every unit.
    Outside,
    /// The base row of the chunk's unit `i`.
    Base(usize),
    /// A later row of the chunk's unit `i`.
    Later(usize),
}

/// What pass C reads.
struct GradPlan<'a> {
    vocab: usize,
    /// The chunk's first row.
    first: usize,
    stats: &'a [f32],
    roles: &'a [Role],
    units: &'a [UnitTerms],
    ids: &'a [u32],
    coefs: &'a [f32],
    /// Sparse slots per unit.
    cap: usize,
    terms: &'a Terms<'a>,
}

multiversion! {
    /// Pass C over a block of a chunk's rows starting at the chunk's row `r0`: each row's logits
    /// replaced by the gradient of the weighted loss.
    fn gradient_rows(z: &mut [f32], r0: usize, plan: &GradPlan) {
        let terms = plan.terms;
        let (a, kd) = (terms.ce_weight, terms.kd_weight);
        let inv_tau = 1.0 / terms.cross.tau;
        for (r, row) in z.chunks_exact_mut(plan.vocab).enumerate() {
            let at = r0 + r;
            let s = &plan.stats[at * STATS..(at + 1) * STATS];
            let y = terms.targets[plan.first + at] as usize;
            let c = match plan.roles[at] {
                Role::Outside => 0.0,
                Role::Base(i) | Role::Later(i) => plan.units[i].c,
            };
            let b = -kd * c * inv_tau;
            if b == 0.0 {
                softmax_times(row, s[0], 1.0, a);
            } else if inv_tau == 1.0 {
                softmax_times(row, s[0], 1.0, a + b);
            } else {
                softmax_pair(row, s[0], (inv_tau, s[1]), a, b);
            }
            row[y] -= a;
            match plan.roles[at] {
                Role::Outside => {}
                Role::Later(_) => row[y] -= b,
                Role::Base(i) => {
                    let slots = i * plan.cap..i * plan.cap + plan.units[i].sparse;
                    for (&j, &v) in plan.ids[slots.clone()].iter().zip(&plan.coefs[slots]) {
                        row[j as usize] += kd * v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::head::{self, HeadOut};
    use super::*;
    use crate::kernels::cross_reference::{Example, weighted};

    const KINDS: [CrossTokenizer; 2] = [CrossTokenizer::Uld, CrossTokenizer::Gold];
    const WEIGHTS: (f32, f32) = (0.3, 0.7);
    const GOLD: (f32, f32) = (0.6, 0.4);

    fn values(n: usize, k: f32, scale: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * k).sin() * scale).collect()
    }

    fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| x[(i % rows) * cols + i / rows])
            .collect()
    }

    /// An [`Example`]'s teacher side in the kernel's types.
    struct Teacher {
        units: Vec<Unit>,
        log_t: Vec<f32>,
        matched: Vec<i32>,
        mask: Vec<f32>,
        student_matched: Vec<f32>,
        targets: Vec<u32>,
    }

    impl Teacher {
        fn of(ex: &Example) -> Teacher {
            Teacher {
                units: units(&ex.span).expect("valid spans"),
                log_t: ex.log_t.iter().map(|&v| v as f32).collect(),
                matched: ex.matched.iter().map(|&v| v as i32).collect(),
                mask: ex.mask.iter().map(|&v| v as f32).collect(),
                student_matched: ex
                    .student_matched
                    .iter()
                    .map(|&m| f32::from(u8::from(m)))
                    .collect(),
                targets: ex.targets.iter().map(|&v| v as u32).collect(),
            }
        }

        fn terms(&self, width: usize, kind: CrossTokenizer, tau: f32, top_k: usize) -> Terms<'_> {
            Terms {
                targets: &self.targets,
                cross: Cross {
                    units: &self.units,
                    log_t: &self.log_t,
                    matched: &self.matched,
                    mask: &self.mask,
                    width,
                    student_matched: &self.student_matched,
                    kind,
                    tau,
                    top_k,
                    gold_weights: GOLD,
                },
                ce_weight: WEIGHTS.0,
                kd_weight: WEIGHTS.1,
            }
        }
    }

    /// The reference's loss and ∂h, ∂W (`[d, vocab]`) at z = h · W, in f64.
    fn reference(
        ex: &Example,
        h: &[f32],
        w: &[f32],
        dims: Dims,
        (kind, tau, top_k): (CrossTokenizer, f64, usize),
    ) -> (f64, Vec<f64>, Vec<f64>) {
        let Dims { rows, d, vocab } = dims;
        let mut z = vec![0.0f64; rows * vocab];
        for r in 0..rows {
            for j in 0..vocab {
                z[r * vocab + j] = (0..d)
                    .map(|i| f64::from(h[r * d + i]) * f64::from(w[i * vocab + j]))
                    .sum();
            }
        }
        let gold = (f64::from(GOLD.0), f64::from(GOLD.1));
        let x = ex.inputs(&z, kind, tau, top_k, gold);
        let (loss, dz) = weighted(&x, (f64::from(WEIGHTS.0), f64::from(WEIGHTS.1)));
        let mut dh = vec![0.0; rows * d];
        let mut dw = vec![0.0; d * vocab];
        for r in 0..rows {
            for i in 0..d {
                for j in 0..vocab {
                    let g = dz[r * vocab + j];
                    dh[r * d + i] += g * f64::from(w[i * vocab + j]);
                    dw[i * vocab + j] += g * f64::from(h[r * d + i]);
                }
            }
        }
        (loss, dh, dw)
    }

    fn close(got: &[f32], want: &[f64], tol: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (f64::from(g) - w).abs() <= tol * scale,
                "{what}[{i}]: {g} vs {w}"
            );
        }
    }

    /// The fused kernel against the f64 reference: the loss, ∂h and ∂W for both kinds, τ = 1
    /// and 2, a teacher narrower and wider than k, k past the vocabulary, both weight layouts
    /// and chunk sizes that would split the 3-row units.
    #[test]
    fn the_fused_kernel_matches_the_reference() {
        // units of 3, 1 and 2 rows, rows outside units, a unit at the very end
        let span = [3, 0, 0, -1, 1, 2, 0, 3, 0, 0, 1, -1, 1, 3, 0, 0];
        let (rows, d, vocab) = (span.len(), 6, 37); // odd vocabulary: vector tails
        let dims = Dims { rows, d, vocab };
        let h = values(rows * d, 0.37, 1.0);
        let w = values(d * vocab, 0.11, 0.9);
        let wt = transpose(&w, d, vocab);
        for width in [3, 8] {
            let ex = Example::new(&span, vocab, width, 11 + width as u64);
            let teacher = Teacher::of(&ex);
            for kind in KINDS {
                for tau in [1.0f32, 2.0] {
                    for k in [5, 40] {
                        let setting = (kind, f64::from(tau), k);
                        let (loss, dh, dw) = reference(&ex, &h, &w, dims, setting);
                        let dw_t: Vec<f64> = (0..d * vocab)
                            .map(|i| dw[(i % d) * vocab + i / d])
                            .collect();
                        let terms = teacher.terms(width, kind, tau, k);
                        for chunk in [1, 2, 4, 100] {
                            let what =
                                format!("{kind:?} τ {tau} width {width} k {k} chunk {chunk}");
                            let check = |out: &HeadOut, dw_want: &[f64], how: &str| {
                                let got = out.loss(WEIGHTS);
                                assert!(
                                    (got - loss).abs() <= 1e-5 * loss.abs().max(1.0),
                                    "{what} {how} loss {got} vs {loss}"
                                );
                                let dh_got = out.dh.as_deref().unwrap_or_default();
                                close(dh_got, &dh, 1e-4, &format!("{what} {how} dh"));
                                let dw_got = out.dw.as_deref().unwrap_or_default();
                                close(dw_got, dw_want, 1e-4, &format!("{what} {how} dw"));
                            };
                            let untied = head_loss(&h, &w, Layout::InOut, dims, terms, chunk, true);
                            check(&untied, &dw, "untied");
                            let tied = head_loss(&h, &wt, Layout::OutIn, dims, terms, chunk, true);
                            check(&tied, &dw_t, "tied");
                            let plain = head_loss(&h, &w, Layout::InOut, dims, terms, chunk, false);
                            assert!(plain.dh.is_none() && plain.dw.is_none());
                            assert_eq!(plain.kd, untied.kd, "{what}: forward-only unit losses");
                        }
                    }
                }
            }
        }
    }

    /// An all-unaligned batch is the cross-entropy head alone; a batch of one-row units runs.
    #[test]
    fn unaligned_rows_and_one_row_units_run() {
        let (rows, d, vocab, width) = (9, 5, 29, 4);
        let dims = Dims { rows, d, vocab };
        let h = values(rows * d, 0.53, 1.0);
        let w = values(d * vocab, 0.29, 0.9);
        let ex = Example::new(&[-1; 9], vocab, width, 5);
        let teacher = Teacher::of(&ex);
        assert!(teacher.units.is_empty());
        for kind in KINDS {
            let terms = teacher.terms(width, kind, 2.0, 8);
            let got = head_loss(&h, &w, Layout::InOut, dims, terms, 4, true);
            assert!(got.kd.iter().all(|&v| v == 0.0));
            let plain = head::Terms {
                targets: &teacher.targets,
                distill: None,
                ce_weight: WEIGHTS.0,
                kd_weight: WEIGHTS.1,
            };
            let want = head::head_loss(&h, &w, Layout::InOut, dims, plain, 4, true);
            assert_eq!(got.ce, want.ce);
            assert_eq!(got.dh, want.dh);
            assert_eq!(got.dw, want.dw);
        }
        let ex = Example::new(&[1; 9], vocab, width, 6);
        let teacher = Teacher::of(&ex);
        for kind in KINDS {
            let (loss, dh, _) = reference(&ex, &h, &w, dims, (kind, 1.0, 3));
            let got = head_loss(
                &h,
                &w,
                Layout::InOut,
                dims,
                teacher.terms(width, kind, 1.0, 3),
                2,
                true,
            );
            assert!((got.loss(WEIGHTS) - loss).abs() < 1e-5 * loss.abs());
            close(
                got.dh.as_deref().unwrap_or_default(),
                &dh,
                1e-4,
                "one-row units dh",
            );
        }
    }

    #[test]
    fn the_same_bits_on_one_thread_and_on_three() {
        // enough rows and units at this vocabulary for every pass to split over threads
        let span: Vec<i32> = (0..98).map(|r| [2, 0, 1, 3, 0, 0, -1][r % 7]).collect();
        let (rows, d, vocab, width) = (span.len(), 8, 2003, 6);
        let dims = Dims { rows, d, vocab };
        let h = values(rows * d, 0.41, 1.0);
        let w = values(d * vocab, 0.13, 0.9);
        let ex = Example::new(&span, vocab, width, 9);
        let teacher = Teacher::of(&ex);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("a pool");
            pool.install(|| {
                let terms = teacher.terms(width, CrossTokenizer::Gold, 2.0, 16);
                let out = head_loss(&h, &w, Layout::InOut, dims, terms, 50, true);
                (out.ce, out.kd, out.dh, out.dw)
            })
        };
        assert_eq!(run(1), run(3));
    }

    /// The threshold scan picks what a full sort picks, ties to the lower id, with exclusions.
    #[test]
    fn top_candidates_are_those_of_a_full_sort() {
        // few distinct values: many ties
        let z: Vec<f32> = (0..531)
            .map(|i| ((i * 7919) % 23) as f32 * 0.5 - 3.0)
            .collect();
        let excluded: Vec<f32> = (0..531).map(|i| f32::from(u8::from(i % 3 == 0))).collect();
        for k in [1, 3, 16, 40, 100, 400, 600] {
            for skip in [None, Some(&excluded[..])] {
                let mut want: Vec<(f32, u32)> = (0..z.len())
                    .filter(|&j| skip.is_none_or(|e| e[j] == 0.0))
                    .map(|j| (z[j], j as u32))
                    .collect();
                want.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                want.truncate(k);
                let mut got = Vec::new();
                top_candidates(&z, skip, k, &mut got);
                assert_eq!(got, want, "k {k} excluded {}", skip.is_some());
            }
        }
    }

    #[test]
    fn spans_are_checked_and_chunks_never_split_units() {
        let span = [3, 0, 0, -1, 1, 2, 0, -1];
        let got = units(&span).expect("valid");
        let want = [(0, 3), (4, 1), (5, 2)].map(|(base, rows)| Unit { base, rows });
        assert_eq!(got, want);
        assert_eq!(chunk_bounds(&span, 2), vec![(0, 3), (3, 2), (5, 2), (7, 1)]);
        assert_eq!(chunk_bounds(&span, 100), vec![(0, 8)]);
        assert_eq!(chunk_bounds(&[], 4), vec![]);
        assert!(matches!(
            units(&[0, -1]),
            Err(SpanError::Misplaced { row: 0, .. })
        ));
        assert!(matches!(
            units(&[2, 1]),
            Err(SpanError::Misplaced { row: 1, .. })
        ));
        assert!(matches!(
            units(&[-1, 3, 0]),
            Err(SpanError::PastEnd { base: 1, .. })
        ));
        assert!(matches!(
            units(&[-2]),
            Err(SpanError::Value { row: 0, value: -2 })
        ));
    }
}
