//! `pdsweep gc`: frees the disk held by the logit stores of runs that are no longer in the
//! sweep's current plan (a sweep file edited to new teachers, budgets or truncations leaves its
//! old stores behind: 18 GB in the capacity-gap reference after tuning its teachers). Results
//! are kept: a removed store's logit pass becomes a planned run again (its result is only the
//! teacher's held-out loss), so a later plan that needs the store re-creates it. It takes the
//! sweep's lease alone, so it never runs beside `pdsweep run` or `pdsweep slurm`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use pdsweep::run::lease::{Holder, Lease};
use pdsweep::run::store_dir;
use pdsweep::spec::Sweep;
use pdsweep::spec::units::format_bytes;
use pdsweep::store::SweepDb;

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
    id: String,
    name: Option<String>,
    path: PathBuf,
    bytes: u64,
}

/// Runs `pdsweep gc`.
pub fn gc(cmd: GcCommand) -> anyhow::Result<()> {
    let sweep = Sweep::load(&cmd.sweep)?;
    let name = sweep.file.name.as_str();
    let dir = cmd.results.join(name);
    let db_path = SweepDb::path_for(&cmd.results, name);
    if !db_path.exists() {
        return Err(UsageError(format!(
            "sweep `{name}` has no database at `{}`: nothing to collect",
            db_path.display()
        ))
        .into());
    }
    let _lease = match cmd.dry_run {
        true => None,
        false => Some(Lease::acquire(&dir, Holder::Gc)?),
    };
    let db = SweepDb::open(&db_path)?;
    let plan = db.current_plan()?.ok_or_else(|| {
        UsageError(format!(
            "sweep `{name}` has no plan in `{}`: nothing to compare the stores with",
            db_path.display()
        ))
    })?;
    let planned: HashSet<String> = db.plan_runs(plan)?.into_iter().map(|r| r.id).collect();
    let orphans = orphans(&db, &cmd.results.join(name), &planned)?;
    let total: u64 = orphans.iter().map(|o| o.bytes).sum();
    if orphans.is_empty() {
        println!(
            "every logit store in `{}` belongs to a run of the current plan: nothing to remove",
            dir.join("logits").display()
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
            .map_err(|e| anyhow::anyhow!("cannot remove `{}`: {e}", o.path.display()))?;
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

/// The store folders under `results_dir/logits` whose run is not in `planned`.
fn orphans(
    db: &SweepDb,
    results_dir: &Path,
    planned: &HashSet<String>,
) -> anyhow::Result<Vec<Orphan>> {
    let logits = results_dir.join("logits");
    let entries = match std::fs::read_dir(&logits) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::anyhow!("cannot read `{}`: {e}", logits.display())),
    };
    let names: std::collections::HashMap<String, String> =
        db.runs()?.into_iter().map(|r| (r.id, r.name)).collect();
    let mut out = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| anyhow::anyhow!("cannot read `{}`: {e}", logits.display()))?;
        let id = entry.file_name().to_string_lossy().to_string();
        let path = store_dir(results_dir, &id);
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
