//! `recommend`: the optimal teacher for a student of size N_S on D_S tokens — from a sweep's
//! stored fits, or from Busbridge et al.'s published coefficients — with the predicted student
//! loss, the gain over training without a teacher, the cost of training that teacher, and an
//! honest flag when the answer extrapolates beyond what the sweep measured.

use crate::fit::LawOptimum;
use serde::{Deserialize, Serialize};

use super::bootstrap::percentile_interval;
use super::capacity_gap::{TStarScaling, optimal_teacher_loss, size_for_loss};
use super::data::SupervisedSource;
use super::error::FitError;
use super::estimate::Fit;
use super::laws::{Busbridge, DistillLaw};
use super::store::{SCOPE_DISTILL, SCOPE_SUPERVISED, SCOPE_TSTAR, StoredFit};
use super::sweep::{law_optimum, sample_law};

/// The answer to "which teacher for this student?".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// `busbridge2025` or the sweep database.
    pub source: String,
    /// N_S.
    pub student_params: f64,
    /// D_S.
    pub student_tokens: f64,
    /// L̃_S: the supervised law at N_S, D_S (the student without a teacher).
    pub supervised_loss: f64,
    /// L_T*: the teacher loss minimising the distillation law.
    pub teacher_loss: f64,
    /// Its bootstrap interval (sweep fits only).
    pub teacher_loss_ci: Option<[f64; 2]>,
    /// L_S at L_T*.
    pub student_loss: f64,
    /// L̃_S − L_S: the predicted gain over the baseline (negative: distillation loses).
    pub gain: f64,
    /// Tokens of the teacher's training, when known.
    pub teacher_tokens: Option<f64>,
    /// N_T*: the teacher size reaching L_T* on `teacher_tokens`, by the supervised law.
    pub teacher_params: Option<f64>,
    /// Its bootstrap interval (sweep fits only).
    pub teacher_params_ci: Option<[f64; 2]>,
    /// 6 · N_T* · D_T.
    pub teacher_flops: Option<f64>,
    /// Whether the sweep already trained a teacher of about that size (within 10%).
    pub teacher_in_sweep: Option<bool>,
    /// The empirical T*(S) fit's prediction for N_S, when the sweep has one: (form, T*).
    pub tstar_empirical: Option<(String, f64)>,
    /// The distillation config the fits are for.
    pub config: Option<String>,
    /// Why the answer is an extrapolation (empty: inside the measured ranges).
    pub extrapolation: Vec<String>,
    /// Other things to know.
    pub notes: Vec<String>,
}

/// From the published coefficients (DESIGN.md §6): L_T* by a dense scan refined by golden
/// section, L̃_S and L_S; N_T* when the teacher's token budget is given.
pub fn recommend_published(
    student_params: f64,
    student_tokens: f64,
    teacher_tokens: Option<f64>,
) -> Result<Recommendation, FitError> {
    let sup = SupervisedSource::Busbridge(Busbridge::PUBLISHED);
    let law = DistillLaw::PUBLISHED;
    let l_sup = sup.predict(student_params, student_tokens);
    let (lt, ls) =
        optimal_teacher_loss(&law, student_params, student_tokens, l_sup).ok_or_else(|| {
            FitError::Invalid(
                "the published law has no optimal teacher loss in [0.01, 100] for this student"
                    .into(),
            )
        })?;
    let teacher_params = teacher_tokens.and_then(|d| size_for_loss(&sup, lt, d));
    let mut notes = vec![
        "Busbridge et al. (2025) coefficients, fitted on C4 with their tokenizer: losses are in their units".to_string(),
    ];
    let mut extrapolation = Vec::new();
    if !(143e6..=12.6e9).contains(&student_params) {
        extrapolation
            .push("the student size is outside the 143M–12.6B the law was fitted on".into());
    }
    if let (Some(d), None) = (teacher_tokens, teacher_params) {
        notes.push(format!(
            "no teacher size reaches L_T* = {lt:.4} on {d:.3e} tokens by the supervised law (its floor on that budget is higher)"
        ));
    }
    Ok(Recommendation {
        source: "busbridge2025".into(),
        student_params,
        student_tokens,
        supervised_loss: l_sup,
        teacher_loss: lt,
        teacher_loss_ci: None,
        student_loss: ls,
        gain: l_sup - ls,
        teacher_tokens,
        teacher_params,
        teacher_params_ci: None,
        teacher_flops: teacher_params.zip(teacher_tokens).map(|(n, d)| 6.0 * n * d),
        teacher_in_sweep: None,
        tstar_empirical: None,
        config: None,
        extrapolation,
        notes,
    })
}

/// From a sweep's stored fits: its supervised law and the distillation law of `config` (or of
/// the config with the most points). `student_tokens` and `teacher_tokens` default to the
/// budget the sweep used when it used only one.
pub fn recommend_from_fits(
    fits: &[StoredFit],
    source: &str,
    student_params: f64,
    student_tokens: Option<f64>,
    teacher_tokens: Option<f64>,
    config: Option<&str>,
) -> Result<Recommendation, FitError> {
    let missing = |what: &str| {
        FitError::Invalid(format!(
            "the sweep database `{source}` has no {what} fit\n\nhint: run `pdsweep fit` on the sweep first; `pdsweep fit` lists what it could not fit and why, or use `--law busbridge2025` to plan from the published law"
        ))
    };
    let supervised: Fit = fits
        .iter()
        .filter(|f| f.scope == SCOPE_SUPERVISED)
        .max_by_key(|f| f.id)
        .and_then(StoredFit::as_fit)
        .ok_or_else(|| missing("supervised-law"))?;
    let distill: Fit = fits
        .iter()
        .filter(|f| f.scope == SCOPE_DISTILL && config.is_none_or(|c| f.key.contains(c)))
        .max_by_key(|f| (f.n_points, f.id))
        .and_then(StoredFit::as_fit)
        .ok_or_else(|| missing("distillation-law"))?;
    let config_key = distill
        .source
        .trim_start_matches("students (")
        .trim_end_matches(')')
        .to_string();
    let points: Vec<_> = distill.residuals.iter().map(|r| r.point).collect();
    let unique = |v: Vec<f64>, what: &str, flag: &str| -> Result<f64, FitError> {
        let mut v = v;
        v.sort_by(f64::total_cmp);
        v.dedup();
        match v.as_slice() {
            [one] => Ok(*one),
            _ => Err(FitError::Invalid(format!(
                "the sweep used several {what}; say which\n\nhint: `{flag} TOKENS`"
            ))),
        }
    };
    let d_s = match student_tokens {
        Some(d) => d,
        None => unique(
            points.iter().map(|p| p.tokens).collect(),
            "student budgets",
            "--tokens",
        )?,
    };
    let d_t = match teacher_tokens {
        Some(d) => Some(d),
        None => unique(
            points.iter().filter_map(|p| p.teacher_tokens).collect(),
            "teacher budgets",
            "--teacher-tokens",
        )
        .ok(),
    };
    let sup_law = supervised
        .supervised()
        .ok_or_else(|| missing("supervised-law"))?;
    let l_sup = sup_law.predict(student_params, d_s);
    let tstar = fits
        .iter()
        .filter(|f| f.scope == SCOPE_TSTAR && f.key.contains(&config_key))
        .filter_map(StoredFit::as_tstar)
        .find(|t| (t.student_tokens / d_s - 1.0).abs() < 0.01); // budgets are rounded to whole batches
    let tstar_empirical = tstar
        .as_ref()
        .map(|t: &TStarScaling| (t.better.clone(), better_form(t).at(student_params)));
    let mut notes = Vec::new();
    let opt = match law_optimum(
        &distill,
        Some(&supervised),
        student_params,
        d_s,
        l_sup,
        d_t.unwrap_or(f64::NAN),
    ) {
        Some(opt) => opt,
        None => {
            // The law has no interior optimum here (a poorly identified fit on a small
            // sweep): answer from the measured optima instead, T*(S) fitted across students.
            let t = tstar.as_ref().ok_or_else(|| {
                FitError::Invalid(
                    "the fitted distillation law has no optimal teacher loss in [0.01, 100] for this student (its minimum is at the edge), and the sweep has no T*(S) fit on this budget".into(),
                )
            })?;
            notes.push(format!(
                "the fitted distillation law has no interior optimum for this student; the teacher size comes from the {} T*(S) fit of the measured optima",
                t.better
            ));
            empirical_optimum(t, &distill, &supervised, student_params, d_s, l_sup, d_t)
        }
    };
    let teacher_params = d_t.and(opt.teacher_params);

    let range = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let mut extrapolation = Vec::new();
    let outside = |x: f64, (lo, hi): (f64, f64)| x < lo * 0.999 || x > hi * 1.001;
    let (s_lo, s_hi) = range(points.iter().map(|p| p.params).collect());
    if outside(student_params, (s_lo, s_hi)) {
        extrapolation.push(format!(
            "the student size is outside the student sizes measured ({s_lo:.3e}–{s_hi:.3e})"
        ));
    }
    let d_range = range(points.iter().map(|p| p.tokens).collect());
    if outside(d_s, d_range) {
        extrapolation.push(format!(
            "the student budget is outside the budgets measured ({:.3e}–{:.3e})",
            d_range.0, d_range.1
        ));
    }
    let teachers: Vec<f64> = points.iter().filter_map(|p| p.teacher_params).collect();
    let lt_range = range(points.iter().filter_map(|p| p.teacher_loss).collect());
    if outside(opt.teacher_loss, lt_range) {
        extrapolation.push(format!(
            "L_T* is outside the teacher losses measured ({:.4}–{:.4})",
            lt_range.0, lt_range.1
        ));
    }
    let teacher_in_sweep =
        teacher_params.map(|n| teachers.iter().any(|t| (t / n - 1.0).abs() <= 0.1));
    if d_t.is_none() {
        notes.push("no teacher budget (the sweep's teachers used several; give `--teacher-tokens`): no teacher size or cost".into());
    } else if teacher_params.is_none() {
        notes.push(format!(
            "no teacher size reaches L_T* = {:.4} on that budget by the supervised law",
            opt.teacher_loss
        ));
    }
    // Interval of the predicted student loss and gain from paired samples.
    let ls_draws: Vec<f64> = distill
        .samples
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let law = DistillLaw::from_natural(s);
            let l_sup_i =
                sample_law(&supervised, i).map_or(l_sup, |l| l.predict(student_params, d_s));
            optimal_teacher_loss(&law, student_params, d_s, l_sup_i).map(|(_, ls)| ls)
        })
        .collect();
    if ls_draws.len() >= 20 {
        let [lo, hi] = percentile_interval(&ls_draws, 0.95);
        notes.push(format!(
            "95% interval of the predicted student loss: [{lo:.4}, {hi:.4}]"
        ));
    }
    Ok(Recommendation {
        source: source.into(),
        student_params,
        student_tokens: d_s,
        supervised_loss: l_sup,
        teacher_loss: opt.teacher_loss,
        teacher_loss_ci: opt.teacher_loss_ci,
        student_loss: opt.student_loss,
        gain: l_sup - opt.student_loss,
        teacher_tokens: d_t,
        teacher_params,
        teacher_params_ci: d_t.and(opt.teacher_params_ci),
        teacher_flops: teacher_params.zip(d_t).map(|(n, d)| 6.0 * n * d),
        teacher_in_sweep,
        tstar_empirical,
        config: Some(config_key),
        extrapolation,
        notes,
    })
}

/// The better of a T*(S) scaling's two fits.
fn better_form(t: &TStarScaling) -> &crate::fit::capacity_gap::TStarFit {
    if t.better == "power" {
        &t.power
    } else {
        &t.linear
    }
}

/// The optimal teacher from the T*(S) fit: its size (with the range its parameters' intervals
/// span), its loss by the supervised law on the teachers' budget, and the student's loss by
/// the distillation law at that teacher loss.
fn empirical_optimum(
    t: &TStarScaling,
    distill: &Fit,
    supervised: &Fit,
    n_s: f64,
    d_s: f64,
    l_sup: f64,
    d_t: Option<f64>,
) -> LawOptimum {
    let form = better_form(t);
    let n_t = form.at(n_s);
    let teacher_params_ci = form.ci.map(|[a, b]| {
        let corners = [[a[0], b[0]], [a[0], b[1]], [a[1], b[0]], [a[1], b[1]]].map(|params| {
            crate::fit::capacity_gap::TStarFit {
                params,
                ..form.clone()
            }
            .at(n_s)
        });
        [
            corners.iter().copied().fold(f64::INFINITY, f64::min),
            corners.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ]
    });
    let teacher_loss = match (supervised.supervised(), d_t) {
        (Some(law), Some(d)) => law.predict(n_t, d),
        _ => f64::NAN,
    };
    let student_loss = distill
        .distill()
        .map_or(f64::NAN, |law| law.predict(n_s, d_s, teacher_loss, l_sup));
    LawOptimum {
        teacher_loss,
        teacher_loss_ci: None,
        student_loss,
        teacher_params: Some(n_t),
        teacher_params_ci,
    }
}
