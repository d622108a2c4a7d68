//! The sweep database (`results/NAME/sweep.db`): schema, migrations, writes and queries.

mod db;
mod error;
mod schema;

pub use db::{PlanWrite, StoredRun, SweepDb};
pub use error::StoreError;
