//! Gathers a report's data from the sweep database: runs of the current plan with their
//! results, held-out curves, the points of the capacity-gap and supervised views, and
//! provenance (sweep-file hash, versions, git commit, date).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::data::{
    CapacityGapView, CorpusFacts, Curve, GapPoint, OptimalPoint, Provenance, ReportData, RunState,
    RunView, SupervisedPoint, SweepInfo, TeacherRef, mean_by,
};
use super::error::ReportError;
use super::fits;
use crate::digest::hex;
use crate::plan::{RunId, RunKind};
use crate::store::{RunRow, SweepDb};

/// The sweep file the user named, if any (its path and text).
#[derive(Debug, Clone, Copy)]
pub struct SweepSource<'a> {
    /// Where it was read from.
    pub path: &'a Path,
    /// Its text.
    pub text: &'a str,
}

/// Reads everything the report shows from `db`: the current plan's runs, curves and views, then the
/// stored fits (see [`fits::attach`]).
///
/// `sweep` is the sweep file the user named; without one, the text recorded with the plan is used.
pub fn gather(db: &SweepDb, sweep: Option<SweepSource>) -> Result<ReportData, ReportError> {
    let plan_id = db.current_plan()?.ok_or_else(|| ReportError::NoPlan {
        path: db.path().to_path_buf(),
    })?;
    let plan = db.plan_info(plan_id)?.ok_or_else(|| ReportError::NoPlan {
        path: db.path().to_path_buf(),
    })?;
    let rows = db.run_rows(plan_id)?;
    let facts = corpus_facts(db)?;
    let mut runs = run_views(&rows);
    for r in &mut runs {
        r.corpus_train_tokens = facts.get(&r.id).map(|f| f.train_tokens);
        r.corpus_unigram_nats = facts.get(&r.id).map(|f| f.unigram_entropy_nats);
    }
    attach_fidelity(db, &rows, &mut runs);
    let candidate_ids =
        crate::plan::teacher_candidates(rows.iter().map(|r| (r.kind, r.config_json.as_str())));
    let (teacher_candidates, runs): (Vec<RunView>, Vec<RunView>) = runs
        .into_iter()
        .partition(|r| candidate_ids.contains(&r.id));
    let corpus = distinct_corpora(&runs, &facts);
    let distill_settings = shared_settings(&rows);
    let curves = curves(db, plan_id, &runs)?;
    let (toml, path) = match sweep {
        Some(s) => (s.text.to_string(), s.path.display().to_string()),
        None => (plan.sweep_toml.clone(), plan.sweep_path.clone()),
    };
    let description = toml::from_str::<toml::Table>(&toml).ok().and_then(|t| {
        t.get("description")
            .and_then(|d| d.as_str())
            .map(str::to_string)
    });
    let git_dir = sweep
        .and_then(|s| s.path.parent())
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut data = ReportData {
        sweep: SweepInfo {
            name: plan.sweep_name.clone(),
            description,
            path,
            toml: toml.clone(),
        },
        provenance: Provenance {
            sweep_sha256: hex(&Sha256::digest(toml.as_bytes())),
            pdsweep_version: env!("CARGO_PKG_VERSION").to_string(),
            planned_with: plan.pdsweep_version.clone(),
            planned_at: plan.created_at.clone(),
            git_commit: git_commit(git_dir),
            date_utc: now_utc(),
        },
        runs,
        teacher_candidates,
        curves,
        fits: Default::default(),
        corpus,
        distill_settings,
        similarity: similarity_view(db, &rows)?,
    };
    data.fits.supervised.points = supervised_points(&data.runs);
    data.fits.capacity_gap = capacity_gap_views(&data.runs);
    data.fits.optimal_teacher.points = grid_optima(&data.fits.capacity_gap);
    fits::attach(db, &mut data)?;
    Ok(data)
}

/// What each finished run recorded about its corpus, by run id (records that cannot be read
/// are left out).
fn corpus_facts(db: &SweepDb) -> Result<BTreeMap<RunId, CorpusFacts>, ReportError> {
    let fail = |e| crate::store::StoreError::sql(db.path(), "read corpus facts", e);
    let mut stmt = db
        .conn()
        .prepare("SELECT run_id, corpus_json FROM results")
        .map_err(fail)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, RunId>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .map_err(fail)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, json)| Some((id, serde_json::from_str(json.as_deref()?).ok()?)))
        .collect())
}

/// The distinct corpora of the current plan's runs (by key), in run order; of several records
/// of one corpus, the one with the most facts (a run recorded after the corpus checks knew more).
fn distinct_corpora(runs: &[RunView], facts: &BTreeMap<RunId, CorpusFacts>) -> Vec<CorpusFacts> {
    let mut out: Vec<CorpusFacts> = Vec::new();
    for f in runs.iter().filter_map(|r| facts.get(&r.id)) {
        match out.iter_mut().find(|o| o.key == f.key) {
            Some(o) if o.files == 0 && f.files > 0 => *o = f.clone(),
            Some(_) => {}
            None => out.push(f.clone()),
        }
    }
    out
}

/// Every student's distillation knobs in words, when all students share them.
fn shared_settings(rows: &[RunRow]) -> Option<String> {
    let mut settings = rows
        .iter()
        .filter(|r| r.kind == RunKind::Student)
        .map(|r| serde_json::from_str::<Value>(&r.config_json).unwrap_or(Value::Null))
        .map(|c| {
            let knobs = distill_knobs(&c);
            ["mode", "loss", "alpha", "temperature", "truncation"]
                .iter()
                .filter_map(|k| {
                    let v = knobs.get(k)?;
                    Some(if *k == "loss" {
                        format!("{v} loss")
                    } else {
                        v.clone()
                    })
                })
                .collect::<Vec<_>>()
                .join(", ")
        });
    let first = settings.next()?;
    settings.all(|s| s == first).then_some(first)
}

/// Nats per student token per bit per byte on the held-out text, from the first finished
/// student or baseline ([`crate::fit::nats_per_bpb`]).
fn nats_per_bpb(rows: &[RunRow]) -> Option<f64> {
    rows.iter()
        .filter(|r| matches!(r.kind, RunKind::Student | RunKind::Baseline))
        .find_map(|r| crate::fit::nats_per_bpb(r.val_loss?, r.val_bpb))
}

/// The distillation knobs of a student's configuration, each as a short label.
fn distill_knobs(config: &Value) -> BTreeMap<&'static str, String> {
    let d = &config["distill"];
    let mut knobs = BTreeMap::new();
    if d.is_null() {
        return knobs;
    }
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    knobs.insert("mode", text(&d["mode"]));
    knobs.insert("loss", text(&d["loss"]));
    let alpha = &d["alpha"];
    let alpha_label = match alpha["schedule"].as_str() {
        Some("constant") | None => format!("α={}", text(&alpha["peak"])),
        Some(s) => format!("α={s} {}", text(&alpha["peak"])),
    };
    knobs.insert("alpha", alpha_label);
    knobs.insert("temperature", format!("τ={}", text(&d["temperature"])));
    knobs.insert(
        "truncation",
        format!(
            "top-{}-{}",
            text(&d["truncation"]["top_p"]),
            text(&d["truncation"]["top_k"])
        ),
    );
    // absent from a config's JSON when at their defaults (top-k targets, renormalised)
    let targets = &d["truncation"]["targets"];
    knobs.insert(
        "targets",
        if targets.is_null() {
            "top-k targets".into()
        } else {
            format!("{} targets", text(targets))
        },
    );
    let missing = &d["truncation"]["missing"];
    knobs.insert(
        "missing",
        if missing.is_null() {
            "tail renormalised".into()
        } else {
            format!("tail {}", text(missing))
        },
    );
    // only students of a teacher of another tokenizer have it: a curve of their own per loss
    if let Some(cross) = d["cross_tokenizer"].as_str() {
        knobs.insert("cross", format!("{} across", cross.to_uppercase()));
    }
    knobs
}

/// The report's view of each run: its teacher described, its student labelled by the knobs
/// where it departs from the others.
fn run_views(rows: &[RunRow]) -> Vec<RunView> {
    let configs: Vec<Value> = rows
        .iter()
        .map(|r| serde_json::from_str(&r.config_json).unwrap_or(Value::Null))
        .collect();
    let knobs: Vec<BTreeMap<&str, String>> = configs.iter().map(distill_knobs).collect();
    let students: Vec<&BTreeMap<&str, String>> = rows
        .iter()
        .zip(&knobs)
        .filter(|(r, _)| r.kind == RunKind::Student)
        .map(|(_, k)| k)
        .collect();
    let labels = KnobLabels::of(&students);
    let teachers = Teachers {
        by_id: rows
            .iter()
            .zip(&configs)
            .map(|(r, c)| (&r.id, (r, c)))
            .collect(),
        nats_per_bpb: nats_per_bpb(rows),
    };
    rows.iter()
        .zip(&configs)
        .zip(&knobs)
        .map(|((r, config), knobs)| {
            let teacher = r.teacher_id.as_ref().map(|tid| teachers.get(r, tid, knobs));
            let distill = if r.kind == RunKind::Student {
                labels.label(knobs)
            } else {
                String::new()
            };
            run_view(r, config, teacher, distill)
        })
        .collect()
}

/// The model label a run's configuration records.
fn label_of(config: &Value) -> String {
    config["model"]["label"].as_str().unwrap_or("?").to_string()
}

/// How students are labelled by their distillation knobs: only the knobs that differ between
/// students go into labels, and of those only where a student departs from the value most
/// students share (one-at-a-time designs read "τ=2.0", "loss mse", "reference"); in a full grid
/// every varying knob is named.
struct KnobLabels<'a> {
    /// The knobs whose value differs between students.
    varying: BTreeSet<&'a str>,
    /// The value a majority of students share, for the varying knobs that have one.
    modal: BTreeMap<&'a str, &'a str>,
}

impl<'a> KnobLabels<'a> {
    fn of(students: &[&'a BTreeMap<&'a str, String>]) -> KnobLabels<'a> {
        let mut varying: BTreeSet<&str> = BTreeSet::new();
        if let Some(first) = students.first() {
            for k in students.iter().skip(1) {
                for key in k.keys().chain(first.keys()) {
                    if first.get(key) != k.get(key) {
                        varying.insert(key);
                    }
                }
            }
        }
        let modal = varying
            .iter()
            .filter_map(|&key| {
                let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
                for k in students {
                    if let Some(v) = k.get(key) {
                        *counts.entry(v.as_str()).or_default() += 1;
                    }
                }
                let (top, n) = counts.iter().max_by_key(|(_, n)| **n)?;
                (2 * n > students.len()).then_some((key, *top))
            })
            .collect();
        KnobLabels { varying, modal }
    }

    /// The label of a student with these knobs.
    fn label(&self, knobs: &BTreeMap<&str, String>) -> String {
        let differing: Vec<&str> = knobs
            .iter()
            .filter(|(k, v)| self.varying.contains(*k) && self.modal.get(*k) != Some(&v.as_str()))
            .map(|(_, v)| v.as_str())
            .collect();
        match (differing.is_empty(), self.varying.is_empty()) {
            (_, true) => String::new(),
            // only the pairing varies: the students not "GOLD across" share a tokenizer
            (true, false) if self.varying.iter().all(|k| *k == "cross") => {
                "same tokenizer".to_string()
            }
            (true, false) => "reference setting".to_string(),
            (false, false) => differing.join(" "),
        }
    }
}

/// The sweep's runs by id, to describe a student's teacher.
struct Teachers<'a> {
    by_id: BTreeMap<&'a RunId, (&'a RunRow, &'a Value)>,
    /// Nats per token of one bit per byte on the students' text, when known.
    nats_per_bpb: Option<f64>,
}

impl Teachers<'_> {
    /// The teacher `tid` of the student `r` (with distillation `knobs`).
    fn get(&self, r: &RunRow, tid: &RunId, knobs: &BTreeMap<&str, String>) -> TeacherRef {
        match self.by_id.get(tid) {
            Some((t, tc)) => TeacherRef {
                id: t.id.clone(),
                name: t.name.clone(),
                label: label_of(tc),
                n: t.params_non_embedding as f64,
                // a teacher of another tokenizer is compared by bits per byte, on the
                // students' scale, as `fit` does
                val_loss: if knobs.contains_key("cross") {
                    t.val_bpb.zip(self.nats_per_bpb).map(|(b, k)| b * k)
                } else {
                    t.val_loss
                },
            },
            None => TeacherRef {
                id: tid.clone(),
                name: r.teacher_name.clone().unwrap_or_else(|| tid.to_string()),
                label: "?".into(),
                n: f64::NAN,
                val_loss: None,
            },
        }
    }
}

/// One run as the report shows it.
fn run_view(r: &RunRow, config: &Value, teacher: Option<TeacherRef>, distill: String) -> RunView {
    let state = r.state;
    RunView {
        id: r.id.clone(),
        kind: r.kind,
        name: r.name.clone(),
        state,
        error: r.error.clone(),
        label: label_of(config),
        seed: config["data"]["seed"].as_u64().unwrap_or(0),
        params_total: r.params_total.max(0) as u64,
        n: r.params_non_embedding.max(0) as f64,
        tokens: r.tokens.max(0) as f64,
        flops: r.flops,
        teacher,
        distill,
        val_loss: r.val_loss.filter(|_| state == RunState::Done),
        val_bpb: r.val_bpb,
        tokens_per_s: r.tokens_per_s,
        wall_s: r.wall_s,
        agreement: r.agreement,
        kl_teacher_student: r.kl_teacher_student,
        gain: r.gain,
        corpus_train_tokens: None,
        corpus_unigram_nats: None,
        lr_peak: config["train"]["lr"]["peak"].as_f64(),
        fidelity_kl: None,
        fidelity_kept_mass: None,
    }
}

fn curves(db: &SweepDb, plan_id: i64, runs: &[RunView]) -> Result<Vec<Curve>, ReportError> {
    let metrics = db.metric_rows(plan_id)?;
    let mut by_run: BTreeMap<&RunId, Vec<(f64, f64)>> = BTreeMap::new();
    for m in metrics
        .iter()
        .filter(|m| m.kind == "val" && m.loss.is_finite())
    {
        by_run
            .entry(&m.run_id)
            .or_default()
            .push((m.tokens as f64, m.loss));
    }
    Ok(runs
        .iter()
        .filter(|r| r.kind != RunKind::Logits)
        .filter_map(|r| {
            // a tuned teacher that adopted its best candidate trained nothing itself: its
            // curve is the candidate's
            let points = match by_run.remove(&r.id) {
                Some(p) => p,
                None => by_run.get(&adopted_from(db, &r.id)?)?.clone(),
            };
            Some(Curve {
                run_id: r.id.clone(),
                kind: r.kind,
                name: r.name.clone(),
                n: r.n,
                state: r.state,
                points,
                seed: r.seed,
                tokens: r.tokens,
                teacher: r.teacher.as_ref().map(|t| (t.label.clone(), t.n)),
                label: r.label.clone(),
                distill: r.distill.clone(),
            })
        })
        .collect())
}

/// Each logit pass's measured fidelity (its store at its own truncation) and each offline
/// student's (its store at the student's truncation), from the passes' `fidelity_views`.
fn attach_fidelity(db: &SweepDb, rows: &[RunRow], runs: &mut [RunView]) {
    // (teacher run, truncation JSON) → (KL, kept mass), and each pass's own
    let mut by_view: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == RunKind::Logits) {
        let Some(extra) = db.result_extra(&r.id).ok().flatten() else {
            continue;
        };
        let extra: Value = serde_json::from_str(&extra).unwrap_or(Value::Null);
        let config: Value = serde_json::from_str(&r.config_json).unwrap_or(Value::Null);
        let teacher = config["logits"]["teacher"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if let Some(view) = runs.iter_mut().find(|v| v.id == r.id) {
            view.fidelity_kl = extra["fidelity_kl"].as_f64();
            view.fidelity_kept_mass = extra["fidelity_kept_mass"].as_f64();
        }
        for v in extra["fidelity_views"].as_array().into_iter().flatten() {
            let (Some(kl), Some(mass)) = (v["kl"].as_f64(), v["kept_mass"].as_f64()) else {
                continue;
            };
            let key = format!(
                "{} {} {} {}",
                v["top_p"],
                v["top_k"].as_str().unwrap_or(""),
                v["targets"].as_str().unwrap_or(""),
                v["missing"].as_str().unwrap_or("")
            );
            by_view.insert((teacher.clone(), key), (kl, mass));
        }
    }
    for r in rows.iter().filter(|r| r.kind == RunKind::Student) {
        let config: Value = serde_json::from_str(&r.config_json).unwrap_or(Value::Null);
        let d = &config["distill"];
        if d["mode"].as_str() != Some("offline") {
            continue;
        }
        let t = &d["truncation"];
        let key = format!(
            "{} {} {} {}",
            t["top_p"],
            match &t["top_k"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            t["targets"].as_str().unwrap_or("top_k"),
            t["missing"].as_str().unwrap_or("renormalise")
        );
        let teacher = d["teacher"].as_str().unwrap_or("").to_string();
        if let (Some(&(kl, mass)), Some(view)) = (
            by_view.get(&(teacher, key)),
            runs.iter_mut().find(|v| v.id == r.id),
        ) {
            view.fidelity_kl = Some(kl);
            view.fidelity_kept_mass = Some(mass);
        }
    }
}

/// The candidate a tuned teacher adopted (`results.extra_json` → `adopted_from`), if any.
fn adopted_from(db: &SweepDb, id: &RunId) -> Option<RunId> {
    let extra = db.result_extra(id).ok()??;
    let extra: Value = serde_json::from_str(&extra).ok()?;
    extra["adopted_from"]
        .as_str()
        .map(|a| RunId::from_stored(a.to_string()))
}

/// Ids of the finished baselines at a learning rate that lost (`[train] tune_lr`): per student size
/// and budget, every baseline not at the peak `run::tuning::best_peak` chooses (the rate the
/// students trained at).
///
/// Figures and gaps leave them out, as `fit` does.
fn untuned_baselines(runs: &[RunView]) -> HashSet<RunId> {
    let mut groups: BTreeMap<(u64, u64), Vec<&RunView>> = BTreeMap::new();
    for b in runs
        .iter()
        .filter(|b| b.kind == RunKind::Baseline && b.done())
    {
        groups
            .entry((b.n.to_bits(), b.tokens.to_bits()))
            .or_default()
            .push(b);
    }
    let mut out = HashSet::new();
    for group in groups.values() {
        let results: Vec<(f64, f64)> = group
            .iter()
            .filter_map(|b| Some((b.lr_peak?, b.val_loss?)))
            .collect();
        if let Some(best) = crate::run::tuning::best_peak(&results) {
            out.extend(
                group
                    .iter()
                    .filter(|b| b.lr_peak.is_some_and(|p| p != best))
                    .map(|b| b.id.clone()),
            );
        }
    }
    out
}

fn supervised_points(runs: &[RunView]) -> Vec<SupervisedPoint> {
    let untuned = untuned_baselines(runs);
    runs.iter()
        .filter(|r| matches!(r.kind, RunKind::Teacher | RunKind::Baseline))
        .filter(|r| !untuned.contains(&r.id))
        .filter(|r| r.tokens > 0.0) // a pre-trained teacher was not trained on the sweep's data
        .filter_map(|r| {
            Some(SupervisedPoint {
                name: r.name.clone(),
                kind: r.kind,
                n: r.n,
                d: r.tokens,
                loss: r.val_loss.filter(|_| r.done())?,
            })
        })
        .collect()
}

/// One series per (student size, budget, distillation config), from finished students; the
/// baseline is the mean of the matching baselines that finished.
fn capacity_gap_views(runs: &[RunView]) -> Vec<CapacityGapView> {
    let mut groups: BTreeMap<(u64, u64, String), CapacityGapView> = BTreeMap::new();
    for s in runs
        .iter()
        .filter(|r| r.kind == RunKind::Student && r.done())
    {
        let (Some(teacher), Some(loss)) = (&s.teacher, s.val_loss) else {
            continue;
        };
        let view = groups
            .entry((s.n as u64, s.tokens as u64, s.distill.clone()))
            .or_insert_with(|| CapacityGapView {
                student: s.label.clone(),
                student_n: s.n,
                budget: s.tokens,
                config: s.distill.clone(),
                ..CapacityGapView::default()
            });
        view.points.push(GapPoint {
            teacher: teacher.label.clone(),
            teacher_n: teacher.n,
            teacher_loss: teacher.val_loss,
            student_loss: loss,
            seed: s.seed,
        });
    }
    let untuned = untuned_baselines(runs);
    let mut views: Vec<CapacityGapView> = groups.into_values().collect();
    for v in &mut views {
        v.points.sort_by(|a, b| {
            a.teacher_n
                .total_cmp(&b.teacher_n)
                .then(a.seed.cmp(&b.seed))
        });
        let baselines: Vec<f64> = runs
            .iter()
            .filter(|b| b.kind == RunKind::Baseline && b.done() && !untuned.contains(&b.id))
            .filter(|b| b.n == v.student_n && b.tokens == v.budget)
            .filter_map(|b| b.val_loss)
            .collect();
        if !baselines.is_empty() {
            v.baseline_loss = Some(baselines.iter().sum::<f64>() / baselines.len() as f64);
        }
        v.baseline_losses = baselines;
    }
    views
}

/// The best teacher on the grid of every series with at least two teachers.
fn grid_optima(views: &[CapacityGapView]) -> Vec<OptimalPoint> {
    views
        .iter()
        .filter(|v| mean_by(&v.points, |p| (p.teacher_n, p.student_loss)).len() >= 2)
        .filter_map(|v| {
            let (t, _, at_edge) = v.grid_best()?;
            let means = mean_by(&v.points, |p| (p.teacher_n, p.student_loss));
            let edge = at_edge.then(|| {
                if means.first().is_some_and(|m| m.0 >= t) {
                    "smallest".to_string()
                } else {
                    "largest".to_string()
                }
            });
            Some(OptimalPoint {
                student_n: v.student_n,
                label: v.label(),
                t_star: t,
                ci: None,
                fitted: false,
                at_edge,
                edge,
            })
        })
        .collect()
}

/// `git rev-parse HEAD` in `dir` (with ` (modified)` when its work tree has changes), or
/// `None` outside a repository or without git.
pub(crate) fn git_commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{head} (modified)")
    } else {
        head
    })
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

/// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian calendar).
pub(crate) fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The similarity measurements stored under the default settings and the degrees per student
/// setting (nothing before `pdsweep fit` measured them).
fn similarity_view(
    db: &SweepDb,
    rows: &[crate::store::RunRow],
) -> Result<crate::report::data::SimilarityView, ReportError> {
    let key = crate::similarity::Settings::default().key();
    let records = crate::similarity::read_records(db, &key)?;
    let groups = crate::similarity::group_degrees(rows, &records);
    let by_student = crate::similarity::students(rows, &records)
        .into_iter()
        .map(|s| {
            let d = crate::similarity::degree(s.student_similarity, s.baseline_similarity);
            (s.student.id.clone(), d)
        })
        .collect();
    Ok(crate::report::data::SimilarityView {
        records,
        groups,
        by_student,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_match_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_796_020_230), "2026-11-30T06:30:30Z");
    }
}
