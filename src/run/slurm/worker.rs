//! `pdsweep worker`: what a Slurm job runs. It reads its unit of work from the array's
//! manifest, executes it (see [`crate::run::execute`](mod@crate::run::execute)) on this node, and records into the
//! runs' own files, never into the sweep database. A stop request (Slurm's USR2 warning before
//! the time limit, or SIGTERM from `scancel` or preemption) ends the current step with a
//! checkpoint; the caller then asks Slurm to requeue the job, which resumes from there.

use crate::error::Cause;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use super::script::{MANIFEST_VERSION, Manifest};
use crate::run::error::RunError;
use crate::run::events::RunEvent;
use crate::run::execute::{ExecEnv, Outcome, execute_unit};
use crate::run::record::FileRecorder;
use crate::train;

/// The worker could not start its unit.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The manifest could not be read.
    #[error("cannot read the job manifest `{}`", path.display())]
    Manifest {
        /// The manifest.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The manifest has no unit at this index.
    #[error("the job manifest `{}` has no unit of work at index {index}", path.display())]
    NoUnit {
        /// The manifest.
        path: std::path::PathBuf,
        /// The index asked for.
        index: u32,
    },
    /// Executing failed (recording, backend).
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Reads the manifest at `path`.
pub(crate) fn read_manifest(path: &Path) -> Result<Manifest, WorkerError> {
    let fail = |reason: Cause| WorkerError::Manifest {
        path: path.to_path_buf(),
        source: reason,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.into()))?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| fail(e.into()))?;
    if manifest.version != MANIFEST_VERSION {
        return Err(fail(format!(
            "format version {} (this pdsweep reads {MANIFEST_VERSION}; rebuild the jobs' pdsweep)",
            manifest.version
        ).into()));
    }
    Ok(manifest)
}

/// Executes unit `index` of the manifest at `manifest_path` as session `session`, stopping
/// gracefully when `stop` is set; returns each run's outcome.
pub fn work(
    manifest_path: &Path,
    index: u32,
    session: &str,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Vec<Outcome>, WorkerError> {
    let manifest = read_manifest(manifest_path)?;
    let unit = manifest.units.get(&index).ok_or(WorkerError::NoUnit {
        path: manifest_path.to_path_buf(),
        index,
    })?;
    // Slurm gives the job its GPUs as devices 0.. (CUDA_VISIBLE_DEVICES).
    let device = train::device_for(manifest.backend, 0).map_err(RunError::from)?;
    let layout = manifest.layout();
    let mut recorder = FileRecorder::new(&layout, session);
    let env = ExecEnv {
        layout,
        backend: manifest.backend,
        stop,
    };
    Ok(execute_unit(unit, &env, &device, &mut recorder, on_event)?)
}
