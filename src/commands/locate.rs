//! Finding a sweep's database for the commands that read one (`report`, `export`): from a sweep
//! file, a sweep name, or — with neither — the only sweep under the results folder.

use std::path::{Path, PathBuf};

use pdsweep::spec::Sweep;
use pdsweep::store::SweepDb;

use super::UsageError;

/// A sweep whose database exists.
pub struct Located {
    /// The sweep's name.
    pub name: String,
    /// Its database.
    pub db_path: PathBuf,
    /// The sweep file, when one was named.
    pub sweep: Option<Sweep>,
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
            let db_path = SweepDb::path_for(results, &name);
            if !db_path.exists() {
                return Err(no_db(&name, &db_path, &path.display().to_string()).into());
            }
            Ok(Located {
                name,
                db_path,
                sweep: Some(sweep),
            })
        }
        Some(name) => {
            let name = name.to_string_lossy().into_owned();
            let db_path = SweepDb::path_for(results, &name);
            if db_path.exists() {
                Ok(Located {
                    name,
                    db_path,
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
                        .filter(|e| e.path().join("sweep.db").is_file())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            match names.as_slice() {
                [one] => Ok(Located {
                    name: one.clone(),
                    db_path: SweepDb::path_for(results, one),
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
    let db = SweepDb::open(&located.db_path)?;
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
