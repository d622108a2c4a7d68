//! Executing a unit of work, per kind of run: prepare the data, then train a teacher or
//! baseline (or adopt its tuned candidate), measure a pre-trained teacher, distil a student
//! (online, or offline from its logit store), or write a logit store; metrics and each run's
//! end go to a `Recorder`. The local worker pool and the Slurm worker both execute runs through
//! here, so a run computes the same thing wherever it runs.
//!
//! Every run, alone (`solo`) or in a stack (`stacked`), goes through one core (`core`:
//! its context, begin, end and result row); what it does in between is its kind's (`adopt`,
//! `logits`, `pretrained`, and `teacher` for a student's teacher and targets).

mod adopt;
mod core;
mod logits;
mod pretrained;
mod solo;
mod stacked;
mod teacher;
mod unit;

pub(crate) use core::ExecEnv;
pub use core::Outcome;
pub(crate) use unit::execute_unit;
