//! `pdsweep fit`: fit the laws to a sweep (stored in its database) or to any CSV file, and
//! print the parameters with their bootstrap intervals as a table or JSON.

use std::path::{Path, PathBuf};

use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;

use pdsweep::fit::{
    Busbridge, CapacityGap, Chinchilla, ColumnMap, FinishedRun, Fit, FitOptions, FitRecord,
    FitSummary, GapCurve, LawKind, Optimiser, Optimum, ReleasedCheck, Role, SCOPE_DISTILL,
    SCOPE_SUPERVISED, SupervisedSource, SweepFitOptions, SweepFits, TunedRate,
    add_failed_candidates, finished_runs, fit, fit_sweep, paired_gains, read_csv, save_fits,
};
use pdsweep::spec::Sweep;
use pdsweep::spec::units::format_count;
use pdsweep::store::{SweepDb, SweepLayout};

use super::UsageError;

/// What to fit.
#[derive(Debug, Clone)]
pub enum FitTarget {
    /// A sweep file (its database under the results folder).
    Sweep(PathBuf),
    /// A sweep database.
    Db(PathBuf),
    /// A CSV file.
    Data(PathBuf),
}

/// Options of `pdsweep fit`.
#[derive(Debug, Clone)]
pub struct FitCommand {
    /// What to fit.
    pub target: FitTarget,
    /// Results folder (for a sweep file).
    pub results: PathBuf,
    /// The law (CSV: the law to fit; sweep: the supervised law).
    pub law: Option<LawKind>,
    /// `ROLE=COLUMN,...`.
    pub columns: Option<String>,
    /// Where L̃_S comes from for a distillation CSV without that column.
    pub supervised: Option<String>,
    /// Huber δ.
    pub delta: f64,
    /// Bootstrap resamples.
    pub bootstrap: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// Start grid overrides.
    pub grid: Option<String>,
    /// Fit only the students and baselines of these seeds, and store nothing.
    pub seeds: Option<Vec<u64>>,
    /// Check a confirmation round against this prediction file (`suggest --predict`): fit
    /// the round's seeds alone, store nothing, and say for each group whether its optimum lies
    /// in the predicted interval.
    pub check: Option<PathBuf>,
    /// Do not measure how distilled the students are (their distillation degrees).
    pub no_similarity: bool,
    /// JSON output.
    pub json: bool,
}

/// Runs `pdsweep fit`.
pub fn fit_command(cmd: FitCommand) -> anyhow::Result<()> {
    let mut opts = FitOptions {
        optimiser: Optimiser {
            delta: cmd.delta,
            ..Optimiser::default()
        },
        bootstrap: cmd.bootstrap,
        seed: cmd.seed,
        ..FitOptions::default()
    };
    match &cmd.target {
        FitTarget::Data(path) => {
            let law = cmd.law.unwrap_or(LawKind::Chinchilla);
            if let Some(spec) = &cmd.grid {
                opts.grid = Some(law.default_grid().with_overrides(spec)?);
            }
            let columns = ColumnMap::parse(cmd.columns.as_deref().unwrap_or(""), law)?;
            let supervised = cmd
                .supervised
                .as_deref()
                .map(parse_supervised)
                .transpose()?;
            let points = read_csv(path, law, &columns, supervised)?;
            let result = fit(law, &path.display().to_string(), &points, &opts)?;
            if cmd.json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                print!("{}", fit_table(&result));
            }
            Ok(())
        }
        FitTarget::Sweep(_) | FitTarget::Db(_) => {
            if cmd.columns.is_some() || cmd.supervised.is_some() {
                return Err(UsageError(
                    "`--columns` and `--supervised` apply to `--data` files only".into(),
                )
                .into());
            }
            let law = cmd.law.unwrap_or(LawKind::Chinchilla);
            if law.is_distill() {
                return Err(UsageError("on a sweep, `--law` picks the supervised law (chinchilla or busbridge); the distillation law is always fitted to the students".into()).into());
            }
            if let Some(spec) = &cmd.grid {
                opts.grid = Some(law.default_grid().with_overrides(spec)?);
            }
            let db_path = locate_db(&cmd.target, &cmd.results)?;
            let mut db = SweepDb::open(&db_path)?;
            let mut runs = finished_runs(&db)?;
            let student_prediction = match &cmd.check {
                Some(path) => pdsweep::suggest::read_student_prediction(path)?,
                None => None,
            };
            let prediction = match (&cmd.check, &student_prediction) {
                (Some(path), None) => Some(pdsweep::suggest::read_prediction(path)?),
                _ => None,
            };
            if let Some(seeds) = cmd.seeds.as_ref().or(prediction.as_ref().map(|p| &p.seeds)) {
                runs = of_seeds(runs, seeds)?;
            }
            let mut fits = fit_sweep(
                &runs,
                &SweepFitOptions {
                    fit: opts,
                    supervised_law: law,
                },
            );
            add_failed_candidates(&db, &mut fits.tuned_rates)?;
            let records = fit_records(&fits, runs.len());

            if let Some(prediction) = &student_prediction {
                let checks = pdsweep::suggest::check_student(prediction, &fits.teacher_budgets);
                if cmd.json {
                    println!("{}", serde_json::to_string_pretty(&checks)?);
                } else {
                    print!("{}", student_check_report(prediction, &checks));
                }
                return Ok(());
            }
            if let Some(prediction) = &prediction {
                let checks = pdsweep::suggest::check(prediction, &fits.capacity_gaps);
                if cmd.json {
                    println!("{}", serde_json::to_string_pretty(&checks)?);
                } else {
                    print!("{}", check_report(prediction, &checks, runs.len()));
                }
                return Ok(());
            }
            let stored = cmd.seeds.is_none();
            if stored {
                save_fits(&mut db, &records)?;
            }
            if cmd.json {
                println!("{}", serde_json::to_string_pretty(&fits)?);
            } else {
                print!("{}", sweep_report(&fits, runs.len(), &db_path, stored));
            }
            if let (true, false, FitTarget::Sweep(file)) = (stored, cmd.no_similarity, &cmd.target)
            {
                super::degrees::measure_and_print(file, &cmd.results, &db, cmd.json)?;
            }
            Ok(())
        }
    }
}

/// What `fit` stores of a sweep's fits: the laws, the capacity-gap groups, T*(S) and a summary.
fn fit_records(fits: &pdsweep::fit::SweepFits, runs: usize) -> Vec<FitRecord> {
    let mut records = Vec::new();
    if let Some(f) = &fits.supervised {
        records.push(FitRecord::Law {
            scope: SCOPE_SUPERVISED.into(),
            key: String::new(),
            fit: Box::new(f.clone()),
        });
    }
    for (key, f) in &fits.distill {
        records.push(FitRecord::Law {
            scope: SCOPE_DISTILL.into(),
            key: key.clone(),
            fit: Box::new(f.clone()),
        });
    }
    records.extend(
        fits.capacity_gaps
            .iter()
            .map(|g| FitRecord::Gap(Box::new(g.clone()))),
    );
    records.extend(
        fits.tstar
            .iter()
            .map(|t| FitRecord::TStar(Box::new(t.clone()))),
    );
    records.push(FitRecord::Summary(FitSummary {
        runs,
        skipped: fits.skipped.clone(),
        released: fits.released.clone(),
    }));
    records
}

/// A student prediction against the student's fit, one line per predicted quantity.
fn student_check_report(
    prediction: &pdsweep::suggest::StudentPrediction,
    checks: &[pdsweep::suggest::QuantityCheck],
) -> String {
    use pdsweep::spec::units::format_count;
    let mut out = format!(
        "student of {} parameters against the prediction made {} ({} finished runs then):\n",
        format_count(prediction.student_params),
        prediction.made_from.made_at,
        prediction.made_from.finished_runs
    );
    for c in checks {
        let size = !c.what.starts_with("optimal teacher loss");
        let v = |x: f64| {
            if size {
                format_count(x)
            } else {
                format!("{x:.3}")
            }
        };
        let predicted = c
            .predicted
            .as_ref()
            .map_or("no prediction".to_string(), |p| {
                format!("{} [{}, {}]", v(p.at), v(p.interval[0]), v(p.interval[1]))
            });
        let verdict = match c.inside {
            Some(true) => "INSIDE",
            Some(false) => "OUTSIDE",
            None => "not checkable",
        };
        let measured = match (c.at, c.ci) {
            (Some(at), Some([lo, hi])) => format!("{} [{}, {}]", v(at), v(lo), v(hi)),
            (Some(at), None) => v(at),
            _ => c.measured.clone(),
        };
        out += &format!(
            "  {}: predicted {predicted}, measured {measured}: {verdict}\n",
            c.what
        );
    }
    out
}

/// A confirmation round against its prediction, one block per group.
fn check_report(
    prediction: &pdsweep::suggest::Prediction,
    checks: &[pdsweep::suggest::GroupCheck],
    runs: usize,
) -> String {
    let seeds: Vec<String> = prediction.seeds.iter().map(u64::to_string).collect();
    let made = &prediction.made_from;
    let mut out = format!(
        "confirmation round: seeds {} ({runs} finished runs: every teacher, the round's students and baselines)
against the prediction made {} from {} finished runs of {} (runs digest {})

",
        seeds.join(", "),
        made.made_at,
        made.finished_runs,
        made.sweep,
        &made.runs_sha256[..made.runs_sha256.len().min(12)]
    );
    let count = |v: f64| pdsweep::spec::units::format_count(v);
    let interval = |i: Option<[f64; 2]>| {
        i.map_or("none".to_string(), |[a, b]| {
            format!("[{}, {}]", count(a), count(b))
        })
    };
    for c in checks {
        let p = &c.predicted;
        out += &format!(
            "student {} on {} tokens ({}): {} of {} runs of the round
",
            count(p.student_params),
            count(p.student_tokens),
            p.config,
            c.runs_found,
            p.design.len()
        );
        out += &format!(
            "  predicted  {} (interval {})
",
            p.now,
            interval(p.interval)
        );
        out += &format!(
            "  measured   {}
",
            c.measured
        );
        let edge = p.edge.as_deref().unwrap_or("edge");
        let verdict = match (c.inside, c.edge_held) {
            (Some(true), _) => "inside the predicted interval".to_string(),
            (Some(false), _) => "OUTSIDE the predicted interval".to_string(),
            (None, Some(true)) => {
                format!("the round's best teacher is the {edge} too, as predicted")
            }
            (None, Some(false)) => {
                format!("the round's best teacher is NOT the {edge}, as was predicted")
            }
            (None, None) if p.interval.is_none() => {
                "no predicted interval to check against".to_string()
            }
            (None, None) => "no optimum in the round to check".to_string(),
        };
        out += &format!(
            "  outcome    {verdict}
"
        );
        let expected = p
            .expected_width
            .map_or("none".to_string(), |w| format!("{w:.2}x"));
        let supported = p.expected_supported.map_or(String::new(), |s| {
            format!(", {:.0}% of simulated rounds support an optimum", 100.0 * s)
        });
        match (c.width, c.width_ratio) {
            (Some(w), Some(r)) => {
                out += &format!(
                    "  width      {w:.2}x measured, {expected} expected ({r:.2} of it){supported}
"
                )
            }
            (Some(w), None) => {
                out += &format!(
                    "  width      {w:.2}x measured, none expected
"
                )
            }
            (None, _) => {
                out += &format!(
                    "  width      no interval measured, {expected} expected{supported}
"
                )
            }
        }
    }
    out
}

/// The runs of `runs` that a fit on `seeds` uses: every teacher, and the students and
/// baselines of those seeds. A seed no student or baseline has is a usage error naming it.
fn of_seeds(runs: Vec<FinishedRun>, seeds: &[u64]) -> anyhow::Result<Vec<FinishedRun>> {
    let replicated = |r: &FinishedRun| matches!(r.kind, Role::Student | Role::Baseline);
    let known: std::collections::BTreeSet<u64> = runs
        .iter()
        .filter(|r| replicated(r))
        .map(|r| r.seed)
        .collect();
    if let Some(missing) = seeds.iter().find(|s| !known.contains(s)) {
        let list: Vec<String> = known.iter().map(u64::to_string).collect();
        return Err(UsageError(format!(
            "`--seeds`/`--check`: no finished student or baseline has seed {missing} (seeds: {})\n\nhint: a confirmation round is checked once its runs have finished (`pdsweep run` its follow-up sweep)",
            list.join(", ")
        ))
        .into());
    }
    Ok(runs
        .into_iter()
        .filter(|r| !replicated(r) || seeds.contains(&r.seed))
        .collect())
}

/// The database of a sweep file (as `pdsweep status` finds it) or the one given by `--db`.
pub fn locate_db(target: &FitTarget, results: &Path) -> anyhow::Result<PathBuf> {
    let (path, hint) = match target {
        FitTarget::Sweep(file) => {
            let sweep = Sweep::load(file)?;
            (
                SweepLayout::for_file(file, results, sweep.file.name.as_str()).database(),
                format!("run `pdsweep run {}` first", file.display()),
            )
        }
        FitTarget::Db(path) => (path.clone(), "check the `--db` path".to_string()),
        FitTarget::Data(path) => (path.clone(), String::new()),
    };
    if !path.exists() {
        return Err(UsageError(format!(
            "no sweep database at `{}`\n\nhint: {hint}",
            path.display()
        ))
        .into());
    }
    Ok(path)
}

fn parse_supervised(text: &str) -> anyhow::Result<SupervisedSource> {
    if text == "busbridge2025" {
        return Ok(SupervisedSource::Busbridge(Busbridge::PUBLISHED));
    }
    let mut vals = std::collections::BTreeMap::new();
    for entry in text.split(',').filter(|e| !e.trim().is_empty()) {
        let parsed = entry
            .split_once('=')
            .and_then(|(k, v)| Some((k.trim().to_string(), v.trim().parse::<f64>().ok()?)));
        let Some((k, v)) = parsed else {
            return Err(UsageError(format!("cannot read `--supervised` entry `{entry}`\n\nhint: `--supervised busbridge2025` or `--supervised \"E=1.82,A=482,B=2085,alpha=0.348,beta=0.366[,gamma=..]\"`")).into());
        };
        vals.insert(k, v);
    }
    let get = |k: &str| {
        vals.get(k).copied().ok_or_else(|| {
            UsageError(format!("`--supervised` has no `{k}`\n\nhint: give E, A, B, alpha, beta (and gamma for the Busbridge form)"))
        })
    };
    let (e, a, b, alpha, beta) = (get("E")?, get("A")?, get("B")?, get("alpha")?, get("beta")?);
    Ok(match vals.get("gamma") {
        Some(&gamma) => SupervisedSource::Busbridge(Busbridge {
            E: e,
            A: a,
            B: b,
            alpha,
            beta,
            gamma,
        }),
        None => SupervisedSource::Chinchilla(Chinchilla {
            E: e,
            A: a,
            B: b,
            alpha,
            beta,
        }),
    })
}

fn num(v: f64) -> String {
    if v == 0.0 || (1e-3..1e5).contains(&v.abs()) {
        format!("{v:.4}")
    } else {
        format!("{v:.4e}")
    }
}

/// A fit as a readable table.
pub fn fit_table(f: &Fit) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_BORDERS_ONLY);
    t.set_header([
        "parameter",
        "value",
        &format!("{:.0}% CI", f.ci_level * 100.0),
    ]);
    for name in f.law.param_names() {
        let ci = if f.unidentified.iter().any(|u| u == name) {
            "not identified".to_string()
        } else {
            f.ci.get(*name).map_or("-".to_string(), |[lo, hi]| {
                format!("[{}, {}]", num(*lo), num(*hi))
            })
        };
        t.add_row([name.to_string(), num(f.param(name)), ci]);
    }
    let points = if f.support.runs > 0 {
        f.support.points_text()
    } else {
        format!("{} points", f.n_points)
    };
    let mut out = if f.support.runs > 0 && f.support.is_thin() {
        format!(
            "UNDER-DETERMINED FIT: {points} for {} parameters; read the numbers below as a description of these points, not as a law\n",
            f.law.n_params()
        )
    } else {
        String::new()
    };
    out += &format!(
        "{} law on {points} of {}\nobjective (sum of Huber, delta {}): {:.6e}; {} of {} starts finite; bootstrap {} of {} resamples\n{t}\nrms log residual: {:.4}\n",
        f.law,
        f.source,
        f.delta,
        f.objective,
        f.starts_finite,
        f.starts,
        f.bootstrap_ok,
        f.bootstrap,
        f.rmse_log
    );
    if let Some(x) = &f.extrapolation {
        out += &format!(
            "leave-largest-out: fitted without N = {} ({} points held out), mean |error| {:.2}%, max {:.2}%\n",
            format_count(x.held_out_params),
            x.n_held_out,
            100.0 * x.mean_abs_rel_error,
            100.0 * x.max_abs_rel_error
        );
    }
    for w in &f.warnings {
        out += &format!("warning: {w}\n");
    }
    out
}

/// One student's optimal teacher across teacher budgets: per budget in size and loss, pooled in
/// loss, and the verdict.
fn budget_text(b: &pdsweep::fit::BudgetComparison) -> String {
    let curve = |o: &Optimum, variable: &str| GapCurve {
        variable: variable.into(),
        fit: None,
        samples: Vec::new(),
        optimum: o.clone(),
        near_best: None,
        draws: Vec::new(),
    };
    let mut out = format!(
        "teacher budget: student {} on {} tokens ({}), teachers at {} budgets\n",
        format_count(b.student_params),
        format_count(b.student_tokens),
        b.config,
        b.budgets.len()
    );
    for o in &b.budgets {
        out += &format!(
            "  teachers on {}: by size {}; by loss {}\n",
            format_count(o.teacher_tokens),
            optimum_text(&curve(&o.by_size, "teacher_params"), &|x| format_count(x)),
            optimum_text(&curve(&o.by_loss, "teacher_loss"), &|x| format!("{x:.4}")),
        );
    }
    out += &format!(
        "  every budget's teachers, by loss: {}\n  verdict: {}{}\n",
        optimum_text(&b.pooled_by_teacher_loss, &|x| format!("{x:.4}")),
        b.verdict,
        b.loss_half_width().map_or(String::new(), |w| format!(
            " (widest loss interval ±{w:.3} nats)"
        )),
    );
    out
}

fn optimum_text(c: &GapCurve, unit: &dyn Fn(f64) -> String) -> String {
    match &c.optimum {
        Optimum::Interior {
            at,
            ci,
            student_loss,
            ..
        } => format!(
            "{} (student loss {:.4}){}",
            unit(*at),
            student_loss,
            ci.map_or(String::new(), |[lo, hi]| format!(
                ", 95% CI [{}, {}]",
                unit(lo),
                unit(hi)
            ))
        ),
        Optimum::Boundary { at, edge } => format!(
            "{} (the best measured, {}, is the {edge} of the grid)",
            c.optimum.edge_advice(&c.variable).unwrap_or_default(),
            unit(*at)
        ),
        Optimum::Unsupported { at, reason } => format!(
            "no supported optimum: {reason}; the best measured is {}",
            unit(*at)
        ),
        Optimum::TooFewPoints => "fewer than 3 teachers: no curve".into(),
    }
}

/// `4 teachers × 2 seeds (8 students)`, counting sizes, not runs.
fn gap_counts(g: &CapacityGap) -> String {
    let teachers = if g.teachers > 0 {
        g.teachers
    } else {
        g.points.len()
    };
    if g.seeds > 1 {
        format!(
            "{teachers} teacher(s) × {} seeds ({} students)",
            g.seeds,
            g.points.len()
        )
    } else {
        format!("{teachers} teacher(s)")
    }
}

/// The paired gains per teacher with their spread over seeds, and the noise floor (the spread
/// of the replicate baselines) beside them.
fn gains_line(g: &CapacityGap) -> String {
    let gains = paired_gains(&g.points);
    if gains.is_empty() {
        return String::new();
    }
    let each: Vec<String> = gains
        .iter()
        .map(|(t, mean, sd, _)| match sd {
            Some(sd) => format!("{} {mean:+.4} ± {sd:.4}", format_count(*t)),
            None => format!("{} {mean:+.4}", format_count(*t)),
        })
        .collect();
    let floor = match g.noise_floor {
        Some(sd) => format!(
            "noise floor {sd:.4} (sd of {} baseline seeds)",
            g.baseline_seeds
        ),
        None => "noise floor unknown (one baseline seed: add seeds)".to_string(),
    };
    format!(
        "  gain vs same-seed baseline (mean ± sd over seeds): {}; {floor}{}\n",
        each.join(", "),
        if g.paired {
            "; curves fitted to paired losses"
        } else {
            ""
        }
    )
}

/// The tuned learning rate per student size and budget (and per teacher size and budget with
/// `[teachers] tune_lr`), with a warning where it is the
/// largest or smallest candidate (the best rate may lie beyond them).
fn tuned_rates_text(rates: &[TunedRate]) -> String {
    let mut out = String::new();
    for t in rates {
        let scores: Vec<String> = t
            .candidates
            .iter()
            .map(|c| match c.finished {
                0 => format!("{:e}: failed (diverged)", c.peak),
                n => format!("{:e}: {:.4} ({n} run(s))", c.peak, c.mean_loss),
            })
            .collect();
        let (whose, runs) = if t.is_teacher() {
            ("the teacher of ", "its candidate runs")
        } else {
            ("", "the baselines")
        };
        out += &format!(
            "learning rate of {whose}{} on {} tokens: {:e} (mean held-out loss of {runs} per peak: {})\n",
            format_count(t.params),
            format_count(t.tokens),
            t.peak,
            scores.join(", ")
        );
        if let Some(high) = t.at_edge() {
            let (which, way) = if high {
                ("largest", "larger")
            } else {
                ("smallest", "smaller")
            };
            out += &format!(
                "warning: the tuned rate is the {which} candidate: the best may be {way}; extend `{}` toward {way} rates\n",
                t.key()
            );
        }
        if !t.students_elsewhere.is_empty() {
            let mut peaks: Vec<f64> = t.students_elsewhere.iter().map(|s| s.1).collect();
            peaks.sort_by(f64::total_cmp);
            peaks.dedup();
            let peaks: Vec<String> = peaks.iter().map(|p| format!("{p:e}")).collect();
            out += &format!(
                "warning: {} student(s) of this size trained at {} (the best rate when they started, from fewer seeds); each gain is still paired with its seed's baseline at the student's rate\n",
                t.students_elsewhere.len(),
                peaks.join(" or ")
            );
        }
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The teachers these seeds cannot tell from the best (mean student loss within two standard
/// errors of the difference): on a plateau, the answer beside the fitted optimum.
fn near_best_line(g: &CapacityGap) -> String {
    let Some([lo, hi]) = g.by_teacher_params.near_best else {
        return String::new();
    };
    if lo == hi {
        return format!(
            "  within the noise of the best: only the best teacher, {}\n",
            format_count(lo)
        );
    }
    format!(
        "  within the noise of the best: every teacher from {} to {} (the smallest {:.1}× the student; these seeds cannot tell them from the best)\n",
        format_count(lo),
        format_count(hi),
        lo / g.student_params
    )
}

fn sweep_report(f: &SweepFits, n_runs: usize, db: &Path, stored: bool) -> String {
    let mut out = if stored {
        format!(
            "{n_runs} finished runs; fits stored in `{}`\n\n",
            db.display()
        )
    } else {
        format!(
            "{n_runs} finished runs (students and baselines of the seeds asked for, every teacher); not stored: the stored fits of `{}` are unchanged\n\n",
            db.display()
        )
    };
    if let Some(s) = &f.supervised {
        out += &format!(
            "supervised law (teachers and baselines):\n{}\n",
            fit_table(s)
        );
    }
    for (key, d) in &f.distill {
        out += &format!("distillation law ({key}):\n{}\n", fit_table(d));
    }
    out += &tuned_rates_text(&f.tuned_rates);
    for g in &f.capacity_gaps {
        let baseline = match (g.baseline_loss, g.baseline_seeds) {
            (Some(b), n) if n > 1 => format!(", baseline loss {b:.4} (mean of {n} seeds)"),
            (Some(b), _) => format!(", baseline loss {b:.4}"),
            (None, _) => String::new(),
        };
        let teachers_on = g.teacher_tokens.map_or(String::new(), |d| {
            format!(", teachers on {} tokens", format_count(d))
        });
        out += &format!(
            "capacity gap: student {} on {} tokens{teachers_on} ({}), {}{baseline}\n  by teacher size: {}\n  by teacher loss: {}\n",
            format_count(g.student_params),
            format_count(g.student_tokens),
            g.config,
            gap_counts(g),
            optimum_text(&g.by_teacher_params, &|x| format_count(x)),
            optimum_text(&g.by_teacher_loss, &|x| format!("{x:.4}")),
        );
        out += &gains_line(g);
        out += &near_best_line(g);
        if let Some(l) = &g.from_law {
            out += &format!(
                "  from the distillation law: L_T* {:.4}{}, student loss {:.4}{}\n",
                l.teacher_loss,
                l.teacher_loss_ci
                    .map_or(String::new(), |[a, b]| format!(" [{a:.4}, {b:.4}]")),
                l.student_loss,
                l.teacher_params
                    .map_or(String::new(), |n| format!(", teacher {}", format_count(n)))
            );
        }
    }
    for b in &f.teacher_budgets {
        out += &budget_text(b);
    }
    for t in &f.tstar {
        let teachers_on = t.teacher_tokens.map_or(String::new(), |d| {
            format!(", teachers on {} tokens", format_count(d))
        });
        out += &format!(
            "T*(S) on {} tokens{teachers_on} ({}), {} student sizes: linear T* = {:.3}·S + {:.3e} (rms log {:.3}); power T* = {:.3e}·S^{:.3} (rms log {:.3}); better: {} (lower rms log residual)\n",
            format_count(t.student_tokens),
            t.config,
            t.points.len(),
            t.linear.params[0],
            t.linear.params[1],
            t.linear.rmse_log,
            t.power.params[0],
            t.power.params[1],
            t.power.rmse_log,
            t.better
        );
        if let Some(p) = &t.largest_held_out {
            out += &format!(
                "  the power law fitted without the largest student ({}) predicts its T* {} against {} measured on its own curve: error {:+.0} %\n",
                format_count(p.student_params),
                format_count(p.predicted),
                format_count(p.measured),
                100.0 * p.relative_error
            );
        }
        for w in &t.warnings {
            out += &format!("  warning: {w}\n");
        }
    }
    out += &released_text(&f.released);
    for s in &f.skipped {
        let first = s.reason.lines().next().unwrap_or("");
        out += &format!("not fitted: {}: {first}\n", s.what);
    }
    out
}

/// Each pre-trained teacher against the distillation law of the trained teachers.
fn released_text(checks: &[ReleasedCheck]) -> String {
    let mut out = String::new();
    for c in checks {
        out += &format!(
            "pre-trained teacher `{}` ({}): L_T {:.4}; the law fitted to the {} students of trained teachers (L_T {:.4} to {:.4}){}\n",
            c.teacher,
            c.config,
            c.teacher_loss,
            c.law_points,
            c.trained_teacher_losses[0],
            c.trained_teacher_losses[1],
            c.not_predicted
                .as_deref()
                .map_or(String::new(), |why| format!(
                    " could not be fitted: {}",
                    why.lines().next().unwrap_or("")
                ))
        );
        for s in &c.students {
            let sd = s
                .measured_sd
                .map_or(String::new(), |sd| format!(" ± {sd:.4}"));
            let predicted = match (s.predicted, s.predicted_ci) {
                (Some(p), Some([a, b])) => format!(
                    "; predicted {p:.4} [{a:.4}, {b:.4}], error {:+.2} %",
                    100.0 * (p / s.measured - 1.0)
                ),
                (Some(p), None) => {
                    format!(
                        "; predicted {p:.4}, error {:+.2} %",
                        100.0 * (p / s.measured - 1.0)
                    )
                }
                _ => String::new(),
            };
            let gain = s.gain.map_or(String::new(), |g| format!(", gain {g:+.4}"));
            let best = s.best_trained.as_ref().map_or(String::new(), |b| {
                format!(
                    "; best trained teacher `{}` (L_T {:.4}): student {:.4}{}",
                    b.teacher,
                    b.teacher_loss,
                    b.student_loss,
                    b.gain.map_or(String::new(), |g| format!(", gain {g:+.4}"))
                )
            });
            out += &format!(
                "  student {} on {} tokens: measured {:.4}{sd} ({} seeds){gain}{predicted}{best}\n",
                format_count(s.student_params),
                format_count(s.student_tokens),
                s.measured,
                s.seeds,
            );
        }
    }
    out
}
