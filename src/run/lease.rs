//! The sweep's lease (`results/NAME/lease.json`): which process may write `sweep.db`. A Slurm
//! coordinator holds it alone; local `pdsweep run` processes of one host share it. It is taken
//! before the database is opened, so a process of another host never opens a database in use
//! (SQLite's WAL index cannot be shared across hosts). The holder renews it every
//! `RENEW_EVERY`; a lease not renewed for `STALE_AFTER`, or held by a dead process of this
//! host, is taken over.

use crate::error::Cause;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::store::{SweepLayout, this_host};

/// How often the holder rewrites the lease.
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(15);
/// A lease not renewed for this long belongs to a process that is gone.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(120);

/// Who holds a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holder {
    /// `pdsweep run` (shared by the processes of one host).
    Run,
    /// `pdsweep slurm`, the coordinator (alone).
    Slurm,
    /// `pdsweep gc`, removing files of runs no longer planned (alone).
    Gc,
}

impl Holder {
    fn command(self) -> &'static str {
        match self {
            Holder::Run => "pdsweep run",
            Holder::Slurm => "pdsweep slurm",
            Holder::Gc => "pdsweep gc",
        }
    }
}

/// The content of a lease file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseInfo {
    /// The holder's host.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// What holds it.
    pub holder: Holder,
    /// When the lease was last written (seconds since the Unix epoch).
    pub renewed_unix: f64,
}

impl LeaseInfo {
    fn mine(holder: Holder) -> LeaseInfo {
        LeaseInfo {
            host: this_host(),
            pid: std::process::id(),
            holder,
            renewed_unix: now_unix(),
        }
    }

    fn age_s(&self) -> f64 {
        (now_unix() - self.renewed_unix).max(0.0)
    }

    /// Whether the holder is gone: not renewed for [`STALE_AFTER`], or a process of this host
    /// that no longer exists.
    fn is_stale(&self) -> bool {
        self.age_s() > STALE_AFTER.as_secs_f64()
            || (self.host == this_host() && !process_exists(self.pid))
    }

    fn is_mine(&self) -> bool {
        self.host == this_host() && self.pid == std::process::id()
    }
}

/// The lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another process holds it.
    #[error("{}", held_message(.path, .info, *.wanted))]
    Held {
        /// The lease file.
        path: PathBuf,
        /// Its holder.
        info: LeaseInfo,
        /// What asked for it.
        wanted: Holder,
    },
    /// The lease file could not be written or read.
    #[error("cannot {action} the sweep's lease `{}`", path.display())]
    Io {
        /// What pdsweep was doing.
        action: &'static str,
        /// The lease file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: Cause,
    },
}

fn held_message(path: &Path, info: &LeaseInfo, wanted: Holder) -> String {
    let who = format!(
        "`{}` on host `{}` (pid {}, lease renewed {:.0}s ago, `{}`)",
        info.holder.command(),
        info.host,
        info.pid,
        info.age_s(),
        path.display()
    );
    match (wanted, info.holder) {
        (Holder::Slurm, Holder::Slurm) => format!(
            "this sweep already has a coordinator: {who}; only one process may write its sweep.db\n\nhint: stop that one (Ctrl-C leaves its jobs running) and run this command again to re-attach, or follow it with `pdsweep status`"
        ),
        (Holder::Run, Holder::Slurm) => format!(
            "this sweep is being run on Slurm by {who}\n\nhint: let the coordinator finish, or stop it first (its jobs keep running; `pdsweep slurm` re-attaches)"
        ),
        (Holder::Slurm, Holder::Run) => format!(
            "this sweep is being run locally by {who}; a coordinator must be the only writer of sweep.db\n\nhint: wait for `pdsweep run` to finish or stop it (Ctrl-C), then run this command again"
        ),
        (Holder::Gc, _) => format!(
            "this sweep is in use by {who}: its files must not be removed while it runs\n\nhint: run `pdsweep gc` when it has finished or been stopped"
        ),
        (_, Holder::Gc) => format!(
            "`pdsweep gc` is removing files of this sweep: {who}\n\nhint: run this command again when it has finished (it takes seconds)"
        ),
        (Holder::Run, Holder::Run) => format!(
            "this sweep's database is in use by {who}, and pdsweep does not share a sweep database across hosts: SQLite's WAL mode keeps an index in shared memory that only processes of one host can see, and file locks over network filesystems are unreliable, so two hosts writing one sweep.db can corrupt it\n\nhint: run `pdsweep run` on `{}` (several processes there may share the sweep), wait until it finishes, or use `pdsweep slurm` to spread the runs over a cluster from one coordinator",
            info.host
        ),
    }
}

/// A lease held by this process; renewed in the background until dropped, then removed.
pub struct Lease {
    path: PathBuf,
    lost: Arc<AtomicBool>,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    /// Takes the lease of the sweep laid out as `layout` for `holder`, or says who holds it.
    pub fn acquire(layout: &SweepLayout, holder: Holder) -> Result<Lease, LeaseError> {
        let path = layout.lease();
        std::fs::create_dir_all(layout.root()).map_err(|e| LeaseError::Io {
            action: "create the folder of",
            path: path.clone(),
            source: e.into(),
        })?;
        for _ in 0..20 {
            match read(&path)? {
                None => {
                    if create_new(&path, &LeaseInfo::mine(holder))? {
                        return Ok(Lease::start(path, holder));
                    }
                }
                Some(current) => {
                    let shared = holder == Holder::Run
                        && current.holder == Holder::Run
                        && current.host == this_host();
                    if !(shared || current.is_mine() || current.is_stale()) {
                        return Err(LeaseError::Held {
                            path,
                            info: current,
                            wanted: holder,
                        });
                    }
                    write(&path, &LeaseInfo::mine(holder))?;
                    // Another process may have taken it over at the same moment: the last
                    // rename wins, and the loser sees that here.
                    std::thread::sleep(Duration::from_millis(50));
                    if read(&path)?.is_some_and(|l| {
                        l.is_mine() || (shared && l.host == this_host() && l.holder == Holder::Run)
                    }) {
                        return Ok(Lease::start(path, holder));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        match read(&path)? {
            Some(info) => Err(LeaseError::Held {
                path,
                info,
                wanted: holder,
            }),
            None => Err(LeaseError::Io {
                action: "take",
                path,
                source: "it keeps changing hands".into(),
            }),
        }
    }

    fn start(path: PathBuf, holder: Holder) -> Lease {
        let lost = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<()>();
        let renewer = {
            let (path, lost) = (path.clone(), lost.clone());
            std::thread::spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(RENEW_EVERY) {
                    if !renew(&path, holder) {
                        lost.store(true, Ordering::SeqCst);
                    }
                }
            })
        };
        Lease {
            path,
            lost,
            stop: Some(tx),
            renewer: Some(renewer),
        }
    }

    /// Whether another process has taken the lease over (this one should stop writing).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The lease file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        if read(&self.path).ok().flatten().is_some_and(|l| l.is_mine()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Rewrites the lease if it is still this process's (or, for `run`, this host's); returns
/// whether it is.
fn renew(path: &Path, holder: Holder) -> bool {
    let ours = match read(path) {
        Ok(None) => holder == Holder::Run, // another local `run` finished and removed it
        Ok(Some(l)) => {
            l.is_mine()
                || (holder == Holder::Run && l.holder == Holder::Run && l.host == this_host())
        }
        Err(_) => true, // a transient read error: keep going, try again next time
    };
    ours && write(path, &LeaseInfo::mine(holder)).is_ok()
}

fn read(path: &Path) -> Result<Option<LeaseInfo>, LeaseError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok().or_else(|| {
            // Unreadable (a writer of another version, or a damaged file): judge it by its age.
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
            let renewed_unix = modified.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
            Some(LeaseInfo {
                host: "?".into(),
                pid: 0,
                holder: Holder::Slurm,
                renewed_unix,
            })
        })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LeaseError::Io {
            action: "read",
            path: path.to_path_buf(),
            source: e.into(),
        }),
    }
}

/// Creates the lease file if it does not exist (atomically); returns whether it did.
fn create_new(path: &Path, info: &LeaseInfo) -> Result<bool, LeaseError> {
    let io = |e: std::io::Error| LeaseError::Io {
        action: "create",
        path: path.to_path_buf(),
        source: e.into(),
    };
    // Write a private file, then link it into place: link fails if the name exists, also on
    // NFS, where O_EXCL is not reliable everywhere.
    let tmp = temp_name(path);
    write_file(&tmp, info).map_err(io)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io(e)),
    }
}

/// Replaces the lease file atomically (temporary file, fsync, rename).
fn write(path: &Path, info: &LeaseInfo) -> Result<(), LeaseError> {
    let tmp = temp_name(path);
    write_file(&tmp, info)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            LeaseError::Io {
                action: "write",
                path: path.to_path_buf(),
                source: e.into(),
            }
        })
}

fn write_file(path: &Path, info: &LeaseInfo) -> std::io::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(serde_json::to_string(info).unwrap_or_default().as_bytes())?;
    file.sync_all()
}

fn temp_name(path: &Path) -> PathBuf {
    path.with_extension(format!("json.tmp-{}-{}", this_host(), std::process::id()))
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn process_exists(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(dir: &Path, host: &str, pid: u32, holder: Holder, age_s: f64) {
        let info = LeaseInfo {
            host: host.into(),
            pid,
            holder,
            renewed_unix: now_unix() - age_s,
        };
        std::fs::write(
            SweepLayout::at("", dir).lease(),
            serde_json::to_string(&info).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_coordinator_excludes_another_and_the_lease_goes_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Slurm).unwrap();
        // this process again (as if a second coordinator): refused unless it is this very
        // process; a fresh lease of another host is refused for every holder
        fake(dir.path(), "elsewhere", 1, Holder::Slurm, 1.0);
        let err = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Slurm)
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("already has a coordinator"),
            "{err}"
        );
        assert!(err.to_string().contains("`elsewhere`"), "{err}");
        let err = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Run)
            .err()
            .unwrap();
        assert!(err.to_string().contains("being run on Slurm"), "{err}");
        drop(first); // not its lease any more: left in place
        assert!(SweepLayout::at("", dir.path()).lease().exists());
    }

    #[test]
    fn run_refuses_a_database_in_use_on_another_host_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), "node-17", 4242, Holder::Run, 5.0);
        let err = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Run)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("node-17") && err.contains("WAL"), "{err}");
        assert!(
            err.contains("hint: run `pdsweep run` on `node-17`"),
            "{err}"
        );
    }

    #[test]
    fn stale_and_dead_holders_are_taken_over_and_local_runs_share() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), "node-17", 4242, Holder::Slurm, 1000.0);
        let lease = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Slurm).unwrap();
        drop(lease);
        assert!(
            !SweepLayout::at("", dir.path()).lease().exists(),
            "removed when dropped"
        );
        // a dead process of this host
        fake(dir.path(), &this_host(), u32::MAX - 1, Holder::Slurm, 1.0);
        let lease = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Run).unwrap();
        // a second local run shares it with the first
        let second = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Run).unwrap();
        assert!(!lease.lost() && !second.lost());
        // but a coordinator may not join a live local run
        fake(dir.path(), &this_host(), 1, Holder::Run, 1.0);
        let err = Lease::acquire(&SweepLayout::at("", dir.path()), Holder::Slurm)
            .err()
            .unwrap();
        assert!(err.to_string().contains("being run locally"), "{err}");
    }
}
