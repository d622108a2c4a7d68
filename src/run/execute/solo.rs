//! A run executed alone: it begins, does its kind's work (a teacher or baseline trains or
//! adopts its tuned candidate, a pre-trained teacher is measured, a student distils, a logit
//! pass writes its store) and ends; a panic inside is recorded as its failure.

use super::core::{
    Attempt, Ctx, ExecEnv, Outcome, Step, add_extra, begin, end, fail, panic_reason, result_row,
    trained,
};
use super::{adopt, logits, pretrained, teacher};
use crate::model::LanguageModel;
use crate::plan::RunKind;
use crate::run::error::{RecordError, RunError};
use crate::run::events::RunEvent;
use crate::run::record::Recorder;
use crate::run::unit::UnitRun;
use crate::train::{self, NextToken, Objective, TrainEvent};
use burn::tensor::Device;

/// Runs `run`, turning a panic inside it (burn reports some failures, e.g. out of memory, by
/// panicking) into a recorded failure, and handing the run back if recording fails.
pub(crate) fn execute_guarded(
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
            let reason = panic_reason(panic.as_ref());
            fail(
                recorder,
                run,
                &format!("crashed: {reason}").into(),
                on_event,
            )
        }
    }
}

fn execute_one(
    run: &UnitRun,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Outcome, RunError> {
    let ctx = match begin(run, env, device, recorder, on_event)? {
        Attempt::Ready(ctx) => ctx,
        Attempt::Failed(why) => return fail(recorder, run, &why, on_event),
    };
    let outcome = match ctx.config.kind {
        RunKind::Teacher if ctx.config.model.pretrained.is_some() => Ok(pretrained_run(&ctx)),
        RunKind::Teacher | RunKind::Baseline => match adopt::adoptable(&ctx)? {
            Some(candidate) => Ok(adopt::adopt(&ctx, &candidate)),
            None => train_run(&ctx, &mut NextToken, None, recorder, on_event),
        },
        RunKind::Student => student_run(&ctx, recorder, on_event),
        RunKind::Logits => logits::logits_pass(&ctx, recorder, on_event),
    };
    end(&ctx, outcome?, recorder, on_event)
}

fn student_run(
    ctx: &Ctx,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let teacher = match teacher::student_teacher(ctx)? {
        Attempt::Ready(t) => t,
        Attempt::Failed(why) => return Ok(Step::Failed(why)),
    };
    let mut objective = match teacher::student_objective(ctx, &teacher)? {
        Attempt::Ready(o) => o,
        Attempt::Failed(why) => return Ok(Step::Failed(why)),
    };
    // agreement compares the two models token by token: one vocabulary only
    let agreement = objective
        .targets
        .cross
        .is_none()
        .then_some(&teacher.0 as &dyn LanguageModel);
    let mut step = train_run(ctx, &mut objective, agreement, recorder, on_event)?;
    if let (Step::Done(row), Some(cross)) = (&mut step, objective.targets.cross.as_deref()) {
        // how much of the student's text aligned with its teacher's, over the batches read
        let rows = cross.rows.max(1) as f64;
        let extra = serde_json::json!({"cross": {
            "loss": cross.loss.kind.as_str(),
            "aligned_rows": 1.0 - cross.unaligned_rows as f64 / rows,
            "units_per_row": cross.units as f64 / rows,
            "gold_weights": [cross.loss.weights.0, cross.loss.weights.1],
        }});
        add_extra(row, extra);
    }
    match objective.targets.error {
        Some(e) => Ok(Step::Failed(e.into())),
        None => Ok(step),
    }
}

/// A pre-trained teacher's run: nothing to train; its held-out loss on the sweep's corpus.
fn pretrained_run(ctx: &Ctx) -> Step {
    let Some(source) = &ctx.config.model.pretrained else {
        return Step::Failed("run has no pre-trained source".into());
    };
    let dir = ctx.env.layout.sweep_dir();
    match pretrained::measure(&ctx.config, source, dir, &ctx.prepared, &ctx.device) {
        Ok(m) => {
            // no training throughput (0 keeps it out of time estimates); the scoring speed
            // goes to the extra column
            let mut row = result_row(ctx, m.val_loss, m.val_bpb, m.wall_s, 0.0);
            let extra =
                serde_json::json!({"pretrained": source.path, "eval_tokens_per_s": m.tokens_per_s});
            add_extra(&mut row, extra);
            Step::Done(row)
        }
        Err(e) => Step::Failed(e.into()),
    }
}

/// Trains the run with `objective`; a student also measures agreement with `teacher`.
fn train_run(
    ctx: &Ctx,
    objective: &mut dyn Objective,
    teacher: Option<&dyn LanguageModel>,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let id = &ctx.run.id;
    let checkpoint = ctx.env.layout.checkpoint(id);
    let Some(job) = ctx.train_job(&checkpoint) else {
        return Ok(Step::Failed("run has no training settings".into()));
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
