//! Choosing the next token from a row of logits: greedy (temperature 0) or sampled at a
//! temperature from the top-k and then top-p (nucleus) of the distribution, as Hugging Face's
//! `generate` orders its warpers (temperature, top-k, top-p). Seeded: the same seed and logits
//! give the same token on every machine.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sampling {
    /// Softmax temperature; 0 is greedy (the most likely token, the lowest id on ties).
    pub temperature: f64,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Then keep the smallest set of most likely tokens whose mass reaches `top_p` (1: all).
    pub top_p: f64,
}

impl Default for Sampling {
    /// Plain sampling at τ = 1 from the whole distribution.
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        }
    }
}

impl Sampling {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            ..Sampling::default()
        }
    }

    /// Why these settings cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(format!(
                "temperature must be 0 (greedy) or positive, not {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top-p must be in (0, 1], not {}", self.top_p));
        }
        Ok(())
    }
}

/// A seeded source of draws, one per generated sequence.
pub(crate) struct Sampler {
    rng: StdRng,
}

impl Sampler {
    /// The sampler of sequence `stream` under `seed`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mixed = seed ^ stream.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Sampler {
            rng: StdRng::seed_from_u64(mixed),
        }
    }

    /// The next token from `logits` under `how`. A row of NaNs gives token 0 rather than
    /// panicking (NaN sorts last).
    pub fn pick(&mut self, logits: &[f32], how: &Sampling) -> u32 {
        if how.temperature == 0.0 || logits.len() == 1 {
            return argmax(logits);
        }
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (logits[a as usize], logits[b as usize]);
            y.total_cmp(&x).then(a.cmp(&b))
        });
        if how.top_k > 0 {
            order.truncate(how.top_k.min(order.len()));
        }
        let max = logits[order[0] as usize] as f64;
        let mut weights: Vec<f64> = order
            .iter()
            .map(|&id| ((logits[id as usize] as f64 - max) / how.temperature).exp())
            .map(|w| if w.is_finite() { w } else { 0.0 })
            .collect();
        let total: f64 = weights.iter().sum();
        if how.top_p < 1.0 && total > 0.0 {
            let (mut mass, mut keep) = (0.0, weights.len());
            for (i, w) in weights.iter().enumerate() {
                mass += w / total;
                if mass >= how.top_p {
                    keep = i + 1;
                    break;
                }
            }
            weights.truncate(keep);
            order.truncate(keep);
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 || !total.is_finite() {
            return order[0];
        }
        let mut u = self.rng.random::<f64>() * total;
        for (id, w) in order.iter().zip(&weights) {
            if u < *w {
                return *id;
            }
            u -= w;
        }
        order[order.len() - 1]
    }
}

/// The index of the largest logit (the lowest on ties; NaN never wins).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] || logits[best].is_nan() && !v.is_nan() {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_largest_and_the_lowest_id_on_ties() {
        let mut s = Sampler::new(1, 0);
        assert_eq!(s.pick(&[0.1, 2.0, 2.0, -1.0], &Sampling::greedy()), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, 0.2]), 1);
    }

    /// Sampled frequencies match softmax(z/τ) within a few standard errors, and top-k / top-p
    /// never pick what they cut.
    #[test]
    fn sampling_follows_the_tempered_distribution_and_the_cuts() {
        let z = [1.0f32, 0.0, -1.0, 2.0];
        let how = Sampling {
            temperature: 2.0,
            ..Sampling::default()
        };
        let p: Vec<f64> = {
            let e: Vec<f64> = z.iter().map(|&v| (v as f64 / 2.0).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|x| x / s).collect()
        };
        let mut s = Sampler::new(42, 3);
        let n = 40_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.pick(&z, &how) as usize] += 1;
        }
        for (c, p) in counts.iter().zip(&p) {
            let f = *c as f64 / n as f64;
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((f - p).abs() < 5.0 * se, "frequency {f} against {p}");
        }
        let top2 = Sampling {
            top_k: 2,
            ..Sampling::default()
        };
        let nucleus = Sampling {
            top_p: 0.5,
            ..Sampling::default()
        };
        for _ in 0..2_000 {
            assert!([0, 3].contains(&s.pick(&z, &top2)));
            // softmax(z): token 3 has 0.64 of the mass, so the 0.5 nucleus is token 3 alone
            assert_eq!(s.pick(&z, &nucleus), 3);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens() {
        let z: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let how = Sampling::default();
        let draw = |seed| {
            let mut s = Sampler::new(seed, 0);
            (0..20).map(|_| s.pick(&z, &how)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = Sampling {
            temperature: -1.0,
            ..Sampling::default()
        };
        assert!(bad.check().is_err());
        let bad = Sampling {
            top_p: 0.0,
            ..Sampling::default()
        };
        assert!(bad.check().unwrap_err().contains("top-p"));
    }
}
