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

pub use db::{PlanWrite, StoredRun, SweepDb};
pub use error::StoreError;
pub use journal::{JOURNAL_ENV, JournalMode, journal_mode_for};
pub use layout::SweepLayout;
pub use runs::{Metric, RunResult, STALE_AFTER_S, this_host, this_process};
pub use slurm::{Session, SlurmTask, TaskEnd};
pub use state::RunState;
pub use status::{RunStatus, remaining_seconds};
pub use tables::{MetricRow, PlanInfo, RawTable, RunRow};
