//! The core every executed run goes through, alone or in a stack: its context ([`Ctx`]:
//! configuration, data, device), how it begins (recorded as begun, data prepared), how its work
//! ended ([`Step`]), its result row, and how its end is recorded.

use crate::error::Cause;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use burn::tensor::Device;

use crate::data::{self, Prepared};
use crate::plan::{RunConfig, RunKind};
use crate::run::error::RunError;
use crate::run::events::RunEvent;
use crate::run::record::Recorder;
use crate::run::unit::UnitRun;
use crate::spec::Backend;
use crate::store::{RunResult, SweepLayout};
use crate::train::{self, TrainError, TrainJob};

/// Where and how units execute (the same for every unit of a sweep).
pub(crate) struct ExecEnv<'a> {
    /// Where the sweep's files are: its sweep file's folder (corpus paths are relative to it)
    /// and `results/NAME/` (checkpoints, logit stores, caches).
    pub layout: SweepLayout,
    /// The backend to train on (from the sweep file; not part of a run's identity).
    pub backend: Backend,
    /// Set to stop gracefully: the current step ends, a checkpoint is written, the run is
    /// handed back.
    pub stop: &'a AtomicBool,
}

/// How one run of a unit ended (its result or failure is already recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Finished; its result is recorded.
    Done,
    /// Failed; the reason is recorded.
    Failed,
    /// Stopped on request after a checkpoint; it resumes from there.
    Interrupted,
}

/// Everything one run needs besides the recorder.
pub(crate) struct Ctx<'a> {
    pub(crate) run: &'a UnitRun,
    pub(crate) config: RunConfig,
    pub(crate) device: Device,
    /// The device's name, for the results' throughput and MFU.
    pub(crate) device_name: String,
    pub(crate) prepared: Prepared,
    pub(crate) env: &'a ExecEnv<'a>,
    /// Holds the process's peak-memory window open while the run lasts.
    _peak: PeakWindow,
}

/// Runs of this process under way (the local scheduler's workers are threads).
static ACTIVE_RUNS: AtomicUsize = AtomicUsize::new(0);

/// While a run lasts: when it is the only run of the process, the kernel's peak-resident-memory
/// mark is reset as it begins, so the peak recorded with its result is its own; beside other
/// runs (`run --jobs N`) the mark is left alone and the recorded peak is the process's.
struct PeakWindow;

impl PeakWindow {
    fn open() -> PeakWindow {
        if ACTIVE_RUNS.fetch_add(1, Ordering::SeqCst) == 0 {
            // what earlier runs freed goes back to the system first (the allocator keeps freed
            // memory for reuse, `crate::alloc`), then the mark is reset to what is resident:
            // Linux resets VmHWM when 5 is written to clear_refs
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only returns free heap pages to the system.
            unsafe {
                libc::malloc_trim(0);
            }
            let _ = std::fs::write("/proc/self/clear_refs", "5");
        }
        PeakWindow
    }
}

impl Drop for PeakWindow {
    fn drop(&mut self) {
        ACTIVE_RUNS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What preparing part of a run came to: ready, or the run fails for this cause (recorded with
/// the run, and the sweep goes on). What stops the whole execution is a [`RunError`], outside.
pub(crate) enum Attempt<T> {
    /// The part is ready.
    Ready(T),
    /// The run fails.
    Failed(Cause),
}

impl<T> Attempt<T> {
    /// The next part, prepared from this one when it is ready.
    pub(crate) fn and_then<U>(self, next: impl FnOnce(T) -> Attempt<U>) -> Attempt<U> {
        match self {
            Attempt::Ready(t) => next(t),
            Attempt::Failed(why) => Attempt::Failed(why),
        }
    }
}

impl<T, E: Into<Cause>> From<Result<T, E>> for Attempt<T> {
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(t) => Attempt::Ready(t),
            Err(e) => Attempt::Failed(e.into()),
        }
    }
}

/// Begins `run`: its configuration read, recorded as begun, its data prepared; failed with the
/// cause otherwise.
pub(crate) fn begin<'a>(
    run: &'a UnitRun,
    env: &'a ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Attempt<Ctx<'a>>, RunError> {
    if let Some(Err(reason)) = &run.tuned {
        recorder.begin(&run.id)?;
        return Ok(Attempt::Failed(crate::error::context(
            "learning rate",
            reason.clone(),
        )));
    }
    let config = run.config()?;
    recorder.begin(&run.id)?;
    let peak = PeakWindow::open();
    on_event(RunEvent::Preparing {
        id: run.id.clone(),
        name: run.name.clone(),
    });
    let (sweep_dir, cache) = (env.layout.sweep_dir(), env.layout.cache());
    let prepared = match data::prepare(&config.data, sweep_dir, &cache, config.tokens) {
        Ok(p) => p,
        Err(e) => return Ok(Attempt::Failed(e.into())),
    };
    on_event(RunEvent::DataReady {
        id: run.id.clone(),
        name: run.name.clone(),
        info: prepared.info.clone(),
    });
    Ok(Attempt::Ready(Ctx {
        run,
        config,
        device: device.clone(),
        device_name: train::device_label(device),
        prepared,
        env,
        _peak: peak,
    }))
}

/// Records how `ctx`'s run ended.
pub(crate) fn end(
    ctx: &Ctx,
    step: Step,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let run = ctx.run;
    match step {
        Step::Done(mut result) => {
            if let Some(tuned) = run.tuned_lr() {
                result.extra_json = Some(crate::run::tuning::annotate(
                    result.extra_json.as_deref(),
                    tuned,
                ));
            }
            recorder.finish(&run.id, &result)?;
            on_event(RunEvent::Finished {
                id: run.id.clone(),
                name: run.name.clone(),
                val_loss: result.val_loss,
                wall_s: result.wall_s,
                gain: recorder.gain(&run.id),
            });
            Ok(Outcome::Done)
        }
        Step::Interrupted => {
            recorder.release(&run.id)?;
            Ok(Outcome::Interrupted)
        }
        Step::Failed(reason) => fail(recorder, run, &reason, on_event),
    }
}

/// How a run's work ended (recording errors aside).
pub(crate) enum Step {
    Done(RunResult),
    Failed(Cause),
    Interrupted,
}

/// The result row of a finished run.
///
/// Its `extra_json` holds the precision, the device and the throughput as model FLOP/s and MFU
/// ([`train::utilization`]; a logit pass counts forward FLOPs).
pub(crate) fn result_row(
    ctx: &Ctx,
    val_loss: f64,
    val_bpb: f64,
    wall_s: f64,
    tokens_per_s: f64,
) -> RunResult {
    let (shape, context) = (&ctx.config.model.shape, ctx.config.data.context);
    let flops_per_token = match ctx.config.kind {
        RunKind::Logits => train::utilization::forward_flops_per_token(shape, context),
        _ => train::utilization::train_flops_per_token(shape, context),
    };
    let used = train::utilization::Utilization::of(tokens_per_s, flops_per_token, &ctx.device_name);
    let extra = serde_json::json!({
        "precision": ctx.precision().as_str(),
        "device": ctx.device_name,
        "model_flops_per_token": used.flops_per_token,
        "model_flops_per_s": used.flops_per_s,
        "peak_flops_per_s": used.peak_flops_per_s,
        "mfu": used.mfu,
    });
    RunResult {
        val_loss,
        val_bpb,
        train_loss: None,
        steps: ctx.config.train.as_ref().map_or(0, |t| t.steps),
        tokens: ctx.config.tokens,
        wall_s,
        tokens_per_s,
        flops: ctx.run.flops,
        peak_rss_bytes: peak_rss_bytes(),
        backend: ctx.env.backend.to_string(),
        corpus_json: serde_json::to_string(&ctx.prepared.info).unwrap_or_default(),
        agreement: None,
        kl_teacher_student: None,
        extra_json: Some(extra.to_string()),
    }
}

/// Adds the fields of the JSON object `fields` to `row`'s `extra_json`.
pub(crate) fn add_extra(row: &mut RunResult, fields: serde_json::Value) {
    let mut extra: serde_json::Map<String, serde_json::Value> = row
        .extra_json
        .as_deref()
        .and_then(|e| serde_json::from_str(e).ok())
        .unwrap_or_default();
    if let serde_json::Value::Object(fields) = fields {
        extra.extend(fields);
    }
    row.extra_json = Some(serde_json::Value::Object(extra).to_string());
}

/// How a trained run ended: its result row (a student's with its agreement with `teacher`),
/// its failure, or its interruption.
pub(crate) fn trained(
    ctx: &Ctx,
    result: Result<train::TrainOutcome, TrainError>,
    teacher: Option<&dyn crate::model::LanguageModel>,
) -> Step {
    let outcome = match result {
        Ok(o) => o,
        Err(TrainError::Interrupted { .. }) => return Step::Interrupted,
        Err(e) => return Step::Failed(e.into()),
    };
    let mut row = result_row(
        ctx,
        outcome.val_loss,
        outcome.val_bpb,
        outcome.wall_s,
        outcome.tokens_per_s,
    );
    row.train_loss = outcome.train_loss.is_finite().then_some(outcome.train_loss);
    if let Some(teacher) = teacher {
        let context = ctx.config.data.context as usize;
        let (agree, kl) = train::agreement(
            &outcome.model,
            teacher,
            &ctx.prepared.val,
            context,
            &ctx.device,
        );
        row.agreement = Some(agree);
        row.kl_teacher_student = Some(kl);
    }
    Step::Done(row)
}

impl Ctx<'_> {
    /// The training job of this run with its checkpoint at `checkpoint`; `None` for a run
    /// without training settings.
    pub(crate) fn train_job<'c>(&'c self, checkpoint: &'c Path) -> Option<TrainJob<'c>> {
        Some(TrainJob {
            run_id: self.run.id.as_str(),
            model: self.config.transformer(),
            data_config: &self.config.data,
            train: self.config.train.as_ref()?,
            data: &self.prepared,
            device: &self.device,
            backend: self.env.backend,
            checkpoint,
            stop: self.env.stop,
        })
    }

    /// The run's training precision (f32 for runs that do not train).
    pub(crate) fn precision(&self) -> crate::spec::Precision {
        self.config
            .train
            .as_ref()
            .map(|t| t.precision)
            .unwrap_or_default()
    }
}

/// Records `run` as failed for `why` (the cause and its causes, one message) and tells the
/// caller; the sweep goes on.
pub(crate) fn fail(
    recorder: &mut dyn Recorder,
    run: &UnitRun,
    why: &Cause,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let error = crate::error::chain(why.as_ref());
    recorder.fail(&run.id, &error)?;
    on_event(RunEvent::Failed {
        id: run.id.clone(),
        name: run.name.clone(),
        error,
    });
    Ok(Outcome::Failed)
}

/// The process's peak resident memory (Linux `VmHWM`), if the system reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The message of a caught panic.
pub(crate) fn panic_reason(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic")
}
