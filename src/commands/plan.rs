//! `pdsweep plan`: load the sweep, expand it, record it in the sweep database, print it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use pdsweep::plan::{Plan, PlanFormat, PlanOptions, render};
use pdsweep::run::stack_groups;
use pdsweep::spec::Sweep;
use pdsweep::store::{SweepDb, SweepLayout};

use super::UsageError;

/// Options of `pdsweep plan`.
#[derive(Debug, Clone)]
pub struct PlanCommand {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Output format.
    pub format: PlanFormat,
    /// Results folder.
    pub results: PathBuf,
    /// Do not write the database.
    pub dry_run: bool,
    /// Throughput override.
    pub flops_per_s: Option<f64>,
    /// Refuse a plan with design warnings.
    pub strict: bool,
    /// Do not time a probe on this machine for the estimate (stated defaults instead).
    pub no_probe: bool,
}

/// Runs `pdsweep plan`.
pub fn plan(cmd: PlanCommand) -> anyhow::Result<()> {
    if let Some(f) = cmd.flops_per_s
        && !(f.is_finite() && f > 0.0)
    {
        return Err(UsageError(format!("--flops-per-s `{f}` must be a positive number")).into());
    }
    let sweep = Sweep::load(&cmd.sweep)?;
    let layout = SweepLayout::for_file(&cmd.sweep, &cmd.results, sweep.file.name.as_str());
    let db_path = layout.database();
    let forced = cmd.flops_per_s.is_some() || sweep.file.estimate.flops_per_s.is_some();
    let db = db_path
        .exists()
        .then(|| SweepDb::open(&db_path))
        .transpose()?;
    let options = PlanOptions {
        flops_per_s: cmd.flops_per_s,
        calibration: (!forced)
            .then(|| super::estimate::calibration(db.as_ref(), sweep.file.backend, !cmd.no_probe)),
    };
    drop(db);
    let mut plan = Plan::build(&sweep, &options)?;
    super::corpus::prepare(&mut plan, &sweep, &layout, !cmd.dry_run)?;
    let db = db_path
        .exists()
        .then(|| SweepDb::open(&db_path))
        .transpose()?;
    plan.check_design(&super::priors::priors(&sweep, db.as_ref()));
    drop(db);
    if cmd.strict && !plan.warnings.is_empty() {
        for w in &plan.warnings {
            eprintln!("warning: {w}");
        }
        return Err(UsageError(format!(
            "`--strict`: the plan has {} design warning(s) (above)",
            plan.warnings.len()
        ))
        .into());
    }
    let mut out = render(&plan, cmd.format);
    if cmd.format == PlanFormat::Table {
        out += &stacks_note(&plan, sweep.file.backend);
    }
    if cmd.format != PlanFormat::Table {
        for w in &plan.warnings {
            eprintln!("warning: {w}");
        }
    }
    if !cmd.dry_run {
        let mut db = SweepDb::open(&db_path)?;
        let write = db.write_plan(&plan, &cmd.sweep, &sweep.source)?;
        let note = format!(
            "recorded in {}: {} new runs, {} already there ({} in the database){}\n",
            db_path.display(),
            write.runs_added,
            write.runs_kept,
            write.runs_in_db,
            if write.new_plan {
                ""
            } else {
                "; this sweep file was planned before"
            }
        );
        if cmd.format == PlanFormat::Table {
            out += &note;
        } else {
            eprint!("{note}");
        }
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .context("cannot write the plan to standard output")?;
    Ok(())
}

/// What `run --stack` can do with this plan: the groups of same-shape runs, and what `auto`
/// does on the sweep's backend.
fn stacks_note(plan: &Plan, backend: pdsweep::spec::Backend) -> String {
    let groups = stack_groups(plan.runs.iter().map(|r| (r.name.as_str(), &r.config)));
    if groups.is_empty() {
        return String::new();
    }
    let auto = if backend == pdsweep::spec::Backend::Cpu {
        "on the CPU `--stack auto` stacks only groups of 16 or more runs, and only if they \
         measure faster on this machine; `--stack N` stacks them anyway"
    } else {
        "`--stack auto` stacks as many as measure faster on this backend"
    };
    let mut out = format!(
        "  stacks       {} group(s) of same-shape runs can train as one model when runnable together ({auto}):\n",
        groups.len()
    );
    for (label, names) in groups {
        let more = match names.len() {
            n if n > 6 => format!(" and {} more", n - 4),
            _ => String::new(),
        };
        let shown = if more.is_empty() {
            &names[..]
        } else {
            &names[..4]
        };
        out += &format!(
            "    {} × {label}: {}{more}\n",
            names.len(),
            shown.join(", ")
        );
    }
    out
}
