//! The cross-tokenizer distillation losses (ULD, Boizard et al. 2024, and GOLD's hybrid of
//! exact KL over matched tokens and ULD over the rest) computed directly in f64 on plain
//! slices, with their gradient with respect to every row's logits: the reference the fused
//! kernel (`super::cpu::cross`, whose module doc states the maths) and the composite
//! (`super::composite::cross_head_loss`) are tested against.
//!
//! ULD is the Wasserstein-1 distance between two next-token distributions with token
//! identities forgotten: for distributions on a line of ranks, the L1 distance between their
//! probability vectors sorted in decreasing order, each cut to its top k and padded with
//! zeros. It needs no mapping between vocabularies, only that both distributions are over "the
//! next piece of text" (the byte alignment of `crate::distill::align` makes sure of that).

#[cfg(test)]
use crate::spec::CrossTokenizer;

#[cfg(test)]
/// A batch's rows, the teacher's entries and the loss's settings (semantics in
/// `super::cpu::cross`).
///
/// # Shapes
/// - `logits`: `[rows, vocab]`; `targets`, `span`: `[rows]`; `log_t`, `matched`, `mask`:
///   `[rows, width]`; `student_matched`: `[vocab]`
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The student's logits.
    pub logits: &'a [f64],
    /// The student's vocabulary.
    pub vocab: usize,
    /// The next token at every row.
    pub targets: &'a [usize],
    /// n > 0 at a unit's base row (its length), 0 at its later rows, −1 outside units.
    pub span: &'a [i32],
    /// ln t_e of the teacher's entries (read at base rows).
    pub log_t: &'a [f64],
    /// The student id with each entry's bytes, or −1.
    pub matched: &'a [i64],
    /// ≠ 0 for a real entry.
    pub mask: &'a [f64],
    /// Entries per row.
    pub width: usize,
    /// Student ids some teacher token matches (left out of Gold's ULD part).
    pub student_matched: &'a [bool],
    /// ULD, or GOLD's hybrid.
    pub kind: CrossTokenizer,
    /// The student's temperature τ.
    pub tau: f64,
    /// k of ULD's top k.
    pub top_k: usize,
    /// Gold's (w_m, w_u).
    pub gold_weights: (f64, f64),
}

#[cfg(test)]
/// Σ_u L_u over the units of `x`, and its gradient with respect to the logits
/// (`[rows, vocab]`).
pub(crate) fn unit_losses(x: &Inputs) -> (f64, Vec<f64>) {
    let v = x.vocab;
    let tau = x.tau;
    let mut grad = vec![0.0; x.logits.len()];
    let mut total = 0.0;
    let log_probs = |r: usize| log_softmax(&x.logits[r * v..(r + 1) * v], tau);
    let gold = x.kind == CrossTokenizer::Gold;
    let (w_m, w_u) = if gold { x.gold_weights } else { (0.0, 1.0) };
    for (b, &n) in x.span.iter().enumerate() {
        if n <= 0 {
            continue;
        }
        let later = b + 1..b + n as usize;
        let ln_m: f64 = later.clone().map(|r| log_probs(r)[x.targets[r]]).sum();
        let ln_p = log_probs(b);
        let p: Vec<f64> = ln_p.iter().map(|l| l.exp()).collect();
        let q: Vec<f64> = ln_p.iter().map(|l| (ln_m + l).exp()).collect();
        let entries = b * x.width..(b + 1) * x.width;
        let valid = |e: usize| x.mask[e] != 0.0;
        // ULD: the teacher's entries and the student's candidates, each sorted and cut to k
        let mut t: Vec<f64> = entries
            .clone()
            .filter(|&e| valid(e) && (!gold || x.matched[e] < 0))
            .map(|e| x.log_t[e].exp())
            .collect();
        t.sort_by(|a, b| b.total_cmp(a));
        t.resize(x.top_k, 0.0);
        let mut s: Vec<usize> = (0..v).filter(|&j| !gold || !x.student_matched[j]).collect();
        s.sort_by(|&i, &j| q[j].total_cmp(&q[i]).then(i.cmp(&j)));
        s.truncate(x.top_k);
        let mut g = vec![0.0; v];
        let (mut l_u, mut g_u) = (0.0, 0.0);
        for (i, &ti) in t.iter().enumerate() {
            let qi = s.get(i).map_or(0.0, |&j| q[j]);
            l_u += (qi - ti).abs();
            if let Some(&j) = s.get(i) {
                g[j] = sign(qi - ti);
                g_u += g[j] * qi;
            }
        }
        // KL over the matched entries
        let (mut l_k, mut t_k) = (0.0, 0.0);
        let mut kl_at = vec![0.0; v];
        if gold {
            for e in entries.filter(|&e| valid(e) && x.matched[e] >= 0) {
                let te = x.log_t[e].exp();
                if te == 0.0 {
                    continue;
                }
                let j = x.matched[e] as usize;
                l_k += te * (x.log_t[e] - (ln_m + ln_p[j]));
                t_k += te;
                kl_at[j] += te;
            }
        }
        total += w_m * l_k + w_u * l_u;
        let c = w_u * g_u - w_m * t_k;
        let row = &mut grad[b * v..(b + 1) * v];
        for j in 0..v {
            let uld = g[j] * q[j] - p[j] * g_u;
            let kl = t_k * p[j] - kl_at[j];
            row[j] += (w_u * uld + w_m * kl) / tau;
        }
        for r in later {
            let pr: Vec<f64> = log_probs(r).iter().map(|l| l.exp()).collect();
            let row = &mut grad[r * v..(r + 1) * v];
            for j in 0..v {
                let delta = if j == x.targets[r] { 1.0 } else { 0.0 };
                row[j] += c * (delta - pr[j]) / tau;
            }
        }
    }
    (total, grad)
}

#[cfg(test)]
/// Σ_r ce_weight·CE_r + kd_weight·Σ_u L_u (CE_r = −ln softmax(z_r)[y_r]), and its gradient
/// with respect to the logits.
pub(crate) fn weighted(x: &Inputs, (ce_weight, kd_weight): (f64, f64)) -> (f64, Vec<f64>) {
    let (units, mut grad) = unit_losses(x);
    grad.iter_mut().for_each(|g| *g *= kd_weight);
    let mut total = kd_weight * units;
    for (r, &y) in x.targets.iter().enumerate() {
        let ln_p = log_softmax(&x.logits[r * x.vocab..(r + 1) * x.vocab], 1.0);
        total -= ce_weight * ln_p[y];
        for (j, l) in ln_p.iter().enumerate() {
            let delta = if j == y { 1.0 } else { 0.0 };
            grad[r * x.vocab + j] += ce_weight * (l.exp() - delta);
        }
    }
    (total, grad)
}

#[cfg(test)]
fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

#[cfg(test)]
/// ln softmax(z/τ).
fn log_softmax(z: &[f64], tau: f64) -> Vec<f64> {
    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max) / tau;
    let lse = max + z.iter().map(|v| (v / tau - max).exp()).sum::<f64>().ln();
    z.iter().map(|v| v / tau - lse).collect()
}

/// A seeded batch's teacher side and targets, for tests and benchmarks: `span` as given;
/// at every row 1 to `width` valid entries (the rest padding, with ln t = 0 so that reading
/// one would show) summing to between ½ and 1, sorted descending; about half of them matched
/// to a random student id; `student_matched` true at every matched id and at about a quarter
/// of the others.
#[derive(Debug, Clone)]
pub struct Example {
    /// The student's vocabulary.
    pub vocab: usize,
    /// The next token at every row.
    pub targets: Vec<usize>,
    /// The units.
    pub span: Vec<i32>,
    /// ln t, `[rows, width]`.
    pub log_t: Vec<f64>,
    /// Matched student ids or −1, `[rows, width]`.
    pub matched: Vec<i64>,
    /// 1 or 0, `[rows, width]`.
    pub mask: Vec<f64>,
    /// Entries per row.
    pub width: usize,
    /// `[vocab]`.
    pub student_matched: Vec<bool>,
}

impl Example {
    /// A batch of `span.len()` rows (see the type).
    pub fn new(span: &[i32], vocab: usize, width: usize, seed: u64) -> Example {
        let mut state = seed;
        let mut next = move || {
            // SplitMix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let rows = span.len();
        let targets = (0..rows).map(|_| next() as usize % vocab).collect();
        let (mut log_t, mut matched, mut mask) = (vec![], vec![], vec![]);
        let mut student_matched = vec![false; vocab];
        let unit = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
        for _ in 0..rows {
            let valid = if width == 0 {
                0
            } else {
                1 + next() as usize % width
            };
            let mut w: Vec<f64> = (0..valid).map(|_| 0.05 + unit(next())).collect();
            let scale = (0.5 + 0.5 * unit(next())) / w.iter().sum::<f64>();
            w.iter_mut().for_each(|v| *v *= scale);
            w.sort_by(|a, b| b.total_cmp(a));
            for e in 0..width {
                let value = w.get(e).copied();
                log_t.push(value.map_or(0.0, f64::ln));
                mask.push(if value.is_some() { 1.0 } else { 0.0 });
                let id = next() as usize % vocab;
                let m = value.is_some() && next() % 2 == 0;
                if m {
                    student_matched[id] = true;
                }
                matched.push(if m { id as i64 } else { -1 });
            }
        }
        for flag in student_matched.iter_mut() {
            *flag |= next() % 4 == 0;
        }
        Example {
            vocab,
            targets,
            span: span.to_vec(),
            log_t,
            matched,
            mask,
            width,
            student_matched,
        }
    }

    /// The reference's inputs for `logits` (`[rows, vocab]`) and the loss's settings.
    #[cfg(test)]
    pub fn inputs<'a>(
        &'a self,
        logits: &'a [f64],
        kind: CrossTokenizer,
        tau: f64,
        top_k: usize,
        gold_weights: (f64, f64),
    ) -> Inputs<'a> {
        Inputs {
            logits,
            vocab: self.vocab,
            targets: &self.targets,
            span: &self.span,
            log_t: &self.log_t,
            matched: &self.matched,
            mask: &self.mask,
            width: self.width,
            student_matched: &self.student_matched,
            kind,
            tau,
            top_k,
            gold_weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [CrossTokenizer; 2] = [CrossTokenizer::Uld, CrossTokenizer::Gold];

    fn logits(n: usize, seed: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64) * 0.731 + seed).sin() * 2.5)
            .collect()
    }

    /// One unit of one row with the student's logits `z` against the teacher's `t`, all
    /// unmatched.
    fn one_row(z: &[f64], t: &[f64], kind: CrossTokenizer, k: usize, w: (f64, f64)) -> f64 {
        let log_t: Vec<f64> = t.iter().map(|v| v.ln()).collect();
        let x = Inputs {
            logits: z,
            vocab: z.len(),
            targets: &[0],
            span: &[1],
            log_t: &log_t,
            matched: &vec![-1; t.len()],
            mask: &vec![1.0; t.len()],
            width: t.len(),
            student_matched: &vec![false; z.len()],
            kind,
            tau: 1.0,
            top_k: k,
            gold_weights: w,
        };
        unit_losses(&x).0
    }

    #[test]
    fn every_rows_gradient_matches_finite_differences() {
        // units of 3, 1 and 2 rows and a row outside them; width 5, so k = 2 is below the
        // teacher's entries and k = 8 above them
        let span = [3, 0, 0, 1, -1, 2, 0];
        let (vocab, width) = (11, 5);
        let ex = Example::new(&span, vocab, width, 3);
        let z = logits(span.len() * vocab, 0.4);
        for kind in KINDS {
            for tau in [1.0, 2.0] {
                for k in [2, 8] {
                    let f =
                        |z: &[f64]| weighted(&ex.inputs(z, kind, tau, k, (0.6, 0.4)), (0.3, 0.7));
                    let (loss, g) = f(&z);
                    assert!(loss.is_finite());
                    let units = unit_losses(&ex.inputs(&z, kind, tau, k, (0.6, 0.4))).0;
                    assert!(units > 0.0, "{kind:?} τ {tau} k {k}: no distillation term");
                    for i in 0..z.len() {
                        let h = 1e-6;
                        let (mut up, mut down) = (z.clone(), z.clone());
                        up[i] += h;
                        down[i] -= h;
                        let fd = (f(&up).0 - f(&down).0) / (2.0 * h);
                        assert!(
                            (fd - g[i]).abs() < 1e-6 * (1.0 + g[i].abs()),
                            "{kind:?} τ {tau} k {k} row {} id {}: {fd} vs {}",
                            i / vocab,
                            i % vocab,
                            g[i]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn uld_forgets_identities_and_matches_hand_computed_cases() {
        let uld = CrossTokenizer::Uld;
        let z = [2.0f64.ln(), 0.0, 0.0]; // p = (0.5, 0.25, 0.25)
        // a permutation of the student's own probabilities: 0
        assert!(one_row(&z, &[0.25, 0.5, 0.25], uld, 3, (0.0, 0.0)).abs() < 1e-12);
        // permuting the student's logits changes nothing either
        let perm = [0.0, 0.0, 2.0f64.ln()];
        let a = one_row(&z, &[0.6, 0.3, 0.05], uld, 3, (0.0, 0.0));
        let b = one_row(&perm, &[0.6, 0.3, 0.05], uld, 3, (0.0, 0.0));
        assert!((a - b).abs() < 1e-12 && a > 0.0);
        // sorted student (0.5, 0.25, 0.25) against teacher (0.7, 0.3):
        // |0.5 − 0.7| + |0.25 − 0.3| + |0.25 − 0| = 0.5
        let loss = one_row(&z, &[0.3, 0.7], uld, 3, (0.0, 0.0));
        assert!((loss - 0.5).abs() < 1e-12, "{loss}");
        // vocabularies of different sizes are the point: the student is padded with zeros
        let loss = one_row(&z, &[0.5, 0.25, 0.125, 0.125], uld, 5, (0.0, 0.0));
        assert!((loss - 0.25).abs() < 1e-12, "{loss}");
        // top 2 of each: |0.5 − 0.7| + |0.25 − 0.3|
        let loss = one_row(&z, &[0.3, 0.7], uld, 2, (0.0, 0.0));
        assert!((loss - 0.25).abs() < 1e-12, "{loss}");
    }

    #[test]
    fn gold_is_kl_on_matched_tokens_and_uld_on_the_rest_by_hand() {
        // p = (0.5, 0.25, 0.25); teacher 0.6 matched to id 0, 0.3 and 0.1 unmatched; id 0 is
        // the only matched student id. KL: 0.6 ln(0.6 / 0.5); ULD over ids 1, 2 against
        // (0.3, 0.1): |0.25 − 0.3| + |0.25 − 0.1| = 0.2.
        let z = [2.0f64.ln(), 0.0, 0.0];
        let log_t = [0.6f64.ln(), 0.3f64.ln(), 0.1f64.ln()];
        let x = Inputs {
            logits: &z,
            vocab: 3,
            targets: &[0],
            span: &[1],
            log_t: &log_t,
            matched: &[0, -1, -1],
            mask: &[1.0; 3],
            width: 3,
            student_matched: &[true, false, false],
            kind: CrossTokenizer::Gold,
            tau: 1.0,
            top_k: 2,
            gold_weights: (1.0, 0.5),
        };
        let want = 0.6 * (0.6f64 / 0.5).ln() + 0.5 * 0.2;
        let got = unit_losses(&x).0;
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }

    #[test]
    fn a_merged_unit_scores_the_product_of_its_rows() {
        // row 1 is uniform over 3 ids, so M = 1/3 and q = (1/6, 1/12, 1/12): a teacher whose
        // merged probabilities are those scores 0, one whose are not does not
        let z = [2.0f64.ln(), 0.0, 0.0, 0.0, 0.0, 0.0];
        let teacher = |t: [f64; 3]| {
            let log_t: Vec<f64> = t.iter().map(|v| v.ln()).collect();
            let x = Inputs {
                logits: &z,
                vocab: 3,
                targets: &[0, 2],
                span: &[2, 0],
                log_t: &[log_t.clone(), vec![0.0; 3]].concat(),
                matched: &[-1; 6],
                mask: &[1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
                width: 3,
                student_matched: &[false; 3],
                kind: CrossTokenizer::Uld,
                tau: 1.0,
                top_k: 3,
                gold_weights: (0.0, 0.0),
            };
            unit_losses(&x).0
        };
        assert!(teacher([1.0 / 12.0, 1.0 / 6.0, 1.0 / 12.0]).abs() < 1e-12);
        let off = teacher([0.5, 0.25, 0.25]);
        assert!((off - (0.5 - 1.0 / 6.0 + 2.0 * (0.25 - 1.0 / 12.0))).abs() < 1e-12);
    }
}
