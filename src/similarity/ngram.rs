//! Sequence-level similarity on symbols (bytes of decoded text, so tokenizers do not matter):
//! chrF-style n-gram overlap of two texts, the diversity of a model's own samples (distinct-n)
//! and their self-similarity. n runs from 1 to `MAX_N`.
//!
//! Overlap of hypothesis h and reference r at order n: with C_h(g), C_r(g) the counts of n-gram
//! g, matches_n = Σ_g min(C_h(g), C_r(g)), precision_n = matches_n / Σ C_h, recall_n = matches_n
//! / Σ C_r. As chrF (Popović 2015), precision and recall are averaged over n before the F-score;
//! the F-score here is F1 (β = 1), so that similarity is symmetric in its two texts. Orders
//! longer than the shorter text (which has no n-gram of them) are left out of the averages, so
//! a short text equal to another scores 1.

use std::collections::HashMap;

/// Highest n-gram order (chrF's character orders stop at 6; 4 is the and BLEU's).
pub(crate) const MAX_N: usize = 4;

/// n-gram overlap of two texts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overlap {
    /// Precision per order (index 0 is unigrams).
    pub precision: [f64; MAX_N],
    /// Recall per order.
    pub recall: [f64; MAX_N],
    /// Orders both texts have n-grams of (1..=orders); the averages are over these.
    pub orders: usize,
}

impl Overlap {
    /// Mean precision over the orders.
    pub fn mean_precision(&self) -> f64 {
        mean(&self.precision[..self.orders])
    }

    /// Mean recall over the orders.
    pub fn mean_recall(&self) -> f64 {
        mean(&self.recall[..self.orders])
    }

    /// chrF1: the harmonic mean of mean precision and mean recall (0 when both are 0).
    pub fn chrf(&self) -> f64 {
        let (p, r) = (self.mean_precision(), self.mean_recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn counts(text: &[u32], n: usize) -> HashMap<&[u32], usize> {
    let mut out: HashMap<&[u32], usize> = HashMap::new();
    for g in text.windows(n) {
        *out.entry(g).or_default() += 1;
    }
    out
}

/// The overlap of hypothesis `h` with reference `r`. A text too short for an order has
/// precision (or recall) 0 at that order; two empty texts overlap 0.
pub fn overlap(h: &[u32], r: &[u32]) -> Overlap {
    let mut precision = [0.0; MAX_N];
    let mut recall = [0.0; MAX_N];
    for n in 1..=MAX_N {
        let (ch, cr) = (counts(h, n), counts(r, n));
        let matches: usize = ch
            .iter()
            .map(|(g, c)| (*c).min(cr.get(g).copied().unwrap_or(0)))
            .sum();
        let (nh, nr) = (h.len().saturating_sub(n - 1), r.len().saturating_sub(n - 1));
        if nh > 0 {
            precision[n - 1] = matches as f64 / nh as f64;
        }
        if nr > 0 {
            recall[n - 1] = matches as f64 / nr as f64;
        }
    }
    Overlap {
        precision,
        recall,
        orders: h.len().min(r.len()).min(MAX_N),
    }
}

/// distinct-n of a set of texts: distinct n-grams over all n-grams, pooled over the texts, per
/// order (1 for texts that never repeat an n-gram; small for a model that loops).
pub fn distinct(texts: &[Vec<u32>]) -> [f64; MAX_N] {
    let mut out = [0.0; MAX_N];
    for n in 1..=MAX_N {
        let mut seen: HashMap<&[u32], ()> = HashMap::new();
        let mut total = 0usize;
        for t in texts {
            for g in t.windows(n) {
                seen.insert(g, ());
                total += 1;
            }
        }
        if total > 0 {
            out[n - 1] = seen.len() as f64 / total as f64;
        }
    }
    out
}

/// Mean chrF1 over every pair of `samples` (continuations of one prefix under different
/// seeds): 1 when every seed gives the same text; `None` with fewer than two samples.
pub(crate) fn self_similarity(samples: &[Vec<u32>]) -> Option<f64> {
    let mut sum = 0.0;
    let mut pairs = 0usize;
    for i in 0..samples.len() {
        for j in i + 1..samples.len() {
            sum += overlap(&samples[i], &samples[j]).chrf();
            pairs += 1;
        }
    }
    (pairs > 0).then(|| sum / pairs as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Vec<u32> {
        s.bytes().map(u32::from).collect()
    }

    /// "abcd" against "abce": unigrams 3 of 4 match (a, b, c), bigrams 2 of 3 (ab, bc),
    /// trigrams 1 of 2 (abc), 4-grams 0 of 1; both texts have the same length, so precision
    /// equals recall: (3/4 + 2/3 + 1/2 + 0) / 4 = 23/48.
    #[test]
    fn overlap_of_a_hand_computed_pair() {
        let o = overlap(&b("abcd"), &b("abce"));
        assert_eq!(o.precision, [0.75, 2.0 / 3.0, 0.5, 0.0]);
        assert_eq!(o.recall, o.precision);
        assert!((o.chrf() - 23.0 / 48.0).abs() < 1e-12);
    }

    /// Counts are clipped: "aaaa" against "a" matches one unigram; precision 1/4, recall 1.
    #[test]
    fn repeated_ngrams_are_clipped_and_lengths_differ() {
        let o = overlap(&b("aaaa"), &b("a"));
        assert_eq!(o.precision[0], 0.25);
        assert_eq!(o.recall[0], 1.0);
        assert_eq!(o.recall[1], 0.0); // "a" has no bigram
        assert_eq!(o.orders, 1); // so only unigrams are averaged: F1 of 1/4 and 1
        assert!((o.chrf() - 0.4).abs() < 1e-12);
        assert_eq!(overlap(&b("xyz"), &b("xyz")).chrf(), 1.0);
        assert_eq!(overlap(&b(""), &b("")).chrf(), 0.0);
        assert_eq!(overlap(&b("hello"), &b("hello")).chrf(), 1.0);
        assert_eq!(overlap(&b("abc"), &b("xyz")).chrf(), 0.0);
    }

    /// "abab": unigrams {a, b} of 4 → 1/2; bigrams {ab, ba} of 3 → 2/3; trigrams {aba, bab}
    /// of 2 → 1; the 4-gram → 1.
    #[test]
    fn distinct_n_of_a_hand_computed_text() {
        assert_eq!(distinct(&[b("abab")]), [0.5, 2.0 / 3.0, 1.0, 1.0]);
        // pooled over texts: the same text twice halves every order
        assert_eq!(
            distinct(&[b("abab"), b("abab")]),
            [0.25, 1.0 / 3.0, 0.5, 0.5]
        );
    }

    #[test]
    fn self_similarity_is_one_for_identical_samples_and_needs_two() {
        assert_eq!(self_similarity(&[b("xyz"), b("xyz"), b("xyz")]), Some(1.0));
        assert_eq!(self_similarity(&[b("xyz")]), None);
        let mixed = self_similarity(&[b("abcd"), b("abce")]).unwrap();
        assert!((mixed - 23.0 / 48.0).abs() < 1e-12);
    }
}
