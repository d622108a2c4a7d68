//! The subcommands, each taking its own plain options (converted from clap in `cli.rs`) and
//! returning `anyhow` errors to `main`.

mod bench;
mod corpus;
mod degrees;
mod devices;
mod estimate;
mod export;
mod export_models;
mod fit;
mod gc;
mod locate;
mod plan;
mod priors;
mod progress;
mod recommend;
mod report;
mod run;
mod sample;
mod size;
mod slurm;
mod status;
mod suggest;
mod triage;
mod worker;

pub use bench::{BenchCommand, bench};
pub use devices::{DevicesCommand, devices};
pub use export::{ExportCommand, export};
pub use fit::{FitCommand, FitTarget, fit_command as fit};
pub use gc::{GcCommand, gc};
pub use plan::{PlanCommand, plan};
pub use recommend::{RecommendCommand, recommend};
pub use report::{ReportCommand, report};
pub use run::{Interrupted, RunCommand, RunsFailed, run};
pub use sample::{PromptSource, SampleCommand, sample};
pub use size::{SizeCommand, size};
pub use slurm::{SlurmCommand, slurm};
pub use status::{StatusCommand, status};
pub use suggest::{SuggestCommand, suggest};
pub use triage::{TriageCommand, triage};
pub use worker::{WorkerCommand, WorkerStopped, worker};

/// A command-line argument the user must change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
