//! Running a sweep on Slurm: the graph becomes job arrays with dependencies ([`arrays`]), each
//! job runs `pdsweep worker` (`worker`) and records into its runs' own files, and one
//! coordinator (`coordinator`), holding the sweep's lease, submits, follows (`queue`),
//! ingests and resubmits. Resources come from the sweep file's `[slurm]` table and flags
//! (`settings`); what is submitted is written down first ([`script`]).

pub mod arrays;
pub(crate) mod coordinator;
pub(crate) mod queue;
pub mod script;
pub(crate) mod settings;
pub(crate) mod worker;

pub use coordinator::{CoordinatorOptions, SlurmEvent, candidates, coordinate, in_flight};
pub use queue::Slurm;

pub use settings::{SlurmFlags, SlurmSettings};

pub use worker::work;
