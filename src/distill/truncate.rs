//! Truncating a teacher's next-token distribution (Peng et al., 2025): keep the top-p nucleus of
//! softmax(z) first, then at most k tokens. What is kept is the tokens and their log-probabilities
//! at τ = 1 under the full vocabulary; renormalising over the kept support at a temperature τ is
//! done when the targets are used ([`super::loss`]), so one truncation serves every τ.

use crate::spec::TopK;

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
    let log_norm = crate::kernels::row_log_sum_exp(z) as f64;
    let mut order: Vec<u32> = (0..vocab as u32).collect();
    let by_prob = |a: &u32, b: &u32| z[*b as usize].total_cmp(&z[*a as usize]).then(a.cmp(b));
    if k < vocab {
        order.select_nth_unstable_by(k - 1, by_prob);
        order.truncate(k);
    }
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
