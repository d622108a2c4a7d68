//! What a report cannot show yet, in words the user can act on: unfinished and failed runs,
//! missing students or baselines, and fits not run.

use super::data::{ReportData, RunState};
use crate::plan::RunKind;

/// One line per missing piece (backticks mark commands).
pub fn missing(data: &ReportData) -> Vec<String> {
    let mut out = Vec::new();
    let runs = &data.runs;
    if runs.is_empty() {
        out.push("the plan has no runs".to_string());
        return out;
    }
    let failed: Vec<&str> = runs
        .iter()
        .filter(|r| r.state == RunState::Failed)
        .map(|r| r.name.as_str())
        .collect();
    if !failed.is_empty() {
        out.push(format!(
            "{} run(s) failed: {} (no results; errors in the runs table; `pdsweep run --retry-failed` tries them again)",
            failed.len(),
            list(&failed)
        ));
    }
    let unfinished = runs
        .iter()
        .filter(|r| matches!(r.state, RunState::Planned | RunState::Running))
        .count();
    if unfinished > 0 {
        out.push(format!(
            "{unfinished} of {} runs have not finished yet: `pdsweep run` finishes them",
            runs.len()
        ));
    }
    let count = |k: RunKind| runs.iter().filter(|r| r.kind == k).count();
    let done = |k: RunKind| runs.iter().filter(|r| r.kind == k && r.done()).count();
    if count(RunKind::Student) == 0 {
        out.push("the sweep has no students: no capacity gap, gain or agreement".to_string());
    } else if done(RunKind::Student) == 0 {
        out.push("no student has finished: no capacity gap, gain or agreement yet".to_string());
    }
    if count(RunKind::Baseline) == 0 && count(RunKind::Student) > 0 {
        out.push(
            "the sweep has no baselines (`[students] baseline = true`): no distillation gain"
                .to_string(),
        );
    } else if count(RunKind::Baseline) > 0 && done(RunKind::Baseline) == 0 {
        out.push("no baseline has finished: no distillation gain yet".to_string());
    }
    if !data.fits.any_fit() && data.fits.source.is_some() {
        let what: Vec<String> = data
            .fits
            .skipped
            .iter()
            .map(|(what, why)| format!("{what} ({why})"))
            .collect();
        out.push(format!(
            "`pdsweep fit` ran but could fit nothing: {}",
            if what.is_empty() {
                "no finished runs to fit".to_string()
            } else {
                what.join("; ")
            }
        ));
    } else if !data.fits.any_fit() {
        let sizes = |kinds: &[RunKind]| {
            let mut n: Vec<u64> = runs
                .iter()
                .filter(|r| kinds.contains(&r.kind))
                .map(|r| r.n as u64)
                .collect();
            n.sort_unstable();
            n.dedup();
            n.len()
        };
        let (teachers, students) = (sizes(&[RunKind::Teacher]), sizes(&[RunKind::Student]));
        let supervised = count(RunKind::Teacher) + count(RunKind::Baseline);
        // A law needs more points than its 5 parameters; a capacity-gap curve 3 teachers.
        out.push(if supervised < 6 && teachers < 3 {
            format!(
                "no fits: with {teachers} teacher size(s), {students} student size(s) and {supervised} supervised run(s) this sweep is too small for scaling laws or T* (`pdsweep fit` lists what it skips and why)"
            )
        } else {
            "no fits yet: run `pdsweep fit` for the fitted laws, T* with intervals and the recommendation"
                .to_string()
        });
    }
    out.extend(data.fits.notes.iter().cloned());
    out
}

fn list(names: &[&str]) -> String {
    const MAX: usize = 6;
    let mut s = names
        .iter()
        .take(MAX)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX {
        s += &format!(" and {} more", names.len() - MAX);
    }
    s
}
