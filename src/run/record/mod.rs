//! Recording what runs produce: metric rows, heartbeats, and each run's end (result, failure, or
//! handed back). Local runs record straight into the sweep database (`DbRecorder`); Slurm jobs
//! never open it and write their own files, which the coordinator ingests. Either way each run
//! also writes TensorBoard event files ([`TensorBoard`]).

mod db;
mod files;
mod ingest;
mod tensorboard;

pub(crate) use db::DbRecorder;
pub use files::FileRecorder;
pub(crate) use files::RunFiles;
pub(crate) use ingest::Ingester;
pub use tensorboard::{TensorBoard, tensorboard_dir};

use super::error::RecordError;
use crate::plan::RunId;
use crate::store::RunResult;
use crate::train::TrainEvent;

/// Where a run's metrics and end are recorded.
pub trait Recorder {
    /// Run `id` begins in this process (before its data is prepared).
    fn begin(&mut self, _id: &RunId) -> Result<(), RecordError> {
        Ok(())
    }
    /// A training event of run `id`: metric rows for steps and evaluations, a sign of life for
    /// the others.
    fn event(&mut self, id: &RunId, event: &TrainEvent) -> Result<(), RecordError>;
    /// Run `id` is alive (runs without metric rows, such as logit passes, call this).
    fn heartbeat(&mut self, id: &RunId) -> Result<(), RecordError>;
    /// Run `id` finished with `result`.
    fn finish(&mut self, id: &RunId, result: &RunResult) -> Result<(), RecordError>;
    /// Run `id` failed for `reason` (its metrics so far are kept).
    fn fail(&mut self, id: &RunId, reason: &str) -> Result<(), RecordError>;
    /// Run `id` stopped before its end (a stop request; it resumes from its checkpoint).
    fn release(&mut self, id: &RunId) -> Result<(), RecordError>;
    /// A finished student's gain over its baseline, where this recorder can tell.
    fn gain(&mut self, _id: &RunId) -> Option<f64> {
        None
    }
}
