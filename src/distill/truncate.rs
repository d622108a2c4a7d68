//! Truncating a teacher's next-token distribution (Peng et al., 2025): keep the top-p nucleus of
//! softmax(z) first, then at most k tokens. What is kept is the tokens and their log-probabilities
//! at τ = 1 under the full vocabulary; renormalising over the kept support at a temperature τ is
//! done when the targets are used ([`super::loss`]), so one truncation serves every τ.

use serde::{Deserialize, Serialize};

use crate::kernels;
use crate::spec::{TopK, TopP};

/// How the teacher distribution is truncated before use (Peng et al.: top-p, then top-k).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// Nucleus mass.
    pub top_p: TopP,
    /// Most tokens kept.
    pub top_k: TopK,
}

/// The kept support of one position: token ids by decreasing probability and their
/// log-probabilities at τ = 1 (normalised over the full vocabulary).
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// Token ids, most probable first.
    pub ids: Vec<u32>,
    /// ln p(id) under softmax(z) over the full vocabulary.
    pub log_probs: Vec<f32>,
}

/// Truncates the logits `z` of one position: tokens in decreasing probability until their
/// cumulative probability reaches `top_p` (the token that crosses it is kept), then at most
/// `top_k` of them. Ties go to the lower token id.
pub fn truncate(z: &[f32], top_p: f64, top_k: TopK) -> Kept {
    let vocab = z.len();
    let k = (top_k.kept(vocab as u64) as usize).clamp(1, vocab.max(1));
    let max = kernels::row_max(z);
    let log_norm = max as f64 + kernels::exp_sum_f64(z, max).ln();
    let by_prob = |a: &u32, b: &u32| z[*b as usize].total_cmp(&z[*a as usize]).then(a.cmp(b));
    let mut order = top_ids(z, k);
    order.sort_unstable_by(by_prob);
    let mut kept = Kept {
        ids: Vec::with_capacity(k),
        log_probs: Vec::with_capacity(k),
    };
    let mut mass = 0.0f64;
    for id in order {
        let log_p = z[id as usize] as f64 - log_norm;
        kept.ids.push(id);
        kept.log_probs.push(log_p as f32);
        mass += log_p.exp();
        // top-p 1 keeps all k: the mass can reach 1 − 1e-12 long before the k-th token (a
        // peaked teacher), and a store sized for k entries per position must get k.
        if top_p < 1.0 && mass >= top_p - 1e-12 {
            break;
        }
    }
    kept
}

/// The ids of the `k` largest values of `z` (ties to the lower id), in no particular order.
/// One pass with a running threshold: only values above the current k-th largest enter a
/// buffer, which is cut back to the top k when it fills; O(V) with a single comparison for
/// most entries, where selecting among all V ids costs several times more at V = 49,152.
fn top_ids(z: &[f32], k: usize) -> Vec<u32> {
    let by_prob = |a: &u32, b: &u32| z[*b as usize].total_cmp(&z[*a as usize]).then(a.cmp(b));
    if k >= z.len() {
        return (0..z.len() as u32).collect();
    }
    let cap = (4 * k).max(64);
    let mut buffer: Vec<u32> = (0..k as u32).collect();
    buffer.reserve(cap);
    let mut threshold = buffer
        .iter()
        .map(|&i| z[i as usize])
        .fold(
            f32::INFINITY,
            |a, b| if b.total_cmp(&a).is_lt() { b } else { a },
        );
    let mut skip_to = 0;
    for (i, &v) in z.iter().enumerate().skip(k) {
        // most blocks of 16 hold nothing above the threshold: one vector test skips them
        if i % 16 == 0 && i + 16 <= z.len() && kernels::none_above(&z[i..i + 16], threshold) {
            skip_to = i + 16;
        }
        if i < skip_to {
            continue;
        }
        // equal values later in the vocabulary lose the tie to the one already kept
        if v.total_cmp(&threshold).is_gt() {
            buffer.push(i as u32);
            if buffer.len() == cap {
                buffer.select_nth_unstable_by(k - 1, by_prob);
                buffer.truncate(k);
                threshold = z[buffer[k - 1] as usize];
            }
        }
    }
    if buffer.len() > k {
        buffer.select_nth_unstable_by(k - 1, by_prob);
        buffer.truncate(k);
    }
    buffer
}

/// How many of the first entries of `kept` (most probable first, log-probabilities under the
/// full vocabulary) a student with `top_p` and `top_k` uses: entries until their cumulative
/// probability reaches `top_p`, at most `top_k`. Applied to a store written with a larger k and
/// no nucleus cut, this gives the same support as [`truncate`] on the teacher's logits.
pub fn refine(kept: &Kept, top_p: f64, top_k: TopK) -> usize {
    let k = (top_k.kept(kept.ids.len() as u64) as usize).max(1);
    let mut mass = 0.0f64;
    for (n, lp) in kept.log_probs.iter().take(k).enumerate() {
        mass += (*lp as f64).exp();
        if top_p < 1.0 && mass >= top_p - 1e-12 {
            return n + 1;
        }
    }
    k.min(kept.ids.len()).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probs(z: &[f32]) -> Vec<f64> {
        let s: f64 = z.iter().map(|&v| (v as f64).exp()).sum();
        z.iter().map(|&v| (v as f64).exp() / s).collect()
    }

    #[test]
    fn nucleus_then_top_k() {
        let z = [2.0f32, 0.5, 1.0, -1.0, 0.0];
        let p = probs(&z);
        let all = truncate(&z, 1.0, TopK::All);
        assert_eq!(all.ids, vec![0, 2, 1, 4, 3]);
        for (id, lp) in all.ids.iter().zip(&all.log_probs) {
            assert!((lp.exp() as f64 - p[*id as usize]).abs() < 1e-6);
        }
        // p ≈ [0.52, 0.12, 0.19, 0.03, 0.07]: 0.52 < 0.6 ≤ 0.52 + 0.19, so the nucleus is {0, 2}
        assert_eq!(truncate(&z, 0.6, TopK::All).ids, vec![0, 2]);
        assert_eq!(truncate(&z, 0.6, TopK::Keep(1)).ids, vec![0]);
        assert_eq!(truncate(&z, 1.0, TopK::Keep(3)).ids, vec![0, 2, 1]);
        assert_eq!(truncate(&z, 0.01, TopK::Keep(3)).ids, vec![0]);
    }

    #[test]
    fn refining_a_wider_truncation_gives_the_narrow_one() {
        let z: Vec<f32> = (0..50).map(|i| ((i * 17) % 23) as f32 / 4.0).collect();
        let wide = truncate(&z, 1.0, TopK::Keep(40));
        for (p, k) in [
            (0.5, TopK::Keep(40)),
            (0.9, TopK::Keep(8)),
            (1.0, TopK::Keep(5)),
            (0.95, TopK::All),
        ] {
            let narrow = truncate(&z, p, k);
            assert_eq!(
                &wide.ids[..refine(&wide, p, k)],
                &narrow.ids[..],
                "p={p} k={k}"
            );
        }
    }

    #[test]
    fn the_fast_exp_and_top_ids_match_the_exact_ones() {
        for x in [0.0f32, -1e-8, -0.3, -1.0, -5.5, -20.0, -70.0, -86.9] {
            let (fast, exact) = (kernels::exp_nonpositive(x) as f64, (x as f64).exp());
            assert!(
                (fast - exact).abs() <= 3e-7 * exact,
                "{x}: {fast} vs {exact}"
            );
        }
        let z: Vec<f32> = (0..5000u32)
            .map(|i| ((i * 7919) % 1013) as f32 / 37.0 - (i % 3) as f32)
            .collect();
        let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exact: f64 = z.iter().map(|&v| ((v - max) as f64).exp()).sum();
        assert!((kernels::exp_sum_f64(&z, max) / exact - 1.0).abs() < 1e-6);
        for k in [1, 5, 64, 700, 4999, 5000] {
            let mut ids = top_ids(&z, k);
            ids.sort_unstable();
            let mut all: Vec<u32> = (0..5000).collect();
            all.sort_by(|a, b| z[*b as usize].total_cmp(&z[*a as usize]).then(a.cmp(b)));
            let mut want = all[..k].to_vec();
            want.sort_unstable();
            assert_eq!(ids, want, "k = {k}");
        }
    }

    #[test]
    fn ties_go_to_the_lower_id() {
        assert_eq!(
            truncate(&[1.0, 3.0, 3.0, 0.0], 1.0, TopK::Keep(2)).ids,
            vec![1, 2]
        );
    }

    /// Regression: a store with top-k `all` of a peaked teacher (most of the vocabulary below
    /// 1e-12) had fewer entries than its header promised, and every shard was refused.
    #[test]
    fn top_p_one_keeps_exactly_k_tokens_of_a_peaked_teacher() {
        let mut z = vec![-60.0f32; 256];
        z[3] = 10.0;
        z[7] = 8.0;
        let all = truncate(&z, 1.0, TopK::All);
        assert_eq!(all.ids.len(), 256);
        assert_eq!(refine(&all, 1.0, TopK::All), 256);
        assert_eq!(truncate(&z, 1.0, TopK::Keep(100)).ids.len(), 100);
        assert_eq!(truncate(&z, 0.95, TopK::All).ids.len(), 2); // 0.88 + 0.12
        let block = crate::distill::store::encode_block(std::slice::from_ref(&all), 256, 256);
        let decoded = crate::distill::store::decode_block(&block, 1, 256, 256);
        assert_eq!(decoded.map(|d| d[0].ids.clone()), Some(all.ids));
    }
}
