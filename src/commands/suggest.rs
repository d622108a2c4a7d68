//! `pdsweep suggest`: fit the sweep's finished runs, ask the suggestion engine
//! ([`pdsweep::suggest`]) for the next runs that most shrink the T* intervals per hour, print
//! them, and with `--write` save the follow-up sweep file that `run` executes into the same
//! database.

use anyhow::Context;

use std::fmt::Write as _;
use std::path::PathBuf;

use pdsweep::fit::{
    FinishedRun, FitOptions, LawKind, SweepFitOptions, SweepFits, finished_runs, fit_sweep,
};
use pdsweep::plan::{MIN_STEPS, Plan, PlanOptions, RunKind, measured_floor, plateau_line};
use pdsweep::spec::Sweep;
use pdsweep::spec::units::{format_count, format_duration};
use pdsweep::store::{RunState, StoredRun, SweepDb, SweepLayout};
use pdsweep::suggest::{
    Budget, Goal, GroupOutlook, Step, Suggestion, Unconverged, suggest as propose,
};

use super::UsageError;

/// Options of `pdsweep suggest`.
#[derive(Debug, Clone)]
pub struct SuggestCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Results folder.
    pub results: PathBuf,
    /// What may be spent, and the interval width that is good enough.
    pub goal: Goal,
    /// Where to write the follow-up sweep file.
    pub write: Option<PathBuf>,
    /// Bootstrap resamples of the fits.
    pub bootstrap: usize,
    /// Pre-register a confirmation round of these new seeds instead of searching.
    pub confirm: Option<Vec<u64>>,
    /// Pre-register the optimal teacher of a student of this many parameters.
    pub student: Option<f64>,
    /// Where to write the prediction.
    pub predict: Option<PathBuf>,
}

/// Runs `pdsweep suggest`.
pub fn suggest(cmd: SuggestCommand) -> anyhow::Result<()> {
    match cmd.goal.budget {
        Budget::Seconds(s) if !(s.is_finite() && s > 0.0) => {
            return Err(UsageError("`--hours` must be a positive number".into()).into());
        }
        Budget::Runs(0) => {
            return Err(UsageError("`--runs` must be at least 1".into()).into());
        }
        _ => {}
    }
    if let Some(w) = cmd.goal.target_width
        && !(w.is_finite() && w > 1.0)
    {
        return Err(UsageError(format!(
            "`--target-width` must be a ratio above 1 (got {w})"
        ))
        .into());
    }
    let sweep = Sweep::load(&cmd.sweep)?;
    let db_path =
        SweepLayout::for_file(&cmd.sweep, &cmd.results, sweep.file.name.as_str()).database();
    if !db_path.exists() {
        return Err(UsageError(format!(
            "no results for sweep `{}` (no {}): run it first\n\nhint: `pdsweep run {}`",
            sweep.file.name.as_str(),
            db_path.display(),
            cmd.sweep.display()
        ))
        .into());
    }
    if let Some(out) = &cmd.write {
        check_output(&cmd.sweep, out)?;
    }
    if let Some(out) = cmd.predict.as_ref().filter(|p| p.exists()) {
        return Err(UsageError(format!(
            "`--predict {}`: the file exists; a prediction is written once, before its round (nothing was overwritten)",
            out.display()
        ))
        .into());
    }
    let db = SweepDb::open(&db_path)?;
    let calibration = super::estimate::calibration(Some(&db), sweep.file.backend, false);
    let current = Plan::build(
        &sweep,
        &PlanOptions {
            flops_per_s: None,
            calibration: Some(calibration.clone()),
        },
    )?;
    let runs = finished_runs(&db)?;
    let fits = fit_sweep(
        &runs,
        &SweepFitOptions {
            fit: FitOptions {
                bootstrap: cmd.bootstrap,
                ..FitOptions::default()
            },
            supervised_law: LawKind::Chinchilla,
        },
    );
    if let Some(seeds) = &cmd.confirm {
        return confirm(&cmd, &sweep, seeds, &fits, &runs, &db_path);
    }
    if let Some(params) = cmd.student {
        return predict_student(&cmd, &sweep, params, &fits, &runs, &db_path);
    }
    let students: Vec<StoredRun> = match db.current_plan()? {
        Some(plan) => db.plan_runs(plan)?,
        None => db.runs()?,
    }
    .into_iter()
    .filter(|r| r.kind == RunKind::Student && r.state == RunState::Done)
    .collect();
    let unconverged = unconverged(&students, &fits, &runs, db.unigram_entropy()?);
    let s = propose(
        &cmd.sweep,
        &sweep.source,
        &current,
        &fits,
        &calibration,
        cmd.goal,
        &unconverged,
    )?;
    print!("{}", render(&s, runs.len(), cmd.goal));
    if let Some(out) = &cmd.write {
        if s.steps.is_empty() {
            println!("\nnothing to write: no run fits the budget and narrows an interval");
            return Ok(());
        }
        let header = format!(
            "# Follow-up of {} written by `pdsweep suggest`: {}.\n# Same name, same database: `pdsweep run` trains only the new runs.\n",
            cmd.sweep.display(),
            s.steps
                .iter()
                .map(|st| st.edit.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        std::fs::write(out, header + &s.sweep_text)
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!(
            "\nwrote {}\nnext: pdsweep run {}   then: pdsweep fit {}; pdsweep suggest {}",
            out.display(),
            out.display(),
            out.display(),
            out.display()
        );
    }
    Ok(())
}

/// `suggest --confirm SEEDS`: the prediction of a confirmation round of new seeds, printed,
/// written with `--predict`, and the round's sweep file written with `--write`.
fn confirm(
    cmd: &SuggestCommand,
    sweep: &Sweep,
    seeds: &[u64],
    fits: &SweepFits,
    runs: &[FinishedRun],
    db_path: &std::path::Path,
) -> anyhow::Result<()> {
    use pdsweep::suggest::{Edit, apply, predict};
    let used: std::collections::BTreeSet<u64> = runs
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                pdsweep::fit::Role::Student | pdsweep::fit::Role::Baseline
            )
        })
        .map(|r| r.seed)
        .collect();
    if let Some(s) = seeds.iter().find(|s| used.contains(s)) {
        return Err(UsageError(format!(
            "`--confirm`: seed {s} already has finished students or baselines; a confirmation round uses seeds never run before\n\nhint: start after the largest seed used ({})",
            used.iter().max().copied().unwrap_or(0)
        ))
        .into());
    }
    if fits.capacity_gaps.is_empty() {
        return Err(UsageError(
            "no capacity-gap curve yet (no finished students): run the sweep, then predict".into(),
        )
        .into());
    }
    let made_from = provenance(cmd, sweep, runs, db_path);
    let prediction = predict(&fits.capacity_gaps, seeds, made_from);
    print!("{}", render_prediction(&prediction));
    if let Some(out) = &cmd.predict {
        std::fs::write(out, serde_json::to_string_pretty(&prediction)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!(
            "\nwrote the prediction to {} (commit it before the round runs)",
            out.display()
        );
    }
    if let Some(out) = &cmd.write {
        let mut text = sweep.source.clone();
        for &seed in seeds {
            text = apply(&text, Edit::AddSeed { seed, count: 1 })?;
        }
        let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
        let header = format!(
            "# Confirmation round of {} written by `pdsweep suggest --confirm`: seeds {} for students and baselines, every teacher as measured.\n# Same name, same database: `pdsweep run` trains only the new runs; then `pdsweep fit {} --check PREDICTION`.\n",
            cmd.sweep.display(),
            list.join(", "),
            out.display()
        );
        std::fs::write(out, header + &text)
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!("wrote the round's sweep file to {}", out.display());
    }
    Ok(())
}

/// What a prediction is made from: the sweep file and the finished runs, by digest.
fn provenance(
    cmd: &SuggestCommand,
    sweep: &Sweep,
    runs: &[FinishedRun],
    db_path: &std::path::Path,
) -> pdsweep::suggest::Provenance {
    use sha2::{Digest, Sha256};
    let mut lines: Vec<String> = runs
        .iter()
        .map(|r| format!("{} {:?}", r.id, r.loss))
        .collect();
    lines.sort();
    pdsweep::suggest::Provenance {
        made_at: pdsweep::report::load::now_utc(),
        pdsweep: env!("CARGO_PKG_VERSION").into(),
        sweep: cmd.sweep.display().to_string(),
        sweep_sha256: hex(&Sha256::digest(sweep.source.as_bytes())),
        database: db_path.display().to_string(),
        finished_runs: runs.len(),
        runs_sha256: hex(&Sha256::digest(lines.join("\n").as_bytes())),
    }
}

/// `suggest --student N`: the optimal teacher of a student not yet run, printed, and written
/// with `--predict` (commit it before the student runs; `fit --check` reads it after).
fn predict_student(
    cmd: &SuggestCommand,
    sweep: &Sweep,
    params: f64,
    fits: &SweepFits,
    runs: &[FinishedRun],
    db_path: &std::path::Path,
) -> anyhow::Result<()> {
    let made_from = provenance(cmd, sweep, runs, db_path);
    let prediction = pdsweep::suggest::predict_student(
        &fits.teacher_budgets,
        &fits.capacity_gaps,
        params,
        made_from,
        sweep.file.seed.0.first().copied().unwrap_or(1),
    )
    .map_err(|e| UsageError(pdsweep::error::chain(&e)))?;
    print!("{}", render_student_prediction(&prediction));
    if let Some(out) = &cmd.predict {
        std::fs::write(out, serde_json::to_string_pretty(&prediction)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))?;
        println!(
            "\nwrote the prediction to {} (commit it before the student runs)",
            out.display()
        );
    }
    Ok(())
}

/// A student prediction as the researcher reads it before the run.
fn render_student_prediction(p: &pdsweep::suggest::StudentPrediction) -> String {
    let mut out = format!(
        "prediction for a student of {} parameters on {} tokens ({} finished runs fitted):\n",
        format_count(p.student_params),
        format_count(p.student_tokens),
        p.made_from.finished_runs
    );
    let line = |what: &str, e: Option<&pdsweep::suggest::Extrapolated>, size: bool| {
        let v = |x: f64| {
            if size {
                format_count(x)
            } else {
                format!("{x:.3}")
            }
        };
        match e {
            Some(e) => format!(
                "  {what}: {} [{}, {}] (from {} measured students)\n",
                v(e.at),
                v(e.interval[0]),
                v(e.interval[1]),
                e.from.len()
            ),
            None => {
                format!("  {what}: no prediction (fewer than two measured optima with intervals)\n")
            }
        }
    };
    out += &line(
        "optimal teacher loss (nats/token)",
        p.by_loss.as_ref(),
        false,
    );
    for b in &p.budgets {
        let tokens = format_count(b.teacher_tokens);
        out += &line(
            &format!("optimal teacher size at {tokens} teacher tokens"),
            b.by_size.as_ref(),
            true,
        );
        match &b.size_of_loss {
            Some(s) => {
                out += &format!(
                    "    the size reaching that loss at {tokens}: {} [{}, {}]\n",
                    format_count(s.at),
                    format_count(s.interval[0]),
                    format_count(s.interval[1])
                )
            }
            None => {
                out += &format!(
                    "    the size reaching that loss at {tokens}: beyond the measured teachers\n"
                )
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The prediction as the researcher reads it before the round.
fn render_prediction(p: &pdsweep::suggest::Prediction) -> String {
    let seeds: Vec<String> = p.seeds.iter().map(u64::to_string).collect();
    let mut out = format!(
        "prediction for a confirmation round of seeds {} ({} finished runs fitted):\n",
        seeds.join(", "),
        p.made_from.finished_runs
    );
    for g in &p.groups {
        let width = g
            .expected_width
            .map_or("no U-shaped curve to simulate".into(), |w| {
                format!("expected width of the round's own interval {w:.2}x")
            });
        let supported = g.expected_supported.map_or(String::new(), |s| {
            format!(", {:.0}% of simulated rounds support an optimum", 100.0 * s)
        });
        out += &format!(
            "  student {} on {} tokens ({}): {}; {} runs; {width}{supported}\n",
            format_count(g.student_params),
            format_count(g.student_tokens),
            g.config,
            g.now,
            g.design.len()
        );
    }
    out
}

/// The follow-up must sit next to the sweep file (its paths are relative to it) and must not
/// replace an existing file.
fn check_output(sweep: &std::path::Path, out: &std::path::Path) -> Result<(), UsageError> {
    let dir = |p: &std::path::Path| {
        let parent = p.parent().unwrap_or(std::path::Path::new(""));
        let parent = if parent.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            parent
        };
        parent.canonicalize().ok()
    };
    if dir(sweep) != dir(out) {
        return Err(UsageError(format!(
            "`--write {}`: write the follow-up next to {} (the sweep's paths are relative to its folder)",
            out.display(),
            sweep.display()
        )));
    }
    if out.exists() {
        return Err(UsageError(format!(
            "`--write {}`: the file exists; choose a new name (nothing was overwritten)",
            out.display()
        )));
    }
    Ok(())
}

/// The student sizes and budgets of the capacity-gap curves whose runs are not converged:
/// students of fewer than [`MIN_STEPS`] optimiser steps (the budget that reaches them is
/// proposed), or baselines that ended near the unigram entropy by `plan`'s and `report`'s rule
/// (less than [`PLATEAU_SHARE`](pdsweep::plan::PLATEAU_SHARE) of the way from it to the floor: the supervised law's `E`, else
/// the lowest loss measured; twice the budget is proposed).
fn unconverged(
    students: &[StoredRun],
    fits: &SweepFits,
    runs: &[FinishedRun],
    unigram: Option<f64>,
) -> Vec<Unconverged> {
    let lowest = runs.iter().map(|r| r.loss).fold(f64::INFINITY, f64::min);
    let fitted_e = fits
        .supervised
        .as_ref()
        .and_then(|f| f.params.get("E").copied());
    let plateau = unigram.and_then(|u| {
        let floor = measured_floor(fitted_e, u, lowest);
        Some((u, floor, plateau_line(u, floor)?))
    });
    let mut out: Vec<Unconverged> = Vec::new();
    for g in &fits.capacity_gaps {
        let (n, d) = (g.student_params, g.student_tokens);
        if out
            .iter()
            .any(|u| u.student_params == n && u.student_tokens == d)
        {
            continue;
        }
        let steps = students
            .iter()
            .filter(|r| r.params_non_embedding as f64 == n && r.tokens as f64 == d)
            .filter_map(|r| {
                let config: serde_json::Value = serde_json::from_str(&r.config_json).ok()?;
                config["train"]["steps"].as_u64()
            })
            .min();
        if let Some(steps) = steps.filter(|s| *s > 0 && *s < MIN_STEPS) {
            out.push(Unconverged {
                student_params: n,
                student_tokens: d,
                why: format!("{steps} optimiser steps, fewer than {MIN_STEPS}"),
                tokens_needed: (d * MIN_STEPS as f64 / steps as f64).ceil() as u64,
            });
        } else if let (Some((u, floor, line)), Some(b)) = (plateau, g.baseline_loss)
            && b > line
        {
            out.push(Unconverged {
                student_params: n,
                student_tokens: d,
                why: format!(
                    "baselines ended at {b:.3}, near the unigram entropy {u:.3} (floor {floor:.3})"
                ),
                tokens_needed: (2.0 * d) as u64,
            });
        }
    }
    out
}

fn width(w: Option<f64>) -> String {
    w.map_or("–".into(), |w| format!("{w:.2}x"))
}

/// A group's expected outlook: its interval's expected width where it has an optimum, else how
/// often simulated sweeps of the design would support one (a width there is meaningless).
fn outlook(g: &GroupOutlook, proposed: bool) -> String {
    if let Some([before, after]) = g.supported {
        let now = format!(
            "no optimum in the grid yet: simulated sweeps of this design support one in {:.0} %",
            100.0 * before
        );
        return if proposed {
            format!("{now}, after the runs below in {:.0} %", 100.0 * after)
        } else {
            now
        };
    }
    if g.expected_before.is_none() {
        return "no U-shaped curve to simulate from: the runs below are chosen to bracket the optimum, not to narrow an interval".into();
    }
    let before = format!(
        "expected width with this design {}",
        width(g.expected_before)
    );
    match (proposed, g.expected_before, g.expected_after) {
        (false, ..) => before,
        (true, Some(b), Some(a)) if a > b * 1.005 => format!(
            "{before}, after the runs below {} (no narrower: they are for other students)",
            width(Some(a))
        ),
        (true, _, a) => format!("{before}, after the runs below {}", width(a)),
    }
}

/// What a step buys, as text.
fn step_value(st: &Step, to_target: bool) -> String {
    let mut parts = Vec::new();
    if st.narrowing > 0.0 {
        parts.push(format!(
            "expected intervals narrower by a factor {:.2}{}",
            st.narrowing.exp(),
            if to_target {
                " (down to the target)"
            } else {
                ""
            }
        ));
    }
    if st.bracketing > 0.0 {
        parts.push(format!(
            "{:.0} % more simulated sweeps support an optimum",
            100.0 * st.bracketing
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(", {}", parts.join("; "))
    }
}

/// The suggestion as text.
fn render(s: &Suggestion, finished: usize, goal: Goal) -> String {
    let mut out = String::new();
    // Why `expect`: a `String`'s `fmt::Write` never fails, and no `Display` impl written here
    // returns an error, so this is a bug, not an input.
    write_suggestion(&mut out, s, finished, goal).expect("formatting into a String cannot fail");
    out
}

/// Writes [`render`]'s text into `out`.
fn write_suggestion(
    out: &mut String,
    s: &Suggestion,
    finished: usize,
    goal: Goal,
) -> std::fmt::Result {
    writeln!(
        out,
        "T* intervals now ({finished} finished runs; widths are 97.5th / 2.5th percentile):"
    )?;
    for g in &s.groups {
        writeln!(
            out,
            "  student {} on {} tokens ({}): {}\n    {}",
            format_count(g.student_params),
            format_count(g.student_tokens),
            g.config,
            g.now,
            outlook(g, !s.steps.is_empty()),
        )?;
    }
    let mut limit = match goal.budget {
        Budget::Runs(n) => format!("{n} runs"),
        Budget::Seconds(s) => format_duration(s),
    };
    if let Some(w) = goal.target_width {
        write!(limit, ", for intervals expected wider than {w}×")?;
    }
    if s.steps.is_empty() {
        writeln!(out, "\nnothing to propose within {limit}")?;
    } else {
        let total: f64 = s.steps.iter().map(|st| st.seconds).sum();
        let runs: usize = s.steps.iter().map(|st| st.new_runs.len()).sum();
        writeln!(
            out,
            "\nproposed ({runs} runs, about {} one at a time; budget {limit}):",
            format_duration(total)
        )?;
        for (i, st) in s.steps.iter().enumerate() {
            writeln!(
                out,
                "  {}. {}: {}\n     {} new runs, about {}{}: {}",
                i + 1,
                st.edit,
                st.why,
                st.new_runs.len(),
                format_duration(st.seconds),
                step_value(st, goal.target_width.is_some()),
                st.new_runs.join(", ")
            )?;
        }
    }
    if !s.passed_over.is_empty() {
        writeln!(out, "\npassed over:")?;
        for (what, why) in &s.passed_over {
            writeln!(out, "  {what}: {why}")?;
        }
    }
    Ok(())
}
