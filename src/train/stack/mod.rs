//! Stacks: K same-shape runs trained as one batched model (`docs/src/guide/running.md`), each
//! member computing what its solo run computes and keeping its own seed, data, objective, schedule,
//! optimiser state, clipping, evaluations, events and checkpoint.

mod loss;
mod optim;
pub mod probe;
mod trainer;

pub use trainer::{StackMember, train_stack};
