//! The report's input as plain data: the sweep, its runs and curves, and views of the fitted
//! laws in which every fit-based field is optional, so a sweep without fits still reports.

use std::collections::BTreeMap;

use crate::plan::{RunId, RunKind};
pub use crate::store::RunState;

/// Everything a report shows.
#[derive(Debug, Clone, Default)]
pub struct ReportData {
    /// The sweep.
    pub sweep: SweepInfo,
    /// Where the numbers come from.
    pub provenance: Provenance,
    /// Every run of the current plan but the teachers' learning-rate candidates, in graph
    /// order.
    pub runs: Vec<RunView>,
    /// The teachers' learning-rate candidates (`[teachers] tune_lr`): in the learning-rate
    /// table and the exported runs, in no figure or law (each tuned teacher adopts its best).
    pub teacher_candidates: Vec<RunView>,
    /// Held-out loss curves of trained runs (teachers, students, baselines).
    pub curves: Vec<Curve>,
    /// What the fitted laws say (points from the database; fitted pieces when fits exist).
    pub fits: FitViews,
    /// The corpora the runs trained on (usually one), as the runs recorded them.
    pub corpus: Vec<CorpusFacts>,
    /// The distillation settings every student shares, in words (`offline, kl, α=0.9, …`),
    /// when they all share them.
    pub distill_settings: Option<String>,
    /// How distilled the students are (`pdsweep fit` measures it; empty before).
    pub similarity: SimilarityView,
}

/// The stored similarity measurements and the degrees they give.
#[derive(Debug, Clone, Default)]
pub struct SimilarityView {
    /// Every model measured against its teacher, under the default settings.
    pub records: Vec<crate::similarity::Record>,
    /// Per student setting: its degrees with intervals over seeds.
    pub groups: Vec<crate::similarity::GroupDegree>,
    /// Each measured student's own degree against its same-seed baseline.
    pub by_student: Vec<(RunId, crate::similarity::Degree)>,
}

/// What a run recorded about its corpus (`results.corpus_json`). Every field has a default, so
/// records written before a field existed still read.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(default)]
pub struct CorpusFacts {
    /// Human-readable description.
    pub description: String,
    /// Identifies the tokens exactly (settings and files).
    pub key: String,
    /// Tokens available for training.
    pub train_tokens: u64,
    /// Held-out tokens.
    pub val_tokens: u64,
    /// UTF-8 bytes per held-out token.
    pub val_bytes_per_token: f64,
    /// Unigram entropy of the held-out tokens (nats).
    pub unigram_entropy_nats: f64,
    /// The corpus's true entropy rate (synthetic only).
    pub entropy_rate_nats: Option<f64>,
    /// Files read.
    pub files: u64,
    /// Documents read.
    pub documents: u64,
    /// Groups of byte-identical files (paths).
    pub duplicate_groups: Vec<Vec<String>>,
    /// How the held-out split was chosen, in words.
    pub val_split: String,
    /// Bytes of training text.
    pub train_bytes: u64,
}

/// The sweep being reported.
#[derive(Debug, Clone, Default)]
pub struct SweepInfo {
    /// Its name.
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// The sweep file's path.
    pub path: String,
    /// The sweep file's text.
    pub toml: String,
}

/// Where the report's numbers come from.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// SHA-256 of the sweep file (hex).
    pub sweep_sha256: String,
    /// The pdsweep that drew the report.
    pub pdsweep_version: String,
    /// The pdsweep that planned the sweep.
    pub planned_with: String,
    /// When the plan was recorded (UTC).
    pub planned_at: String,
    /// `git rev-parse HEAD` in the sweep file's folder, if it is in a repository (with
    /// ` (modified)` when the work tree has changes).
    pub git_commit: Option<String>,
    /// When the report was drawn (UTC, ISO 8601).
    pub date_utc: String,
}

/// A student's teacher.
#[derive(Debug, Clone, PartialEq)]
pub struct TeacherRef {
    /// The teacher run's id.
    pub id: RunId,
    /// The teacher run's name.
    pub name: String,
    /// Its model label (`400K`).
    pub label: String,
    /// Its non-embedding parameters.
    pub n: f64,
    /// Its held-out loss, once done.
    pub val_loss: Option<f64>,
}

/// One run as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunView {
    /// Run id.
    pub id: RunId,
    /// Kind.
    pub kind: RunKind,
    /// Name.
    pub name: String,
    /// State.
    pub state: RunState,
    /// The failure reason, if failed.
    pub error: Option<String>,
    /// The model's label (`30K`, or the entry's name).
    pub label: String,
    /// Seed of data order and initialisation.
    pub seed: u64,
    /// Total parameters.
    pub params_total: u64,
    /// Non-embedding parameters (N of the laws).
    pub n: f64,
    /// Tokens trained on (or scored).
    pub tokens: f64,
    /// Planned FLOPs.
    pub flops: f64,
    /// Students and logit runs: the teacher.
    pub teacher: Option<TeacherRef>,
    /// Students: the distillation knobs that vary across the sweep's students (`offline`,
    /// `τ=2`), empty when none vary.
    pub distill: String,
    /// Held-out loss (nats/token).
    pub val_loss: Option<f64>,
    /// Held-out bits per byte.
    pub val_bpb: Option<f64>,
    /// Mean throughput.
    pub tokens_per_s: Option<f64>,
    /// Wall time.
    pub wall_s: Option<f64>,
    /// Students: top-1 agreement with the teacher.
    pub agreement: Option<f64>,
    /// Students: KL(teacher ‖ student) in nats/token.
    pub kl_teacher_student: Option<f64>,
    /// Students: matching baseline's loss minus this student's (nats/token).
    pub gain: Option<f64>,
    /// The corpus's training tokens, as the run recorded them (finished runs).
    pub corpus_train_tokens: Option<u64>,
    /// The unigram entropy (nats per token) of the held-out tokens of the run's corpus, in its
    /// own tokenizer, as the run recorded it (finished runs).
    pub corpus_unigram_nats: Option<f64>,
    /// Peak learning rate as planned (a tuned student's is chosen when it starts).
    pub lr_peak: Option<f64>,
    /// Logit passes: their store's measured fidelity, KL(stored ‖ teacher) in nats per
    /// position; offline students: their store's at the student's own truncation.
    pub fidelity_kl: Option<f64>,
    /// The teacher's mean mass on the kept ids, as `fidelity_kl`.
    pub fidelity_kept_mass: Option<f64>,
}

impl RunView {
    /// Whether the run finished with a held-out loss.
    pub fn done(&self) -> bool {
        self.state == RunState::Done && self.val_loss.is_some()
    }

    /// Passes over the training data: the run's tokens over the corpus's training tokens.
    pub fn epochs(&self) -> Option<f64> {
        self.corpus_train_tokens
            .filter(|t| *t > 0)
            .map(|t| self.tokens / t as f64)
    }
}

/// A run's held-out loss over training.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Run id.
    pub run_id: RunId,
    /// Kind.
    pub kind: RunKind,
    /// Run name.
    pub name: String,
    /// Non-embedding parameters.
    pub n: f64,
    /// The run's state (a failed or unfinished run's curve stops early).
    pub state: RunState,
    /// (tokens, held-out loss in nats/token), by step.
    pub points: Vec<(f64, f64)>,
    /// The run's seed.
    pub seed: u64,
    /// The run's token budget.
    pub tokens: f64,
    /// Students: the teacher's model label and non-embedding parameters.
    pub teacher: Option<(String, f64)>,
    /// The run's model label (`30K`).
    pub label: String,
    /// Students: the distillation knobs that vary across the sweep (empty when none do).
    pub distill: String,
}

/// The fitted laws as the figures need them.
#[derive(Debug, Clone, Default)]
pub struct FitViews {
    /// Supervised runs (teachers and baselines) and the supervised law, if fitted.
    pub supervised: SupervisedFitView,
    /// One per (student size, budget, distillation config).
    pub capacity_gap: Vec<CapacityGapView>,
    /// T*(S).
    pub optimal_teacher: OptimalTeacherView,
    /// The answer for the student the sweep is about, if fitted.
    pub recommendation: Option<RecommendationView>,
    /// Where fitted pieces came from (`None`: no fits yet).
    pub source: Option<String>,
    /// What about the stored fits could not be shown.
    pub notes: Vec<String>,
    /// The distillation law per distillation config, when fitted.
    pub distill: Vec<(String, LawView)>,
    /// What `pdsweep fit` could not fit, and why: (what, reason).
    pub skipped: Vec<(String, String)>,
    /// Pre-trained teachers against the distillation law of the trained teachers.
    pub released: Vec<crate::fit::ReleasedCheck>,
}

impl FitViews {
    /// Whether any fitted piece is present.
    pub fn any_fit(&self) -> bool {
        self.supervised.law.is_some()
            || !self.distill.is_empty()
            || self
                .capacity_gap
                .iter()
                .any(|g| g.fitted.is_some() || g.t_star.is_some())
            || self.optimal_teacher.linear.is_some()
            || self.optimal_teacher.power.is_some()
            || self.recommendation.is_some()
    }
}

/// One supervised run as a point of the supervised law.
#[derive(Debug, Clone, PartialEq)]
pub struct SupervisedPoint {
    /// Run name.
    pub name: String,
    /// teacher or baseline.
    pub kind: RunKind,
    /// Non-embedding parameters.
    pub n: f64,
    /// Tokens.
    pub d: f64,
    /// Held-out loss (nats/token).
    pub loss: f64,
}

/// The supervised runs and the law fitted to them.
#[derive(Debug, Clone, Default)]
pub struct SupervisedFitView {
    /// Finished teachers and baselines.
    pub points: Vec<SupervisedPoint>,
    /// The fitted law, if any.
    pub law: Option<LawView>,
}

/// A fitted supervised law with its parameters and bootstrap intervals.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LawView {
    /// `chinchilla` (E + A/N^α + B/D^β) or `busbridge` ((…)^γ).
    pub law: String,
    /// Parameters by name: `E`, `A`, `alpha`, `B`, `beta`, and `gamma` for busbridge.
    pub params: BTreeMap<String, f64>,
    /// Percentile intervals by parameter name.
    pub ci: BTreeMap<String, (f64, f64)>,
    /// Relative error predicting the largest run from the others, if measured.
    pub extrapolation_error: Option<f64>,
    /// `fit`'s warnings about this law (under-determined, parameters not identified, ...).
    pub warnings: Vec<String>,
    /// Parameters the data do not identify (their intervals are meaningless).
    pub unidentified: Vec<String>,
    /// What the fit rests on, e.g. `8 distinct points (16 runs: ...)`.
    pub support: Option<String>,
    /// Fewer than two distinct points per parameter.
    pub thin: bool,
}

impl LawView {
    /// The law's loss at `n` parameters and `d` tokens; `None` for an unknown law or missing
    /// parameter.
    pub fn predict(&self, n: f64, d: f64) -> Option<f64> {
        let p = |k: &str| self.params.get(k).copied();
        let reducible = p("A")? / n.powf(p("alpha")?) + p("B")? / d.powf(p("beta")?);
        let e = p("E")?;
        match self.law.as_str() {
            "chinchilla" => Some(e + reducible),
            "busbridge" => Some(e + reducible.powf(p("gamma")?)),
            _ => None,
        }
    }
}

/// One student of a capacity-gap series.
#[derive(Debug, Clone, PartialEq)]
pub struct GapPoint {
    /// The teacher's name.
    pub teacher: String,
    /// The teacher's non-embedding parameters.
    pub teacher_n: f64,
    /// The teacher's held-out loss, if done.
    pub teacher_loss: Option<f64>,
    /// The student's held-out loss.
    pub student_loss: f64,
    /// The student's seed.
    pub seed: u64,
}

/// An estimate with a confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
}

/// Student loss against teacher size for one student size, budget and distillation config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityGapView {
    /// The student's model label.
    pub student: String,
    /// The student's non-embedding parameters.
    pub student_n: f64,
    /// The student's tokens.
    pub budget: f64,
    /// The distillation knobs that vary across the sweep (empty when none do).
    pub config: String,
    /// Finished students, one per teacher (and seed).
    pub points: Vec<GapPoint>,
    /// The no-teacher baseline's loss (mean over seeds), if done.
    pub baseline_loss: Option<f64>,
    /// Each finished baseline seed's loss.
    pub baseline_losses: Vec<f64>,
    /// The fitted curve as (teacher parameters, student loss), if fitted.
    pub fitted: Option<Vec<(f64, f64)>>,
    /// The optimal teacher size with its bootstrap interval, when the fit has an optimum the
    /// data support.
    pub t_star: Option<Estimate>,
    /// What the fit says when it has no supported optimum.
    pub verdict: Option<GapVerdict>,
    /// The teachers (lowest, highest size) the seeds cannot tell from the best one, as `fit`
    /// stored them (`near_best`).
    pub near_best: Option<[f64; 2]>,
}

/// A capacity-gap fit without a supported interior optimum.
#[derive(Debug, Clone, PartialEq)]
pub enum GapVerdict {
    /// The best measured teacher is at the edge of the grid.
    Edge {
        /// The best measured teacher's size.
        at: f64,
        /// `smallest` or `largest`.
        edge: String,
        /// "edge of grid: extend the grid toward larger teachers".
        advice: String,
    },
    /// The best measured teacher is inside the grid, but the fitted curve does not support an
    /// optimum there.
    Unsupported {
        /// The best measured teacher's size.
        at: f64,
        /// Why.
        reason: String,
    },
}

impl CapacityGapView {
    /// `30K student, 300K tokens, offline`: how the series is named in legends.
    pub fn label(&self) -> String {
        let mut label = format!(
            "{} student, {} tokens",
            self.student,
            super::numbers::si(self.budget)
        );
        if !self.config.is_empty() {
            label += ", ";
            label += &self.config;
        }
        label
    }

    /// Distinct student seeds among the points.
    pub fn seeds(&self) -> usize {
        let mut s: Vec<u64> = self.points.iter().map(|p| p.seed).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }

    /// Distinct teachers among the points.
    pub fn teachers(&self) -> usize {
        mean_by(&self.points, |p| (p.teacher_n, p.student_loss)).len()
    }

    /// The teacher with the lowest mean student loss on the grid: (teacher parameters, loss,
    /// whether it is the smallest or largest teacher of the grid).
    pub fn grid_best(&self) -> Option<(f64, f64, bool)> {
        let means = mean_by(&self.points, |p| (p.teacher_n, p.student_loss));
        let best = means.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let at_edge = means.len() < 3
            || best.0 <= means.first().map_or(best.0, |m| m.0)
            || best.0 >= means.last().map_or(best.0, |m| m.0);
        Some((best.0, best.1, at_edge))
    }
}

/// Means of `y` per distinct `x`, sorted by `x`.
pub(crate) fn mean_by<T>(items: &[T], xy: impl Fn(&T) -> (f64, f64)) -> Vec<(f64, f64)> {
    let mut groups: Vec<(f64, f64, usize)> = Vec::new();
    for (x, y) in items.iter().map(xy) {
        match groups.iter_mut().find(|g| g.0 == x) {
            Some(g) => {
                g.1 += y;
                g.2 += 1;
            }
            None => groups.push((x, y, 1)),
        }
    }
    groups.sort_by(|a, b| a.0.total_cmp(&b.0));
    groups
        .into_iter()
        .map(|(x, s, n)| (x, s / n as f64))
        .collect()
}

/// The optimal teacher of one student size.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimalPoint {
    /// The student's non-embedding parameters.
    pub student_n: f64,
    /// The student's budget and config, for the legend.
    pub label: String,
    /// T* (teacher non-embedding parameters).
    pub t_star: f64,
    /// Its interval, when fitted.
    pub ci: Option<(f64, f64)>,
    /// Whether T* comes from a fit (else it is the best teacher on the grid).
    pub fitted: bool,
    /// Whether the grid's best teacher is its smallest or largest one (so the optimum may lie
    /// beyond the grid).
    pub at_edge: bool,
    /// Which edge: `smallest` or `largest` (when `at_edge` and known).
    pub edge: Option<String>,
}

/// The form of a T*(S) fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TrendForm {
    /// T* = a·S + b.
    Linear {
        /// Slope.
        a: f64,
        /// Intercept.
        b: f64,
    },
    /// T* = c·S^k.
    Power {
        /// Coefficient.
        c: f64,
        /// Exponent.
        k: f64,
    },
}

/// A fit of T*(S).
#[derive(Debug, Clone, PartialEq)]
pub struct TrendView {
    /// The fitted form.
    pub form: TrendForm,
    /// Intervals of its parameters (`a`, `b` or `c`, `k`).
    pub ci: BTreeMap<String, (f64, f64)>,
    /// Coefficient of determination, if computed.
    pub r2: Option<f64>,
    /// The confidence band as (S, low T*, high T*), if computed.
    pub band: Vec<(f64, f64, f64)>,
}

impl TrendView {
    /// T* at student size `s`.
    pub fn predict(&self, s: f64) -> f64 {
        match self.form {
            TrendForm::Linear { a, b } => a * s + b,
            TrendForm::Power { c, k } => c * s.powf(k),
        }
    }

    /// A one-line formula, e.g. `T* = 2.48·S + 1.2e4`.
    pub fn formula(&self) -> String {
        match self.form {
            TrendForm::Linear { a, b } => format!("T* = {}·S {} {}", sig(a), sign(b), sig(b.abs())),
            TrendForm::Power { c, k } => format!("T* = {}·S^{}", sig(c), sig(k)),
        }
    }
}

fn sign(v: f64) -> &'static str {
    if v < 0.0 { "−" } else { "+" }
}

/// `v` to three significant digits, in scientific notation when very large or small.
pub(crate) fn sig(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{v:.2e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The optimal teacher across student sizes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OptimalTeacherView {
    /// One per capacity-gap series: fitted T* when available, else the grid's best teacher.
    pub points: Vec<OptimalPoint>,
    /// T* = a·S + b, if fitted.
    pub linear: Option<TrendView>,
    /// T* = c·S^k, if fitted.
    pub power: Option<TrendView>,
    /// Which form fits better (`linear` or `power`), if both are fitted.
    pub better: Option<String>,
    /// The (S, T*) points the T*(S) fits were fitted to.
    pub fitted_points: Vec<(f64, f64)>,
    /// `fit`'s warnings about T*(S).
    pub warnings: Vec<String>,
}

/// `recommend`'s answer for one student.
#[derive(Debug, Clone, PartialEq)]
pub struct RecommendationView {
    /// The student's non-embedding parameters.
    pub student_n: f64,
    /// The student's tokens, if given.
    pub tokens: Option<f64>,
    /// The recommended teacher size with its interval.
    pub teacher_n: Estimate,
    /// Predicted student loss with that teacher (nats/token).
    pub predicted_loss: Option<f64>,
    /// Predicted gain over the no-teacher baseline (nats/token).
    pub predicted_gain: Option<f64>,
    /// FLOPs to pre-train that teacher, if it does not exist yet.
    pub teacher_cost_flops: Option<f64>,
    /// Whether the student lies outside the sweep's sizes.
    pub extrapolation: bool,
    /// Free text from the fit (which law, caveats).
    pub note: String,
}

/// Finished trained runs that ended near the unigram entropy of their corpus: covering less
/// than [`PLATEAU_SHARE`](crate::plan::PLATEAU_SHARE) of the way from it to the floor (the
/// supervised law's `E` when fitted and below the unigram entropy, else the lowest loss of the
/// runs on the same tokens). Their losses say when a run left the plateau, not what it can
/// learn; `plan` warns of them beforehand from a prior law, this names the runs that did end
/// there.
///
/// Losses in nats per token are comparable only within one tokenizer, so each run is held to
/// its own corpus's unigram entropy and floor: a sweep whose teachers read another tokenizer
/// (cross-tokenizer distillation) has one line per tokenizer.
pub fn near_unigram(data: &ReportData) -> Vec<(&RunView, f64)> {
    let trained = |r: &&RunView| r.done() && r.kind != RunKind::Logits && r.tokens > 0.0;
    // the corpus the runs record first is the one the supervised law was fitted on
    let first = data
        .corpus
        .iter()
        .map(|c| c.unigram_entropy_nats)
        .find(|u| *u > 0.0);
    let unigram_of = |r: &RunView| r.corpus_unigram_nats.filter(|u| *u > 0.0).or(first);
    let fitted_e = data.fits.supervised.law.as_ref();
    let fitted_e = fitted_e.and_then(|l| l.params.get("E").copied());
    // runs of one tokenizer record nearly the same entropy (a synthetic corpus is drawn per
    // run); tokenizers differ by far more than 2 %
    let same_tokenizer = |a: f64, b: f64| (a / b - 1.0).abs() < 0.02;
    let mut unigrams: Vec<f64> = data
        .runs
        .iter()
        .filter(trained)
        .filter_map(unigram_of)
        .collect();
    unigrams.sort_by(f64::total_cmp);
    unigrams.dedup_by(|a, b| same_tokenizer(*a, *b));
    let line_of = |unigram: f64| {
        let lowest = data
            .runs
            .iter()
            .filter(trained)
            .filter(|r| unigram_of(r).is_some_and(|u| same_tokenizer(u, unigram)))
            .filter_map(|r| r.val_loss)
            .fold(f64::INFINITY, f64::min);
        let e = fitted_e.filter(|_| Some(unigram) == first);
        let floor = crate::plan::measured_floor(e, unigram, lowest);
        crate::plan::plateau_line(unigram, floor).map(|line| (unigram, line))
    };
    let lines: Vec<(f64, f64)> = unigrams.into_iter().filter_map(line_of).collect();
    data.runs
        .iter()
        .filter(trained)
        .filter_map(|r| {
            let unigram = unigram_of(r)?;
            let &(_, line) = lines.iter().find(|(u, _)| same_tokenizer(*u, unigram))?;
            r.val_loss.filter(|l| *l > line).map(|_| (r, line))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(id: &str, kind: RunKind, val_loss: f64, unigram: f64) -> RunView {
        RunView {
            id: RunId::from_stored(id.to_string()),
            kind,
            name: id.to_string(),
            state: crate::store::RunState::Done,
            error: None,
            label: String::new(),
            seed: 1,
            params_total: 1000,
            n: 1000.0,
            tokens: 1e6,
            flops: 0.0,
            teacher: None,
            distill: String::new(),
            val_loss: Some(val_loss),
            val_bpb: None,
            tokens_per_s: None,
            wall_s: None,
            agreement: None,
            kl_teacher_student: None,
            gain: None,
            corpus_train_tokens: None,
            corpus_unigram_nats: Some(unigram),
            lr_peak: None,
            fidelity_kl: None,
            fidelity_kept_mass: None,
        }
    }

    /// Runs of two tokenizers (bytes at 3.2 nats of unigram entropy, a BPE at 6.0) are each
    /// held to their own corpus: a BPE teacher well below its own unigram entropy is not near
    /// it, though its loss lies above the byte runs' unigram entropy; the byte run that barely
    /// left its plateau is.
    #[test]
    fn each_run_is_held_to_its_own_tokenizers_unigram_entropy() {
        let data = ReportData {
            corpus: vec![
                CorpusFacts {
                    key: "bytes".into(),
                    unigram_entropy_nats: 3.2,
                    ..CorpusFacts::default()
                },
                CorpusFacts {
                    key: "bpe".into(),
                    unigram_entropy_nats: 6.0,
                    ..CorpusFacts::default()
                },
            ],
            runs: vec![
                finished("b-good", RunKind::Baseline, 1.6, 3.2),
                finished("b-plateau", RunKind::Baseline, 3.1, 3.2),
                finished("t-bpe-good", RunKind::Teacher, 3.6, 6.0),
                finished("t-bpe-plateau", RunKind::Teacher, 5.8, 6.0),
            ],
            ..ReportData::default()
        };
        let near: Vec<&str> = near_unigram(&data)
            .iter()
            .map(|(r, _)| r.id.as_str())
            .collect();
        assert_eq!(near, ["b-plateau", "t-bpe-plateau"]);
        // the lines: 3.2 - 0.25·(3.2 - 1.6) = 2.8 for bytes, 6.0 - 0.25·(6.0 - 3.6) = 5.4 for BPE
        let lines: Vec<f64> = near_unigram(&data).iter().map(|(_, l)| *l).collect();
        assert!(
            (lines[0] - 2.8).abs() < 1e-12 && (lines[1] - 5.4).abs() < 1e-12,
            "{lines:?}"
        );
    }

    #[test]
    fn chinchilla_law_predicts_its_formula() {
        let law = LawView {
            law: "chinchilla".into(),
            params: [
                ("E", 1.0),
                ("A", 100.0),
                ("alpha", 0.5),
                ("B", 400.0),
                ("beta", 0.5),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..LawView::default()
        };
        let l = law.predict(10_000.0, 40_000.0).unwrap_or(f64::NAN);
        assert!((l - (1.0 + 1.0 + 2.0)).abs() < 1e-12, "{l}");
        let unknown = LawView {
            law: "other".into(),
            ..law
        };
        assert_eq!(unknown.predict(1.0, 1.0), None);
    }

    #[test]
    fn grid_best_flags_the_edge_of_the_grid() {
        let point = |t: f64, l: f64| GapPoint {
            teacher: format!("{t}"),
            teacher_n: t,
            teacher_loss: None,
            student_loss: l,
            seed: 1,
        };
        let mut view = CapacityGapView {
            points: vec![point(1.0, 3.0), point(2.0, 2.0), point(4.0, 2.5)],
            ..CapacityGapView::default()
        };
        assert_eq!(view.grid_best(), Some((2.0, 2.0, false)));
        view.points.push(point(8.0, 1.0));
        assert_eq!(view.grid_best(), Some((8.0, 1.0, true)));
    }
}
