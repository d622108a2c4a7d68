//! How distilled is a student? Judge-free similarity of a model to its teacher at three
//! granularities that carry over to base models (Lee et al., ACL 2025, measure the same with an
//! LLM judge): token (`token`: teacher-forced top-1 agreement and Jensen–Shannon divergence),
//! sequence ([`ngram`]: chrF-style n-gram overlap of continuations of the same held-out
//! prefixes, on bytes) and homogenisation (the diversity of a model's own samples). The
//! **distillation degree** (`degree`) is a student's similarity minus its same-seed
//! baseline's: any two models of one corpus resemble each other, and the baseline says how
//! much. Measurements are made once per sweep and stored ([`measure`], `records`).

pub(crate) mod degree;
mod measure;
mod models;
pub mod ngram;
mod profile;
mod records;
mod token;

pub use degree::degree;
pub(crate) use degree::{Degree, DegreeSummary, Interval, summarise};
pub(crate) use measure::StudentSimilarity;
pub use measure::{measure, students};
pub use models::{TextOf, held_out_prefixes, load_model, run_data};
pub(crate) use profile::Similarity;
pub use profile::{Settings, compare, continuations};
pub(crate) use records::{Record, read as read_records};

use crate::store::RunRow;

/// The degrees of one student setting over its seeds.
#[derive(Debug, Clone)]
pub struct GroupDegree {
    /// The students' name without its seed (`student-20K-from-60K-…`).
    pub group: String,
    /// Their teacher's name.
    pub teacher: String,
    /// Student non-embedding parameters.
    pub student_params: i64,
    /// Teacher non-embedding parameters (its row's), where known.
    pub teacher_params: Option<i64>,
    /// Degrees with intervals.
    pub summary: DegreeSummary,
    /// Mean similarity of the students and of their baselines (chrF), for the reference line.
    pub student_chrf: f64,
    /// Mean baseline chrF against the same teacher.
    pub baseline_chrf: f64,
}

/// A run name without its trailing seed (`-s3`).
pub(crate) fn without_seed(name: &str) -> &str {
    match name.rfind("-s") {
        Some(i) if name[i + 2..].chars().all(|c| c.is_ascii_digit()) && i + 2 < name.len() => {
            &name[..i]
        }
        _ => name,
    }
}

/// Every student setting's degrees, in run order of its first seed.
pub fn group_degrees(rows: &[RunRow], records: &[Record]) -> Vec<GroupDegree> {
    let mut groups: Vec<(String, Vec<StudentSimilarity>)> = Vec::new();
    for s in students(rows, records) {
        let key = without_seed(&s.student.name).to_string();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(s),
            None => groups.push((key, vec![s])),
        }
    }
    groups
        .into_iter()
        .map(|(group, members)| {
            let degrees: Vec<Degree> = members
                .iter()
                .map(|m| degree(m.student_similarity, m.baseline_similarity))
                .collect();
            let first = members[0].student;
            let teacher = first.teacher_name.clone().unwrap_or_default();
            let teacher_params = first
                .teacher_id
                .as_ref()
                .and_then(|t| rows.iter().find(|r| &r.id == t))
                .map(|r| r.params_non_embedding);
            let n = members.len() as f64;
            GroupDegree {
                group,
                teacher,
                student_params: first.params_non_embedding,
                teacher_params,
                summary: summarise(&degrees),
                student_chrf: members
                    .iter()
                    .map(|m| m.student_similarity.chrf)
                    .sum::<f64>()
                    / n,
                baseline_chrf: members
                    .iter()
                    .map(|m| m.baseline_similarity.chrf)
                    .sum::<f64>()
                    / n,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::profile::Continuations;
    use super::token::token_similarity;

    use burn::tensor::Device;

    use super::*;
    use crate::data::Stream;
    use crate::model::{ModelShape, Transformer, TransformerConfig, WeightSource};

    fn config() -> TransformerConfig {
        let shape = ModelShape {
            n_layers: 2,
            d_model: 32,
            n_heads: 2,
            n_kv_heads: 2,
            d_ff: 64,
            vocab: 64,
            // untied: an untrained tied model's top token is its input token whatever its
            // weights, so any two would agree
            tie_embeddings: false,
        };
        TransformerConfig::new(shape, 32)
    }

    fn model(seed: u64) -> Transformer {
        let device = Device::flex();
        device.seed(seed);
        config().init(&device)
    }

    struct Map(HashMap<String, Vec<f32>>);

    impl WeightSource for Map {
        fn tensor(&mut self, name: &str, _: &[usize]) -> Result<Vec<f32>, String> {
            self.0.get(name).cloned().ok_or_else(|| name.to_string())
        }
    }

    /// `m` with every weight multiplied by (1 + `noise`·ε), ε a fixed ±1 pattern.
    fn perturbed(m: &Transformer, noise: f32) -> Transformer {
        let map = m
            .named_weights()
            .into_iter()
            .map(|t| {
                let data = t
                    .data
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v * (1.0 + noise * if (i * 7919) % 3 == 0 { 1.0 } else { -1.0 }))
                    .collect();
                (t.name, data)
            })
            .collect();
        config()
            .from_weights(&mut Map(map), &Device::flex())
            .unwrap()
    }

    /// A model against itself, a perturbed copy and an independent model: similarity ranks
    /// them in that order at every granularity, the model against itself is maximal (agreement
    /// 1, JSD 0, chrF 1: the same seeds give the same text), and two independently initialised
    /// models overlap at chance level.
    #[test]
    fn itself_a_noisy_copy_and_a_stranger_rank_in_order() {
        let device = Device::flex();
        let a = model(1);
        let copy = perturbed(&a, 0.05);
        let stranger = model(2);
        let val = Stream::Memory((0..4000u32).map(|i| (i * 37 + i / 7) % 64).collect());
        let prefixes: Vec<Vec<u32>> = (0..8)
            .map(|p| (0..8).map(|i| (p * 11 + i * 5) % 64).collect())
            .collect();
        let settings = Settings {
            prefixes: 8,
            prefix_tokens: 8,
            continuation_tokens: 24,
            samples: 3,
            token_windows: 16,
            ..Settings::default()
        };
        let ident = |t: &[u32]| t.to_vec();
        let conts =
            |m: &Transformer| continuations(m, &prefixes, &settings, &ident, &device).unwrap();
        let (ca, cc, cs) = (conts(&a), conts(&copy), conts(&stranger));
        let sim = |m: &Transformer, c: &Continuations| {
            compare(c, &ca, token_similarity(m, &a, &val, 32, 16, &device))
        };
        let (own, near, far) = (sim(&a, &ca), sim(&copy, &cc), sim(&stranger, &cs));
        assert_eq!(own.agreement, 1.0);
        assert!(own.jsd.abs() < 1e-6, "{}", own.jsd);
        assert_eq!(own.chrf, 1.0);
        assert!(
            own.agreement > near.agreement && near.agreement > far.agreement,
            "{own:?} {near:?} {far:?}"
        );
        assert!(own.jsd < near.jsd && near.jsd < far.jsd, "{near:?} {far:?}");
        assert!(
            own.chrf > near.chrf && near.chrf > far.chrf,
            "{near:?} {far:?}"
        );
        // untrained models are near uniform over 64 tokens: independent samples share
        // unigrams at about the rate two uniform draws do and almost no 4-grams
        assert!(far.precision[3] < 0.02, "{far:?}");
        assert!(far.agreement < 0.15, "{far:?}");
        // a model as its own baseline has degree 0 at every granularity
        let d = degree(&near, &near);
        assert_eq!([d.agreement, d.jsd, d.chrf, d.homogenisation], [0.0; 4]);
        // the copy is closer to the model than the stranger is: positive degree everywhere
        let d = degree(&near, &far);
        assert!(d.agreement > 0.0 && d.jsd > 0.0 && d.chrf > 0.0, "{d:?}");
    }

    #[test]
    fn seeds_come_off_names() {
        assert_eq!(
            super::without_seed("student-20K-from-60K-kl-s12"),
            "student-20K-from-60K-kl"
        );
        assert_eq!(super::without_seed("student-x-s"), "student-x-s");
        assert_eq!(
            super::without_seed("teacher-5K-s1-lr3e-3"),
            "teacher-5K-s1-lr3e-3"
        );
    }
}
