//! Teacher budget as an axis (`docs/src/science/teacher-budget.md`): when one student distilled
//! from teachers trained on several token budgets, is its optimal teacher a size or a loss?
//!
//! Each budget's teachers form a capacity-gap group of their own (the size curve is meaningful
//! only at one budget). Here the groups of one student are compared: the optimum in teacher loss
//! is also fitted once over every budget's teachers (pooled), and the verdict says which of the
//! two optima stays put across budgets, judged by whether their intervals overlap.

use serde::{Deserialize, Serialize};

use super::capacity_gap::{CapacityGap, GapCurve, GapPoint, Optimum, gap_curve};

/// One budget's optima for a student.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetOptimum {
    /// The tokens every teacher of this group trained on.
    pub teacher_tokens: f64,
    /// The optimum in teacher size at this budget.
    pub by_size: Optimum,
    /// The optimum in teacher held-out loss at this budget.
    pub by_loss: Optimum,
}

/// What the comparison across budgets says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum BudgetVerdict {
    /// The loss optima's intervals overlap across budgets while the size optima's do not: the
    /// optimal teacher is a loss, reached by different sizes on different budgets.
    Loss,
    /// The size optima's intervals overlap and the loss optima's do not.
    Size,
    /// Both overlap: these budgets cannot tell the two apart.
    Either,
    /// Neither overlaps: the optimum moves in both size and loss.
    Neither,
    /// Fewer than two budgets have interior optima in both size and loss with intervals.
    Undetermined {
        /// Why.
        reason: String,
    },
}

/// One student's optimal teacher compared across teacher budgets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetComparison {
    /// Student parameters.
    pub student_params: f64,
    /// Student tokens.
    pub student_tokens: f64,
    /// The distillation config (a readable key).
    pub config: String,
    /// Per teacher budget, smallest first.
    pub budgets: Vec<BudgetOptimum>,
    /// Student loss against teacher loss over the teachers of every budget.
    pub pooled_by_teacher_loss: GapCurve,
    /// Which optimum stays put.
    pub verdict: BudgetVerdict,
}

impl BudgetComparison {
    /// The comparison for one student's per-budget groups among `gaps` (all of that student:
    /// those of the first group's config and student budget are kept), `None` with fewer than
    /// two budgets. Used where only stored fits are at hand (`triage`, `plan`'s priors).
    pub fn of_student(gaps: &[&CapacityGap], bootstrap: usize, seed: u64) -> Option<Self> {
        let first = gaps.iter().find(|g| g.teacher_tokens.is_some())?;
        let group: Vec<&CapacityGap> = gaps
            .iter()
            .copied()
            .filter(|g| {
                g.teacher_tokens.is_some()
                    && g.config == first.config
                    && g.student_tokens == first.student_tokens
            })
            .collect();
        Self::of(&group, bootstrap, seed)
    }

    /// The comparison for the per-budget groups `gaps` of one student and config (at least two;
    /// `None` otherwise), with `bootstrap` resamples seeded by `seed` for the pooled curve.
    pub fn of(gaps: &[&CapacityGap], bootstrap: usize, seed: u64) -> Option<BudgetComparison> {
        let first = gaps.first()?;
        let mut budgets: Vec<BudgetOptimum> = gaps
            .iter()
            .filter_map(|g| {
                Some(BudgetOptimum {
                    teacher_tokens: g.teacher_tokens?,
                    by_size: g.by_teacher_params.optimum.clone(),
                    by_loss: g.by_teacher_loss.optimum.clone(),
                })
            })
            .collect();
        if budgets.len() < 2 {
            return None;
        }
        budgets.sort_by(|a, b| a.teacher_tokens.total_cmp(&b.teacher_tokens));
        // A pre-trained teacher's students are in every budget's group: counted once.
        let mut points: Vec<GapPoint> = Vec::new();
        for p in gaps.iter().flat_map(|g| g.points.iter()) {
            if !points.contains(p) {
                points.push(*p);
            }
        }
        let pooled = gap_curve("teacher_loss", &points, |p| p.teacher_loss, bootstrap, seed);
        Some(BudgetComparison {
            student_params: first.student_params,
            student_tokens: first.student_tokens,
            config: first.config.clone(),
            verdict: verdict(&budgets),
            budgets,
            pooled_by_teacher_loss: pooled,
        })
    }

    /// The widest half-width of the per-budget loss optima's intervals, in nats (`None` when
    /// some budget has no interval): the precision goal is ±0.03.
    pub fn loss_half_width(&self) -> Option<f64> {
        self.budgets
            .iter()
            .map(|b| interval(&b.by_loss).map(|[lo, hi]| (hi - lo) / 2.0))
            .try_fold(0.0f64, |w, h| h.map(|h| w.max(h)))
    }
}

/// The interval of an interior optimum.
fn interval(o: &Optimum) -> Option<[f64; 2]> {
    match o {
        Optimum::Interior { ci: Some(ci), .. } => Some(*ci),
        _ => None,
    }
}

/// Whether every pair of intervals overlaps (one common point is not needed; pairwise is the
/// weaker, symmetric test of "the same optimum within the noise").
fn overlap(intervals: &[[f64; 2]]) -> bool {
    intervals.iter().enumerate().all(|(i, a)| {
        intervals[i + 1..]
            .iter()
            .all(|b| a[0] <= b[1] && b[0] <= a[1])
    })
}

/// The verdict from the budgets whose optima in both size and loss are interior with intervals.
fn verdict(budgets: &[BudgetOptimum]) -> BudgetVerdict {
    let both: Vec<([f64; 2], [f64; 2])> = budgets
        .iter()
        .filter_map(|b| Some((interval(&b.by_size)?, interval(&b.by_loss)?)))
        .collect();
    if both.len() < 2 {
        return BudgetVerdict::Undetermined {
            reason: format!(
                "{} of {} teacher budgets have a supported optimum with an interval in both teacher size and teacher loss; a comparison needs 2",
                both.len(),
                budgets.len()
            ),
        };
    }
    let (size, loss): (Vec<[f64; 2]>, Vec<[f64; 2]>) = both.into_iter().unzip();
    match (overlap(&size), overlap(&loss)) {
        (false, true) => BudgetVerdict::Loss,
        (true, false) => BudgetVerdict::Size,
        (true, true) => BudgetVerdict::Either,
        (false, false) => BudgetVerdict::Neither,
    }
}

impl std::fmt::Display for BudgetVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            BudgetVerdict::Loss => f.write_str(
                "the optimal teacher is a loss: its loss stays within the intervals across budgets while its size moves",
            ),
            BudgetVerdict::Size => f.write_str(
                "the optimal teacher is a size: its size stays within the intervals across budgets while its loss moves",
            ),
            BudgetVerdict::Either => f.write_str(
                "both the optimal size and the optimal loss stay within the intervals across budgets: these budgets cannot tell them apart",
            ),
            BudgetVerdict::Neither => f.write_str(
                "neither stays put: the optimal teacher moves in both size and loss across budgets",
            ),
            BudgetVerdict::Undetermined { reason } => write!(f, "undetermined: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interior(at: f64, ci: [f64; 2]) -> Optimum {
        Optimum::Interior {
            at,
            student_loss: 1.0,
            ci: Some(ci),
            interior_fraction: Some(1.0),
        }
    }

    fn budget(tokens: f64, size: [f64; 2], loss: [f64; 2]) -> BudgetOptimum {
        BudgetOptimum {
            teacher_tokens: tokens,
            by_size: interior(size[0].midpoint(size[1]), size),
            by_loss: interior(loss[0].midpoint(loss[1]), loss),
        }
    }

    #[test]
    fn the_verdict_follows_which_intervals_overlap() {
        let loss = [
            budget(1e6, [10e3, 20e3], [1.70, 1.74]),
            budget(4e6, [40e3, 80e3], [1.71, 1.75]),
        ];
        assert_eq!(verdict(&loss), BudgetVerdict::Loss);
        let size = [
            budget(1e6, [40e3, 80e3], [1.80, 1.84]),
            budget(4e6, [50e3, 90e3], [1.70, 1.74]),
        ];
        assert_eq!(verdict(&size), BudgetVerdict::Size);
        let one = [
            budget(1e6, [40e3, 80e3], [1.80, 1.84]),
            BudgetOptimum {
                by_loss: Optimum::TooFewPoints,
                ..budget(4e6, [50e3, 90e3], [1.70, 1.74])
            },
        ];
        assert!(matches!(verdict(&one), BudgetVerdict::Undetermined { .. }));
    }

    /// A student whose loss depends only on its teacher's loss (a parabola in ln L_T with its
    /// minimum at 1.72), with teachers of each budget reaching different losses at the same
    /// sizes (1.72 by the largest at one budget, a middle size at another): the pooled curve
    /// recovers the optimum in loss.
    #[test]
    fn the_pooled_curve_recovers_an_optimal_teacher_loss() {
        let mut points = Vec::new();
        for (budget, shift) in [(1e6, 0.09), (4e6, 0.0), (16e6, -0.09)] {
            for (i, size) in [10e3, 20e3, 40e3, 80e3, 160e3].iter().enumerate() {
                let teacher_loss = 1.96 - 0.06 * i as f64 + shift;
                for seed in 1..=4u64 {
                    let noise = 0.004 * ((seed as f64 * 7.3 + i as f64).sin());
                    let x = (teacher_loss / 1.72f64).ln();
                    points.push((
                        budget,
                        GapPoint {
                            teacher_params: *size,
                            teacher_loss,
                            student_loss: 2.0 + 8.0 * x * x + noise,
                            seed: Some(seed),
                            paired_baseline: None,
                        },
                    ));
                }
            }
        }
        let all: Vec<GapPoint> = points.iter().map(|p| p.1).collect();
        let pooled = gap_curve("teacher_loss", &all, |p| p.teacher_loss, 200, 1);
        let Optimum::Interior { at, ci, .. } = pooled.optimum else {
            panic!("{:?}", pooled.optimum)
        };
        assert!((at - 1.72).abs() < 0.005, "{at}");
        let [lo, hi] = ci.expect("an interval");
        assert!(lo <= 1.72 && 1.72 <= hi && hi - lo < 0.02, "[{lo}, {hi}]");
    }
}
