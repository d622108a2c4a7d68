//! Finding a sweep for the commands that read one (`report`, `export`, `fit`): from a sweep
//! file, a sweep name, or — with neither — the only sweep under the results folder; and where
//! its files are ([`SweepLayout`]), built once here and passed down.

use std::path::{Path, PathBuf};

use anyhow::Context;
use pdsweep::spec::Sweep;
use pdsweep::store::{SweepDb, SweepLayout};

use super::UsageError;

/// A sweep whose database exists.
pub struct Located {
    /// The sweep's name.
    pub name: String,
    /// Its files under `results/NAME/` (the sweep file's folder as [`Located::sweep_dir`]
    /// finds it).
    pub layout: SweepLayout,
    /// The sweep file, when one was named.
    pub sweep: Option<Sweep>,
}

impl Located {
    /// Its database file.
    pub fn db_path(&self) -> PathBuf {
        self.layout.database()
    }

    /// The layout with the sweep file's folder: the file named, else the one its current plan
    /// was made from (paths in run configurations are relative to it).
    pub fn with_sweep_dir(&self, db: &SweepDb) -> anyhow::Result<SweepLayout> {
        let sweep_file = match &self.sweep {
            Some(s) => s.path.clone(),
            None => {
                let plan = db.current_plan()?.context("the sweep has no plan")?;
                let info = db.plan_info(plan)?.context("the sweep's plan is missing")?;
                PathBuf::from(info.sweep_path)
            }
        };
        let sweep_dir = sweep_file.parent().map(PathBuf::from).unwrap_or_default();
        Ok(SweepLayout::at(sweep_dir, self.layout.root()))
    }
}

/// Finds the database of `sweep` (a sweep file or a sweep name) under `results`; without one,
/// the only sweep there.
pub fn locate(sweep: Option<&Path>, results: &Path) -> anyhow::Result<Located> {
    let no_db = |name: &str, db: &Path, file: &str| {
        UsageError(format!(
            "sweep `{name}` has no database at `{}` yet\n\nhint: run `pdsweep run {file}` first",
            db.display()
        ))
    };
    match sweep {
        Some(path) if path.is_file() => {
            let sweep = Sweep::load(path)?;
            let name = sweep.file.name.to_string();
            let layout = SweepLayout::for_file(path, results, &name);
            if !layout.database().exists() {
                return Err(no_db(&name, &layout.database(), &path.display().to_string()).into());
            }
            Ok(Located {
                name,
                layout,
                sweep: Some(sweep),
            })
        }
        Some(name) => {
            let name = name.to_string_lossy().into_owned();
            let layout = SweepLayout::new(PathBuf::new(), results, &name);
            if layout.database().exists() {
                Ok(Located {
                    name,
                    layout,
                    sweep: None,
                })
            } else {
                Err(UsageError(format!(
                    "`{name}` is neither a sweep file nor a sweep with a database under `{}`\n\nhint: pass the sweep file, e.g. `sweeps/quickstart.toml`",
                    results.display()
                ))
                .into())
            }
        }
        None => {
            let mut names: Vec<String> = std::fs::read_dir(results)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .filter(|e| {
                            SweepLayout::at(PathBuf::new(), e.path())
                                .database()
                                .is_file()
                        })
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            match names.as_slice() {
                [one] => Ok(Located {
                    name: one.clone(),
                    layout: SweepLayout::new(PathBuf::new(), results, one),
                    sweep: None,
                }),
                [] => Err(UsageError(format!(
                    "no sweep database under `{}`\n\nhint: pass the sweep file, e.g. `sweeps/quickstart.toml`, or `--results DIR`",
                    results.display()
                ))
                .into()),
                many => Err(UsageError(format!(
                    "`{}` holds several sweeps: {}\n\nhint: name one, e.g. `{}`",
                    results.display(),
                    many.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
                    many[0]
                ))
                .into()),
            }
        }
    }
}

/// Locates the sweep, opens its database and gathers everything a report or export reads.
pub fn gather(
    sweep: Option<&Path>,
    results: &Path,
) -> anyhow::Result<(Located, SweepDb, pdsweep::report::data::ReportData)> {
    let located = locate(sweep, results)?;
    let db = SweepDb::open(&located.db_path())?;
    let source = located
        .sweep
        .as_ref()
        .map(|s| pdsweep::report::load::SweepSource {
            path: &s.path,
            text: &s.source,
        });
    let data = pdsweep::report::load::gather(&db, source)?;
    Ok((located, db, data))
}
