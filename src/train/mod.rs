//! Training: the loop, learning-rate and α schedules, objectives, checkpoints, and the choice
//! of compute device.

pub mod checkpoint;
mod device;
mod objective;
pub mod probe;
pub mod schedule;
pub mod stack;
mod trainer;

pub use device::{MissingBackend, device_for};
pub use objective::{DistillTerm, LossTerms, NextToken, Objective, cross_entropy};
pub use trainer::{
    TrainError, TrainEvent, TrainJob, TrainOutcome, batch_tensors, eval_rows, evaluate, init_model,
    optimizer, train,
};
