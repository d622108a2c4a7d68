//! `recommend`: the optimal teacher for a student of size N_S on D_S tokens — from a sweep's
//! stored fits, or from Busbridge et al.'s published coefficients — with the predicted student
//! loss, the gain over training without a teacher, the cost of training that teacher, and an
//! honest flag when the answer extrapolates beyond what the sweep measured.

use crate::fit::LawOptimum;
use serde::{Deserialize, Serialize};

use super::bootstrap::percentile_interval;
use super::capacity_gap::{Optimum, TStarFit, TStarScaling, optimal_teacher_loss, size_for_loss};
use super::data::SupervisedSource;
use super::error::FitError;
use super::estimate::Fit;
use super::laws::{Busbridge, DistillLaw};
use super::store::{
    FitSummary, SCOPE_CAPACITY_GAP, SCOPE_DISTILL, SCOPE_SUMMARY, SCOPE_SUPERVISED, SCOPE_TSTAR,
    StoredFit,
};
use super::sweep::law_optimum;

/// The answer to "which teacher for this student?".
///
/// A quantity that could not be given, or that failed a sanity bound, is `None` (or kept and
/// flagged) with the reason in `problems` under its field name, so the answer says why on the same
/// line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// `busbridge2025` or the sweep database.
    pub source: String,
    /// N_S (non-embedding parameters, exact).
    pub student_params: f64,
    /// How N_S was read from `--student` (e.g. the sweep's model `30K` has N = 27,792).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub student_input: Option<String>,
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
    /// Where the answer comes from: `distillation law`, `T*(S) fit` or `published law`.
    #[serde(default)]
    pub method: String,
    /// Why the answer is an extrapolation (empty: inside the measured ranges).
    pub extrapolation: Vec<String>,
    /// Quantities refused or flagged, by field name, with the reason.
    #[serde(default)]
    pub problems: std::collections::BTreeMap<String, String>,
    /// What the sweep measured for the nearest student size (the best teacher on its grid,
    /// or "edge of grid: extend the grid toward ...").
    #[serde(default)]
    pub measured: Vec<String>,
    /// Other things to know.
    pub notes: Vec<String>,
}

impl Recommendation {
    /// Flags `field` with `reason` (the first reason given stays).
    fn problem(&mut self, field: &str, reason: impl Into<String>) {
        self.problems
            .entry(field.to_string())
            .or_insert_with(|| reason.into());
    }

    /// Checks the answer against bounds no real model can break: a positive, finite teacher
    /// size, and losses between 0 and ln V (a uniform guess over the vocabulary, when known).
    fn check_bounds(&mut self, vocab: Option<u64>) {
        let ceiling = vocab.map(|v| (v as f64).ln());
        let bound = |x: f64| -> Option<String> {
            if !x.is_finite() || x <= 0.0 {
                return Some(format!("{x:.4} is not a possible loss"));
            }
            match (ceiling, vocab) {
                (Some(c), Some(v)) if x > c => Some(format!(
                    "{x:.4} is above ln V = {c:.4}, the loss of a uniform guess over {v} tokens: the law does not hold this far from the sizes it was fitted on"
                )),
                _ => None,
            }
        };
        if let Some(n) = self.teacher_params
            && !(n.is_finite() && n > 0.0)
        {
            self.problem(
                "teacher_params",
                format!("{n:.4e} is not a possible model size"),
            );
            self.teacher_params = None;
            self.teacher_params_ci = None;
            self.teacher_flops = None;
            self.teacher_in_sweep = None;
        }
        if let Some((form, t)) = &self.tstar_empirical
            && !(t.is_finite() && *t > 0.0)
        {
            let reason = format!(
                "the {form} T*(S) fit gives {} at this size, not a possible model size",
                crate::spec::units::format_count(*t)
            );
            self.problem("tstar_empirical", reason);
        }
        if !(self.teacher_loss.is_finite() && self.teacher_loss > 0.0) {
            let why = if self.problems.contains_key("teacher_params") {
                "depends on N_T*, which could not be given"
            } else {
                "no optimal teacher loss"
            };
            self.problem("teacher_loss", why);
        }
        if let Some(r) = bound(self.supervised_loss) {
            self.problem("supervised_loss", r);
        }
        if !self.student_loss.is_finite() && self.problems.contains_key("teacher_loss") {
            self.problem("student_loss", "depends on L_T*, which could not be given");
        } else if let Some(r) = bound(self.student_loss) {
            self.problem("student_loss", r);
        }
        if self.problems.contains_key("supervised_loss") {
            let why = "depends on L̃_S, which is out of bounds";
            for f in ["student_loss", "gain", "teacher_loss"] {
                self.problem(f, why);
            }
        }
        if self.problems.contains_key("student_loss") {
            self.problem("gain", "depends on L_S, which could not be given");
        }
        if self.method == "distillation law"
            && self.teacher_params.is_some()
            && self.problems.contains_key("teacher_loss")
        {
            self.problem("teacher_params", "depends on L_T*, which is out of bounds");
        }
        if self.problems.contains_key("teacher_params") && self.teacher_flops.is_some() {
            self.problem("teacher_flops", "depends on N_T*, which is out of bounds");
        }
    }

    /// Whether the headline numbers (L_T*, N_T*, L_S) all passed.
    pub fn is_sound(&self) -> bool {
        [
            "supervised_loss",
            "student_loss",
            "teacher_loss",
            "teacher_params",
        ]
        .iter()
        .all(|f| !self.problems.contains_key(*f))
    }
}

/// From the published coefficients (`docs/src/science/laws.md`): L_T* by a dense scan refined by
/// golden section, L̃_S and L_S; N_T* when the teacher's token budget is given.
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
    let notes = vec![
        "Busbridge et al. (2025) coefficients, fitted on C4 with their tokenizer: losses are in their units".to_string(),
    ];
    let mut extrapolation = Vec::new();
    if !(143e6..=12.6e9).contains(&student_params) {
        extrapolation
            .push("the student size is outside the 143M–12.6B the law was fitted on".into());
    }
    let mut r = Recommendation {
        source: "busbridge2025".into(),
        student_params,
        student_input: None,
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
        method: "published law".into(),
        extrapolation,
        problems: Default::default(),
        measured: Vec::new(),
        notes,
    };
    match (teacher_tokens, teacher_params) {
        (None, _) => r.problem(
            "teacher_params",
            "no teacher budget given (`--teacher-tokens`): no teacher size or cost",
        ),
        (Some(d), None) => r.problem("teacher_params", no_size_reason(&sup, lt, d)),
        _ => {}
    }
    r.check_bounds(None);
    Ok(r)
}

/// Why no teacher size reaches `lt` on `d` tokens: the law's floor on that budget.
fn no_size_reason(sup: &SupervisedSource, lt: f64, d: f64) -> String {
    let floor = sup.predict(1e15, d);
    format!(
        "no teacher size reaches L_T* = {lt:.4} on {} tokens by the supervised law (its floor on that budget is {floor:.4}); train the teacher longer",
        crate::spec::units::format_count(d)
    )
}

/// What `recommend` asks of a sweep's fits.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecommendQuery {
    /// Where the fits come from (the database path), for messages.
    pub source: String,
    /// N_S: the student's exact non-embedding parameters.
    pub student_params: f64,
    /// How N_S was read from the user's input, to repeat back.
    pub student_input: Option<String>,
    /// D_S (default: the sweep's student budget, when it used one).
    pub student_tokens: Option<f64>,
    /// D_T (default: the sweep's teacher budget, when it used one).
    pub teacher_tokens: Option<f64>,
    /// Part of the distillation config key to use.
    pub config: Option<String>,
    /// The vocabulary size, for the ln V bound on losses.
    pub vocab: Option<u64>,
}

/// Where an answer from a sweep's fits comes from.
enum Method {
    /// The distillation law's optimum (with the supervised law).
    Law,
    /// The empirical T*(S) fit of the measured optima.
    TStar(Box<TStarScaling>),
}

/// From a sweep's stored fits: its supervised law and the distillation law of the query's config
/// (or of the config with the most points).
///
/// Budgets default to the sweep's when it used only one. The answer comes from the distillation law
/// when the law is identified and has an optimum at every student size the sweep measured, else
/// from the T*(S) fit of the measured optima; the choice is made once per sweep, not per student,
/// so answers move smoothly with the student's size. Answers outside the measured ranges are
/// flagged as extrapolations, and quantities that break a sanity bound are refused with the reason.
pub fn recommend_from_fits(
    fits: &[StoredFit],
    q: &RecommendQuery,
) -> Result<Recommendation, FitError> {
    let source = q.source.as_str();
    let summary = latest_summary(fits);
    let missing = MissingLaw {
        source,
        summary: summary.as_ref(),
        measured: measured_text(fits, None, q.student_params, q.student_tokens)
            .into_iter()
            .map(|m| format!("\nmeasured: {m}"))
            .collect::<String>(),
    };
    let SweepLaws {
        supervised,
        distill,
    } = SweepLaws::pick(fits, q.config.as_deref(), &missing)?;
    let config_key = config_key_of(&distill);
    let points: Vec<_> = distill.residuals.iter().map(|r| r.point).collect();
    let n_s = q.student_params;
    let budgets = Budgets::resolve(q, &points)?;
    let (d_s, d_t) = (budgets.student, budgets.teacher);
    let sup_law = supervised
        .supervised()
        .ok_or_else(|| missing.error("supervised", "law on teachers and baselines"))?;
    let l_sup = sup_law.predict(n_s, d_s);
    let tstar = tstar_fit(fits, &config_key, d_s);
    let tstar_empirical = tstar
        .as_ref()
        .map(|t: &TStarScaling| (t.better.clone(), better_form(t).at(n_s)));

    let (s_lo, s_hi) = range(points.iter().map(|p| p.params));
    let mut notes = Vec::new();
    let method = match law_trouble(&distill, &supervised, &points, d_s) {
        None => Method::Law,
        Some(why) => match &tstar {
            Some(t) => {
                notes.push(format!(
                    "{why}; the teacher size comes from the {} T*(S) fit of the optima the sweep measured",
                    t.better
                ));
                Method::TStar(Box::new(t.clone()))
            }
            None => return Err(no_tstar_error(fits, &missing, &why, &config_key, n_s, d_s)),
        },
    };
    let TeacherOptimum { opt, no_optimum } =
        teacher_optimum(&method, &distill, &supervised, n_s, d_s, l_sup, d_t);
    let teacher_params = match &method {
        Method::Law => d_t.and(opt.teacher_params),
        Method::TStar(_) => opt.teacher_params,
    };
    let extrapolation = extrapolation(n_s, &budgets, &points, opt.teacher_loss, teacher_params);
    let teacher_in_sweep = teacher_in_sweep(&points, teacher_params);
    // Interval of the predicted student loss and gain from paired samples (law answers).
    if matches!(method, Method::Law) {
        notes.extend(student_loss_interval(
            &distill,
            &supervised,
            n_s,
            d_s,
            l_sup,
        ));
    }
    notes.extend(fit_warning_notes(&distill, &supervised));
    let mut r = Recommendation {
        source: source.into(),
        student_params: n_s,
        student_input: q.student_input.clone(),
        student_tokens: d_s,
        supervised_loss: l_sup,
        teacher_loss: opt.teacher_loss,
        teacher_loss_ci: opt.teacher_loss_ci,
        student_loss: opt.student_loss,
        gain: l_sup - opt.student_loss,
        teacher_tokens: d_t,
        teacher_params,
        teacher_params_ci: teacher_params.and(opt.teacher_params_ci),
        teacher_flops: teacher_params.zip(d_t).map(|(n, d)| 6.0 * n * d),
        teacher_in_sweep,
        tstar_empirical,
        config: Some(config_key.clone()),
        method: match &method {
            Method::Law => "distillation law".into(),
            Method::TStar(t) => format!("{} T*(S) fit", t.better),
        },
        extrapolation,
        problems: Default::default(),
        measured: measured_text(fits, Some(&config_key), n_s, Some(d_s)),
        notes,
    };
    flag_teacher_problems(&mut r, &method, &sup_law, opt.teacher_loss);
    r.check_bounds(q.vocab);
    if let Some(why) = no_optimum {
        for f in ["teacher_loss", "teacher_params", "student_loss", "gain"] {
            r.problem(f, why.clone());
        }
    }
    if let Some(w) = monotone_warning(&method, &distill, &supervised, n_s, d_s, d_t, (s_lo, s_hi)) {
        r.notes.insert(0, w);
    }
    Ok(r)
}

/// The newest summary of what `pdsweep fit` fitted and skipped, when stored.
fn latest_summary(fits: &[StoredFit]) -> Option<FitSummary> {
    fits.iter()
        .filter(|f| f.scope == SCOPE_SUMMARY)
        .max_by_key(|f| f.id)
        .and_then(StoredFit::as_summary)
}

/// What to say when a law `recommend` needs was not fitted.
struct MissingLaw<'a> {
    /// Where the fits come from, for messages.
    source: &'a str,
    /// The sweep's fit summary, which says why a law was skipped.
    summary: Option<&'a FitSummary>,
    /// What the sweep measured near the student, as `\nmeasured: …` lines.
    measured: String,
}

impl MissingLaw<'_> {
    /// The error for a missing `what` law, with the reason the summary's skip starting with
    /// `skipped_prefix` gives.
    fn error(&self, what: &str, skipped_prefix: &str) -> FitError {
        let (source, measured) = (self.source, &self.measured);
        let why = self.summary.and_then(|s| {
            s.skipped
                .iter()
                .find(|k| k.what.contains(skipped_prefix))
                .map(|k| k.reason.lines().next().unwrap_or("").to_string())
        });
        FitError::Invalid(match why {
            Some(reason) => format!(
                "cannot recommend from `{source}`: `pdsweep fit` could not fit the {what} law: {reason}{measured}\n\nhint: add model sizes (and, for the distillation law, teachers) to the sweep, run it and `pdsweep fit` again (more seeds repeat points rather than add them), or plan from the published law with `--law busbridge2025`"
            ),
            None if self.summary.is_some() => format!(
                "cannot recommend from `{source}`: the sweep's fits have no {what} law (no finished runs for it)\n\nhint: or plan from the published law with `--law busbridge2025`"
            ),
            None => format!(
                "the sweep database `{source}` has no {what}-law fit\n\nhint: run `pdsweep fit` on the sweep first; `pdsweep fit` lists what it could not fit and why, or use `--law busbridge2025` to plan from the published law"
            ),
        })
    }
}

/// The two laws a recommendation from a sweep stands on.
struct SweepLaws {
    /// The supervised law on teachers and baselines.
    supervised: Fit,
    /// The distillation law of the chosen config.
    distill: Fit,
}

impl SweepLaws {
    /// The newest supervised law and the distillation law of `config` (or of the config with
    /// the most points).
    fn pick(
        fits: &[StoredFit],
        config: Option<&str>,
        missing: &MissingLaw,
    ) -> Result<Self, FitError> {
        let supervised: Fit = fits
            .iter()
            .filter(|f| f.scope == SCOPE_SUPERVISED)
            .max_by_key(|f| f.id)
            .and_then(StoredFit::as_fit)
            .ok_or_else(|| missing.error("supervised", "law on teachers and baselines"))?;
        let distill: Fit = fits
            .iter()
            .filter(|f| f.scope == SCOPE_DISTILL && config.is_none_or(|c| names_config(&f.key, c)))
            .max_by_key(|f| (f.n_points, f.id))
            .and_then(StoredFit::as_fit)
            .ok_or_else(|| missing.error("distillation", "distillation law"))?;
        Ok(Self {
            supervised,
            distill,
        })
    }
}

/// The distillation config key a distillation fit was made on (its source's parentheses).
fn config_key_of(distill: &Fit) -> String {
    distill
        .source
        .trim_start_matches("students (")
        .trim_end_matches(')')
        .to_string()
}

/// The token budgets a recommendation is for.
struct Budgets {
    /// D_S.
    student: f64,
    /// D_T, when known.
    teacher: Option<f64>,
    /// The teacher budgets the sweep measured, one per point that has one.
    teacher_measured: Vec<f64>,
}

impl Budgets {
    /// The query's budgets, each defaulting to the sweep's when it used only one.
    fn resolve(q: &RecommendQuery, points: &[crate::fit::DataPoint]) -> Result<Self, FitError> {
        let student = match q.student_tokens {
            Some(d) => d,
            None => unique_budget(
                points.iter().map(|p| p.tokens).collect(),
                "student budgets",
                "--tokens",
            )?,
        };
        let teacher_measured: Vec<f64> = points.iter().filter_map(|p| p.teacher_tokens).collect();
        let teacher = match q.teacher_tokens {
            Some(d) => Some(d),
            None => unique_budget(
                teacher_measured.clone(),
                "teacher budgets",
                "--teacher-tokens",
            )
            .ok(),
        };
        Ok(Self {
            student,
            teacher,
            teacher_measured,
        })
    }
}

/// The one budget in `v`, or an error asking for `flag` when the sweep used several `what`.
fn unique_budget(mut v: Vec<f64>, what: &str, flag: &str) -> Result<f64, FitError> {
    v.sort_by(f64::total_cmp);
    v.dedup();
    match v.as_slice() {
        [one] => Ok(*one),
        _ => Err(FitError::Invalid(format!(
            "the sweep used several {what}; say which\n\nhint: `{flag} TOKENS`"
        ))),
    }
}

/// The sweep's T*(S) fit for `config_key` on the student budget `d_s`, when it has one.
fn tstar_fit(fits: &[StoredFit], config_key: &str, d_s: f64) -> Option<TStarScaling> {
    let same_budget = |t: f64| (t / d_s - 1.0).abs() < 0.01; // budgets are rounded to whole batches
    fits.iter()
        .filter(|f| f.scope == SCOPE_TSTAR && names_config(&f.key, config_key))
        .filter_map(StoredFit::as_tstar)
        .find(|t| same_budget(t.student_tokens))
}

/// The error when the law should not answer (`why`) and no T*(S) fit can stand in.
fn no_tstar_error(
    fits: &[StoredFit],
    missing: &MissingLaw,
    why: &str,
    config_key: &str,
    n_s: f64,
    d_s: f64,
) -> FitError {
    FitError::Invalid(format!(
        "cannot recommend from `{}`: {why}, and the sweep has no T*(S) fit on this budget ({}){}\n\nhint: add student sizes and teachers around the optimum, or plan from the published law with `--law busbridge2025`",
        missing.source,
        missing
            .summary
            .and_then(|s| s.skipped.iter().find(|k| k.what.starts_with("T*(S)")))
            .map_or("none was fitted".to_string(), |k| k
                .reason
                .lines()
                .next()
                .unwrap_or("")
                .to_string()),
        measured_text(fits, Some(config_key), n_s, Some(d_s))
            .first()
            .map_or(String::new(), |m| format!("; measured: {m}"))
    ))
}

/// An optimal teacher, or NaNs with the reason the law has none.
struct TeacherOptimum {
    /// The optimum (NaN losses when there is none).
    opt: LawOptimum,
    /// Why the distillation law has no optimum for this student.
    no_optimum: Option<String>,
}

/// The optimal teacher by `method`: the distillation law's optimum or the T*(S) fit's.
fn teacher_optimum(
    method: &Method,
    distill: &Fit,
    supervised: &Fit,
    n_s: f64,
    d_s: f64,
    l_sup: f64,
    d_t: Option<f64>,
) -> TeacherOptimum {
    let mut no_optimum = None;
    let opt = match method {
        Method::Law => law_optimum(
            distill,
            Some(supervised),
            n_s,
            d_s,
            l_sup,
            d_t.unwrap_or(f64::NAN),
        )
        .unwrap_or_else(|| {
            no_optimum = Some(format!(
                "the fitted distillation law has no optimal teacher loss in [0.01, 100] for a student of {} (its minimum is at the edge of that range)",
                crate::spec::units::format_count(n_s)
            ));
            LawOptimum {
                teacher_loss: f64::NAN,
                teacher_loss_ci: None,
                student_loss: f64::NAN,
                teacher_params: None,
                teacher_params_ci: None,
            }
        }),
        Method::TStar(t) => empirical_optimum(t, distill, supervised, n_s, d_s, l_sup, d_t),
    };
    TeacherOptimum { opt, no_optimum }
}

/// Why the answer is an extrapolation: each of N_S, D_S, L_T*, N_T* and D_T outside the
/// ranges the sweep measured.
fn extrapolation(
    n_s: f64,
    budgets: &Budgets,
    points: &[crate::fit::DataPoint],
    teacher_loss: f64,
    teacher_params: Option<f64>,
) -> Vec<String> {
    let (d_s, d_t) = (budgets.student, budgets.teacher);
    let (s_lo, s_hi) = range(points.iter().map(|p| p.params));
    let mut extrapolation = Vec::new();
    let outside = |x: f64, (lo, hi): (f64, f64)| x < lo * 0.999 || x > hi * 1.001;
    let fc = crate::spec::units::format_count;
    if outside(n_s, (s_lo, s_hi)) {
        extrapolation.push(format!(
            "the student size N = {} is outside the student sizes measured ({}–{}, exact non-embedding counts)",
            fc(n_s),
            fc(s_lo),
            fc(s_hi)
        ));
    }
    let d_range = range(points.iter().map(|p| p.tokens));
    if outside(d_s, d_range) {
        extrapolation.push(format!(
            "the student budget is outside the budgets measured ({}–{})",
            fc(d_range.0),
            fc(d_range.1)
        ));
    }
    let lt_range = range(points.iter().filter_map(|p| p.teacher_loss));
    if teacher_loss.is_finite() && outside(teacher_loss, lt_range) {
        extrapolation.push(format!(
            "L_T* = {:.4} is outside the teacher losses measured ({:.4}–{:.4})",
            teacher_loss, lt_range.0, lt_range.1
        ));
    }
    let t_range = range(points.iter().filter_map(|p| p.teacher_params));
    if let Some(n) = teacher_params
        && n > 0.0
        && outside(n, t_range)
    {
        extrapolation.push(format!(
            "the optimal teacher N_T* = {} is outside the teacher sizes measured ({}–{})",
            fc(n),
            fc(t_range.0),
            fc(t_range.1)
        ));
    }
    let teacher_budgets = &budgets.teacher_measured;
    if let Some(d) = d_t
        && !teacher_budgets.is_empty()
        && outside(d, range(teacher_budgets.iter().copied()))
    {
        extrapolation.push(format!(
            "the teacher budget {} is outside the teacher budgets measured",
            fc(d)
        ));
    }
    extrapolation
}

/// Whether the sweep already trained a teacher within 10% of `teacher_params`.
fn teacher_in_sweep(points: &[crate::fit::DataPoint], teacher_params: Option<f64>) -> Option<bool> {
    let teachers: Vec<f64> = points.iter().filter_map(|p| p.teacher_params).collect();
    teacher_params.map(|n| teachers.iter().any(|t| (t / n - 1.0).abs() <= 0.1))
}

/// The 95% interval of the predicted student loss from the laws' paired bootstrap samples,
/// as a note, when there are at least 20 draws.
fn student_loss_interval(
    distill: &Fit,
    supervised: &Fit,
    n_s: f64,
    d_s: f64,
    l_sup: f64,
) -> Option<String> {
    let ls_draws: Vec<f64> = distill
        .samples
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let law = DistillLaw::from_natural(s);
            let l_sup_i = supervised
                .supervised_sample(i)
                .map_or(l_sup, |l| l.predict(n_s, d_s));
            optimal_teacher_loss(&law, n_s, d_s, l_sup_i).map(|(_, ls)| ls)
        })
        .collect();
    if ls_draws.len() >= 20 {
        let [lo, hi] = percentile_interval(&ls_draws, 0.95);
        Some(format!(
            "95% interval of the predicted student loss: [{lo:.4}, {hi:.4}]"
        ))
    } else {
        None
    }
}

/// The laws' warnings a reader must see: under-determined or not identified.
fn fit_warning_notes(distill: &Fit, supervised: &Fit) -> Vec<String> {
    distill
        .warnings
        .iter()
        .chain(&supervised.warnings)
        .filter(|w| w.starts_with("UNDER-DETERMINED") || w.starts_with("not identified"))
        .map(|w| format!("fit warning: {w}"))
        .collect()
}

/// Flags a teacher size or cost the answer cannot give: no teacher budget, no size reaching
/// L_T*, or a T*(S) fit that goes non-positive this far out.
fn flag_teacher_problems(
    r: &mut Recommendation,
    method: &Method,
    sup_law: &SupervisedSource,
    teacher_loss: f64,
) {
    match (r.teacher_tokens, r.teacher_params, method) {
        (None, _, Method::Law) => r.problem(
            "teacher_params",
            "the sweep's teachers used several budgets: give `--teacher-tokens` for a teacher size and cost",
        ),
        (Some(d), None, Method::Law) => r.problem("teacher_params", no_size_reason(sup_law, teacher_loss, d)),
        (None, Some(_), Method::TStar(_)) => r.problem(
            "teacher_flops",
            "the sweep's teachers used several budgets: give `--teacher-tokens` for the cost",
        ),
        _ => {}
    }
    if let Method::TStar(t) = method
        && let Some(n) = r.teacher_params
        && n <= 0.0
    {
        r.problem(
            "teacher_params",
            format!(
                "the {} T*(S) fit ({}) gives {} for this student: the fit does not hold this far from the measured student sizes",
                t.better,
                formula(better_form(t)),
                crate::spec::units::format_count(n)
            ),
        );
    }
}

/// The smallest and largest of `values`.
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// Why the distillation law should not answer (under-determined, or no optimum at a measured
/// student size), or `None` when it may.
///
/// Parameters that are not identified on their own (c1 and f1 trade off against each other) do not
/// disqualify it: the answer is flagged instead.
fn law_trouble(
    distill: &Fit,
    supervised: &Fit,
    points: &[crate::fit::DataPoint],
    d_s: f64,
) -> Option<String> {
    if distill.support.runs > 0 && distill.support.is_thin() {
        return Some(format!(
            "the distillation law is under-determined ({} for {} parameters)",
            distill.support.points_text(),
            distill.law.n_params()
        ));
    }
    let law = distill.distill()?;
    let sup = supervised.supervised()?;
    let mut sizes: Vec<f64> = points.iter().map(|p| p.params).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    for n in sizes {
        if optimal_teacher_loss(&law, n, d_s, sup.predict(n, d_s)).is_none() {
            return Some(format!(
                "the fitted distillation law has no optimal teacher for the measured student of {} (its minimum is at the edge)",
                crate::spec::units::format_count(n)
            ));
        }
    }
    None
}

/// The capacity-gap result the sweep measured for the student size nearest `n_s` (same budget
/// and config, when given): its supported optimum, or the best teacher on the grid and what to
/// do.
fn measured_text(
    fits: &[StoredFit],
    config: Option<&str>,
    n_s: f64,
    d_s: Option<f64>,
) -> Vec<String> {
    let fc = crate::spec::units::format_count;
    let gaps: Vec<_> = fits
        .iter()
        .filter(|f| f.scope == SCOPE_CAPACITY_GAP)
        .filter_map(StoredFit::as_gap)
        .filter(|g| config.is_none_or(|c| g.config == c))
        .filter(|g| d_s.is_none_or(|d| (g.student_tokens / d - 1.0).abs() < 0.01))
        .collect();
    let Some(g) = gaps.iter().min_by(|a, b| {
        (a.student_params / n_s)
            .ln()
            .abs()
            .total_cmp(&(b.student_params / n_s).ln().abs())
    }) else {
        return Vec::new();
    };
    let curve = &g.by_teacher_params;
    let what = match &curve.optimum {
        Optimum::Interior { at, ci, .. } => format!(
            "optimum teacher {}{} on the fitted capacity-gap curve",
            fc(*at),
            ci.map_or(String::new(), |[a, b]| format!(" [{}, {}]", fc(a), fc(b)))
        ),
        Optimum::Boundary { at, edge } => format!(
            "the best teacher on the grid is the {edge} ({}): {}",
            fc(*at),
            curve
                .optimum
                .edge_advice(&curve.variable)
                .unwrap_or_default()
        ),
        Optimum::Unsupported { at, reason } => format!(
            "the best teacher on the grid is {} (no supported optimum: {reason})",
            fc(*at)
        ),
        Optimum::TooFewPoints => "fewer than 3 teachers: no optimum located".to_string(),
    };
    let what = match super::capacity_gap::near_best_phrase(curve.near_best, fc) {
        Some(tied) => format!("{what}; {tied}"),
        None => what,
    };
    vec![format!(
        "student {} on {} tokens: {what}",
        fc(g.student_params),
        fc(g.student_tokens)
    )]
}

/// Checks that the answer moves the right way with the student's size between the nearest measured
/// size and `n_s`: the optimal teacher should not shrink and the predicted loss not rise as the
/// student grows.
///
/// Returns a warning naming where it fails.
fn monotone_warning(
    method: &Method,
    distill: &Fit,
    supervised: &Fit,
    n_s: f64,
    d_s: f64,
    d_t: Option<f64>,
    (s_lo, s_hi): (f64, f64),
) -> Option<String> {
    let lo = n_s.min(s_lo);
    let hi = n_s.max(s_hi);
    if !(lo > 0.0 && hi > lo) {
        return None;
    }
    let sup = supervised.supervised()?;
    let law = distill.distill()?;
    let at = |n: f64| -> Option<(f64, f64)> {
        let l_sup = sup.predict(n, d_s);
        match method {
            Method::Law => {
                let (lt, ls) = optimal_teacher_loss(&law, n, d_s, l_sup)?;
                let size = d_t
                    .and_then(|d| size_for_loss(&sup, lt, d))
                    .unwrap_or(f64::NAN);
                Some((size, ls))
            }
            Method::TStar(t) => {
                let size = better_form(t).at(n);
                let ls = d_t.map_or(f64::NAN, |d| {
                    law.predict(n, d_s, sup.predict(size, d), l_sup)
                });
                Some((size, ls))
            }
        }
    };
    let steps = 24;
    let ladder: Vec<(f64, Option<(f64, f64)>)> = (0..=steps)
        .map(|i| {
            let n = (lo.ln() + (hi.ln() - lo.ln()) * i as f64 / steps as f64).exp();
            (n, at(n))
        })
        .collect();
    let fc = crate::spec::units::format_count;
    for w in ladder.windows(2) {
        let ((n0, Some((t0, l0))), (n1, Some((t1, l1)))) = (w[0], w[1]) else {
            continue;
        };
        if t0.is_finite() && t1.is_finite() && t1 < t0 * (1.0 - 1e-3) {
            return Some(format!(
                "NOT MONOTONE: the optimal teacher shrinks from {} to {} as the student grows from {} to {}; the fit does not describe this range of student sizes",
                fc(t0),
                fc(t1),
                fc(n0),
                fc(n1)
            ));
        }
        if l0.is_finite() && l1.is_finite() && l1 > l0 + 1e-6 {
            return Some(format!(
                "NOT MONOTONE: the predicted student loss rises from {l0:.4} to {l1:.4} as the student grows from {} to {}; the fit does not describe this range of student sizes",
                fc(n0),
                fc(n1)
            ));
        }
    }
    None
}

/// `T* = 2.5·S + 1.2e4` or `T* = 9.1·S^0.95`.
fn formula(f: &TStarFit) -> String {
    match f.form.as_str() {
        "linear" => format!("T* = {:.3}·S {:+.3e}", f.params[0], f.params[1]),
        _ => format!("T* = {:.3e}·S^{:.3}", f.params[0], f.params[1]),
    }
}

/// The better of a T*(S) scaling's two fits.
fn better_form(t: &TStarScaling) -> &TStarFit {
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
            TStarFit {
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
        (Some(law), Some(d)) if n_t > 0.0 => law.predict(n_t, d),
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

/// Whether the stored fit key `key` names the distillation config `config` itself, not a
/// config that extends it (`... targets=sampled`, `... missing=bucket` start with it).
fn names_config(key: &str, config: &str) -> bool {
    key.match_indices(config).any(|(i, _)| {
        let rest = &key[i + config.len()..];
        !rest.starts_with(" targets=") && !rest.starts_with(" missing=")
    })
}
