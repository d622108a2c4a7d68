//! Executing a unit of work, per kind of run: prepare the data, then train a teacher or
//! baseline, distil a student (online, or offline from its logit store), or write a logit
//! store; metrics and each run's end go to a [`Recorder`]. The local worker pool and the Slurm
//! worker both execute runs through here, so a run computes the same thing wherever it runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::Device;

use super::error::{RecordError, RunError};
use super::events::RunEvent;
use super::record::Recorder;
use super::unit::{UnitRun, WorkUnit};
use crate::data::{self, Prepared};
use crate::distill::{self, DistillObjective, StoreReader, TeacherSource, TruncateOn, logits_run};
use crate::model::Transformer;
use crate::plan::{RunConfig, RunKind};
use crate::spec::{Backend, DistillMode};
use crate::store::RunResult;
use crate::train::{self, NextToken, Objective, TrainError, TrainEvent, TrainJob, checkpoint};

/// Where and how units execute (the same for every unit of a sweep).
pub struct ExecEnv<'a> {
    /// The sweep file's folder (corpus paths are relative to it).
    pub sweep_dir: PathBuf,
    /// `results/NAME/`: checkpoints, logit stores and caches go below it.
    pub results_dir: PathBuf,
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

/// Executes every run of `unit` on `device`, recording through `recorder`; returns each run's
/// outcome in the unit's order. A failing run (error, NaN, panic) is recorded as failed and
/// the others go on; only a failure to record stops the unit.
pub fn execute_unit(
    unit: &WorkUnit,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Vec<Outcome>, RunError> {
    if unit.stack && unit.runs.len() > 1 {
        return super::stacked::execute_stack(unit, env, device, recorder, on_event);
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

/// Runs `run`, turning a panic inside it (burn reports some failures, e.g. out of memory, by
/// panicking) into a recorded failure, and handing the run back if recording fails.
pub(super) fn execute_guarded(
    run: &UnitRun,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute_one(run, env, device, recorder, on_event)
    }));
    match attempt {
        Ok(result) => result.inspect_err(|_| {
            let _ = recorder.release(&run.id); // hand the run back so the next `run` takes it at once
        }),
        Err(panic) => {
            let reason = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            fail(recorder, run, &format!("crashed: {reason}"), on_event)
        }
    }
}

/// Everything one run needs besides the recorder.
pub(super) struct Ctx<'a> {
    pub(super) run: &'a UnitRun,
    pub(super) config: RunConfig,
    pub(super) device: Device,
    /// The device's name, for the results' throughput and MFU.
    pub(super) device_name: String,
    pub(super) prepared: Prepared,
    pub(super) env: &'a ExecEnv<'a>,
}

fn execute_one(
    run: &UnitRun,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let ctx = match begin(run, env, device, recorder, on_event)? {
        Ok(ctx) => ctx,
        Err(reason) => return fail(recorder, run, &reason, on_event),
    };
    let outcome = match ctx.config.kind {
        RunKind::Teacher if ctx.config.model.pretrained.is_some() => Ok(pretrained_run(&ctx)),
        RunKind::Teacher | RunKind::Baseline => match super::adopt::adoptable(&ctx)? {
            Some(candidate) => Ok(super::adopt::adopt(&ctx, &candidate)),
            None => train_run(&ctx, &mut NextToken, None, recorder, on_event),
        },
        RunKind::Student => student_run(&ctx, recorder, on_event),
        RunKind::Logits => logits_pass(&ctx, recorder, on_event),
    };
    end(&ctx, outcome?, recorder, on_event)
}

/// Begins `run`: its configuration read, recorded as begun, its data prepared; `Err` with the
/// reason it fails otherwise.
pub(super) fn begin<'a>(
    run: &'a UnitRun,
    env: &'a ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Result<Ctx<'a>, String>, RunError> {
    if let Some(Err(reason)) = &run.tuned {
        recorder.begin(&run.id)?;
        return Ok(Err(format!("learning rate: {reason}")));
    }
    let config = run.config()?;
    recorder.begin(&run.id)?;
    on_event(RunEvent::Preparing {
        id: run.id.clone(),
        name: run.name.clone(),
    });
    let cache = env.results_dir.join("cache");
    let prepared = match data::prepare(&config.data, &env.sweep_dir, &cache, config.tokens) {
        Ok(p) => p,
        Err(e) => return Ok(Err(e.to_string())),
    };
    on_event(RunEvent::DataReady {
        id: run.id.clone(),
        name: run.name.clone(),
        info: prepared.info.clone(),
    });
    Ok(Ok(Ctx {
        run,
        config,
        device: device.clone(),
        device_name: train::device_label(device),
        prepared,
        env,
    }))
}

/// Records how `ctx`'s run ended.
pub(super) fn end(
    ctx: &Ctx,
    step: Step,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let run = ctx.run;
    match step {
        Step::Done(mut result) => {
            if let Some(tuned) = run.tuned_lr() {
                result.extra_json =
                    Some(super::tuning::annotate(result.extra_json.as_deref(), tuned));
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

/// The logit store among `run`'s dependencies (a tuned student also waits for baselines).
fn logit_store_of(run: &UnitRun) -> Result<Option<&String>, RunError> {
    for id in &run.depends_on {
        if run
            .related_config(id)?
            .is_some_and(|c| c.kind == RunKind::Logits)
        {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// How a run's work ended (recording errors aside).
pub(super) enum Step {
    Done(RunResult),
    Failed(String),
    Interrupted,
}

/// A pre-trained teacher's run: nothing to train; its held-out loss on the sweep's corpus.
fn pretrained_run(ctx: &Ctx) -> Step {
    let Some(source) = &ctx.config.model.pretrained else {
        return Step::Failed("run has no pre-trained source".into());
    };
    let dir = &ctx.env.sweep_dir;
    match super::pretrained::measure(&ctx.config, source, dir, &ctx.prepared, &ctx.device) {
        Ok(m) => {
            // no training throughput (0 keeps it out of time estimates); the scoring speed
            // goes to the extra column
            let mut row = result_row(ctx, m.val_loss, m.val_bpb, m.wall_s, 0.0);
            let extra =
                serde_json::json!({"pretrained": source.path, "eval_tokens_per_s": m.tokens_per_s});
            add_extra(&mut row, extra);
            Step::Done(row)
        }
        Err(reason) => Step::Failed(reason),
    }
}

/// The result row of a finished run. Its `extra_json` holds the precision, the device and the
/// throughput as model FLOP/s and MFU ([`train::utilization`]; a logit pass counts forward
/// FLOPs).
pub(super) fn result_row(
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
pub(super) fn add_extra(row: &mut RunResult, fields: serde_json::Value) {
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

/// Trains the run with `objective`; a student also measures agreement with `teacher`.
fn train_run(
    ctx: &Ctx,
    objective: &mut dyn Objective,
    teacher: Option<&Transformer>,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let id = &ctx.run.id;
    let checkpoint = checkpoint_path(&ctx.env.results_dir, id);
    let job = TrainJob {
        run_id: id,
        config: &ctx.config,
        data: &ctx.prepared,
        device: &ctx.device,
        backend: ctx.env.backend,
        checkpoint: &checkpoint,
        stop: ctx.env.stop,
    };
    let mut record_error: Option<RecordError> = None;
    let mut forward = |event: TrainEvent| {
        if record_error.is_none()
            && let Err(e) = recorder.event(id, &event)
        {
            record_error = Some(e);
        }
        on_event(RunEvent::Train {
            id: id.clone(),
            event,
        });
    };
    let result = train::train(&job, objective, &mut forward);
    if let Some(e) = record_error {
        return Err(e.into());
    }
    Ok(trained(ctx, result, teacher))
}

/// How a trained run ended: its result row (a student's with its agreement with `teacher`),
/// its failure, or its interruption.
pub(super) fn trained(
    ctx: &Ctx,
    result: Result<train::TrainOutcome, TrainError>,
    teacher: Option<&Transformer>,
) -> Step {
    let outcome = match result {
        Ok(o) => o,
        Err(TrainError::Interrupted { .. }) => return Step::Interrupted,
        Err(e) => return Step::Failed(e.to_string()),
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
        let (agree, kl) = distill::agreement(
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

/// The finished teacher run `teacher_id`: its model loaded from its final checkpoint, and the
/// checkpoint's content hash; `Err` with the reason the run fails otherwise.
pub(super) fn load_teacher(
    ctx: &Ctx,
    teacher_id: &str,
) -> Result<Result<(Transformer, String), String>, RunError> {
    let Some(teacher) = ctx.run.related_config(teacher_id)? else {
        return Ok(Err(format!(
            "teacher run `{teacher_id}` is not in the sweep database"
        )));
    };
    if let Some(source) = &teacher.model.pretrained {
        let dir = &ctx.env.sweep_dir;
        return Ok(super::pretrained::load(&teacher, source, dir, &ctx.device));
    }
    let path = checkpoint_path(&ctx.env.results_dir, teacher_id);
    let loaded = match checkpoint::load(&path, teacher_id) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Ok(Err(format!(
                "teacher checkpoint `{}` is missing",
                path.display()
            )));
        }
        Err(e) => return Ok(Err(e.to_string())),
    };
    let model = match loaded.model(train::init_model(&teacher, &ctx.device)) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(checkpoint::content_hash(&path)
        .map(|h| (model, h))
        .map_err(|e| e.to_string()))
}

fn student_run(
    ctx: &Ctx,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let teacher = match student_teacher(ctx)? {
        Ok(t) => t,
        Err(reason) => return Ok(Step::Failed(reason)),
    };
    let mut objective = match student_objective(ctx, &teacher)? {
        Ok(o) => o,
        Err(reason) => return Ok(Step::Failed(reason)),
    };
    let step = train_run(ctx, &mut objective, Some(&teacher.0), recorder, on_event)?;
    match objective.error {
        Some(e) => Ok(Step::Failed(e.to_string())),
        None => Ok(step),
    }
}

/// A student's teacher (loaded from its checkpoint or folder) and its content hash; `Err`
/// with the reason the run fails otherwise.
pub(super) fn student_teacher(
    ctx: &Ctx,
) -> Result<Result<(Transformer, String), String>, RunError> {
    match ctx.config.distill.as_ref() {
        Some(distill) => load_teacher(ctx, &distill.teacher.0),
        None => Ok(Err("student run has no distillation settings".into())),
    }
}

/// A student's objective: online from `teacher`, or offline from the logit store it depends
/// on; `Err` with the reason the run fails otherwise.
pub(super) fn student_objective<'a>(
    ctx: &'a Ctx,
    teacher: &'a (Transformer, String),
) -> Result<Result<DistillObjective<'a>, String>, RunError> {
    let Some(distill) = ctx.config.distill.as_ref() else {
        return Ok(Err("student run has no distillation settings".into()));
    };
    let (teacher, teacher_sha) = (&teacher.0, &teacher.1);
    let source = match distill.mode {
        DistillMode::Online => TeacherSource::Online {
            teacher,
            device: &ctx.device,
            compute: train::precision::compute_dtype(ctx.precision()),
            truncate_on: TruncateOn::for_backend(ctx.env.backend),
        },
        DistillMode::Offline => {
            let Some(store_id) = logit_store_of(ctx.run)? else {
                return Ok(Err("offline student has no logit store dependency".into()));
            };
            let Some(store) = ctx.run.related_config(store_id)? else {
                return Ok(Err(format!(
                    "logit store run `{store_id}` is not in the sweep database"
                )));
            };
            let Some(header) =
                logits_run::expected_header(store_id, &store, teacher_sha, &ctx.prepared.info.key)
            else {
                return Ok(Err(format!("run `{store_id}` is not a logit store")));
            };
            let dir = store_dir(&ctx.env.results_dir, store_id);
            TeacherSource::Offline(Box::new(StoreReader::new(
                &dir,
                header.clone(),
                logits_run::shard_blocks(&header),
            )))
        }
    };
    Ok(Ok(DistillObjective {
        config: distill,
        source,
        error: None,
    }))
}

/// A `logits` run: the teacher's pass over the student token stream into the logit store.
fn logits_pass(
    ctx: &Ctx,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let Some(logits) = ctx.config.logits.as_ref() else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let (teacher, sha) = match load_teacher(ctx, &logits.teacher.0)? {
        Ok(t) => t,
        Err(reason) => return Ok(Step::Failed(reason)),
    };
    let Some(header) =
        logits_run::expected_header(&ctx.run.id, &ctx.config, &sha, &ctx.prepared.info.key)
    else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let id = ctx.run.id.clone();
    let total = ctx.config.tokens / header.block_positions.max(1);
    on_event(RunEvent::Train {
        id: id.clone(),
        event: TrainEvent::Started {
            steps: total,
            start_step: 0,
        },
    });
    let start = std::time::Instant::now();
    let mut record_error: Option<RecordError> = None;
    let mut progress = |done: u64, _total: u64| {
        if done.is_multiple_of(10) || done == total {
            if record_error.is_none()
                && let Err(e) = recorder.heartbeat(&id)
            {
                record_error = Some(e);
            }
            let tokens = done * header.block_positions;
            let tokens_per_s = tokens as f64 / start.elapsed().as_secs_f64().max(1e-9);
            let event = TrainEvent::Step {
                step: done,
                tokens,
                loss: f64::NAN,
                lr: 0.0,
                tokens_per_s,
                wall_s: start.elapsed().as_secs_f64(),
            };
            on_event(RunEvent::Train {
                id: id.clone(),
                event,
            });
        }
    };
    let dir = store_dir(&ctx.env.results_dir, &ctx.run.id);
    let pass = logits_run::PassDevice {
        teacher: &teacher,
        device: &ctx.device,
        truncate_on: TruncateOn::for_backend(ctx.env.backend),
    };
    let written = logits_run::write_store(
        &ctx.config,
        &header,
        &pass,
        &ctx.prepared,
        &dir,
        ctx.env.stop,
        &mut progress,
    );
    if let Some(e) = record_error {
        return Err(e.into());
    }
    let summary = match written {
        Ok(s) => s,
        Err(logits_run::LogitsError::Interrupted) => return Ok(Step::Interrupted),
        Err(e) => return Ok(Step::Failed(e.to_string())),
    };
    let context = ctx.config.data.context as usize;
    let (val_loss, val_bpb) = train::evaluate(
        &teacher,
        &ctx.prepared.val,
        context,
        &ctx.device,
        ctx.prepared.info.val_bytes_per_token,
    );
    let mut row = result_row(ctx, val_loss, val_bpb, summary.wall_s, summary.tokens_per_s);
    let truncated_on = match pass.truncate_on {
        TruncateOn::Host => "host",
        TruncateOn::Device => "device",
    };
    let extra = serde_json::json!({
        "store_bytes": summary.bytes,
        "positions": summary.positions,
        "kept_entries": summary.entries,
        "bytes_per_token": summary.bytes as f64 / summary.positions.max(1) as f64,
        "bytes_per_kept_logit": summary.bytes as f64 / summary.entries.max(1) as f64,
        "predicted_store_bytes": ctx.run_disk_bytes(),
        "truncated_on": truncated_on,
    });
    add_extra(&mut row, extra);
    Ok(Step::Done(row))
}

impl Ctx<'_> {
    /// The run's training precision (f32 for runs that do not train).
    fn precision(&self) -> crate::spec::Precision {
        self.config
            .train
            .as_ref()
            .map(|t| t.precision)
            .unwrap_or_default()
    }

    /// The plan's predicted disk bytes for this run.
    fn run_disk_bytes(&self) -> u64 {
        crate::plan::logit_bytes_per_token(
            self.config.data.vocab,
            self.config
                .logits
                .as_ref()
                .map_or(0, |l| l.truncation.top_k.kept(self.config.data.vocab)),
        ) * self.config.tokens
    }
}

pub(super) fn fail(
    recorder: &mut dyn Recorder,
    run: &UnitRun,
    error: &str,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    recorder.fail(&run.id, error)?;
    on_event(RunEvent::Failed {
        id: run.id.clone(),
        name: run.name.clone(),
        error: error.to_string(),
    });
    Ok(Outcome::Failed)
}

/// Where the logit store of run `id` lives.
pub fn store_dir(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("logits").join(id)
}

/// Where run `id` keeps its checkpoint.
pub fn checkpoint_path(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("checkpoints").join(format!("{id}.ckpt"))
}

/// The process's peak resident memory (Linux `VmHWM`), if the system reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
