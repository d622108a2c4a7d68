//! Where time estimates get their prices: the sweep's own finished runs when there are enough
//! of them, else a calibration probe of this machine (run once and kept in the user's cache
//! folder, keyed by backend, pdsweep version and CPU), else the backend's stated defaults.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use pdsweep::plan::Calibration;
use pdsweep::spec::Backend;
use pdsweep::store::SweepDb;
use pdsweep::train::device_for;

/// A probe result kept between invocations.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    machine: String,
    calibration: Calibration,
}

/// The prices for `backend`: fitted on `db`'s finished runs, else probed (when `probe_allowed`),
/// else stated.
pub fn calibration(db: Option<&SweepDb>, backend: Backend, probe_allowed: bool) -> Calibration {
    let fallback = if probe_allowed {
        probed(backend).unwrap_or_else(|| Calibration::stated(backend))
    } else {
        Calibration::stated(backend)
    };
    match db {
        Some(db) => db.calibration(backend.as_str(), fallback),
        None => fallback,
    }
}

/// What identifies this machine and binary for a cached probe.
pub(crate) fn machine(backend: Backend) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "{backend} | pdsweep {} | {cpu} | {cores} threads",
        env!("CARGO_PKG_VERSION")
    )
}

/// `$PDSWEEP_CACHE_DIR`, else `$XDG_CACHE_HOME/pdsweep`, else `~/.cache/pdsweep`.
fn cache_file(backend: Backend) -> Option<PathBuf> {
    cache_file_named(&format!("calibration-{backend}.json"))
}

/// The file `name` in pdsweep's cache folder (see [`cache_file`]).
pub(crate) fn cache_file_named(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("PDSWEEP_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("pdsweep")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/pdsweep")))?;
    Some(dir.join(name))
}

/// The cached probe of this machine, or a fresh one (kept for next time).
fn probed(backend: Backend) -> Option<Calibration> {
    let machine = machine(backend);
    let path = cache_file(backend);
    if let Some(cached) = path
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Cached>(&b).ok())
        .filter(|c| c.machine == machine)
    {
        return Some(cached.calibration);
    }
    let device = device_for(backend, 0).ok()?;
    eprintln!("calibrating time estimates on this machine (a few seconds, once)...");
    let calibration = Calibration::probe(&device, format!("probed on this machine ({machine})"))?;
    if let Some(path) = path {
        let cached = Cached {
            machine,
            calibration: calibration.clone(),
        };
        if let Ok(json) = serde_json::to_vec_pretty(&cached) {
            // A cache that cannot be written only means probing again next time.
            let _ = pdsweep::atomic::write_atomic(&path, &[&json]);
        }
    }
    Some(calibration)
}
