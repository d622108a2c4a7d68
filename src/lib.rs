//! pdsweep: plan, run and analyse pre-training distillation sweeps.
//!
//! A sweep file ([`spec`]) expands into a graph of runs ([`plan`]) stored in one SQLite database
//! per sweep ([`store`]).
#![warn(missing_docs)]

pub mod plan;
pub mod spec;
pub mod store;
