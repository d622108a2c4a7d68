//! A sweep's storage: its files under `results/NAME/` ([`SweepLayout`]) and its database
//! (`sweep.db`): schema, migrations, writes and queries, with runs' ids, kinds and states as
//! types ([`RunState`]).

mod db;
mod error;
mod journal;
mod layout;
mod runs;
mod schema;
mod slurm;
mod state;
mod status;
mod tables;
pub mod tfevents;

pub use db::{StoredRun, SweepDb};
pub(crate) use error::StoreError;

pub use layout::SweepLayout;
pub(crate) use runs::{Metric, RunResult};
pub use runs::{this_host, this_process};
pub(crate) use slurm::{SlurmTask, TaskEnd};
pub use state::RunState;
pub use status::RunStatus;

pub(crate) use tables::{RawTable, RunRow};
