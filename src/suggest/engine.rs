//! The suggestion engine: from a sweep's capacity-gap fits, the next runs that most shrink
//! the T* intervals per hour of compute, as edits of the sweep file. Candidates are teacher
//! sizes beyond the grid's edge where the best teacher sits at it (no interval exists until the
//! grid brackets the optimum: these come first), teacher sizes between the measured optimum and
//! its neighbours, one more seed (for every student, or for one `[[students.models]]` entry
//! where the file lists them: replicates where the noise is widest), and a longer student budget where students have not left
//! the unigram plateau or train too few steps ([`Unconverged`]: taken first, like an edge of the
//! grid, since a curve measured there says when runs leave the plateau, not where the capacity
//! gap lies). Each candidate is priced by planning the edited sweep
//! (the new runs' ids are those the current plan lacks; seconds from the calibrated cost model)
//! and valued by simulation ([`expected`]): for a student whose measured curve has an optimum,
//! the median T* interval of sweeps drawn from the fitted curve with the measured noise, before
//! and after; for one without (best teacher at the grid's edge, or an optimum the data do not
//! support), no width means anything, and runs are valued by how much more often the
//! simulated sweeps support an optimum (bracketing). The best value per hour is taken
//! greedily until the budget is spent.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::edit::{self, Edit, apply};
use super::error::SuggestError;
use super::expected::{CurveModel, expected_width};
use crate::fit::{CapacityGap, Optimum, SweepFits, config_key};
use crate::model::ModelShape;
use crate::plan::{Calibration, Plan, PlanOptions, Run, RunId, RunKind};
use crate::spec::Sweep;

/// The most edits one suggestion chains (each is re-planned and re-simulated).
const MAX_STEPS: usize = 12;

/// How much `suggest` may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// At most this many new runs.
    Runs(usize),
    /// At most this many estimated seconds of new runs (one at a time).
    Seconds(f64),
}

/// What `suggest` is asked for: a budget, and optionally the interval width (97.5th / 2.5th
/// percentile) that is good enough.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// How much may be spent.
    pub budget: Budget,
    /// With a target, narrowing a group's expected width counts only down to it: a group
    /// already under it is worth nothing more, so the budget goes to the groups above it.
    pub target_width: Option<f64>,
}

impl From<Budget> for Goal {
    fn from(budget: Budget) -> Goal {
        Goal {
            budget,
            target_width: None,
        }
    }
}

impl Goal {
    /// The value of narrowing an expected width from `before` to `after`: ln(before / after),
    /// each width first raised to the target (if any), never negative.
    pub fn value(&self, before: f64, after: f64) -> f64 {
        let floor = self.target_width.unwrap_or(0.0);
        (before.max(floor) / after.max(floor)).ln().max(0.0)
    }
}

/// One capacity-gap group's T* interval: measured, and expected before and after the chosen
/// edits.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupOutlook {
    /// Student non-embedding parameters.
    pub student_params: f64,
    /// Student tokens.
    pub student_tokens: f64,
    /// The distillation config.
    pub config: String,
    /// What `fit` says now (the optimum and its interval, or why there is none).
    pub now: String,
    /// The measured interval's width (97.5th / 2.5th percentile), when there is one.
    pub measured_width: Option<f64>,
    /// Expected width (median of simulated sweeps) with the current design; only for a group
    /// whose measured curve has an optimum with an interval (a width of a group without one
    /// would be the simulation's penalty for unsupported sweeps, not an interval).
    pub expected_before: Option<f64>,
    /// Expected width after the chosen edits (same condition).
    pub expected_after: Option<f64>,
    /// For a group without a measured optimum: the fraction of simulated sweeps of the current
    /// design whose optimum the data support (the grid brackets it), and after the edits.
    pub supported: Option<[f64; 2]>,
}

/// Value of bracketing an optimum: a group whose simulated sweeps go from never to always
/// supporting an optimum is worth as much as narrowing an interval fourfold.
const BRACKET_VALUE: f64 = 2.0 * std::f64::consts::LN_2;

/// A student size and budget whose runs are not converged enough for a capacity gap to mean
/// anything (found by the caller: too few optimiser steps, or baselines that ended near the
/// unigram entropy), with the budget that would fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Unconverged {
    /// Student non-embedding parameters.
    pub student_params: f64,
    /// Student tokens.
    pub student_tokens: f64,
    /// What is wrong, for the researcher.
    pub why: String,
    /// The student budget (tokens) proposed instead.
    pub tokens_needed: u64,
}

/// A chosen edit with what it costs and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The edit.
    pub edit: Edit,
    /// Why it was proposed.
    pub why: String,
    /// Names of the runs it adds.
    pub new_runs: Vec<String>,
    /// Their estimated seconds, one at a time.
    pub seconds: f64,
    /// Sum over groups with an optimum of ln(expected width before / after) (widths raised to
    /// the target, if any; see [`Goal::value`]).
    pub narrowing: f64,
    /// Sum over groups without one of the rise in the fraction of simulated sweeps that
    /// support an optimum.
    pub bracketing: f64,
    /// What it buys in all: `narrowing` + `BRACKET_VALUE`·`bracketing`.
    pub value: f64,
}

/// What `suggest` proposes.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    /// The edits, in the order chosen.
    pub steps: Vec<Step>,
    /// The sweep file with every step applied (same `name`: `run` executes only the new runs
    /// into the same database).
    pub sweep_text: String,
    /// Every capacity-gap group.
    pub groups: Vec<GroupOutlook>,
    /// Candidates not taken, and why (budget, a plan error).
    pub passed_over: Vec<(String, String)>,
}

/// A candidate edit and the groups it is meant for.
#[derive(Debug, Clone)]
struct Candidate {
    edit: Edit,
    why: String,
    /// Whether it extends a grid whose best teacher is at the edge (taken first).
    brackets: bool,
}

/// A group being planned: its curve model and its design (teacher size, seed of every student).
struct Group<'a> {
    gap: &'a CapacityGap,
    model: Option<CurveModel>,
    design: Vec<(f64, u64)>,
    /// Whether its measured curve has an optimum with an interval: then runs are valued by the
    /// expected width, else by how often they let the simulated sweeps support one.
    has_optimum: bool,
}

/// A group's simulated outlook under a design: expected width and supported fraction.
#[derive(Debug, Clone, Copy)]
struct Outlook {
    width: f64,
    supported: f64,
}

impl Group<'_> {
    /// What `after` buys over `before` for this group: (narrowing, bracketing).
    fn gain(&self, goal: &Goal, before: Option<Outlook>, after: Option<Outlook>) -> (f64, f64) {
        let (Some(b), Some(a)) = (before, after) else {
            return (0.0, 0.0);
        };
        if self.has_optimum {
            (goal.value(b.width, a.width), 0.0)
        } else {
            (0.0, (a.supported - b.supported).max(0.0))
        }
    }
}

/// The runs an edit adds and their price.
struct Priced {
    edit: Edit,
    text: String,
    new_runs: Vec<Run>,
    seconds: f64,
    /// (group index, teacher params, seed) of each new student.
    students: Vec<(usize, f64, u64)>,
}

/// Proposes the next runs of the sweep in `path` (text `source`) whose current plan is
/// `current`, from `fits`, within `budget`.
pub fn suggest(
    path: &Path,
    source: &str,
    current: &Plan,
    fits: &SweepFits,
    calibration: &Calibration,
    goal: Goal,
    unconverged: &[Unconverged],
) -> Result<Suggestion, SuggestError> {
    if fits.capacity_gaps.is_empty() {
        return Err(SuggestError::Nothing(
            "no capacity-gap curve yet (no finished students): run the sweep, then suggest".into(),
        ));
    }
    let mut groups = groups_of(fits);
    let before: Vec<Option<Outlook>> = groups.iter().map(|g| outlook(g, None)).collect();
    let mut state = Progress {
        text: source.to_string(),
        known: current.runs.iter().map(|r| r.id.clone()).collect(),
        runs: 0,
        seconds: 0.0,
    };
    let mut candidates = candidates(&groups, current);
    candidates.extend(seed_candidates(&state.text, &groups));
    candidates.extend(longer_budget(unconverged));
    let (mut steps, mut passed_over) = (Vec::new(), Vec::new());
    loop {
        let round = choose(candidates, path, calibration, &goal, &state, &groups);
        passed_over.extend(round.passed_over);
        candidates = round.still;
        let Some(Chosen {
            candidate: c,
            priced,
            value,
            ..
        }) = round.best
        else {
            break;
        };
        for (i, t, s) in &priced.students {
            groups[*i].design.push((*t, *s));
        }
        state.runs += priced.new_runs.len();
        state.seconds += priced.seconds;
        state
            .known
            .extend(priced.new_runs.iter().map(|r| r.id.clone()));
        steps.push(Step {
            edit: priced.edit,
            why: c.why,
            new_runs: priced.new_runs.iter().map(|r| r.name.clone()).collect(),
            seconds: priced.seconds,
            narrowing: value.narrowing,
            bracketing: value.bracketing,
            value: value.value,
        });
        state.text = priced.text;
        if steps.len() >= MAX_STEPS {
            break;
        }
        candidates = next_candidates(candidates, &groups, &steps, current, &state.text);
    }
    Ok(Suggestion {
        passed_over: last_reasons(passed_over, &steps),
        groups: group_outlooks(&groups, &before),
        steps,
        sweep_text: state.text,
    })
}

/// Each capacity-gap group of the fits as the planner starts it: its curve model and its
/// measured design.
fn groups_of(fits: &SweepFits) -> Vec<Group<'_>> {
    fits.capacity_gaps
        .iter()
        .map(|g| Group {
            gap: g,
            model: CurveModel::of(&g.points, g.by_teacher_params.fit),
            design: g
                .points
                .iter()
                .map(|p| (p.teacher_params, p.seed.unwrap_or(0)))
                .collect(),
            has_optimum: matches!(
                g.by_teacher_params.optimum,
                Optimum::Interior { ci: Some(_), .. }
            ),
        })
        .collect()
}

/// Where the suggestion stands between steps: the sweep's text, the runs it plans, and what
/// the steps so far spend.
struct Progress {
    /// The sweep file with the steps so far applied.
    text: String,
    /// The runs already planned.
    known: BTreeSet<RunId>,
    /// New runs the steps add.
    runs: usize,
    /// Their estimated seconds.
    seconds: f64,
}

/// What an edit buys.
#[derive(Debug, Clone, Copy)]
struct EditValue {
    /// Expected narrowing of the groups' intervals.
    narrowing: f64,
    /// Expected gain in the fraction of simulated sweeps that bracket an optimum.
    bracketing: f64,
    /// `narrowing` + [`BRACKET_VALUE`]·`bracketing`.
    value: f64,
}

/// The best candidate of a round, priced and valued.
struct Chosen {
    /// Its rank: bracketing and longer-budget edits first, then value per hour.
    score: f64,
    /// The candidate.
    candidate: Candidate,
    /// Its runs and their price.
    priced: Priced,
    /// What it buys.
    value: EditValue,
}

/// One round of choosing: the best candidate, those kept for the next round, and those passed
/// over with the reason.
struct Round {
    /// The candidate to take, if any is worth it.
    best: Option<Chosen>,
    /// Candidates worth keeping for the next round.
    still: Vec<Candidate>,
    /// Candidates dropped, and why.
    passed_over: Vec<(String, String)>,
}

/// Prices and values every candidate against the sweep as it stands and picks the best one
/// within the budget.
fn choose(
    candidates: Vec<Candidate>,
    path: &Path,
    calibration: &Calibration,
    goal: &Goal,
    state: &Progress,
    groups: &[Group],
) -> Round {
    let mut best: Option<Chosen> = None;
    let mut still = Vec::new();
    let mut passed_over = Vec::new();
    for c in candidates {
        let priced = match price(path, &state.text, c.edit, &state.known, groups, calibration) {
            Ok(p) if p.new_runs.is_empty() => {
                passed_over.push((c.edit.to_string(), "adds no run".into()));
                continue;
            }
            Ok(p) => p,
            Err(e) => {
                passed_over.push((c.edit.to_string(), e));
                continue;
            }
        };
        if let Some(why) = over_budget(goal.budget, state, &priced) {
            passed_over.push((c.edit.to_string(), why));
            continue;
        }
        let value = edit_value(groups, goal, &priced);
        let score = score(&c, value.value, &priced);
        if c.brackets || value.value > 0.01 {
            if best.as_ref().is_none_or(|b| score > b.score) {
                if let Some(old) = best.take() {
                    still.push(old.candidate);
                }
                best = Some(Chosen {
                    score,
                    candidate: c,
                    priced,
                    value,
                });
            } else {
                still.push(c);
            }
        } else {
            let why = match goal.target_width {
                Some(w) => format!("does not narrow any expected interval wider than {w}×"),
                None => "does not narrow any expected interval".into(),
            };
            passed_over.push((c.edit.to_string(), why));
        }
    }
    Round {
        best,
        still,
        passed_over,
    }
}

/// Why `priced` does not fit in what is left of `budget`, or `None` when it does.
fn over_budget(budget: Budget, state: &Progress, priced: &Priced) -> Option<String> {
    let fits_budget = match budget {
        Budget::Runs(n) => state.runs + priced.new_runs.len() <= n,
        Budget::Seconds(s) => state.seconds + priced.seconds <= s,
    };
    (!fits_budget).then(|| {
        format!(
            "over the budget ({} runs, {})",
            priced.new_runs.len(),
            crate::spec::units::format_duration(priced.seconds)
        )
    })
}

/// What the students `priced` adds buy across the groups they join.
fn edit_value(groups: &[Group], goal: &Goal, priced: &Priced) -> EditValue {
    let (mut narrowing, mut bracketing) = (0.0, 0.0);
    for (i, g) in groups.iter().enumerate() {
        let extra: Vec<(f64, u64)> = priced
            .students
            .iter()
            .filter(|s| s.0 == i)
            .map(|s| (s.1, s.2))
            .collect();
        if extra.is_empty() {
            continue; // the edit adds nothing to this group: it cannot change
        }
        let (n, b) = g.gain(goal, outlook(g, None), outlook(g, Some(&extra)));
        narrowing += n;
        bracketing += b;
    }
    EditValue {
        narrowing,
        bracketing,
        value: narrowing + BRACKET_VALUE * bracketing,
    }
}

/// A candidate's rank: bracketing edits first (there is no interval to shrink until the grid
/// holds the optimum), then value per hour; a longer budget before either (a curve of
/// unconverged runs is not worth extending).
fn score(c: &Candidate, value: f64, priced: &Priced) -> f64 {
    let first = match c.edit {
        Edit::AddStudentBudget { .. } => 2e12,
        _ if c.brackets => 1e12,
        _ => 0.0,
    };
    first + value / (priced.seconds.max(1.0) / 3600.0)
}

/// The candidates after a step: a new grid point can open new candidates (teachers between it
/// and its neighbours), and each seed edit moves on to the next seed, as the file now stands.
fn next_candidates(
    mut candidates: Vec<Candidate>,
    groups: &[Group],
    steps: &[Step],
    current: &Plan,
    text: &str,
) -> Vec<Candidate> {
    candidates.retain(|c| !matches!(c.edit, Edit::AddSeed { .. } | Edit::AddStudentSeed { .. }));
    for c in candidates_after(groups, steps, current) {
        if !candidates.iter().any(|k| k.edit == c.edit) {
            candidates.push(c);
        }
    }
    candidates.extend(seed_candidates(text, groups));
    candidates
}

/// The candidates passed over, each once for its last reason, less those a step took.
fn last_reasons(mut passed_over: Vec<(String, String)>, steps: &[Step]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    passed_over.reverse();
    passed_over.retain(|(edit, _)| seen.insert(edit.clone()));
    passed_over.reverse();
    passed_over.retain(|(edit, _)| !steps.iter().any(|s| s.edit.to_string() == *edit));
    passed_over
}

/// Each group's interval now, and its expected width (or bracketing) before and after the
/// steps.
fn group_outlooks(groups: &[Group], before: &[Option<Outlook>]) -> Vec<GroupOutlook> {
    groups
        .iter()
        .zip(before)
        .map(|(g, b)| {
            let after = outlook(g, None);
            let widths = g
                .has_optimum
                .then_some((b.map(|o| o.width), after.map(|o| o.width)));
            GroupOutlook {
                student_params: g.gap.student_params,
                student_tokens: g.gap.student_tokens,
                config: g.gap.config.clone(),
                now: describe(&g.gap.by_teacher_params.optimum),
                measured_width: match g.gap.by_teacher_params.optimum {
                    Optimum::Interior {
                        ci: Some([a, b]), ..
                    } => Some(b / a),
                    _ => None,
                },
                expected_before: widths.and_then(|w| w.0),
                expected_after: widths.and_then(|w| w.1),
                supported: (!g.has_optimum)
                    .then(|| b.zip(after).map(|(b, a)| [b.supported, a.supported]))
                    .flatten(),
            }
        })
        .collect()
}

/// The simulated outlook of a group's design plus `extra` students (`None` without a U-shaped
/// curve to simulate from).
fn outlook(g: &Group, extra: Option<&[(f64, u64)]>) -> Option<Outlook> {
    let model = g.model.as_ref()?;
    let mut design = g.design.clone();
    design.extend_from_slice(extra.unwrap_or(&[]));
    let (width, supported) = expected_width(model, &design, 7);
    Some(Outlook { width, supported })
}

/// What a curve's optimum says, in one line.
pub(crate) fn describe(o: &Optimum) -> String {
    match o {
        Optimum::Interior { at, ci, .. } => match ci {
            Some([a, b]) => format!("T* {} [{}, {}]", fmt(*at), fmt(*a), fmt(*b)),
            None => format!("T* {} (no interval)", fmt(*at)),
        },
        Optimum::Boundary { at, edge } => {
            format!("edge of grid: best teacher {} is the {edge}", fmt(*at))
        }
        Optimum::Unsupported { at, reason } => {
            format!("no supported optimum near {}: {reason}", fmt(*at))
        }
        Optimum::TooFewPoints => "fewer than 3 teacher sizes".into(),
    }
}

fn fmt(v: f64) -> String {
    crate::spec::units::format_count(v)
}

/// Distinct teacher sizes of a group, ascending.
fn teacher_levels(g: &Group) -> Vec<f64> {
    let mut t: Vec<f64> = g.design.iter().map(|d| d.0).collect();
    t.sort_by(f64::total_cmp);
    t.dedup_by(|a, b| (*a / *b - 1.0).abs() < 1e-9);
    t
}

/// The candidate edits for the groups as they stand.
fn candidates(groups: &[Group], current: &Plan) -> Vec<Candidate> {
    let existing: Vec<f64> = current
        .runs
        .iter()
        .filter(|r| r.kind() == RunKind::Teacher)
        .map(|r| r.params.non_embedding as f64)
        .chain(groups.iter().flat_map(|g| g.design.iter().map(|d| d.0)))
        .collect();
    let mut out: Vec<Candidate> = Vec::new();
    let mut add_teacher = |t: f64, why: String, brackets: bool| {
        let far = existing.iter().all(|e| (t / e).ln().abs() > 0.2);
        let dup = out.iter().any(|c| match c.edit {
            Edit::AddTeacher { target } => (t / target as f64).ln().abs() <= 0.2,
            _ => false,
        });
        if far && !dup && t >= 1.0 {
            out.push(Candidate {
                edit: Edit::AddTeacher { target: round3(t) },
                why,
                brackets,
            });
        }
    };
    for g in groups {
        let levels = teacher_levels(g);
        let (Some(&lo), Some(&hi)) = (levels.first(), levels.last()) else {
            continue;
        };
        let who = format!(
            "student {} on {} tokens",
            fmt(g.gap.student_params),
            fmt(g.gap.student_tokens)
        );
        match &g.gap.by_teacher_params.optimum {
            Optimum::Boundary { edge, .. } if edge == "largest" => {
                for k in [2.0, 4.0] {
                    add_teacher(
                        hi * k,
                        format!("{who}: the best teacher is the largest; extend the grid"),
                        true,
                    );
                }
            }
            Optimum::Boundary { .. } => {
                for k in [2.0, 4.0] {
                    add_teacher(
                        lo / k,
                        format!("{who}: the best teacher is the smallest; extend the grid"),
                        true,
                    );
                }
            }
            Optimum::TooFewPoints => {
                add_teacher(
                    hi * 2.0,
                    format!("{who}: a curve needs 3 teacher sizes"),
                    true,
                );
                add_teacher(
                    lo / 2.0,
                    format!("{who}: a curve needs 3 teacher sizes"),
                    true,
                );
            }
            Optimum::Interior { at, .. } | Optimum::Unsupported { at, .. } => {
                let centre = g.model.map_or(*at, |m| m.optimum());
                let below = levels.iter().rev().find(|&&t| t < centre * 0.95);
                let above = levels.iter().find(|&&t| t > centre * 1.05);
                let nearest = levels.iter().min_by(|a, b| {
                    (*a / centre)
                        .ln()
                        .abs()
                        .total_cmp(&(*b / centre).ln().abs())
                });
                for (&a, &b) in [(below, nearest), (nearest, above)]
                    .into_iter()
                    .filter_map(|(a, b)| Some((a?, b?)))
                {
                    if a != b {
                        add_teacher(
                            (a * b).sqrt(),
                            format!(
                                "{who}: a teacher between {} and {}, beside the fitted T* {}",
                                fmt(a),
                                fmt(b),
                                fmt(centre)
                            ),
                            false,
                        );
                    }
                }
            }
        }
    }
    out
}

/// More seeds for every student and baseline, and, where the file lists students one by one, more
/// seeds for each entry alone (cheaper, and where the noise is widest it buys the most): the seeds
/// as the sweep file `text` stands.
///
/// Each comes as one seed and as a block that adds about half as many seeds again as the group has:
/// one seed among a dozen narrows an interval by ~4 %, under what the simulation of the expected
/// width can resolve, so a greedy search offered single seeds only would pass over replicates even
/// when several of them pay.
fn seed_candidates(text: &str, groups: &[Group]) -> Vec<Candidate> {
    let next_seed = groups
        .iter()
        .flat_map(|g| g.design.iter().map(|d| d.1))
        .max()
        .map_or(2, |s| s + 1);
    let fewest = groups
        .iter()
        .map(|g| distinct_seeds(g.design.iter().map(|d| d.1)))
        .min()
        .unwrap_or(1);
    let why = "the interval's noise shrinks with the square root of the seeds";
    let mut out: Vec<Candidate> = seed_counts(fewest)
        .map(|count| Candidate {
            edit: Edit::AddSeed {
                seed: next_seed,
                count,
            },
            why: format!("more replicates of every student and baseline: {why}"),
            brackets: false,
        })
        .collect();
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return out;
    };
    let seeds = edit::student_entry_seeds(&doc);
    if seeds.len() < 2 {
        return out;
    }
    for (entry, (own, label)) in seeds
        .iter()
        .zip(edit::student_entry_labels(&doc))
        .enumerate()
    {
        let seed = own.iter().max().map_or(next_seed, |s| s + 1);
        for count in seed_counts(distinct_seeds(own.iter().copied())) {
            out.push(Candidate {
                edit: Edit::AddStudentSeed { entry, seed, count },
                why: format!("more replicates of the {label} students and baselines only: {why}"),
                brackets: false,
            });
        }
    }
    out
}

/// How many distinct seeds `seeds` holds.
fn distinct_seeds(seeds: impl Iterator<Item = u64>) -> u64 {
    seeds.collect::<BTreeSet<u64>>().len() as u64
}

/// The seed blocks offered to a group of `n` seeds: one seed, and about half as many again.
fn seed_counts(n: u64) -> impl Iterator<Item = u64> {
    let block = n.div_ceil(2).max(2);
    [1, block].into_iter()
}

/// One longer student budget covering every unconverged group, if any.
fn longer_budget(unconverged: &[Unconverged]) -> Option<Candidate> {
    let tokens = unconverged.iter().map(|u| u.tokens_needed).max()?;
    let why = unconverged
        .iter()
        .map(|u| {
            format!(
                "student {} on {} tokens: {}",
                fmt(u.student_params),
                fmt(u.student_tokens),
                u.why
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Some(Candidate {
        edit: Edit::AddStudentBudget {
            tokens: round3(tokens as f64),
        },
        why: format!("not converged ({why}): a longer budget first"),
        brackets: true,
    })
}

/// Candidates once the first round is spent: the next seed, and teachers between the new
/// grid points.
fn candidates_after(groups: &[Group], steps: &[Step], current: &Plan) -> Vec<Candidate> {
    let taken: Vec<Edit> = steps.iter().map(|s| s.edit).collect();
    candidates(groups, current)
        .into_iter()
        .filter(|c| !c.brackets && !taken.contains(&c.edit))
        .collect()
}

/// `v` rounded to three significant digits, as a whole number.
fn round3(v: f64) -> u64 {
    let p = 10f64.powi(v.log10().floor() as i32 - 2);
    ((v / p).round() * p).round() as u64
}

/// [`price_exact`], where a teacher size the shape rule cannot build (no shape within its
/// tolerance, or the shape of a teacher already planned) is retried at sizes up to 25 % away.
fn price(
    path: &Path,
    text: &str,
    edit: Edit,
    known: &BTreeSet<RunId>,
    groups: &[Group],
    calibration: &Calibration,
) -> Result<Priced, String> {
    let Edit::AddTeacher { target } = edit else {
        return price_exact(path, text, edit, known, groups, calibration);
    };
    let mut first_error = None;
    for k in [1.0, 0.9, 1.1, 0.8, 1.25] {
        let edit = Edit::AddTeacher {
            target: round3(target as f64 * k),
        };
        match price_exact(path, text, edit, known, groups, calibration) {
            Ok(p) => return Ok(p),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_default())
}

/// Plans `text` with `edit` applied and returns the runs `known` lacks, their seconds and the
/// students among them per group.
fn price_exact(
    path: &Path,
    text: &str,
    edit: Edit,
    known: &BTreeSet<RunId>,
    groups: &[Group],
    calibration: &Calibration,
) -> Result<Priced, String> {
    let edited = apply(text, edit).map_err(|e| first_line(&crate::error::chain(&e)))?;
    let sweep =
        Sweep::parse(path, edited.clone()).map_err(|e| first_line(&crate::error::chain(&e)))?;
    let plan = Plan::build(
        &sweep,
        &PlanOptions {
            flops_per_s: None,
            calibration: Some(calibration.clone()),
        },
    )
    .map_err(|e| first_line(&crate::error::chain(&e)))?;
    let shapes: HashMap<&RunId, &ModelShape> = plan
        .runs
        .iter()
        .map(|r| (&r.id, &r.config.model.shape))
        .collect();
    let new_runs: Vec<Run> = plan
        .runs
        .iter()
        .filter(|r| !known.contains(&r.id))
        .cloned()
        .collect();
    let seconds = new_runs
        .iter()
        .map(|r| {
            let teacher = r
                .config
                .distill
                .as_ref()
                .and_then(|d| shapes.get(&d.teacher).copied());
            calibration.run_seconds(&r.config, teacher)
        })
        .sum();
    let mut students = Vec::new();
    for r in new_runs.iter().filter(|r| r.kind() == RunKind::Student) {
        let Some(d) = &r.config.distill else { continue };
        let Some(teacher) = plan.run(&d.teacher) else {
            continue;
        };
        let json: serde_json::Value = serde_json::from_str(&r.config_json).unwrap_or_default();
        let key = config_key(&json["distill"]);
        let (n, tokens) = (r.params.non_embedding as f64, r.tokens() as f64);
        if let Some(i) = groups.iter().position(|g| {
            g.gap.student_params == n && g.gap.student_tokens == tokens && g.gap.config == key
        }) {
            students.push((i, teacher.params.non_embedding as f64, r.config.data.seed));
        }
    }
    Ok(Priced {
        edit,
        text: edited,
        new_runs,
        seconds,
        students,
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_width_values_narrowing_only_down_to_it() {
        let free: Goal = Budget::Runs(10).into();
        assert!((free.value(4.0, 2.0) - 2f64.ln()).abs() < 1e-12);
        assert_eq!(free.value(2.0, 3.0), 0.0, "never negative");
        let goal = Goal {
            budget: Budget::Runs(10),
            target_width: Some(2.0),
        };
        // 4× → 1.5× is worth 4× → 2×; a group already under the target is worth nothing
        assert!((goal.value(4.0, 1.5) - 2f64.ln()).abs() < 1e-12);
        assert_eq!(goal.value(1.9, 1.2), 0.0);
        assert!((goal.value(3.0, 2.5) - (3.0f64 / 2.5).ln()).abs() < 1e-12);
    }
}
