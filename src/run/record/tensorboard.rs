//! Live curves: every run of a unit also writes TensorBoard event files, under
//! `results/NAME/tensorboard/RUN/`, beside what its recorder keeps.
//!
//! [`TensorBoard`] wraps the unit's recorder (the database for `run`, the run's files for a
//! Slurm job): each event goes to the recorder first, then to the run's event file as scalars
//! (`train/loss`, `train/lr`, `train/tokens_per_s`, `train/tokens`, `train/alpha` for a
//! distilled student, `heldout/loss`, `heldout/bpb`, and at the end `result/heldout_loss` and,
//! once its baseline is known, `result/gain`). The x-axis is the optimiser step.
//!
//! Why a failing event file never fails the run: the recorder is the record, the curves are a
//! view of it; a run whose event file cannot be written (a full disk, a read-only folder) goes
//! on and keeps recording, without curves from then on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::Recorder;
use crate::plan::RunId;
use crate::run::error::RecordError;
use crate::run::unit::WorkUnit;
use crate::spec::Schedule;
use crate::store::RunResult;
use crate::store::tfevents::EventFile;
use crate::train::TrainEvent;

/// The folder of a sweep's event files: one folder per run below it, named after the run
/// (`tensorboard --logdir results/NAME/tensorboard`).
pub fn tensorboard_dir(root: &Path) -> PathBuf {
    root.join("tensorboard")
}

/// What the event files need to know about a run.
struct Track {
    /// Its folder.
    dir: PathBuf,
    /// A distilled student's α schedule (logged per step).
    alpha: Option<Schedule>,
    /// Its optimiser steps (α's schedule is a function of them).
    steps: u64,
    /// Its event file, opened at its first event (`None` before, and after a failed write).
    file: Option<EventFile>,
    /// Whether writing failed (no more attempts).
    failed: bool,
    /// The last step logged (the result's scalars go there).
    last_step: u64,
}

/// A recorder that also writes each run's curves as TensorBoard event files.
pub struct TensorBoard<'a> {
    inner: &'a mut dyn Recorder,
    runs: HashMap<RunId, Track>,
}

impl<'a> TensorBoard<'a> {
    /// Wraps `inner` for the runs of `unit`, their event files under `root`'s `tensorboard/`.
    pub fn new(inner: &'a mut dyn Recorder, unit: &WorkUnit, root: &Path) -> Self {
        let dir = tensorboard_dir(root);
        let runs = unit
            .runs
            .iter()
            .map(|run| {
                let config = run.config().ok();
                let track = Track {
                    dir: dir.join(&run.name),
                    alpha: config
                        .as_ref()
                        .and_then(|c| c.distill.as_ref())
                        .map(|d| d.alpha.0),
                    steps: config
                        .as_ref()
                        .and_then(|c| c.train.as_ref())
                        .map_or(0, |t| t.steps),
                    file: None,
                    failed: false,
                    last_step: 0,
                };
                (run.id.clone(), track)
            })
            .collect();
        TensorBoard { inner, runs }
    }

    /// Appends `values` at `step` to run `id`'s event file (opened on first use); a failure
    /// stops that run's curves, never the run.
    fn log(&mut self, id: &RunId, step: u64, values: &[(&str, f64)]) {
        let Some(track) = self.runs.get_mut(id) else {
            return;
        };
        if track.failed {
            return;
        }
        if track.file.is_none() {
            track.file = EventFile::create(&track.dir).ok();
        }
        let written = track
            .file
            .as_mut()
            .is_some_and(|f| f.scalars(step, values).is_ok());
        if written {
            track.last_step = track.last_step.max(step);
        } else {
            track.failed = true;
            track.file = None;
        }
    }

    /// The scalars of a training event of run `id` (none for the others).
    fn scalars_of(
        &self,
        id: &RunId,
        event: &TrainEvent,
    ) -> Option<(u64, Vec<(&'static str, f64)>)> {
        match *event {
            TrainEvent::Step {
                step,
                tokens,
                loss,
                lr,
                tokens_per_s,
                ..
            } => {
                let mut values = vec![
                    ("train/loss", loss),
                    ("train/lr", lr),
                    ("train/tokens_per_s", tokens_per_s),
                    ("train/tokens", tokens as f64),
                ];
                if let Some(track) = self.runs.get(id)
                    && let Some(alpha) = &track.alpha
                {
                    let at = step.saturating_sub(1);
                    let value = crate::train::schedule::value_at(alpha, at, track.steps);
                    values.push(("train/alpha", value));
                }
                Some((step, values))
            }
            TrainEvent::Eval {
                step, loss, bpb, ..
            } => Some((step, vec![("heldout/loss", loss), ("heldout/bpb", bpb)])),
            TrainEvent::Started { .. } | TrainEvent::Checkpoint { .. } => None,
        }
    }
}

impl Recorder for TensorBoard<'_> {
    fn begin(&mut self, id: &RunId) -> Result<(), RecordError> {
        self.inner.begin(id)
    }

    fn event(&mut self, id: &RunId, event: &TrainEvent) -> Result<(), RecordError> {
        self.inner.event(id, event)?;
        if let Some((step, values)) = self.scalars_of(id, event) {
            self.log(id, step, &values);
        }
        Ok(())
    }

    fn heartbeat(&mut self, id: &RunId) -> Result<(), RecordError> {
        self.inner.heartbeat(id)
    }

    fn finish(&mut self, id: &RunId, result: &RunResult) -> Result<(), RecordError> {
        self.inner.finish(id, result)?;
        let mut values = vec![("result/heldout_loss", result.val_loss)];
        if let Some(gain) = self.inner.gain(id) {
            values.push(("result/gain", gain));
        }
        let step = self.runs.get(id).map_or(0, |t| t.last_step.max(t.steps));
        self.log(id, step, &values);
        Ok(())
    }

    fn fail(&mut self, id: &RunId, reason: &str) -> Result<(), RecordError> {
        self.inner.fail(id, reason)
    }

    fn release(&mut self, id: &RunId) -> Result<(), RecordError> {
        self.inner.release(id)
    }

    fn gain(&mut self, id: &RunId) -> Option<f64> {
        self.inner.gain(id)
    }
}
