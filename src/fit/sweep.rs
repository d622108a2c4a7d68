//! Fitting a whole sweep from its database: teachers and baselines → the supervised law,
//! students → the distillation law per distillation config, and per (student size, budget,
//! config) the capacity-gap curves, their optima and T*(S).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capacity_gap::{
    CapacityGap, GapPoint, LawOptimum, Optimum, TSTAR_MIN_SIZES, TStarScaling, fitted_losses,
    gap_curve, optimal_teacher_loss, size_for_loss, tstar_scaling,
};
use super::data::{DataPoint, SupervisedSource};
use super::error::FitError;
use super::estimate::{Fit, FitOptions, fit};
use super::laws::{DistillLaw, LawKind};
use super::moments::{mean, sample_sd};
use super::released::{CheckStudent, ReleasedCheck, released_checks};
use super::teacher_budget::BudgetComparison;
use crate::plan::{RunId, RunKind};
use crate::run::tuning::best_peak;
use crate::store::{RunState, SweepDb};

/// One finished run as the fits use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinishedRun {
    /// Run id.
    pub id: String,
    /// What the run is to the fits.
    pub kind: Role,
    /// Non-embedding parameters.
    pub params: f64,
    /// Tokens trained on.
    pub tokens: f64,
    /// Held-out loss (nats/token).
    pub loss: f64,
    /// For students: the teacher run's id.
    pub teacher: Option<String>,
    /// For students: the distillation config (without the teacher), as a readable key.
    pub config: Option<String>,
    /// For students: the matching baseline's held-out loss.
    pub baseline_loss: Option<f64>,
    /// Seed of data order and initialisation (replicates differ only in it).
    #[serde(default)]
    pub seed: u64,
    /// Peak learning rate it trained at: as planned, or for a tuned student the rate chosen
    /// when it started (recorded with its result).
    #[serde(default)]
    pub lr_peak: Option<f64>,
    /// Held-out bits per byte (comparable across tokenizers, where nats per token are not).
    #[serde(default)]
    pub bpb: Option<f64>,
    /// Which tokenizer its tokens are (kind, file hash, vocabulary); runs of one sweep differ
    /// only where a teacher has a tokenizer of its own.
    #[serde(default)]
    pub tokenizer: String,
}

/// What a finished run is to the fits: a run's kind, with a teacher's learning-rate candidate
/// (`[teachers] tune_lr`) told apart, since no law uses it (its tuned teacher adopts the best).
///
/// In JSON: `teacher`, `teacher-candidate`, `student`, `baseline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A teacher (trained, tuned or pre-trained).
    Teacher,
    /// One of a tuned teacher's learning-rate candidates.
    TeacherCandidate,
    /// A distilled student.
    Student,
    /// A student size trained without a teacher.
    Baseline,
}

impl Role {
    /// The role named by its word (`teacher-candidate`, as [`Role`]'s `Display` writes it);
    /// `None` for any other text.
    pub fn parse(word: &str) -> Option<Role> {
        [
            Role::Teacher,
            Role::TeacherCandidate,
            Role::Student,
            Role::Baseline,
        ]
        .into_iter()
        .find(|r| r.to_string() == word)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            Role::Teacher => "teacher",
            Role::TeacherCandidate => "teacher-candidate",
            Role::Student => "student",
            Role::Baseline => "baseline",
        })
    }
}

impl From<RunKind> for Role {
    /// The role of a run of `kind` that is not a learning-rate candidate (a logit pass counts
    /// as its teacher).
    fn from(kind: RunKind) -> Role {
        match kind {
            RunKind::Teacher | RunKind::Logits => Role::Teacher,
            RunKind::Student => Role::Student,
            RunKind::Baseline => Role::Baseline,
        }
    }
}

/// The finished teacher, student and baseline runs of the sweep's current plan (a teacher's
/// learning-rate candidates as [`Role::TeacherCandidate`]).
pub fn finished_runs(db: &SweepDb) -> Result<Vec<FinishedRun>, FitError> {
    let runs = match db.current_plan()? {
        Some(plan) => db.plan_runs(plan)?,
        None => db.runs()?,
    };
    let candidates = teacher_candidates(&runs);
    let mut out = Vec::new();
    for r in runs
        .iter()
        .filter(|r| r.state == RunState::Done && r.kind != RunKind::Logits)
    {
        let Some((loss, bpb, _)) = db.result(&r.id)? else {
            continue;
        };
        let config: Value = serde_json::from_str(&r.config_json).unwrap_or(Value::Null);
        let distill = &config["distill"];
        let (teacher, key) = if r.kind == RunKind::Student {
            let teacher = distill["teacher"].as_str().map(str::to_string);
            (teacher, Some(config_key(distill)))
        } else {
            (None, None)
        };
        let baseline_loss = if r.kind == RunKind::Student {
            db.gain(&r.id)?.map(|g| loss + g)
        } else {
            None
        };
        let tuned = config["train"]["tune"].is_object();
        let lr_peak = if tuned {
            db.result_extra(&r.id)?
                .and_then(|e| serde_json::from_str::<Value>(&e).ok())
                .and_then(|e| e["lr"]["peak"].as_f64())
        } else {
            config["train"]["lr"]["peak"].as_f64()
        };
        let kind = match candidates.contains(&r.id) {
            true => Role::TeacherCandidate,
            false => Role::from(r.kind),
        };
        out.push(FinishedRun {
            id: r.id.to_string(),
            kind,
            params: r.params_non_embedding as f64,
            tokens: r.tokens as f64,
            loss,
            teacher,
            config: key,
            baseline_loss,
            seed: config["data"]["seed"].as_u64().unwrap_or(0),
            lr_peak,
            bpb: (bpb.is_finite() && bpb > 0.0).then_some(bpb),
            tokenizer: tokens_key(&config["data"]),
        });
    }
    Ok(out)
}

/// A run's tokenizer as a key: kind, file hash and vocabulary of its data.
fn tokens_key(data: &Value) -> String {
    format!(
        "{}|{}|{}",
        data["tokenizer"].as_str().unwrap_or("none"),
        data["tokenizer_file"]["sha256"].as_str().unwrap_or(""),
        data["vocab"].as_u64().unwrap_or(0)
    )
}

/// Runs on one scale: a teacher whose tokenizer is not the students' has its held-out loss
/// re-expressed in nats per *student* token through bits per byte (its bits per byte times the
/// students' nats per bit-per-byte), so teachers of every tokenizer compare by what they predict of
/// the same text, never by their own nats per token.
///
/// Also returns which runs those are (no supervised law sees them: their tokens and parameters are
/// another tokenizer's).
pub fn on_students_scale(runs: &[FinishedRun]) -> (Vec<FinishedRun>, Vec<String>) {
    let students = runs
        .iter()
        .find(|r| matches!(r.kind, Role::Student | Role::Baseline));
    let Some(students) = students else {
        return (runs.to_vec(), Vec::new());
    };
    let nats_per_bpb = nats_per_bpb(students.loss, students.bpb);
    let mut other = Vec::new();
    let out = runs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if matches!(r.kind, Role::Teacher | Role::TeacherCandidate)
                && r.tokenizer != students.tokenizer
            {
                other.push(r.id.clone());
                if let (Some(bpb), Some(k)) = (r.bpb, nats_per_bpb) {
                    r.loss = bpb * k;
                }
            }
            r
        })
        .collect();
    (out, other)
}

/// Nats per student token per bit per byte of the held-out text (ln 2 × bytes per student
/// token), from a finished student's or baseline's held-out loss and bits per byte: the factor
/// that puts a teacher of another tokenizer on its students' scale (`fit` and the report).
pub fn nats_per_bpb(loss: f64, bpb: Option<f64>) -> Option<f64> {
    bpb.filter(|b| *b > 0.0).map(|b| loss / b)
}

/// The ids of the teachers' learning-rate candidates (`[teachers] tune_lr`) among `runs`.
fn teacher_candidates(runs: &[crate::store::StoredRun]) -> std::collections::HashSet<RunId> {
    crate::plan::teacher_candidates(runs.iter().map(|r| (r.kind, r.config_json.as_str())))
}

/// The learning rate a student size and budget was tuned to (`[train] tune_lr`), from its
/// baselines at every candidate peak, or a teacher size and budget (`[teachers] tune_lr`),
/// from its candidate runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedRate {
    /// [`Role::Baseline`] (a student size's rate, tuned on its baselines) or [`Role::Teacher`].
    #[serde(default = "baseline_role")]
    pub kind: Role,
    /// Non-embedding parameters.
    pub params: f64,
    /// Tokens.
    pub tokens: f64,
    /// The chosen peak.
    pub peak: f64,
    /// Every candidate peak's mean held-out loss and finished runs.
    pub candidates: Vec<crate::run::tuning::PeakScore>,
    /// Finished students of this size and budget that trained at another peak (chosen when
    /// they started, from fewer seeds' baselines), with that peak.
    #[serde(default)]
    pub students_elsewhere: Vec<(String, f64)>,
}

fn baseline_role() -> Role {
    Role::Baseline
}

impl TunedRate {
    /// Whether this is a teacher's rate (`[teachers] tune_lr`) rather than a student size's.
    pub fn is_teacher(&self) -> bool {
        self.kind == Role::Teacher
    }

    /// The sweep-file key that lists this rate's candidates.
    pub fn key(&self) -> &'static str {
        if self.is_teacher() {
            "[teachers] tune_lr"
        } else {
            "[train] tune_lr"
        }
    }

    /// `Some(true)` when the chosen peak is the largest candidate, `Some(false)` when the
    /// smallest: the best rate may lie beyond the candidates.
    pub fn at_edge(&self) -> Option<bool> {
        let first = self.candidates.first()?.peak;
        let last = self.candidates.last()?.peak;
        if self.peak == last {
            Some(true)
        } else if self.peak == first {
            Some(false)
        } else {
            None
        }
    }
}

/// The tuned rate of every student size and budget whose baselines tried several peaks, then
/// of every teacher size and budget whose candidates did.
pub fn tuned_rates(runs: &[FinishedRun]) -> Vec<TunedRate> {
    let mut rates = rates_of(runs, Role::Baseline);
    rates.extend(rates_of(runs, Role::TeacherCandidate));
    rates
}

/// The tuned rates of the runs of kind `kind` (baselines or teacher candidates), per size and
/// budget.
fn rates_of(runs: &[FinishedRun], kind: Role) -> Vec<TunedRate> {
    let mut results: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.kind == kind) {
        if let Some(peak) = r.lr_peak {
            results
                .entry((r.params.to_bits(), r.tokens.to_bits()))
                .or_default()
                .push((peak, r.loss));
        }
    }
    let teacher = kind == Role::TeacherCandidate;
    results
        .into_iter()
        .filter_map(|((n, d), res)| {
            let candidates = crate::run::tuning::scores(&res);
            (candidates.len() > 1).then_some(())?;
            let peak = best_peak(&res)?;
            let (params, tokens) = (f64::from_bits(n), f64::from_bits(d));
            let students_elsewhere = runs
                .iter()
                .filter(|_| !teacher)
                .filter(|r| r.kind == Role::Student && r.params == params && r.tokens == tokens)
                .filter_map(|r| r.lr_peak.filter(|&p| p != peak).map(|p| (r.id.clone(), p)))
                .collect();
            Some(TunedRate {
                kind: if teacher {
                    Role::Teacher
                } else {
                    Role::Baseline
                },
                params,
                tokens,
                peak,
                candidates,
                students_elsewhere,
            })
        })
        .collect()
}

/// Adds to `rates` the candidate peaks whose baselines all failed (diverged) in `db`'s current
/// plan, with no finished run, so a winner below them is not taken for the largest candidate.
pub fn add_failed_candidates(db: &SweepDb, rates: &mut [TunedRate]) -> Result<(), FitError> {
    let runs = match db.current_plan()? {
        Some(plan) => db.plan_runs(plan)?,
        None => db.runs()?,
    };
    let teacher_candidates = teacher_candidates(&runs);
    for r in runs.iter().filter(|r| r.state == RunState::Failed) {
        let teacher = teacher_candidates.contains(&r.id);
        if r.kind != RunKind::Baseline && !teacher {
            continue;
        }
        let config: Value = serde_json::from_str(&r.config_json).unwrap_or(Value::Null);
        let Some(peak) = config["train"]["lr"]["peak"].as_f64() else {
            continue;
        };
        let (n, d) = (r.params_non_embedding as f64, r.tokens as f64);
        if let Some(rate) = rates
            .iter_mut()
            .find(|t| t.is_teacher() == teacher && t.params == n && t.tokens == d)
            && !rate.candidates.iter().any(|c| c.peak == peak)
        {
            rate.candidates.push(crate::run::tuning::PeakScore {
                peak,
                mean_loss: f64::NAN,
                finished: 0,
            });
            rate.candidates.sort_by(|a, b| a.peak.total_cmp(&b.peak));
        }
    }
    Ok(())
}

/// `runs` without the baselines of learning rates that lost (`[train] tune_lr`): per student
/// size and budget, only the baselines at the peak [`best_peak`] chooses — the rule a tuned
/// student's rate was chosen by — so laws, gains and noise floors use tuned baselines.
pub(crate) fn tuned_baselines(runs: &[FinishedRun]) -> Vec<FinishedRun> {
    let best: BTreeMap<(u64, u64), f64> = rates_of(runs, Role::Baseline)
        .into_iter()
        .map(|t| ((t.params.to_bits(), t.tokens.to_bits()), t.peak))
        .collect();
    runs.iter()
        .filter(|r| {
            r.kind != Role::Baseline
                || match (
                    r.lr_peak,
                    best.get(&(r.params.to_bits(), r.tokens.to_bits())),
                ) {
                    (Some(peak), Some(best)) => peak == *best,
                    _ => true,
                }
        })
        .cloned()
        .collect()
}

/// A readable key of a student's distillation settings: `loss=kl alpha=0.9 tau=1 top_p=0.95
/// top_k=32 mode=offline`, with `cross=uld|gold` for a teacher of another tokenizer.
pub fn config_key(distill: &Value) -> String {
    let alpha = &distill["alpha"];
    let alpha = match alpha["schedule"].as_str() {
        Some("constant") | None => alpha["peak"].to_string(),
        Some(s) => format!("{s}:{}", alpha["peak"]),
    };
    let s = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    // sampled targets and the tail bucket are named only when set, so keys stored before
    // they existed still match
    let t = &distill["truncation"];
    let mut extra = String::new();
    if let Some(targets) = t["targets"].as_str().filter(|v| *v != "top_k") {
        extra += &format!(" targets={targets}");
    }
    if let Some(missing) = t["missing"].as_str().filter(|v| *v != "renormalise") {
        extra += &format!(" missing={missing}");
    }
    // students of a teacher of another tokenizer are a curve of their own, per loss
    if let Some(cross) = distill["cross_tokenizer"].as_str() {
        extra += &format!(" cross={cross}");
    }
    format!(
        "loss={} alpha={alpha} tau={} top_p={} top_k={} mode={}{extra}",
        s(&distill["loss"]),
        s(&distill["temperature"]),
        s(&t["top_p"]),
        s(&t["top_k"]),
        s(&distill["mode"]),
    )
}

/// A student as the distillation fits use it.
#[derive(Debug, Clone, Copy)]
struct Student {
    /// Its data point.
    point: DataPoint,
    /// Its teacher's token budget (0 when pre-trained).
    teacher_tokens: f64,
    /// Its seed.
    seed: u64,
}

/// A capacity-gap group of students, with its teachers' token budget when split by budget.
struct StudentGroup {
    /// The students.
    students: Vec<Student>,
    /// The teachers' budget, when the group is one of a split.
    teacher_tokens: Option<f64>,
}

/// A finished baseline as the capacity gaps pair it with students.
struct Baseline {
    /// Its seed.
    seed: u64,
    /// Its held-out loss.
    loss: f64,
}

/// What `pdsweep fit` does to a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepFitOptions {
    /// Settings shared by every law fit.
    pub fit: FitOptions,
    /// The supervised law (`chinchilla` or `busbridge`).
    pub supervised_law: LawKind,
}

/// A fit that could not be made, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// What was not fitted.
    pub what: String,
    /// Why.
    pub reason: String,
}

/// Everything fitted on a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepFits {
    /// The supervised law on teachers and baselines.
    pub supervised: Option<Fit>,
    /// The distillation law per distillation config.
    pub distill: BTreeMap<String, Fit>,
    /// Capacity-gap groups.
    pub capacity_gaps: Vec<CapacityGap>,
    /// Per student distilled from teachers of several token budgets: its optimal teacher in
    /// size and in loss compared across them.
    #[serde(default)]
    pub teacher_budgets: Vec<BudgetComparison>,
    /// T*(S) per budget and config.
    pub tstar: Vec<TStarScaling>,
    /// Fits that could not be made.
    pub skipped: Vec<Skipped>,
    /// The learning rate each student size and budget was tuned to (`[train] tune_lr`).
    #[serde(default)]
    pub tuned_rates: Vec<TunedRate>,
    /// Each pre-trained teacher's students against the distillation law fitted to the trained
    /// teachers' students alone (per config with both kinds of teacher).
    #[serde(default)]
    pub released: Vec<ReleasedCheck>,
}

/// Fits everything the sweep's finished runs allow; what cannot be fitted is listed in
/// `skipped` with the reason, never fitted with nonsense.
pub fn fit_sweep(runs: &[FinishedRun], opts: &SweepFitOptions) -> SweepFits {
    let tuned_rates = tuned_rates(runs);
    let (runs, other_tokenizer) = on_students_scale(runs);
    let runs = &tuned_baselines(&runs)[..];
    let mut skipped = Vec::new();
    let supervised = match supervised_fit(runs, &other_tokenizer, opts) {
        Ok(f) => Some(f),
        Err(s) => {
            skipped.push(s);
            None
        }
    };
    let sup_law = supervised.as_ref().and_then(Fit::supervised);
    let students = students_by_config(runs, sup_law.as_ref());
    skipped.extend(students.skipped);
    let by_config = students.value.fits;
    let distill = distill_fits(&by_config, opts);
    skipped.extend(distill.skipped);
    let distill = distill.value;
    let released: Vec<ReleasedCheck> = students
        .value
        .checks
        .iter()
        .flat_map(|(config, students)| {
            released_checks(config, students, supervised.as_ref(), &opts.fit)
        })
        .collect();
    let capacity_gaps = capacity_gaps(runs, &by_config, &distill, supervised.as_ref(), opts);
    let boot = opts.fit.bootstrap;
    let teacher_budgets = budget_comparisons(&capacity_gaps, boot, opts.fit.seed);
    let tstar = tstar_fits(&capacity_gaps, boot);
    skipped.extend(tstar.skipped);
    SweepFits {
        supervised,
        distill,
        capacity_gaps,
        teacher_budgets,
        tstar: tstar.value,
        skipped,
        tuned_rates,
        released,
    }
}

/// A stage's result with the fits it could not make.
struct Fitted<T> {
    /// What the stage made.
    value: T,
    /// What it could not, and why.
    skipped: Vec<Skipped>,
}

/// The supervised law fitted on the sweep's teachers and baselines (of the students'
/// tokenizer, trained on the sweep's data), or why it could not be.
fn supervised_fit(
    runs: &[FinishedRun],
    other_tokenizer: &[String],
    opts: &SweepFitOptions,
) -> Result<Fit, Skipped> {
    let supervised_points: Vec<DataPoint> = runs
        .iter()
        .filter(|r| matches!(r.kind, Role::Teacher | Role::Baseline))
        .filter(|r| !other_tokenizer.contains(&r.id))
        .filter(|r| r.tokens > 0.0) // a pre-trained teacher was not trained on the sweep's data
        .map(|r| DataPoint::supervised(r.params, r.tokens, r.loss))
        .collect();
    fit(
        opts.supervised_law,
        "the sweep's teachers and baselines",
        &supervised_points,
        &opts.fit,
    )
    .map_err(|e| Skipped {
        what: format!("{} law on teachers and baselines", opts.supervised_law),
        reason: crate::error::chain(&e),
    })
}

/// The sweep's students per distillation config, as the fits and the released-teacher checks
/// use them.
struct StudentsByConfig {
    /// For the distillation law and the capacity gaps.
    fits: BTreeMap<String, Vec<Student>>,
    /// For the pre-trained teachers' checks.
    checks: BTreeMap<String, Vec<CheckStudent>>,
}

/// Students with their teacher's size and loss, and L̃_S from the law (else the baseline).
fn students_by_config(
    runs: &[FinishedRun],
    sup_law: Option<&SupervisedSource>,
) -> Fitted<StudentsByConfig> {
    let by_id: BTreeMap<&str, &FinishedRun> = runs.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut skipped = Vec::new();
    let mut by_config: BTreeMap<String, Vec<Student>> = BTreeMap::new();
    let mut check_students: BTreeMap<String, Vec<CheckStudent>> = BTreeMap::new();
    for s in runs.iter().filter(|r| r.kind == Role::Student) {
        let (Some(t), Some(config)) = (s.teacher.as_deref().and_then(|t| by_id.get(t)), &s.config)
        else {
            continue;
        };
        let lsup = sup_law
            .map(|l| l.predict(s.params, s.tokens))
            .or(s.baseline_loss);
        let Some(lsup) = lsup else {
            skipped.push(Skipped {
                what: format!("student `{}`", s.id),
                reason: "no supervised law and no finished baseline to give L̃_S".into(),
            });
            continue;
        };
        let mut p = DataPoint::distill(s.params, s.tokens, t.loss, lsup, s.loss);
        p.teacher_params = Some(t.params);
        p.teacher_tokens = (t.tokens > 0.0).then_some(t.tokens); // unknown when pre-trained
        check_students
            .entry(config.clone())
            .or_default()
            .push(CheckStudent {
                point: p,
                teacher: t.id.clone(),
                pretrained: t.tokens <= 0.0,
                baseline_loss: s.baseline_loss,
            });
        by_config.entry(config.clone()).or_default().push(Student {
            point: p,
            teacher_tokens: t.tokens,
            seed: s.seed,
        });
    }
    Fitted {
        value: StudentsByConfig {
            fits: by_config,
            checks: check_students,
        },
        skipped,
    }
}

/// The distillation law fitted per config on its students.
fn distill_fits(
    by_config: &BTreeMap<String, Vec<Student>>,
    opts: &SweepFitOptions,
) -> Fitted<BTreeMap<String, Fit>> {
    let mut distill = BTreeMap::new();
    let mut skipped = Vec::new();
    for (config, pts) in by_config {
        let points: Vec<DataPoint> = pts.iter().map(|s| s.point).collect();
        match fit(
            LawKind::Distill,
            &format!("students ({config})"),
            &points,
            &opts.fit,
        ) {
            Ok(f) => {
                distill.insert(config.clone(), f);
            }
            Err(e) => skipped.push(Skipped {
                what: format!("distillation law for {config}"),
                reason: crate::error::chain(&e),
            }),
        }
    }
    Fitted {
        value: distill,
        skipped,
    }
}

/// The capacity-gap groups of every config's students.
fn capacity_gaps(
    runs: &[FinishedRun],
    by_config: &BTreeMap<String, Vec<Student>>,
    distill: &BTreeMap<String, Fit>,
    supervised: Option<&Fit>,
    opts: &SweepFitOptions,
) -> Vec<CapacityGap> {
    let mut capacity_gaps = Vec::new();
    for (config, pts) in by_config {
        for group in student_groups(pts) {
            capacity_gaps.push(capacity_gap(
                runs,
                config,
                &group,
                distill.get(config),
                supervised,
                opts,
            ));
        }
    }
    capacity_gaps
}

/// One group's capacity gap: its students against their teachers' size and loss, the paired
/// baselines, and the distillation law's optimum for the student.
fn capacity_gap(
    runs: &[FinishedRun],
    config: &str,
    group: &StudentGroup,
    distill: Option<&Fit>,
    supervised: Option<&Fit>,
    opts: &SweepFitOptions,
) -> CapacityGap {
    let boot = opts.fit.bootstrap;
    let budget = group.teacher_tokens;
    let group = &group.students[..];
    let first = group[0].point;
    let baselines = baselines_of(runs, first.params, first.tokens);
    let gap_points: Vec<GapPoint> = group
        .iter()
        .map(|s| GapPoint {
            teacher_params: s.point.teacher_params.unwrap_or(f64::NAN),
            teacher_loss: s.point.teacher_loss.unwrap_or(f64::NAN),
            student_loss: s.point.loss,
            seed: Some(s.seed),
            paired_baseline: baselines.iter().find(|b| b.seed == s.seed).map(|b| b.loss),
        })
        .collect();
    let losses: Vec<f64> = baselines.iter().map(|b| b.loss).collect();
    let (baseline_loss, baseline_seeds) = (mean(&losses), losses.len());
    let mut teacher_tokens: Vec<f64> = group
        .iter()
        .map(|s| s.teacher_tokens)
        .filter(|d| *d > 0.0)
        .collect();
    teacher_tokens.sort_by(f64::total_cmp);
    // NaN when every teacher is pre-trained: the law's teacher size is then unknown.
    let d_t = teacher_tokens
        .get(teacher_tokens.len() / 2)
        .copied()
        .unwrap_or(f64::NAN);
    let from_law = distill.and_then(|f| {
        law_optimum(
            f,
            supervised,
            first.params,
            first.tokens,
            first.supervised_loss?,
            d_t,
        )
    });
    CapacityGap {
        student_params: first.params,
        student_tokens: first.tokens,
        teacher_tokens: budget,
        config: config.to_string(),
        baseline_loss,
        baseline_seeds,
        teachers: count_distinct(gap_points.iter().map(|p| p.teacher_params)),
        seeds: count_distinct(group.iter().map(|s| s.seed as f64)),
        noise_floor: sample_sd(&losses),
        paired: fitted_losses(&gap_points).1,
        by_teacher_params: gap_curve(
            "teacher_params",
            &sized_points(&gap_points, group),
            |p| p.teacher_params,
            boot,
            opts.fit.seed,
        ),
        by_teacher_loss: gap_curve(
            "teacher_loss",
            &gap_points,
            |p| p.teacher_loss,
            boot,
            opts.fit.seed,
        ),
        points: gap_points,
        from_law,
    }
}

/// T*(S) fitted across student sizes at each student budget, config and teacher budget.
fn tstar_fits(capacity_gaps: &[CapacityGap], boot: usize) -> Fitted<Vec<TStarScaling>> {
    let mut tstar = Vec::new();
    let mut skipped = Vec::new();
    // T*(S) is fitted across student sizes at one student budget, config and teacher budget.
    let mut families: BTreeMap<(u64, &str, Option<u64>), Vec<&CapacityGap>> = BTreeMap::new();
    for g in capacity_gaps {
        families
            .entry((
                g.student_tokens.to_bits(),
                g.config.as_str(),
                g.teacher_tokens.map(f64::to_bits),
            ))
            .or_default()
            .push(g);
    }
    for ((tokens, config, teacher_tokens), gaps) in families {
        let sizes = gaps.len();
        let interior: Vec<&CapacityGap> = gaps
            .into_iter()
            .filter(|g| matches!(g.by_teacher_params.optimum, Optimum::Interior { .. }))
            .collect();
        let points: Vec<[f64; 2]> = interior
            .iter()
            .filter_map(|g| match g.by_teacher_params.optimum {
                Optimum::Interior { at, .. } => Some([g.student_params, at]),
                _ => None,
            })
            .collect();
        let draws: Vec<Vec<f64>> = (0..boot)
            .filter_map(|b| {
                interior
                    .iter()
                    .map(|g| g.by_teacher_params.draws.get(b).copied().flatten())
                    .collect::<Option<Vec<f64>>>()
            })
            .collect();
        let d = f64::from_bits(tokens);
        match tstar_scaling(d, config, points, &draws) {
            Some(t) => tstar.push(TStarScaling {
                teacher_tokens: teacher_tokens.map(f64::from_bits),
                ..t
            }),
            None => skipped.push(Skipped {
                what: format!("T*(S) at D={d} ({config})"),
                reason: format!(
                    "{} of {sizes} student size(s) have an optimum teacher the data support; a line or power law (two parameters) needs at least {TSTAR_MIN_SIZES}",
                    interior.len()
                ),
            }),
        }
    }
    Fitted {
        value: tstar,
        skipped,
    }
}

/// The capacity-gap groups of one config's students: one per (student size, budget), its seeds
/// replicates within it, split by the teachers' token budget when the student distilled from
/// teachers of one size trained on two or more budgets (a size curve means something only at one
/// budget; students of pre-trained teachers then join every budget's group).
///
/// Each group comes with its teachers' budget when split.
fn student_groups(pts: &[Student]) -> Vec<StudentGroup> {
    let mut by_student: BTreeMap<(u64, u64), Vec<Student>> = BTreeMap::new();
    for s in pts {
        by_student
            .entry((s.point.params.to_bits(), s.point.tokens.to_bits()))
            .or_default()
            .push(*s);
    }
    let mut out = Vec::new();
    for students in by_student.into_values() {
        let mut budgets: Vec<f64> = students
            .iter()
            .map(|s| s.teacher_tokens)
            .filter(|d| *d > 0.0)
            .collect();
        budgets.sort_by(f64::total_cmp);
        budgets.dedup();
        // Split only when budget is an axis of its own: some teacher size trained on two or
        // more budgets. A ladder whose budget grows with size (each size on its own budget)
        // is one curve.
        let mut sized: Vec<(u64, u64)> = students
            .iter()
            .filter(|s| s.teacher_tokens > 0.0)
            .map(|s| {
                (
                    s.point.teacher_params.unwrap_or(0.0).to_bits(),
                    s.teacher_tokens.to_bits(),
                )
            })
            .collect();
        sized.sort_unstable();
        sized.dedup();
        let crossed = sized.windows(2).any(|w| w[0].0 == w[1].0);
        if budgets.len() < 2 || !crossed {
            out.push(StudentGroup {
                students,
                teacher_tokens: None,
            });
            continue;
        }
        for budget in budgets {
            let group: Vec<Student> = students
                .iter()
                .filter(|s| s.teacher_tokens == budget || s.teacher_tokens <= 0.0)
                .copied()
                .collect();
            out.push(StudentGroup {
                students: group,
                teacher_tokens: Some(budget),
            });
        }
    }
    out
}

/// The comparison across teacher budgets of each (student, config) split by budget.
fn budget_comparisons(gaps: &[CapacityGap], boot: usize, seed: u64) -> Vec<BudgetComparison> {
    let mut by_student: BTreeMap<(u64, u64, &str), Vec<&CapacityGap>> = BTreeMap::new();
    for g in gaps.iter().filter(|g| g.teacher_tokens.is_some()) {
        by_student
            .entry((
                g.student_params.to_bits(),
                g.student_tokens.to_bits(),
                g.config.as_str(),
            ))
            .or_default()
            .push(g);
    }
    by_student
        .values()
        .filter_map(|gaps| BudgetComparison::of(gaps, boot, seed))
        .collect()
}

/// The points of a capacity-gap group that its curve against teacher size is fitted to: those of
/// teachers trained on the sweep's data, when there are any.
///
/// A pre-trained teacher's size is not on the same axis (it learnt from other data, for far more
/// tokens); it stays on the curve against teacher loss, and [`ReleasedCheck`] sets it against the
/// trained teachers' law.
fn sized_points(points: &[GapPoint], group: &[Student]) -> Vec<GapPoint> {
    let trained: Vec<GapPoint> = points
        .iter()
        .zip(group)
        .filter(|(_, s)| s.point.teacher_tokens.is_some())
        .map(|(g, _)| *g)
        .collect();
    if trained.is_empty() {
        points.to_vec()
    } else {
        trained
    }
}

/// The mean held-out loss of the finished baselines of one student size and budget, over their
/// seeds, and how many there are.
///
/// Every finished baseline of `params` trained on `tokens`.
fn baselines_of(runs: &[FinishedRun], params: f64, tokens: f64) -> Vec<Baseline> {
    runs.iter()
        .filter(|r| r.kind == Role::Baseline && r.params == params && r.tokens == tokens)
        .map(|r| Baseline {
            seed: r.seed,
            loss: r.loss,
        })
        .collect()
}

/// The number of distinct values (equal within a relative 1e-9).
fn count_distinct(values: impl Iterator<Item = f64>) -> usize {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * a.abs().max(b.abs()));
    v.len()
}

/// The distillation law's optimal teacher for a student, with bootstrap intervals from the
/// fits' samples (sample i of the distillation law paired with sample i of the supervised law).
pub(crate) fn law_optimum(
    distill: &Fit,
    supervised: Option<&Fit>,
    n_s: f64,
    d_s: f64,
    l_sup: f64,
    teacher_tokens: f64,
) -> Option<LawOptimum> {
    let law = distill.distill()?;
    let (lt, ls) = optimal_teacher_loss(&law, n_s, d_s, l_sup)?;
    let sup = supervised.and_then(Fit::supervised);
    let teacher_params = sup.and_then(|s| size_for_loss(&s, lt, teacher_tokens));
    let mut lts = Vec::new();
    let mut nts = Vec::new();
    for (i, sample) in distill.samples.iter().enumerate() {
        let law = DistillLaw::from_natural(sample);
        let sup_i = supervised.and_then(|s| s.supervised_sample(i));
        let l_sup_i = sup_i.map_or(l_sup, |s| s.predict(n_s, d_s));
        if let Some((lt_i, _)) = optimal_teacher_loss(&law, n_s, d_s, l_sup_i) {
            lts.push(lt_i);
            if let Some(n) = sup_i.and_then(|s| size_for_loss(&s, lt_i, teacher_tokens)) {
                nts.push(n);
            }
        }
    }
    let ci = |v: &[f64]| (v.len() >= 20).then(|| super::bootstrap::percentile_interval(v, 0.95));
    Some(LawOptimum {
        teacher_loss: lt,
        teacher_loss_ci: ci(&lts),
        student_loss: ls,
        teacher_params,
        teacher_params_ci: ci(&nts),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: Role, params: f64, seed: u64, peak: f64, loss: f64) -> FinishedRun {
        FinishedRun {
            id: format!("{kind}-{params}-{seed}-{peak}"),
            kind,
            params,
            tokens: 1e6,
            loss,
            teacher: None,
            config: None,
            baseline_loss: None,
            seed,
            lr_peak: Some(peak),
            bpb: None,
            tokenizer: String::new(),
        }
    }

    #[test]
    fn only_the_baselines_at_each_sizes_best_rate_are_kept() {
        let runs = vec![
            run(Role::Baseline, 1e4, 1, 1e-3, 3.1),
            run(Role::Baseline, 1e4, 2, 1e-3, 3.0),
            run(Role::Baseline, 1e4, 1, 3e-3, 2.9),
            run(Role::Baseline, 1e4, 2, 3e-3, 3.0),
            // another size, where the higher rate wins
            run(Role::Baseline, 2e4, 1, 3e-3, 2.8),
            run(Role::Baseline, 2e4, 1, 1e-2, 2.7),
            // teachers are kept whatever their rate
            run(Role::Teacher, 1e5, 1, 1e-3, 2.5),
            run(Role::Teacher, 1e5, 1, 3e-3, 2.4),
        ];
        let kept: Vec<(Role, f64, f64)> = tuned_baselines(&runs)
            .into_iter()
            .map(|r| (r.kind, r.params, r.lr_peak.unwrap()))
            .collect();
        assert_eq!(
            kept,
            vec![
                (Role::Baseline, 1e4, 3e-3),
                (Role::Baseline, 1e4, 3e-3),
                (Role::Baseline, 2e4, 1e-2),
                (Role::Teacher, 1e5, 1e-3),
                (Role::Teacher, 1e5, 3e-3),
            ]
        );
    }

    #[test]
    fn students_trained_at_an_earlier_winner_are_named() {
        let runs = vec![
            run(Role::Baseline, 1e4, 1, 1e-3, 3.1),
            run(Role::Baseline, 1e4, 2, 1e-3, 3.0),
            run(Role::Baseline, 1e4, 1, 3e-3, 2.9),
            run(Role::Baseline, 1e4, 2, 3e-3, 3.0),
            // seed 1's student started when 1e-3 led; seed 2's at the winner
            run(Role::Student, 1e4, 1, 1e-3, 2.8),
            run(Role::Student, 1e4, 2, 3e-3, 2.7),
        ];
        let rates = tuned_rates(&runs);
        assert_eq!(rates.len(), 1);
        assert_eq!(rates[0].peak, 3e-3);
        assert_eq!(
            rates[0].students_elsewhere,
            vec![("student-10000-1-0.001".to_string(), 1e-3)]
        );
    }

    /// A sweep with trained teachers and one pre-trained teacher (no tokens on the sweep's
    /// data): the pre-trained teacher is checked against the trained teachers' law, and the
    /// curve against teacher size is fitted to the trained teachers alone.
    #[test]
    fn a_pretrained_teacher_is_held_out_of_the_size_curve_and_checked() {
        let mut runs = Vec::new();
        let teachers = [
            (1e5, 4.6, 1.5e6),
            (3e5, 4.3, 1.5e6),
            (8e5, 4.1, 1.5e6),
            (2.6e6, 4.0, 1.5e6),
            (1e8, 3.6, 0.0),
        ];
        for (k, (n, l, d)) in teachers.iter().enumerate() {
            let mut t = run(Role::Teacher, *n, 1, 5e-3, *l);
            t.id = format!("t{k}");
            t.tokens = *d;
            runs.push(t);
        }
        for seed in [1, 2] {
            let base = 5.0 + 0.01 * seed as f64;
            let mut b = run(Role::Baseline, 1e5, seed, 5e-3, base);
            b.tokens = 5e5;
            runs.push(b);
            for (k, (_, l, _)) in teachers.iter().enumerate() {
                let mut s = run(
                    Role::Student,
                    1e5,
                    seed,
                    5e-3,
                    base - 0.05 + 0.1 * (l - 4.2).powi(2),
                );
                s.id = format!("s{k}-{seed}");
                s.tokens = 5e5;
                s.teacher = Some(format!("t{k}"));
                s.config = Some("kl".into());
                s.baseline_loss = Some(base);
                runs.push(s);
            }
        }
        let fits = fit_sweep(
            &runs,
            &SweepFitOptions {
                fit: FitOptions {
                    bootstrap: 20,
                    ..FitOptions::default()
                },
                supervised_law: LawKind::Chinchilla,
            },
        );
        assert_eq!(fits.released.len(), 1);
        let c = &fits.released[0];
        assert_eq!(c.teacher, "t4");
        assert_eq!(c.teacher_loss, 3.6);
        assert_eq!(c.law_points, 8);
        assert_eq!(c.trained_teacher_losses, [4.0, 4.6]);
        let s = &c.students[0];
        assert_eq!(s.seeds, 2);
        let expected = 5.015 - 0.05 + 0.1 * 0.6f64.powi(2);
        assert!((s.measured - expected).abs() < 1e-12, "{}", s.measured);
        assert!((s.gain.unwrap() - (0.05 - 0.036)).abs() < 1e-12);
        let best = s.best_trained.as_ref().unwrap();
        assert_eq!(best.teacher, "t1"); // L_T 4.3, nearest the curve's minimum at 4.2
        let gap = &fits.capacity_gaps[0];
        assert_eq!(
            gap.points.len(),
            10,
            "every student stays a point of the group"
        );
        let sizes: Vec<f64> = gap.by_teacher_params.samples.iter().map(|s| s[0]).collect();
        let top = sizes.iter().copied().fold(0.0, f64::max);
        assert!(
            (top / 2.6e6 - 1.0).abs() < 1e-9,
            "the size curve ends at the largest trained teacher, not {top}"
        );
        let losses: Vec<f64> = gap.by_teacher_loss.samples.iter().map(|s| s[0]).collect();
        let low = losses.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            (low / 3.6 - 1.0).abs() < 1e-9,
            "the loss curve reaches the pre-trained teacher"
        );
    }

    /// Teachers of five sizes at three budgets, a student whose loss depends on its teacher's
    /// loss alone (minimum at L_T = 1.80): one capacity-gap group per budget, the optimum in
    /// size moving with the budget, the optimum in loss recovered per budget and pooled, and the
    /// verdict "a loss".
    #[test]
    fn teachers_at_several_budgets_are_compared_in_size_and_in_loss() {
        let mut runs = Vec::new();
        let sizes = [1e4, 2e4, 4e4, 8e4, 1.6e5];
        for (b, budget) in [1e6, 4e6, 1.6e7].iter().enumerate() {
            for (i, n) in sizes.iter().enumerate() {
                // More data moves every teacher down by 0.12 nats: the same loss, a smaller size.
                let loss = 2.04 - 0.12 * (i as f64 + b as f64);
                let mut t = run(Role::Teacher, *n, 1, 5e-3, loss);
                t.id = format!("t{b}-{i}");
                t.tokens = *budget;
                runs.push(t.clone());
                for seed in 1..=4u64 {
                    let x = (loss / 1.80f64).ln();
                    let noise = 0.001 * (seed as f64 * 3.7 + i as f64 + b as f64).sin();
                    let mut s = run(Role::Student, 5e3, seed, 5e-3, 2.5 + 10.0 * x * x + noise);
                    s.id = format!("s{b}-{i}-{seed}");
                    s.tokens = 2e6;
                    s.teacher = Some(t.id.clone());
                    s.config = Some("kl".into());
                    runs.push(s);
                }
            }
        }
        let fits = fit_sweep(
            &runs,
            &SweepFitOptions {
                fit: FitOptions {
                    bootstrap: 100,
                    ..FitOptions::default()
                },
                supervised_law: LawKind::Chinchilla,
            },
        );
        let budgets: Vec<Option<f64>> = fits
            .capacity_gaps
            .iter()
            .map(|g| g.teacher_tokens)
            .collect();
        assert_eq!(budgets, [Some(1e6), Some(4e6), Some(1.6e7)]);
        let at_size: Vec<f64> = fits.capacity_gaps[..2]
            .iter()
            .map(|g| {
                g.by_teacher_params
                    .optimum
                    .interior()
                    .expect("an optimum in size")
            })
            .collect();
        // L_T = 1.80 is size index 2 at 1M, 1 at 4M, 0 at 16M (an edge): sizes 4e4 then 2e4.
        assert!(matches!(
            fits.capacity_gaps[2].by_teacher_params.optimum,
            Optimum::Boundary { .. }
        ));
        assert!((at_size[0] / 4e4 - 1.0).abs() < 0.15, "{at_size:?}");
        assert!((at_size[1] / 2e4 - 1.0).abs() < 0.15, "{at_size:?}");
        assert_eq!(fits.teacher_budgets.len(), 1);
        let c = &fits.teacher_budgets[0];
        assert_eq!(c.budgets.len(), 3);
        for b in &c.budgets[..2] {
            let at = b.by_loss.interior().expect("an optimum in loss");
            assert!((at - 1.80).abs() < 0.01, "{at}");
        }
        let pooled = c.pooled_by_teacher_loss.optimum.interior().expect("pooled");
        assert!((pooled - 1.80).abs() < 0.005, "{pooled}");
        assert_eq!(c.verdict, crate::fit::BudgetVerdict::Loss, "{}", c.verdict);
        for b in &c.budgets[..2] {
            let Optimum::Interior {
                ci: Some([lo, hi]), ..
            } = b.by_loss
            else {
                panic!("{:?}", b.by_loss)
            };
            assert!(hi - lo < 0.06, "[{lo}, {hi}]");
        }
        // 16M's teachers all reach 1.80 or below: its optimum is at an edge, so not every
        // budget has an interval.
        assert_eq!(c.loss_half_width(), None);
    }
}
