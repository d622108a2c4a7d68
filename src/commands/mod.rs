//! The subcommands, each taking its own plain options (converted from clap in `cli.rs`) and
//! returning `anyhow` errors to `main`.

mod plan;
mod progress;
mod run;
mod size;

pub use plan::{PlanCommand, plan};
pub use run::{RunCommand, RunsFailed, run};
pub use size::{SizeCommand, size};

/// A command-line argument the user must change.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
