//! The sweep database (`results/NAME/sweep.db`): schema, migrations, writes and queries.

mod db;
mod error;
mod runs;
mod schema;
mod status;
mod tables;

pub use db::{PlanWrite, StoredRun, SweepDb};
pub use error::StoreError;
pub use runs::{Metric, RunResult, STALE_AFTER_S, this_process};
pub use status::{RunStatus, remaining_seconds};
pub use tables::{MetricRow, PlanInfo, RawTable, RunRow};
