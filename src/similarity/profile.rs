//! What is compared between two models: each model's continuations of the same held-out
//! prefixes under the same sampling seeds (so a model against itself gives the same texts),
//! as symbols (bytes of decoded text), and the measures that compare two such sets.

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use super::ngram::{self, MAX_N};
use super::token::TokenSimilarity;
use crate::generate::{GenerateError, Sampling, generate};
use crate::model::Transformer;

/// How similarity is measured; recorded with every measurement, whose rows are reused only
/// under the same settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Held-out prefixes (evenly spaced over the held-out split).
    pub prefixes: usize,
    /// Tokens per prefix.
    pub prefix_tokens: usize,
    /// Tokens generated per continuation.
    pub continuation_tokens: usize,
    /// Continuations per prefix (sampling seeds `seed`, `seed + 1`, …).
    pub samples: usize,
    /// First sampling seed.
    pub seed: u64,
    /// Sampling temperature of the continuations.
    pub temperature: f64,
    /// Held-out windows of the context compared teacher-forced.
    pub token_windows: usize,
}

impl Default for Settings {
    /// 32 prefixes × 4 samples of 64 tokens after 32-token prefixes, τ = 1; 64 windows
    /// teacher-forced.
    fn default() -> Self {
        Settings {
            prefixes: 32,
            prefix_tokens: 32,
            continuation_tokens: 64,
            samples: 4,
            seed: 1,
            temperature: 1.0,
            token_windows: 64,
        }
    }
}

impl Settings {
    /// The settings as the compact JSON that keys stored rows.
    pub fn key(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A model's continuations: `[prefix][sample]` as symbols, and the same as token ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Continuations {
    /// Decoded symbols (bytes of text; token ids where the corpus has no text).
    pub symbols: Vec<Vec<Vec<u32>>>,
    /// The generated token ids.
    pub tokens: Vec<Vec<Vec<u32>>>,
}

/// Continues every prefix `settings.samples` times (seed `settings.seed + s` for sample s, the
/// prefix's index as its stream), decoding each continuation with `symbols`.
pub fn continuations(
    model: &Transformer,
    prefixes: &[Vec<u32>],
    settings: &Settings,
    symbols: &dyn Fn(&[u32]) -> Vec<u32>,
    device: &Device,
) -> Result<Continuations, GenerateError> {
    let how = Sampling {
        temperature: settings.temperature,
        ..Sampling::default()
    };
    let mut tokens = vec![Vec::new(); prefixes.len()];
    for s in 0..settings.samples {
        let seed = settings.seed + s as u64;
        let g = generate(
            model,
            prefixes,
            settings.continuation_tokens,
            &how,
            seed,
            0,
            device,
        )?;
        for (p, t) in g.tokens.into_iter().enumerate() {
            tokens[p].push(t);
        }
    }
    let symbols = tokens
        .iter()
        .map(|per| per.iter().map(|t| symbols(t)).collect())
        .collect();
    Ok(Continuations { symbols, tokens })
}

/// A model compared with a reference (its teacher), at every granularity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Similarity {
    /// Teacher-forced top-1 agreement; NaN (stored as null) for a model of another vocabulary
    /// than the reference's, where only the sequence measures apply.
    #[serde(deserialize_with = "nan_if_null")]
    pub agreement: f64,
    /// Teacher-forced Jensen–Shannon divergence (nats/position); NaN as `agreement`.
    #[serde(deserialize_with = "nan_if_null")]
    pub jsd: f64,
    /// Mean chrF1 of the model's continuation against the reference's, same prefix and seed.
    pub chrf: f64,
    /// Mean n-gram precision per order (the model's text as hypothesis).
    pub precision: [f64; MAX_N],
    /// Mean n-gram recall per order.
    pub recall: [f64; MAX_N],
    /// The model's own self-similarity (mean chrF1 between its samples of one prefix).
    pub self_similarity: f64,
    /// The reference's self-similarity, for the homogenisation degree.
    pub reference_self_similarity: f64,
    /// The model's distinct-n per order over all its continuations.
    pub distinct: [f64; MAX_N],
}

/// A stored measure: JSON writes NaN as null, read back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// `model` against `reference`: the sequence measures from their continuations, the token
/// measures as given.
pub fn compare(
    model: &Continuations,
    reference: &Continuations,
    token: TokenSimilarity,
) -> Similarity {
    let (mut chrf, mut precision, mut recall, mut pairs) =
        (0.0, [0.0; MAX_N], [0.0; MAX_N], 0usize);
    for (mine, theirs) in model.symbols.iter().zip(&reference.symbols) {
        for (h, r) in mine.iter().zip(theirs) {
            let o = ngram::overlap(h, r);
            chrf += o.chrf();
            for n in 0..MAX_N {
                precision[n] += o.precision[n];
                recall[n] += o.recall[n];
            }
            pairs += 1;
        }
    }
    let pairs_f = pairs.max(1) as f64;
    for n in 0..MAX_N {
        precision[n] /= pairs_f;
        recall[n] /= pairs_f;
    }
    let all: Vec<Vec<u32>> = model.symbols.iter().flatten().cloned().collect();
    Similarity {
        agreement: token.agreement,
        jsd: token.jsd,
        chrf: chrf / pairs_f,
        precision,
        recall,
        self_similarity: self_similarity(model),
        reference_self_similarity: self_similarity(reference),
        distinct: ngram::distinct(&all),
    }
}

/// Mean self-similarity over the prefixes (0 with one sample per prefix).
pub(crate) fn self_similarity(c: &Continuations) -> f64 {
    let per: Vec<f64> = c
        .symbols
        .iter()
        .filter_map(|s| ngram::self_similarity(s))
        .collect();
    if per.is_empty() {
        0.0
    } else {
        per.iter().sum::<f64>() / per.len() as f64
    }
}
