//! pdsweep: plan, run and analyse pre-training distillation sweeps.
//!
//! A sweep file ([`spec`]) expands into a graph of runs ([`plan`]) stored in one SQLite database
//! per sweep ([`store`]); [`run`] executes them: corpora and tokens ([`data`]), the transformer
//! ([`model`]) and the training loop ([`train`]); [`fit`] fits scaling laws to the results and
//! [`report`] draws figures and exports tables.
#![warn(missing_docs)]

pub mod alloc;
pub mod atomic;
pub mod data;
pub mod digest;
pub mod distill;
pub mod error;
pub mod fit;
pub mod generate;
pub mod hf;
pub mod kernels;
pub mod model;
pub mod plan;
pub mod report;
pub mod run;
pub mod similarity;
pub mod spec;
pub mod store;
pub mod suggest;
pub mod train;
