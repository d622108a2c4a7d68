//! Triage (`pdsweep triage`, `docs/src/guide/triage.md`): ranking candidate teachers for a
//! student before distilling from any of them.
//!
//! Each candidate (a trained teacher of the sweep or a released model of any family and
//! tokenizer) is scored once, by bits per byte on the sweep's held-out text; the ranking is by
//! distance from an optimal teacher loss, also in bits per byte (so teachers of every tokenizer
//! compare by what they predict of the same bytes). Where the sweep also distilled from them,
//! the ranking is checked against the measured gains: Spearman's ρ with an interval from
//! resampling seeds.

use serde::{Deserialize, Serialize};

use super::bootstrap::percentile_interval;
use super::sweep::{FinishedRun, Role};

/// The optimal teacher loss the candidates are ranked against, in bits per byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageTarget {
    /// The optimal teacher's held-out bits per byte.
    pub bpb: f64,
    /// Its interval, when known.
    pub ci: Option<[f64; 2]>,
    /// Where it comes from (a capacity-gap fit, the distillation law, the user).
    pub source: String,
    /// Set when the fit located the optimum only as at or beyond the edge of its grid: every
    /// teacher on that side of `bpb` is as close as the data can tell (distance 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond: Option<Beyond>,
}

/// Which side of an edge-of-grid target the optimum lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Beyond {
    /// Stronger teachers (lower bits per byte) than the target.
    Stronger,
    /// Weaker teachers (higher bits per byte).
    Weaker,
}

impl TriageTarget {
    /// How far a teacher of `bpb` bits per byte lies from the target.
    pub fn distance(&self, bpb: f64) -> f64 {
        match self.beyond {
            None => (bpb - self.bpb).abs(),
            Some(Beyond::Stronger) => (bpb - self.bpb).max(0.0),
            Some(Beyond::Weaker) => (self.bpb - bpb).max(0.0),
        }
    }
}

/// A scored candidate, in ranking order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedTeacher {
    /// Run id of the teacher.
    pub id: String,
    /// Non-embedding parameters (a released model's as counted by its family).
    pub params: f64,
    /// Whether it was pre-trained elsewhere (a released model).
    pub pretrained: bool,
    /// Held-out bits per byte.
    pub bpb: f64,
    /// |bpb − target|.
    pub distance: f64,
    /// Whether its bits per byte lie inside the target's interval.
    pub inside: Option<bool>,
}

/// Why candidates cannot be ranked.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TriageError {
    /// A teacher has no bits per byte: its tokenizer does not say which bytes a token is.
    #[error(
        "teacher `{teacher}` cannot be scored by bytes: its tokenizer does not map its tokens to the bytes of the text, so its loss is not comparable with other tokenizers'"
    )]
    NotByteScorable {
        /// The teacher's run id.
        teacher: String,
    },
    /// No teacher has finished.
    #[error("no teacher of the sweep has a held-out score yet")]
    NoCandidates,
}

/// The finished teachers of `runs` (trained and pre-trained; learning-rate candidates left
/// out) ranked by distance from `target`.
pub fn rank(
    runs: &[FinishedRun],
    target: &TriageTarget,
) -> Result<Vec<RankedTeacher>, TriageError> {
    let mut ranked = Vec::new();
    for r in runs.iter().filter(|r| r.kind == Role::Teacher) {
        let bpb = r.bpb.ok_or_else(|| TriageError::NotByteScorable {
            teacher: r.id.clone(),
        })?;
        ranked.push(RankedTeacher {
            id: r.id.clone(),
            params: r.params,
            pretrained: r.tokens <= 0.0,
            bpb,
            distance: target.distance(bpb),
            inside: target.ci.map(|[lo, hi]| lo <= bpb && bpb <= hi),
        });
    }
    if ranked.is_empty() {
        return Err(TriageError::NoCandidates);
    }
    ranked.sort_by(|a, b| a.distance.total_cmp(&b.distance));
    Ok(ranked)
}

/// The ranking against the gains measured by distilling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankingCheck {
    /// Student size the gains are of.
    pub student_params: f64,
    /// Teachers with both a score and a gain.
    pub teachers: usize,
    /// Seeds the gains are paired over.
    pub seeds: usize,
    /// Spearman's ρ between closeness to the target (−distance) and the mean gain.
    pub spearman: f64,
    /// Its 95 % interval from resampling seeds (`None` with fewer than two seeds).
    pub ci: Option<[f64; 2]>,
}

/// Checks `ranked` against the gains of the students of `student_params` in `runs` (each student's
/// loss against its same-seed baseline); `None` with fewer than three teachers with gains.
///
/// Seeds are resampled with replacement `bootstrap` times (seeded by `seed`) for the interval.
pub fn check_ranking(
    ranked: &[RankedTeacher],
    runs: &[FinishedRun],
    student_params: f64,
    bootstrap: usize,
    seed: u64,
) -> Option<RankingCheck> {
    // gains[teacher][seed]
    let mut seeds: Vec<u64> = Vec::new();
    let mut gains: Vec<(f64, Vec<(u64, f64)>)> = Vec::new();
    for t in ranked {
        let g: Vec<(u64, f64)> = runs
            .iter()
            .filter(|r| r.kind == Role::Student && r.params == student_params)
            .filter(|r| r.teacher.as_deref() == Some(t.id.as_str()))
            .filter_map(|r| Some((r.seed, r.baseline_loss? - r.loss)))
            .collect();
        if g.is_empty() {
            continue;
        }
        seeds.extend(g.iter().map(|x| x.0));
        gains.push((-t.distance, g));
    }
    if gains.len() < 3 {
        return None;
    }
    seeds.sort_unstable();
    seeds.dedup();
    let rho_of = |weights: &dyn Fn(u64) -> f64| -> Option<f64> {
        let (x, y): (Vec<f64>, Vec<f64>) = gains
            .iter()
            .filter_map(|(closeness, g)| {
                let w: f64 = g.iter().map(|(s, _)| weights(*s)).sum();
                (w > 0.0).then(|| {
                    let mean = g.iter().map(|(s, v)| weights(*s) * v).sum::<f64>() / w;
                    (*closeness, mean)
                })
            })
            .unzip();
        (x.len() >= 3).then(|| spearman(&x, &y))
    };
    let spearman_all = rho_of(&|_| 1.0)?;
    let ci = (seeds.len() >= 2 && bootstrap > 0).then(|| {
        let draws: Vec<f64> = (0..bootstrap)
            .filter_map(|i| {
                let counts = super::bootstrap::resample_counts(seeds.len(), seed, i);
                let weight = |s: u64| {
                    seeds
                        .iter()
                        .position(|x| *x == s)
                        .map_or(0.0, |k| f64::from(counts[k]))
                };
                rho_of(&weight)
            })
            .filter(|r| r.is_finite())
            .collect();
        percentile_interval(&draws, 0.95)
    });
    Some(RankingCheck {
        student_params,
        teachers: gains.len(),
        seeds: seeds.len(),
        spearman: spearman_all,
        ci,
    })
}

/// Spearman's rank correlation of `x` and `y` (average ranks for ties); NaN when either is
/// constant.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    let (rx, ry) = (ranks(x), ranks(y));
    let n = rx.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
    let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}

/// Ranks from 1, ties sharing their average rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut out = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for k in &order[i..=j] {
            out[*k] = rank;
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: Role, id: &str, params: f64, loss: f64, bpb: Option<f64>) -> FinishedRun {
        FinishedRun {
            id: id.into(),
            kind,
            params,
            tokens: 1e6,
            loss,
            teacher: None,
            config: None,
            baseline_loss: None,
            seed: 1,
            lr_peak: None,
            bpb,
            tokenizer: String::new(),
        }
    }

    #[test]
    fn an_edge_of_grid_target_is_one_sided() {
        let target = TriageTarget {
            bpb: 2.5,
            ci: None,
            source: "test".into(),
            beyond: Some(Beyond::Stronger),
        };
        assert_eq!(target.distance(2.1), 0.0);
        assert_eq!(target.distance(2.5), 0.0);
        assert!((target.distance(2.8) - 0.3).abs() < 1e-12);
        let weaker = TriageTarget {
            beyond: Some(Beyond::Weaker),
            ..target
        };
        assert!((weaker.distance(2.1) - 0.4).abs() < 1e-12);
        assert_eq!(weaker.distance(2.9), 0.0);
    }

    #[test]
    fn spearman_matches_hand_computed_values() {
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 30.0, 40.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        // ranks (1,2,3,4) against (2,1,4,3): 1 − 6·4/(4·15) = 0.6
        assert!((spearman(&[1.0, 2.0, 3.0, 4.0], &[2.0, 1.0, 4.0, 3.0]) - 0.6).abs() < 1e-12);
        assert_eq!(ranks(&[3.0, 1.0, 3.0]), [2.5, 1.0, 2.5]);
    }

    /// Teachers ranked by distance from the target; gains that fall with that distance give
    /// ρ = 1 with an interval at 1; a teacher without bits per byte is refused by name.
    #[test]
    fn candidates_rank_by_distance_and_the_check_recovers_the_order() {
        let bpbs = [2.9, 2.6, 2.45, 2.3, 2.1];
        let mut runs: Vec<FinishedRun> = bpbs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                run(
                    Role::Teacher,
                    &format!("t{i}"),
                    1e4 * 2f64.powi(i as i32),
                    b * 0.69,
                    Some(*b),
                )
            })
            .collect();
        runs.push(run(Role::TeacherCandidate, "t2-lr", 4e4, 1.0, None));
        for (i, b) in bpbs.iter().enumerate() {
            for seed in 1..=3u64 {
                let mut s = run(Role::Student, &format!("s{i}-{seed}"), 5e3, 0.0, Some(3.0));
                s.seed = seed;
                s.teacher = Some(format!("t{i}"));
                let gain = 0.1 - 0.2 * (b - 2.45f64).abs() + 0.001 * seed as f64;
                s.baseline_loss = Some(2.0);
                s.loss = 2.0 - gain;
                runs.push(s);
            }
        }
        let target = TriageTarget {
            bpb: 2.45,
            ci: Some([2.4, 2.5]),
            source: "test".into(),
            beyond: None,
        };
        let ranked = rank(&runs, &target).unwrap();
        let order: Vec<&str> = ranked.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(order[0], "t2");
        assert_eq!(
            ranked.len(),
            5,
            "learning-rate candidates are not candidates"
        );
        assert_eq!(ranked[0].inside, Some(true));
        assert_eq!(ranked[1].inside, Some(false));
        let check = check_ranking(&ranked, &runs, 5e3, 200, 1).unwrap();
        assert_eq!((check.teachers, check.seeds), (5, 3));
        assert!(check.spearman > 0.85, "{}", check.spearman);
        let [lo, hi] = check.ci.unwrap();
        assert!(lo > 0.5 && hi <= 1.0, "[{lo}, {hi}]");

        runs[0].bpb = None;
        assert_eq!(
            rank(&runs, &target),
            Err(TriageError::NotByteScorable {
                teacher: "t0".into()
            })
        );
    }
}
