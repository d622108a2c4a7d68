//! Pre-trained (released) teachers held out against the sweep's trained ones: per distillation
//! config with students of both, the distillation law is fitted to the trained teachers'
//! students alone and predicts the students of each pre-trained teacher, with a bootstrap
//! interval. Beside the prediction: the measured students (mean over seeds), their paired gain,
//! and the best trained teacher of the same student size and budget. This answers "does the law
//! fitted on teachers I trained predict what a released teacher does?", and shows where the
//! released teacher sits on the curve of student loss against teacher loss.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bootstrap::percentile_interval;
use super::data::DataPoint;
use super::estimate::{Fit, FitOptions, fit};
use super::laws::{DistillLaw, LawKind};
use super::moments::{mean, sample_sd};

/// One distilled student as the check reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckStudent {
    /// The student as the distillation law sees it (teacher loss, L̃_S, loss).
    pub point: DataPoint,
    /// Its teacher's run id.
    pub teacher: String,
    /// Whether that teacher is pre-trained (not trained on the sweep's data).
    pub pretrained: bool,
    /// Held-out loss of its same-seed baseline, when finished.
    pub baseline_loss: Option<f64>,
}

/// The best trained teacher for one student size and budget, by mean student loss over seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestTrained {
    /// Its run id.
    pub teacher: String,
    /// Its held-out loss L_T.
    pub teacher_loss: f64,
    /// Mean held-out loss of its students.
    pub student_loss: f64,
    /// Mean paired gain (baseline − student) of its students, when they have baselines.
    pub gain: Option<f64>,
}

/// The students of one pre-trained teacher at one student size and budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldOutStudents {
    /// Student non-embedding parameters.
    pub student_params: f64,
    /// Student training tokens.
    pub student_tokens: f64,
    /// Seeds measured.
    pub seeds: usize,
    /// Mean held-out loss of the students.
    pub measured: f64,
    /// Its sample standard deviation over seeds (`None` with one seed).
    pub measured_sd: Option<f64>,
    /// Mean paired gain (baseline − student), when the students have baselines.
    pub gain: Option<f64>,
    /// The law's prediction (fitted without any pre-trained teacher).
    pub predicted: Option<f64>,
    /// Its 95 % bootstrap interval.
    pub predicted_ci: Option<[f64; 2]>,
    /// The best trained teacher of the same student size and budget.
    pub best_trained: Option<BestTrained>,
}

/// One pre-trained teacher of one distillation config against the law of the trained teachers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleasedCheck {
    /// The distillation config (as a readable key).
    pub config: String,
    /// The pre-trained teacher's run id.
    pub teacher: String,
    /// Its held-out loss L_T on the sweep's held-out text.
    pub teacher_loss: f64,
    /// Range of L_T over the trained teachers the law was fitted on.
    pub trained_teacher_losses: [f64; 2],
    /// Distillation points the law was fitted on.
    pub law_points: usize,
    /// Why no prediction was made, when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_predicted: Option<String>,
    /// Per student size and budget.
    pub students: Vec<HeldOutStudents>,
}

/// The checks of one config's students (`students`), with `supervised` (the supervised fit, for
/// L̃_S's bootstrap samples) and `opts` for the law fit.
///
/// Empty when the config has no pre-trained teacher or no trained one.
pub(crate) fn released_checks(
    config: &str,
    students: &[CheckStudent],
    supervised: Option<&Fit>,
    opts: &FitOptions,
) -> Vec<ReleasedCheck> {
    let (released, trained): (Vec<&CheckStudent>, Vec<&CheckStudent>) =
        students.iter().partition(|s| s.pretrained);
    if released.is_empty() || trained.is_empty() {
        return Vec::new();
    }
    let points: Vec<DataPoint> = trained.iter().map(|s| s.point).collect();
    let law_fit = fit(
        LawKind::Distill,
        &format!("students of trained teachers ({config})"),
        &points,
        opts,
    );
    let lts: Vec<f64> = trained
        .iter()
        .filter_map(|s| s.point.teacher_loss)
        .collect();
    let range = [
        lts.iter().copied().fold(f64::INFINITY, f64::min),
        lts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    ];
    let mut by_teacher: BTreeMap<&str, Vec<&CheckStudent>> = BTreeMap::new();
    for s in &released {
        by_teacher.entry(s.teacher.as_str()).or_default().push(s);
    }
    by_teacher
        .into_iter()
        .map(|(teacher, mine)| ReleasedCheck {
            config: config.to_string(),
            teacher: teacher.to_string(),
            teacher_loss: mine[0].point.teacher_loss.unwrap_or(f64::NAN),
            trained_teacher_losses: range,
            law_points: points.len(),
            not_predicted: law_fit.as_ref().err().map(|e| crate::error::chain(e)),
            students: groups(&mine)
                .into_iter()
                .map(|g| held_out(&g, &trained, law_fit.as_ref().ok(), supervised))
                .collect(),
        })
        .collect()
}

/// `students` grouped by (size, budget), in order of size then budget.
fn groups<'a>(students: &[&'a CheckStudent]) -> Vec<Vec<&'a CheckStudent>> {
    let mut by: BTreeMap<(u64, u64), Vec<&CheckStudent>> = BTreeMap::new();
    for s in students {
        by.entry((s.point.params.to_bits(), s.point.tokens.to_bits()))
            .or_default()
            .push(s);
    }
    // Sizes and budgets are positive, so their bit patterns sort as the numbers do.
    by.into_values().collect()
}

fn same_group(a: &DataPoint, b: &DataPoint) -> bool {
    a.params == b.params && a.tokens == b.tokens
}

/// One group of a pre-trained teacher's students against the law and the trained teachers.
fn held_out(
    group: &[&CheckStudent],
    trained: &[&CheckStudent],
    law: Option<&Fit>,
    supervised: Option<&Fit>,
) -> HeldOutStudents {
    let p = group[0].point;
    let losses: Vec<f64> = group.iter().map(|s| s.point.loss).collect();
    let (predicted, predicted_ci) = match (law, p.teacher_loss, p.supervised_loss) {
        (Some(f), Some(lt), Some(lsup)) => predict(f, supervised, &p, lt, lsup),
        _ => (None, None),
    };
    let peers: Vec<&CheckStudent> = trained
        .iter()
        .filter(|s| same_group(&s.point, &p))
        .copied()
        .collect();
    HeldOutStudents {
        student_params: p.params,
        student_tokens: p.tokens,
        seeds: group.len(),
        measured: mean(&losses).unwrap_or(f64::NAN),
        measured_sd: sample_sd(&losses),
        gain: mean_gain(group),
        predicted,
        predicted_ci,
        best_trained: best_trained(&peers),
    }
}

/// The law's student loss at `p` for teacher loss `lt`, and its interval over the bootstrap
/// samples of the law (sample i paired with sample i of the supervised law, which gives L̃_S).
fn predict(
    f: &Fit,
    supervised: Option<&Fit>,
    p: &DataPoint,
    lt: f64,
    lsup: f64,
) -> (Option<f64>, Option<[f64; 2]>) {
    let Some(law) = f.distill() else {
        return (None, None);
    };
    let value = law.predict(p.params, p.tokens, lt, lsup);
    let draws: Vec<f64> = f
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let lsup_i = supervised
                .and_then(|sf| sf.supervised_sample(i))
                .map_or(lsup, |l| l.predict(p.params, p.tokens));
            DistillLaw::from_natural(s).predict(p.params, p.tokens, lt, lsup_i)
        })
        .filter(|v| v.is_finite())
        .collect();
    let ci = (draws.len() >= 20).then(|| percentile_interval(&draws, 0.95));
    (value.is_finite().then_some(value), ci)
}

/// The trained teacher whose students (same size and budget) have the lowest mean loss.
fn best_trained(peers: &[&CheckStudent]) -> Option<BestTrained> {
    let mut by_teacher: BTreeMap<&str, Vec<&CheckStudent>> = BTreeMap::new();
    for s in peers {
        by_teacher.entry(s.teacher.as_str()).or_default().push(s);
    }
    by_teacher
        .into_iter()
        .map(|(teacher, v)| BestTrained {
            teacher: teacher.to_string(),
            teacher_loss: v[0].point.teacher_loss.unwrap_or(f64::NAN),
            student_loss: mean(&v.iter().map(|s| s.point.loss).collect::<Vec<_>>())
                .unwrap_or(f64::NAN),
            gain: mean_gain(&v),
        })
        .min_by(|a, b| a.student_loss.total_cmp(&b.student_loss))
}

/// Mean of baseline − student over the students with a baseline; `None` when none has one.
fn mean_gain(students: &[&CheckStudent]) -> Option<f64> {
    let gains: Vec<f64> = students
        .iter()
        .filter_map(|s| s.baseline_loss.map(|b| b - s.point.loss))
        .collect();
    mean(&gains)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Students of a known law at several trained teacher losses and two student sizes, and
    /// one pre-trained teacher far below them all: the law fitted without it predicts its
    /// students to within the fit's error, the best trained teacher is the one the law puts
    /// lowest, and the gains are the baseline minus the student.
    #[test]
    fn the_law_of_trained_teachers_predicts_a_held_out_teacher() {
        let law = DistillLaw::PUBLISHED;
        let lsup = |n: f64| 1.8 + 400.0 / n.powf(0.4);
        let mut students = Vec::new();
        for (k, n) in [2e5, 6e5, 2e6].into_iter().enumerate() {
            for (j, lt) in [2.6, 2.9, 3.2, 3.6, 4.0, 4.5].into_iter().enumerate() {
                let ls = law.predict(n, 4e6, lt, lsup(n));
                let wiggle = 1.0 + 1e-4 * (((k * 7 + j * 3) % 5) as f64 - 2.0);
                let mut point = DataPoint::distill(n, 4e6, lt, lsup(n), ls * wiggle);
                point.teacher_params = Some(1e5 * (j + 1) as f64);
                students.push(CheckStudent {
                    point,
                    teacher: format!("t{j}"),
                    pretrained: false,
                    baseline_loss: Some(lsup(n)),
                });
            }
            let lt = 2.2;
            let ls = law.predict(n, 4e6, lt, lsup(n));
            students.push(CheckStudent {
                point: DataPoint::distill(n, 4e6, lt, lsup(n), ls),
                teacher: "released".into(),
                pretrained: true,
                baseline_loss: Some(lsup(n)),
            });
        }
        let opts = FitOptions {
            bootstrap: 40,
            ..FitOptions::default()
        };
        let checks = released_checks("kl", &students, None, &opts);
        assert_eq!(checks.len(), 1);
        let c = &checks[0];
        assert_eq!(c.teacher, "released");
        assert_eq!(c.law_points, 18);
        assert_eq!(c.trained_teacher_losses, [2.6, 4.5]);
        assert!(c.not_predicted.is_none(), "{:?}", c.not_predicted);
        assert_eq!(c.students.len(), 3);
        for s in &c.students {
            let truth = law.predict(s.student_params, 4e6, 2.2, lsup(s.student_params));
            assert!((s.measured - truth).abs() < 1e-12);
            let predicted = s.predicted.expect("a prediction");
            assert!(
                (predicted / truth - 1.0).abs() < 0.01,
                "predicted {predicted}, truth {truth}"
            );
            let gain = s.gain.expect("a gain");
            assert!((gain - (lsup(s.student_params) - truth)).abs() < 1e-12);
            let best = s.best_trained.as_ref().expect("a best trained teacher");
            let expected = [2.6, 2.9, 3.2, 3.6, 4.0, 4.5]
                .into_iter()
                .min_by(|a, b| {
                    let f =
                        |lt: f64| law.predict(s.student_params, 4e6, lt, lsup(s.student_params));
                    f(*a).total_cmp(&f(*b))
                })
                .unwrap_or(f64::NAN);
            assert_eq!(best.teacher_loss, expected);
        }
    }

    #[test]
    fn no_check_without_both_kinds_of_teacher() {
        let p = DataPoint::distill(1e5, 1e6, 3.0, 4.0, 3.8);
        let only_trained = vec![CheckStudent {
            point: p,
            teacher: "t".into(),
            pretrained: false,
            baseline_loss: None,
        }];
        assert!(released_checks("kl", &only_trained, None, &FitOptions::default()).is_empty());
        let only_released = vec![CheckStudent {
            pretrained: true,
            ..only_trained[0].clone()
        }];
        assert!(released_checks("kl", &only_released, None, &FitOptions::default()).is_empty());
    }
}
