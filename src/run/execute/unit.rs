//! Executing a unit of work: its runs one after the other, or as one stack when the unit was
//! made a stack; each run's outcome in the unit's order.

use std::sync::atomic::Ordering;

use burn::tensor::Device;

use super::core::{ExecEnv, Outcome};
use super::solo::execute_guarded;
use super::stacked::execute_stack;
use crate::run::error::RunError;
use crate::run::events::RunEvent;
use crate::run::record::{Recorder, TensorBoard};
use crate::run::stacks::stack_key;
use crate::run::unit::WorkUnit;

/// Executes every run of `unit` on `device`, recording through `recorder`; returns each run's
/// outcome in the unit's order.
///
/// A failing run (error, NaN, panic) is recorded as failed and the others go on; only a failure to
/// record stops the unit. Each run's curves also go to its TensorBoard event files (see
/// [`TensorBoard`]).
pub(crate) fn execute_unit(
    unit: &WorkUnit,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Vec<Outcome>, RunError> {
    let recorder = &mut TensorBoard::new(recorder, unit, env.layout.root());
    // a stack unit whose runs are not one shape (written by hand, or by another version) runs
    // one after the other
    if unit.stack && unit.runs.len() > 1 && same_key(unit)? {
        return execute_stack(unit, env, device, recorder, on_event);
    }
    let mut outcomes = Vec::with_capacity(unit.runs.len());
    for run in &unit.runs {
        if env.stop.load(Ordering::Relaxed) {
            recorder.release(&run.id)?;
            outcomes.push(Outcome::Interrupted);
            continue;
        }
        outcomes.push(execute_guarded(run, env, device, recorder, on_event)?);
    }
    Ok(outcomes)
}

/// Whether every run of `unit` has the same stack key.
fn same_key(unit: &WorkUnit) -> Result<bool, RunError> {
    let mut keys = Vec::with_capacity(unit.runs.len());
    for run in &unit.runs {
        keys.push(stack_key(&run.config()?));
    }
    Ok(keys
        .first()
        .is_some_and(|k| k.is_some() && keys.iter().all(|x| x == k)))
}
