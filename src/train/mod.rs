//! Training: the loop, learning-rate and α schedules, objectives, checkpoints, the choice of
//! compute device (and what the cuda backend needs at run time), mixed precision, and
//! throughput (model FLOPs, MFU, benchmarks).

pub(crate) mod agreement;
pub mod bench;
pub mod checkpoint;
mod config;
pub mod cuda;
mod device;
mod objective;
pub mod precision;
pub mod probe;
pub mod schedule;
pub mod stack;
mod trainer;
pub mod utilization;

pub use agreement::agreement;
pub(crate) use config::TrainConfig;
pub(crate) use device::BackendError;
pub use device::{device_for, device_label, wgpu_adapters};
pub(crate) use objective::LossTerms;
pub use objective::{
    DistillObjective, NextToken, Objective, cross_entropy, head_input, summed_cross_entropy,
};
pub(crate) use trainer::eval_rows;
pub use trainer::{TrainError, TrainEvent, TrainJob, TrainOutcome, evaluate, init_model, train};
