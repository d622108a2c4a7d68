//! Run ids are stable: planning the committed reference sweep file gives exactly the runs of its
//! committed export, so a change to the configuration types (where a field lives, how it is
//! serialised) cannot silently re-plan the finished runs of every sweep. The capacity-gap
//! reference (1,017 runs: trained and tuned teachers with their candidates, logit passes,
//! tuned baselines and students on a text corpus) is the check. (Names are not compared: a
//! run keeps the name it was first planned with, which the export shows. The design-space
//! export predates the held-out split rule of text corpora, `DataConfig::split`, which gave
//! its runs new ids; it is checked again once that sweep is re-run.) Logit passes are the one
//! deliberate exception: since one store serves every seed (issue 28) a logit pass is keyed by
//! its teacher, corpus and truncation, not by a seed, so the export's per-seed passes are
//! replaced by one per teacher; the students that read them keep their ids.

use std::collections::BTreeSet;
use std::path::Path;

use pdsweep::plan::{Plan, PlanOptions};
use pdsweep::spec::Sweep;

/// The ids of the runs in an exported `runs.csv` other than logit passes, and the teachers of
/// its logit passes.
fn exported(csv: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut reader = csv::Reader::from_path(csv).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (id, kind, teacher) = (col("id"), col("kind"), col("teacher_id"));
    let (mut runs, mut stores) = (BTreeSet::new(), BTreeSet::new());
    for record in reader.records() {
        let r = record.unwrap();
        if &r[kind] == "logits" {
            stores.insert(r[teacher].to_string());
        } else {
            runs.insert(r[id].to_string());
        }
    }
    (runs, stores)
}

/// The same of the runs `sweep` plans today.
fn planned(sweep: &Path) -> (BTreeSet<String>, Vec<String>) {
    let sweep = Sweep::load(sweep).unwrap();
    let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
    let (stores, runs): (Vec<_>, Vec<_>) = plan
        .runs
        .iter()
        .partition(|r| r.kind() == pdsweep::plan::RunKind::Logits);
    let teachers = stores
        .iter()
        .filter_map(|r| r.config.logits.as_ref().map(|l| l.teacher.to_string()))
        .collect();
    (runs.iter().map(|r| r.id.to_string()).collect(), teachers)
}

fn check(sweep: &str, export: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (want, want_teachers) = exported(&root.join(export));
    let (got, got_teachers) = planned(&root.join(sweep));
    let distinct: BTreeSet<String> = got_teachers.iter().cloned().collect();
    assert_eq!(
        distinct.len(),
        got_teachers.len(),
        "one logit pass per teacher"
    );
    assert_eq!(
        distinct, want_teachers,
        "the same teachers have logit stores"
    );
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
