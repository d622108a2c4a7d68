//! Truncating a teacher's next-token distribution (Peng et al., 2025): keep the top-p nucleus of
//! softmax(z) first, then at most k tokens. What is kept is the tokens and their log-probabilities
//! at τ = 1 under the full vocabulary; renormalising over the kept support at a temperature τ is
//! done when the targets are used ([`super::loss`]), so one truncation serves every τ.
//!
//! Sampled targets ([`sample`]) keep instead k tokens drawn from softmax(z) with their counts
//! (Anshumann et al., ACL 2025): an unbiased estimate of the whole distribution.

use serde::{Deserialize, Serialize};

use crate::data::mix;
use crate::kernels;
use crate::spec::{Missing, Targets, TopK, TopP};

/// How the teacher distribution is truncated before use (Peng et al.: top-p, then top-k; or
/// k sampled tokens), and what becomes of the mass outside the kept tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// Nucleus mass (1 for sampled targets).
    pub top_p: TopP,
    /// Most tokens kept (the number of draws of sampled targets).
    pub top_k: TopK,
    /// The k most probable tokens, or k draws (absent from ids when `top_k`).
    #[serde(default, skip_serializing_if = "Targets::is_top_k")]
    pub targets: Targets,
    /// Renormalise over the kept tokens, or keep the tail as one outcome (absent from ids
    /// when `renormalise`); a store keeps the tail when any of its students uses it.
    #[serde(default, skip_serializing_if = "Missing::is_renormalise")]
    pub missing: Missing,
}

/// The kept support of one position: token ids by decreasing probability and their
/// log-probabilities at τ = 1 (normalised over the full vocabulary).
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// Token ids, most probable first.
    pub ids: Vec<u32>,
    /// ln p(id) under softmax(z) over the full vocabulary.
    pub log_probs: Vec<f32>,
    /// Sampled targets: how many of the draws fell on each id (empty for top-k targets).
    pub counts: Vec<u32>,
    /// ln of the teacher's mass outside `ids` at τ = 1 where it is known exactly (a live
    /// teacher's truncation, a store that keeps it); `None`: 1 − Σ p of the kept ids.
    pub tail: Option<f32>,
    /// For alignment across tokenizers (an aligned store, or a live teacher of another
    /// tokenizer): the token that actually follows this position.
    pub next: Option<TokenAfter>,
}

/// The token that follows a position, as a student of another tokenizer aligns on it: where
/// the position's context ends and where the token ends in the corpus's bytes
/// (`crate::data::bytes`), and the teacher's ln p of it at τ = 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenAfter {
    /// ln p(token) under the teacher's full distribution at this position.
    pub log_prob: f32,
    /// Where the position's context ends (the token's first byte).
    pub from: u64,
    /// Where the token ends.
    pub to: u64,
}

impl Kept {
    /// Top-k entries of a support, no tail known.
    pub fn new(ids: Vec<u32>, log_probs: Vec<f32>) -> Kept {
        Kept {
            ids,
            log_probs,
            counts: Vec::new(),
            tail: None,
            next: None,
        }
    }

    /// Keeps the first `n` entries; the mass of those dropped joins the tail.
    pub fn keep_first(&mut self, n: usize) {
        if n >= self.ids.len() {
            return;
        }
        let dropped: f64 = self.log_probs[n..].iter().map(|&l| (l as f64).exp()).sum();
        self.tail = self.tail.map(|t| ((t as f64).exp() + dropped).ln() as f32);
        self.ids.truncate(n);
        self.log_probs.truncate(n);
        self.counts.truncate(n.min(self.counts.len()));
    }

    /// ln of the teacher's mass outside the kept ids: the exact tail when known, else
    /// 1 − Σ p of the kept ids (at least e^-16, the store's floor).
    pub fn tail_log_mass(&self) -> f32 {
        self.tail.unwrap_or_else(|| {
            let kept: f64 = self.log_probs.iter().map(|&l| (l as f64).exp()).sum();
            (1.0 - kept).max((-16.0f64).exp()).ln() as f32
        })
    }
}

/// Truncates the logits `z` of one position: tokens in decreasing probability until their
/// cumulative probability reaches `top_p` (the token that crosses it is kept), then at most `top_k`
/// of them.
///
/// Ties go to the lower token id.
pub fn truncate(z: &[f32], top_p: f64, top_k: TopK) -> Kept {
    let vocab = z.len();
    let k = (top_k.kept(vocab as u64) as usize).clamp(1, vocab.max(1));
    let max = kernels::row_max(z);
    let log_norm = max as f64 + kernels::exp_sum_f64(z, max).ln();
    let by_prob = |a: &u32, b: &u32| z[*b as usize].total_cmp(&z[*a as usize]).then(a.cmp(b));
    let mut order = top_ids(z, k);
    order.sort_unstable_by(by_prob);
    let mut kept = Kept::new(Vec::with_capacity(k), Vec::with_capacity(k));
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
    kept.tail = Some((1.0 - mass).max(0.0).ln() as f32);
    kept
}

/// The seed of the draws at `position` of training window `window` (its own stream, so a store's
/// draws do not depend on which windows a pass computes together, and a live teacher draws what a
/// store would hold).
///
/// SplitMix64 ([`mix`]) is a fixed algorithm, so a store's draws are the same bytes on every
/// machine and release.
pub(crate) fn draw_seed(window: u64, position: u64) -> u64 {
    mix(
        mix(0x5eed_5a3d, window.wrapping_add(1)),
        position.wrapping_add(1),
    )
}

/// `k` tokens drawn with replacement from softmax(z), seeded by `seed`: the distinct ids
/// (most often drawn first, ties to the lower id), their log-probabilities under the full
/// vocabulary, and their counts. counts/k is an unbiased estimate of softmax(z).
pub fn sample(z: &[f32], k: u64, seed: u64) -> Kept {
    let max = kernels::row_max(z);
    // one set of exponentials for the normaliser and the walk, so the last cumulative sum is
    // the normaliser exactly
    let e: Vec<f32> = z
        .iter()
        .map(|&v| kernels::exp_nonpositive(v - max))
        .collect();
    let norm: f64 = e.iter().map(|&x| x as f64).sum();
    let mut u: Vec<f64> = (0..k)
        .map(|i| (mix(seed, i + 1) >> 11) as f64 / (1u64 << 53) as f64 * norm)
        .collect();
    u.sort_unstable_by(f64::total_cmp);
    let mut counts: Vec<(u32, u32)> = Vec::new();
    let (mut cumulative, mut next) = (0.0f64, 0usize);
    for (id, &x) in e.iter().enumerate() {
        cumulative += x as f64;
        let mut n = 0;
        while next < u.len() && (u[next] < cumulative || id + 1 == z.len()) {
            n += 1;
            next += 1;
        }
        if n > 0 {
            counts.push((id as u32, n));
        }
        if next == u.len() {
            break;
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let log_norm = max as f64 + norm.ln();
    Kept {
        ids: counts.iter().map(|c| c.0).collect(),
        log_probs: counts
            .iter()
            .map(|c| (z[c.0 as usize] as f64 - log_norm) as f32)
            .collect(),
        counts: counts.iter().map(|c| c.1).collect(),
        tail: None,
        next: None,
    }
}

/// The ids of the `k` largest values of `z` (ties to the lower id), in no particular order.
///
/// One pass with a running threshold: only values above the current k-th largest enter a buffer,
/// which is cut back to the top k when it fills; O(V) with a single comparison for most entries,
/// where selecting among all V ids costs several times more at V = 49,152.
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

/// How many of the first entries of `kept` (most probable first, log-probabilities under the full
/// vocabulary) a student with `top_p` and `top_k` uses: entries until their cumulative probability
/// reaches `top_p`, at most `top_k`.
///
/// Applied to a store written with a larger k and no nucleus cut, this gives the same support as
/// [`truncate`] on the teacher's logits.
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

    /// Sparse logit sampling is unbiased: the mean of many sampled estimates (counts / k) of a
    /// fixed distribution converges to it, within five standard errors at every token, while
    /// the top-k estimate of the same size stays off by far more.
    #[test]
    fn sampled_targets_are_unbiased() {
        let z: Vec<f32> = (0..50u32)
            .map(|i| ((i * 29) % 17) as f32 / 3.0 - (i % 5) as f32)
            .collect();
        let p = probs(&z);
        let (k, n) = (16u64, 4000u64);
        let mut mean = vec![0.0f64; z.len()];
        for i in 0..n {
            let s = sample(&z, k, draw_seed(3, i));
            assert_eq!(s.counts.iter().sum::<u32>() as u64, k);
            let mut ids = s.ids.clone();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), s.ids.len(), "distinct ids");
            for (id, c) in s.ids.iter().zip(&s.counts) {
                mean[*id as usize] += *c as f64 / (k * n) as f64;
            }
            for (id, lp) in s.ids.iter().zip(&s.log_probs) {
                assert!((lp.exp() as f64 - p[*id as usize]).abs() < 1e-5);
            }
        }
        for (v, (&m, &q)) in mean.iter().zip(&p).enumerate() {
            let se = (q * (1.0 - q) / (k * n) as f64).sqrt();
            assert!((m - q).abs() <= 5.0 * se + 1e-6, "token {v}: {m} vs {q}");
        }
        let top = truncate(&z, 1.0, TopK::Keep(k));
        let kept: f64 = top.log_probs.iter().map(|l| (*l as f64).exp()).sum();
        let worst = (0..z.len())
            .map(|v| {
                let q = top
                    .ids
                    .iter()
                    .position(|&i| i as usize == v)
                    .map_or(0.0, |j| (top.log_probs[j] as f64).exp() / kept);
                (q - p[v]).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst > 0.01, "top-{k} renormalised is biased: {worst}");
        // the draws are a function of the seed alone
        assert_eq!(sample(&z, k, 11), sample(&z, k, 11));
        assert_ne!(sample(&z, k, 11), sample(&z, k, 12));
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
        let layout = crate::distill::store::Layout::top_k(256, 256);
        let block = crate::distill::store::encode_block(std::slice::from_ref(&all), &layout);
        let decoded = crate::distill::store::decode_block(&block, 1, &layout);
        assert_eq!(decoded.map(|d| d[0].ids.clone()), Some(all.ids));
    }
}
