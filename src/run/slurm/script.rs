//! What a submission writes before calling `sbatch`: the manifest (every unit of work of the
//! array, by index, with the paths a job needs) and the batch script, which asks for the
//! resources and runs `pdsweep worker MANIFEST --index $SLURM_ARRAY_TASK_ID`. Both stay under
//! `results/NAME/slurm/` so a researcher can read exactly what was submitted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::arrays::{ArrayPlan, array_spec};
use super::settings::SlurmSettings;
use crate::run::unit::WorkUnit;
use crate::spec::Backend;
use crate::spec::slurm::SlurmTime;
use crate::store::SweepLayout;

/// The version of the manifest format (a worker refuses others).
pub(crate) const MANIFEST_VERSION: u32 = 1;

/// Everything the jobs of one array need, read by `pdsweep worker`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// The sweep's name.
    pub sweep: String,
    /// The sweep file's folder (corpus paths are relative to it).
    pub sweep_dir: PathBuf,
    /// `results/NAME/` (see [`Manifest::layout`]).
    pub results_dir: PathBuf,
    /// The backend to train on.
    pub backend: Backend,
    /// The unit of work of each array index.
    pub units: BTreeMap<u32, WorkUnit>,
}

impl Manifest {
    /// Where the sweep's files are, as the manifest records them.
    pub fn layout(&self) -> SweepLayout {
        SweepLayout::at(&self.sweep_dir, &self.results_dir)
    }
}

/// The batch script of `plan`, submitted as `job_name`, waiting as `dependency` says.
pub fn batch_script(
    job_name: &str,
    plan: &ArrayPlan,
    settings: &SlurmSettings,
    dependency: Option<&str>,
    manifest: &Path,
    logs: &Path,
) -> String {
    let r = &plan.resources;
    let mut lines = vec![
        "#!/bin/sh".to_string(),
        format!(
            "# pdsweep: {} {} run(s); written by `pdsweep slurm`, which follows the jobs",
            plan.tasks.len(),
            plan.kind
        ),
        format!("#SBATCH --job-name={job_name}"),
        format!(
            "#SBATCH --array={}",
            array_spec(&plan.tasks, settings.max_parallel)
        ),
        format!("#SBATCH --output={}/%A_%a.log", logs.display()),
        "#SBATCH --open-mode=append".into(),
        "#SBATCH --requeue".into(),
        format!("#SBATCH --signal=B:USR2@{}", settings.signal_s),
        "#SBATCH --kill-on-invalid-dep=yes".into(),
        format!("#SBATCH --cpus-per-task={}", r.cpus),
        format!("#SBATCH --time={}", SlurmTime::format(r.time_s)),
    ];
    if let Some(d) = dependency {
        lines.push(format!("#SBATCH --dependency={d}"));
    }
    if let Some(mem) = r.mem_mb {
        lines.push(format!("#SBATCH --mem={mem}M"));
    }
    if r.gpus > 0 {
        lines.push(format!("#SBATCH --gres=gpu:{}", r.gpus));
    }
    if let Some(p) = &r.partition {
        lines.push(format!("#SBATCH --partition={p}"));
    }
    if let Some(a) = &settings.account {
        lines.push(format!("#SBATCH --account={a}"));
    }
    if let Some(q) = &settings.qos {
        lines.push(format!("#SBATCH --qos={q}"));
    }
    lines.extend(r.options.iter().map(|o| format!("#SBATCH {o}")));
    lines.push(
        "# burn's CPU backend uses one thread per allocated CPU, not per CPU of the node".into(),
    );
    lines.push("export RAYON_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"".into());
    lines.push(format!(
        "exec {} worker {} --index \"$SLURM_ARRAY_TASK_ID\"",
        shell_quote(&settings.binary.to_string_lossy()),
        shell_quote(&manifest.to_string_lossy())
    ));
    lines.join("\n") + "\n"
}

/// `text` in single quotes for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::slurm::arrays::Dependency;
    use crate::run::slurm::settings::{Resources, SlurmFlags};

    #[test]
    fn the_script_asks_for_everything_and_execs_the_worker() {
        let flags = SlurmFlags {
            account: Some("lab".into()),
            max_parallel: Some(4),
            ..Default::default()
        };
        let settings = SlurmSettings::new(None, flags, "/opt/pd sweep/pdsweep".into());
        let plan = ArrayPlan {
            kind: crate::plan::RunKind::Teacher,
            resources: Resources {
                partition: Some("gpu".into()),
                cpus: 8,
                mem_mb: Some(16_384),
                gpus: 1,
                time_s: 7200,
                options: vec!["--constraint=a100".into()],
            },
            tasks: [(0, "a"), (1, "b"), (5, "c")]
                .map(|(i, id)| (i, crate::plan::RunId::from_stored(id.into())))
                .to_vec(),
            dependency: Dependency::None,
        };
        let text = batch_script(
            "pds-x-s1",
            &plan,
            &settings,
            Some("aftercorr:41"),
            Path::new("/r/slurm/arrays/pds-x-s1.json"),
            Path::new("/r/slurm/logs"),
        );
        for line in [
            "#SBATCH --array=0-1,5%4",
            "#SBATCH --signal=B:USR2@120",
            "#SBATCH --kill-on-invalid-dep=yes",
            "#SBATCH --requeue",
            "#SBATCH --dependency=aftercorr:41",
            "#SBATCH --cpus-per-task=8",
            "#SBATCH --mem=16384M",
            "#SBATCH --gres=gpu:1",
            "#SBATCH --time=0-02:00:00",
            "#SBATCH --partition=gpu",
            "#SBATCH --account=lab",
            "#SBATCH --constraint=a100",
            "#SBATCH --output=/r/slurm/logs/%A_%a.log",
            "exec '/opt/pd sweep/pdsweep' worker '/r/slurm/arrays/pds-x-s1.json' --index \"$SLURM_ARRAY_TASK_ID\"",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in\n{text}"
            );
        }
        assert!(text.starts_with("#!/bin/sh\n"));
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
