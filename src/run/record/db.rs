//! Recording into the sweep database directly: what `pdsweep run` does on one machine.

use super::Recorder;
use crate::plan::RunId;
use crate::run::error::RecordError;
use crate::store::{Metric, RunResult, SweepDb};
use crate::train::TrainEvent;

/// Records into the sweep database (metrics, heartbeats, results and states).
pub(crate) struct DbRecorder<'a> {
    db: &'a mut SweepDb,
}

impl<'a> DbRecorder<'a> {
    /// A recorder writing to `db`.
    pub fn new(db: &'a mut SweepDb) -> Self {
        DbRecorder { db }
    }
}

impl Recorder for DbRecorder<'_> {
    fn event(&mut self, id: &RunId, event: &TrainEvent) -> Result<(), RecordError> {
        if let Some(metric) = metric_of(event) {
            self.db.record_metric(id, &metric)?;
        }
        if !matches!(event, TrainEvent::Eval { .. }) {
            self.db.heartbeat(id)?;
        }
        Ok(())
    }

    fn heartbeat(&mut self, id: &RunId) -> Result<(), RecordError> {
        Ok(self.db.heartbeat(id)?)
    }

    fn finish(&mut self, id: &RunId, result: &RunResult) -> Result<(), RecordError> {
        Ok(self.db.finish(id, result)?)
    }

    fn fail(&mut self, id: &RunId, reason: &str) -> Result<(), RecordError> {
        Ok(self.db.fail(id, reason)?)
    }

    fn release(&mut self, id: &RunId) -> Result<(), RecordError> {
        Ok(self.db.release(id)?)
    }

    fn gain(&mut self, id: &RunId) -> Option<f64> {
        self.db.gain(id).ok().flatten()
    }
}

/// The metric row of a step or evaluation event (`None` for the other events).
pub fn metric_of(event: &TrainEvent) -> Option<Metric<'static>> {
    match *event {
        TrainEvent::Step {
            step,
            tokens,
            loss,
            lr,
            tokens_per_s,
            wall_s,
        } => Some(Metric {
            kind: "train",
            step,
            tokens,
            loss,
            bpb: None,
            lr: Some(lr),
            tokens_per_s: Some(tokens_per_s),
            wall_s,
        }),
        TrainEvent::Eval {
            step,
            tokens,
            loss,
            bpb,
            wall_s,
        } => Some(Metric {
            kind: "val",
            step,
            tokens,
            loss,
            bpb: Some(bpb),
            lr: None,
            tokens_per_s: None,
            wall_s,
        }),
        TrainEvent::Started { .. } | TrainEvent::Checkpoint { .. } => None,
    }
}
