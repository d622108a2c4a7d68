//! The distillation degree: how much closer to its teacher a student is than its same-seed
//! baseline (an undistilled model of the same size, data and seed) is anyway, at each
//! granularity, signed so that positive means "closer to the teacher":
//!
//! - token: agreement(S, T) − agreement(B, T), and JSD(B, T) − JSD(S, T);
//! - sequence: chrF(S, T) − chrF(B, T) of continuations of the same prefixes and seeds;
//! - homogenisation: |self(B) − self(T)| − |self(S) − self(T)|, where self is a model's
//!   self-similarity across sampling seeds: positive when the student's diversity has moved
//!   towards the teacher's.
//!
//! Over the seeds of one student setting, the mean degree and a 95 % percentile interval from
//! the same seed bootstrap the gains use (resampling seeds with replacement).

use serde::Serialize;

use super::profile::Similarity;
use crate::fit::resample_counts;

/// Bootstrap resamples of a degree's mean.
const RESAMPLES: usize = 2000;
/// Seed of those resamples.
const BOOT_SEED: u64 = 29;

/// One student's degree against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Degree {
    /// Teacher-forced top-1 agreement, student minus baseline.
    pub agreement: f64,
    /// Jensen–Shannon divergence from the teacher, baseline minus student.
    pub jsd: f64,
    /// chrF1 of continuations against the teacher's, student minus baseline.
    pub chrf: f64,
    /// How much nearer the teacher's self-similarity the student's is than the baseline's.
    pub homogenisation: f64,
}

/// The degree of `student` against `baseline` (each measured against the same teacher).
pub fn degree(student: &Similarity, baseline: &Similarity) -> Degree {
    let gap = |s: &Similarity| (s.self_similarity - s.reference_self_similarity).abs();
    Degree {
        agreement: student.agreement - baseline.agreement,
        jsd: baseline.jsd - student.jsd,
        chrf: student.chrf - baseline.chrf,
        homogenisation: gap(baseline) - gap(student),
    }
}

/// A mean over seeds with its bootstrap interval (`None` bounds with one seed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Mean over the seeds.
    pub mean: f64,
    /// 2.5th percentile of the resampled means.
    pub lo: Option<f64>,
    /// 97.5th percentile.
    pub hi: Option<f64>,
}

impl Interval {
    /// The mean of `values` and its percentile interval over seed resamples; NaN without
    /// bounds where a value is NaN (a measure that does not apply, such as the token measures
    /// across vocabularies).
    pub fn of(values: &[f64]) -> Interval {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n.max(1) as f64;
        if n < 2 || mean.is_nan() {
            return Interval {
                mean,
                lo: None,
                hi: None,
            };
        }
        let mut means: Vec<f64> = (0..RESAMPLES)
            .map(|i| {
                let counts = resample_counts(n, BOOT_SEED, i);
                values
                    .iter()
                    .zip(&counts)
                    .map(|(v, c)| v * f64::from(*c))
                    .sum::<f64>()
                    / n as f64
            })
            .collect();
        means.sort_by(f64::total_cmp);
        let at = |q: f64| means[((q * (RESAMPLES - 1) as f64).round() as usize).min(RESAMPLES - 1)];
        Interval {
            mean,
            lo: Some(at(0.025)),
            hi: Some(at(0.975)),
        }
    }

    /// `+0.012 [+0.004, +0.020]`, the mean alone, or `n/a` for a measure that does not apply.
    pub fn render(&self) -> String {
        if self.mean.is_nan() {
            return "n/a".into();
        }
        match (self.lo, self.hi) {
            (Some(lo), Some(hi)) => format!("{:+.4} [{lo:+.4}, {hi:+.4}]", self.mean),
            _ => format!("{:+.4}", self.mean),
        }
    }
}

/// The degrees of one student setting (every seed of it), with intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DegreeSummary {
    /// Seeds it is over.
    pub seeds: usize,
    /// Token agreement degree.
    pub agreement: Interval,
    /// Token JSD degree.
    pub jsd: Interval,
    /// Sequence (chrF) degree.
    pub chrf: Interval,
    /// Homogenisation degree.
    pub homogenisation: Interval,
}

/// The summary of `degrees` (one per seed).
pub(crate) fn summarise(degrees: &[Degree]) -> DegreeSummary {
    let of = |f: fn(&Degree) -> f64| Interval::of(&degrees.iter().map(f).collect::<Vec<_>>());
    DegreeSummary {
        seeds: degrees.len(),
        agreement: of(|d| d.agreement),
        jsd: of(|d| d.jsd),
        chrf: of(|d| d.chrf),
        homogenisation: of(|d| d.homogenisation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(agreement: f64, jsd: f64, chrf: f64, own: f64, teacher: f64) -> Similarity {
        Similarity {
            agreement,
            jsd,
            chrf,
            precision: [0.0; 4],
            recall: [0.0; 4],
            self_similarity: own,
            reference_self_similarity: teacher,
            distinct: [0.0; 4],
        }
    }

    #[test]
    fn degrees_are_signed_towards_the_teacher_and_zero_against_oneself() {
        let s = sim(0.6, 0.10, 0.40, 0.30, 0.35);
        let b = sim(0.5, 0.15, 0.30, 0.20, 0.35);
        let d = degree(&s, &b);
        assert!((d.agreement - 0.1).abs() < 1e-12);
        assert!((d.jsd - 0.05).abs() < 1e-12);
        assert!((d.chrf - 0.1).abs() < 1e-12);
        assert!((d.homogenisation - (0.15 - 0.05)).abs() < 1e-12);
        let zero = degree(&s, &s);
        assert_eq!(
            [zero.agreement, zero.jsd, zero.chrf, zero.homogenisation],
            [0.0; 4]
        );
    }

    #[test]
    fn intervals_cover_the_mean_and_need_two_seeds() {
        let i = Interval::of(&[0.1, 0.2, 0.3, 0.4, 0.5]);
        assert!((i.mean - 0.3).abs() < 1e-12);
        let (lo, hi) = (i.lo.unwrap(), i.hi.unwrap());
        assert!(lo < 0.3 && hi > 0.3 && lo >= 0.1 && hi <= 0.5, "{lo} {hi}");
        assert_eq!(Interval::of(&[0.2]).lo, None);
        let same = Interval::of(&[0.7, 0.7, 0.7]);
        let width = same.hi.unwrap() - same.lo.unwrap();
        assert!(width.abs() < 1e-12 && (same.lo.unwrap() - 0.7).abs() < 1e-12);
    }

    #[test]
    fn token_measures_across_vocabularies_stay_not_applicable() {
        // a student of another vocabulary than its teacher has no token measures (NaN)
        let s = sim(f64::NAN, f64::NAN, 0.40, 0.30, 0.35);
        let b = sim(f64::NAN, f64::NAN, 0.30, 0.20, 0.35);
        let d = degree(&s, &b);
        assert!(d.agreement.is_nan() && d.jsd.is_nan());
        assert!((d.chrf - 0.1).abs() < 1e-12);
        let summary = summarise(&[d, d]);
        assert_eq!(summary.agreement.render(), "n/a");
        assert_eq!((summary.jsd.lo, summary.jsd.hi), (None, None));
        assert!(summary.chrf.lo.is_some());
        // stored as JSON (NaN is written null) and read back as NaN
        let json = serde_json::to_string(&s).unwrap();
        let back: Similarity = serde_json::from_str(&json).unwrap();
        assert!(back.agreement.is_nan() && back.jsd.is_nan() && back.chrf == 0.40);
    }
}
