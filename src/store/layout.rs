//! Where one sweep's files live: the folder of its sweep file (the paths the file names are
//! relative to it) and `results/NAME/`, which holds the sweep database and everything the runs
//! write beside it. Every path under `results/NAME/` is spelled here and nowhere else; a
//! [`SweepLayout`] is built once, where a command finds the sweep, and passed down.

use std::path::{Path, PathBuf};

use crate::plan::RunId;

/// The files of one sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepLayout {
    /// The sweep file's folder.
    sweep_dir: PathBuf,
    /// `results/NAME/`.
    root: PathBuf,
}

impl SweepLayout {
    /// The layout of sweep `name` under the results folder `results`, for a sweep file in
    /// `sweep_dir`.
    pub fn new(sweep_dir: impl Into<PathBuf>, results: &Path, name: &str) -> SweepLayout {
        SweepLayout::at(sweep_dir, results.join(name))
    }

    /// The layout whose `results/NAME/` folder is `root` (a Slurm job's manifest, a database
    /// found on disk), for a sweep file in `sweep_dir`.
    pub fn at(sweep_dir: impl Into<PathBuf>, root: impl Into<PathBuf>) -> SweepLayout {
        SweepLayout {
            sweep_dir: sweep_dir.into(),
            root: root.into(),
        }
    }

    /// The layout of the sweep file at `sweep_file`, named `name`, under `results`.
    pub fn for_file(sweep_file: &Path, results: &Path, name: &str) -> SweepLayout {
        let sweep_dir = sweep_file.parent().map(PathBuf::from).unwrap_or_default();
        SweepLayout::new(sweep_dir, results, name)
    }

    /// The sweep file's folder: corpus, tokenizer and pre-trained paths are relative to it.
    pub fn sweep_dir(&self) -> &Path {
        &self.sweep_dir
    }

    /// `results/NAME/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` as the sweep file writes it, resolved against the sweep file's folder.
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.sweep_dir.join(path)
    }

    /// `sweep.db`, the sweep database.
    pub fn database(&self) -> PathBuf {
        self.root.join("sweep.db")
    }

    /// `lease.json`: which process (and host) may write the database.
    pub fn lease(&self) -> PathBuf {
        self.root.join("lease.json")
    }

    /// `checkpoints/`.
    pub fn checkpoints(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// `checkpoints/ID.ckpt`: run `id`'s model, optimiser state and position.
    pub fn checkpoint(&self, id: &RunId) -> PathBuf {
        self.checkpoints().join(format!("{id}.ckpt"))
    }

    /// `logits/`.
    pub fn logit_stores(&self) -> PathBuf {
        self.root.join("logits")
    }

    /// `logits/ID/`: the logit store the logit pass `id` writes.
    pub fn logit_store(&self, id: &RunId) -> PathBuf {
        self.logit_stores().join(id.as_str())
    }

    /// `cache/`: token caches, corpus facts and trained tokenizers.
    pub fn cache(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// `slurm/`: batch scripts, manifests, logs and what jobs write.
    pub fn slurm(&self) -> PathBuf {
        self.root.join("slurm")
    }

    /// `slurm/arrays/`: the batch scripts and their manifests.
    pub fn slurm_arrays(&self) -> PathBuf {
        self.slurm().join("arrays")
    }

    /// `slurm/arrays/JOB.json`: the manifest of array job `job` (every unit of work by index).
    pub fn slurm_manifest(&self, job: &str) -> PathBuf {
        self.slurm_arrays().join(format!("{job}.json"))
    }

    /// `slurm/arrays/JOB.sh`: the batch script of array job `job`.
    pub fn slurm_script(&self, job: &str) -> PathBuf {
        self.slurm_arrays().join(format!("{job}.sh"))
    }

    /// `slurm/logs/`: the jobs' output (`JOBID_INDEX.log`).
    pub fn slurm_logs(&self) -> PathBuf {
        self.slurm().join("logs")
    }

    /// `slurm/runs/`.
    pub fn slurm_runs(&self) -> PathBuf {
        self.slurm().join("runs")
    }

    /// `slurm/runs/ID/`: what the jobs of run `id` wrote (start files, metric segments, its
    /// result or failure).
    pub fn slurm_run(&self, id: &RunId) -> PathBuf {
        self.slurm_runs().join(id.as_str())
    }

    /// `export/`: `pdsweep export`'s default folder.
    pub fn export(&self) -> PathBuf {
        self.root.join("export")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_under_the_sweeps_folder() {
        let layout = SweepLayout::for_file(Path::new("sweeps/a.toml"), Path::new("results"), "a");
        let id = RunId::from_stored("0123456789abcdef".into());
        assert_eq!(layout.sweep_dir(), Path::new("sweeps"));
        assert_eq!(layout.resolve("../data"), Path::new("sweeps/../data"));
        assert_eq!(layout.database(), Path::new("results/a/sweep.db"));
        assert_eq!(
            layout.checkpoint(&id),
            Path::new("results/a/checkpoints/0123456789abcdef.ckpt")
        );
        assert_eq!(
            layout.logit_store(&id),
            Path::new("results/a/logits/0123456789abcdef")
        );
        assert_eq!(
            layout.slurm_run(&id),
            Path::new("results/a/slurm/runs/0123456789abcdef")
        );
        for p in [
            layout.lease(),
            layout.cache(),
            layout.slurm_arrays(),
            layout.slurm_logs(),
            layout.export(),
        ] {
            assert!(p.starts_with(layout.root()), "{}", p.display());
        }
    }
}
