//! Run ids are stable: planning the committed reference sweep file gives exactly the runs of its
//! committed export, so a change to the configuration types (where a field lives, how it is
//! serialised) cannot silently re-plan the finished runs of every sweep. The capacity-gap
//! reference (1,017 runs: trained and tuned teachers with their candidates, logit passes,
//! tuned baselines and students on a text corpus) is the check. (Names are not compared: a
//! run keeps the name it was first planned with, which the export shows. The design-space
//! export predates the held-out split rule of text corpora, `DataConfig::split`, which gave
//! its runs new ids; it is checked again once that sweep is re-run.)

use std::collections::BTreeSet;
use std::path::Path;

use pdsweep::plan::{Plan, PlanOptions};
use pdsweep::spec::Sweep;

/// The ids of the runs in an exported `runs.csv`.
fn exported(csv: &Path) -> BTreeSet<String> {
    let mut reader = csv::Reader::from_path(csv).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let id = col("id");
    reader
        .records()
        .map(|r| r.unwrap()[id].to_string())
        .collect()
}

/// The ids of the runs `sweep` plans today.
fn planned(sweep: &Path) -> BTreeSet<String> {
    let sweep = Sweep::load(sweep).unwrap();
    let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
    plan.runs.iter().map(|r| r.id.to_string()).collect()
}

fn check(sweep: &str, export: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let want = exported(&root.join(export));
    let got = planned(&root.join(sweep));
    let missing: Vec<_> = want.difference(&got).collect();
    let new: Vec<_> = got.difference(&want).collect();
    assert!(
        missing.is_empty() && new.is_empty(),
        "{sweep} no longer plans the runs of {export}: {} exported runs are not planned (e.g. {:?}), {} planned runs are new (e.g. {:?})",
        missing.len(),
        missing.first(),
        new.len(),
        new.first()
    );
}

#[test]
fn the_capacity_gap_reference_plans_the_runs_of_its_export() {
    check(
        "sweeps/capacity-gap-round9.toml",
        "results/capacity-gap/export/runs.csv",
    );
}
