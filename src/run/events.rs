//! What the runner reports while it works; the terminal view and tests consume these.

use crate::data::CorpusInfo;
use crate::plan::RunId;
use crate::train::TrainEvent;

/// A step of a sweep's execution.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// The runner found this many runs left to execute (of the kinds it executes).
    Pending {
        /// Runs to execute now or once their dependencies finish.
        runs: usize,
    },
    /// Time left for the sweep, re-estimated from measured throughput whenever a run ends.
    Eta {
        /// Seconds left running one run at a time.
        one_at_a_time_s: f64,
        /// Runs executed at once by this process.
        jobs: usize,
    },
    /// Data for a run is being prepared (tokenising, generating).
    Preparing {
        /// Run id.
        id: RunId,
        /// Run name.
        name: String,
    },
    /// A run's data is ready.
    DataReady {
        /// Run id.
        id: RunId,
        /// Run name.
        name: String,
        /// Facts about the corpus (entropy rate for the synthetic corpus).
        info: CorpusInfo,
    },
    /// These runs (same shape) are about to train as one stack.
    Stacked {
        /// The members' ids.
        ids: Vec<RunId>,
        /// The members' names.
        names: Vec<String>,
    },
    /// A run started (or resumed).
    Started {
        /// Run id.
        id: RunId,
        /// Run name.
        name: String,
        /// Total steps.
        steps: u64,
        /// First step (non-zero when resuming).
        start_step: u64,
    },
    /// Progress inside a run.
    Train {
        /// Run id.
        id: RunId,
        /// The training event.
        event: TrainEvent,
    },
    /// A run finished.
    Finished {
        /// Run id.
        id: RunId,
        /// Run name.
        name: String,
        /// Final held-out loss.
        val_loss: f64,
        /// Wall time.
        wall_s: f64,
        /// Students: held-out loss gained over the matching baseline (once it has finished).
        gain: Option<f64>,
    },
    /// A run failed; the others go on.
    Failed {
        /// Run id.
        id: RunId,
        /// Run name.
        name: String,
        /// Why.
        error: String,
    },
}
