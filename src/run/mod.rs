//! Executing a planned sweep, in three parts: how a unit of work is executed, per kind of run
//! (`execute`, shared by every scheduler); where units are scheduled (worker threads of this
//! process, or [`slurm`] job arrays); and where results are recorded ([`record`]: the sweep
//! database directly, or each run's own files, ingested by the Slurm coordinator). The
//! sweep's [`lease`] keeps writers of its database on one host. The runner never prints; it
//! reports events to a callback.

mod devices;
mod error;
mod events;
pub(crate) mod execute;
mod graph;
pub mod lease;
mod local;
mod pools;
pub mod record;
pub mod slurm;
pub(crate) mod stacks;
pub mod tuning;
mod unit;

pub use devices::{DeviceChoice, DeviceChoiceError};
pub use events::RunEvent;
pub use execute::Outcome;

pub use local::{RunOptions, Summary, execute};

pub use stacks::{StackAdvisor, StackPolicy, groups as stack_groups};
