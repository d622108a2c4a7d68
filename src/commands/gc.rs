//! `pdsweep gc`: frees the disk held by the logit stores of runs that are no longer in the
//! sweep's current plan (a sweep file edited to new teachers, budgets or truncations leaves its
//! old stores behind: 18 GB in the capacity-gap reference after tuning its teachers). Results
//! are kept: a removed store's logit pass becomes a planned run again (its result is only the
//! teacher's held-out loss), so a later plan that needs the store re-creates it. It takes the
//! sweep's lease alone, so it never runs beside `pdsweep run` or `pdsweep slurm`.

use anyhow::Context;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pdsweep::plan::RunId;
use pdsweep::run::lease::{Holder, Lease};
use pdsweep::spec::Sweep;
use pdsweep::spec::units::format_bytes;
use pdsweep::store::{SweepDb, SweepLayout};

use super::UsageError;

/// Options of `pdsweep gc`.
#[derive(Debug, Clone)]
pub struct GcCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Results folder.
    pub results: PathBuf,
    /// List what would be removed, remove nothing.
    pub dry_run: bool,
}

/// A logit store no run of the current plan reads.
struct Orphan {
    id: RunId,
    name: Option<String>,
    path: PathBuf,
    bytes: u64,
}

/// Runs `pdsweep gc`.
pub fn gc(cmd: GcCommand) -> anyhow::Result<()> {
    let sweep = Sweep::load(&cmd.sweep)?;
    let name = sweep.file.name.as_str();
    let layout = SweepLayout::for_file(&cmd.sweep, &cmd.results, name);
    let db_path = layout.database();
    if !db_path.exists() {
        return Err(UsageError(format!(
            "sweep `{name}` has no database at `{}`: nothing to collect",
            db_path.display()
        ))
        .into());
    }
    let _lease = match cmd.dry_run {
        true => None,
        false => Some(Lease::acquire(&layout, Holder::Gc)?),
    };
    let db = SweepDb::open(&db_path)?;
    let plan = db.current_plan()?.ok_or_else(|| {
        UsageError(format!(
            "sweep `{name}` has no plan in `{}`: nothing to compare the stores with",
            db_path.display()
        ))
    })?;
    let planned: HashSet<RunId> = db.plan_runs(plan)?.into_iter().map(|r| r.id).collect();
    let orphans = orphans(&db, &layout, &planned)?;
    let total: u64 = orphans.iter().map(|o| o.bytes).sum();
    if orphans.is_empty() {
        println!(
            "every logit store in `{}` belongs to a run of the current plan: nothing to remove",
            layout.logit_stores().display()
        );
        return Ok(());
    }
    let verb = if cmd.dry_run {
        "would remove"
    } else {
        "removing"
    };
    println!(
        "{verb} {} logit store(s) of runs not in the current plan ({}):",
        orphans.len(),
        format_bytes(total as f64)
    );
    for o in &orphans {
        println!(
            "  {} {} ({})",
            o.id,
            o.name.as_deref().unwrap_or("not in the database"),
            format_bytes(o.bytes as f64)
        );
    }
    if cmd.dry_run {
        println!("dry run: nothing removed (run without `--dry-run` to remove them)");
        return Ok(());
    }
    for o in &orphans {
        std::fs::remove_dir_all(&o.path)
            .with_context(|| format!("cannot remove `{}`", o.path.display()))?;
        if o.name.is_some() {
            db.replan_logits(&o.id)?;
        }
    }
    println!(
        "freed {}; their logit passes are planned again (results of every other run kept)",
        format_bytes(total as f64)
    );
    Ok(())
}

/// The logit-store folders of `layout` whose run is not in `planned`.
fn orphans(
    db: &SweepDb,
    layout: &SweepLayout,
    planned: &HashSet<RunId>,
) -> anyhow::Result<Vec<Orphan>> {
    let logits = layout.logit_stores();
    let entries = match std::fs::read_dir(&logits) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::anyhow!("cannot read `{}`: {e}", logits.display())),
    };
    let names: std::collections::HashMap<RunId, String> =
        db.runs()?.into_iter().map(|r| (r.id, r.name)).collect();
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read `{}`", logits.display()))?;
        // a store's folder is named by the run that wrote it
        let id = RunId::from_stored(entry.file_name().to_string_lossy().to_string());
        let path = layout.logit_store(&id);
        if planned.contains(&id) || !path.is_dir() {
            continue;
        }
        out.push(Orphan {
            bytes: dir_bytes(&path),
            name: names.get(&id).cloned(),
            id,
            path,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// Bytes of the files under `path` (unreadable entries count 0).
fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}
