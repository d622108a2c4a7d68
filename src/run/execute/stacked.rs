//! Executing a stack unit: each member begins and gets its objective as its solo run would
//! (its data, its teacher, its logit store), then all train as one batched model
//! ([`crate::train::stack`]), and each member's end — its result (with its agreement for a
//! student), failure or interruption — is recorded as a solo run's. A member that cannot
//! begin fails alone; a panic inside the stack (burn reports out of memory that way) fails the
//! members still training, with a hint to train them alone.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use burn::tensor::Device;

use super::core::{Attempt, Ctx, ExecEnv, Outcome, Step, begin, end, fail, panic_reason, trained};
use super::teacher::{student_objective, student_teacher};
use crate::model::{LanguageModel, TeacherModel};
use crate::plan::{RunId, RunKind};
use crate::run::error::{RecordError, RunError};
use crate::run::events::RunEvent;
use crate::run::record::Recorder;
use crate::run::unit::WorkUnit;
use crate::train::stack::{StackMember, train_stack};
use crate::train::{DistillObjective, NextToken, Objective, TrainEvent};

/// What a member minimises.
enum MemberObjective<'a> {
    NextToken(NextToken),
    Distill(DistillObjective<'a>),
}

impl MemberObjective<'_> {
    fn as_dyn(&mut self) -> &mut dyn Objective {
        match self {
            MemberObjective::NextToken(o) => o,
            MemberObjective::Distill(o) => o,
        }
    }

    /// The store error a distillation objective kept, if any (the run fails with it).
    /// The error the teacher's targets stopped on, if any.
    fn take_error(&mut self) -> Option<crate::distill::store::ShardError> {
        match self {
            MemberObjective::Distill(o) => o.targets.error.take(),
            MemberObjective::NextToken(_) => None,
        }
    }
}

/// A member that began: its position in the unit, its context and (a student's) teacher with
/// its checkpoint's hash.
type Begun<'a> = (usize, Ctx<'a>, Option<(TeacherModel, String)>);

/// Executes the runs of `unit` (one stack key) as one stack; returns each run's outcome in the
/// unit's order.
pub(crate) fn execute_stack(
    unit: &WorkUnit,
    env: &ExecEnv,
    device: &Device,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Vec<Outcome>, RunError> {
    let n = unit.runs.len();
    if env.stop.load(Ordering::Relaxed) {
        for run in &unit.runs {
            recorder.release(&run.id)?;
        }
        return Ok(vec![Outcome::Interrupted; n]);
    }
    on_event(RunEvent::Stacked {
        ids: unit.runs.iter().map(|r| r.id.clone()).collect(),
        names: unit.runs.iter().map(|r| r.name.clone()).collect(),
    });
    let mut outcomes: Vec<Option<Outcome>> = vec![None; n];
    // 1. each member begins (its data) and gets its teacher, as its solo run would
    let mut members: Vec<Begun> = Vec::with_capacity(n);
    for (i, run) in unit.runs.iter().enumerate() {
        let ctx = match begin(run, env, device, recorder, on_event)? {
            Attempt::Ready(ctx) => ctx,
            Attempt::Failed(why) => {
                outcomes[i] = Some(fail(recorder, run, &why, on_event)?);
                continue;
            }
        };
        let teacher = if ctx.config.kind == RunKind::Student {
            match student_teacher(&ctx)? {
                Attempt::Ready(t) => Some(t),
                Attempt::Failed(why) => {
                    outcomes[i] = Some(fail(recorder, run, &why, on_event)?);
                    continue;
                }
            }
        } else {
            None
        };
        members.push((i, ctx, teacher));
    }
    // 2. objectives
    let mut objectives = Vec::with_capacity(members.len());
    let mut training = Vec::with_capacity(members.len());
    for (i, ctx, teacher) in &members {
        if ctx.config.train.is_none() {
            outcomes[*i] = Some(fail(
                recorder,
                ctx.run,
                &"run has no training settings".into(),
                on_event,
            )?);
            continue;
        }
        let objective = match teacher {
            Some(teacher) => match student_objective(ctx, teacher)? {
                Attempt::Ready(o) => MemberObjective::Distill(o),
                Attempt::Failed(why) => {
                    outcomes[*i] = Some(fail(recorder, ctx.run, &why, on_event)?);
                    continue;
                }
            },
            None => MemberObjective::NextToken(NextToken),
        };
        objectives.push(objective);
        training.push((
            *i,
            ctx,
            teacher.as_ref().map(|t| &t.0 as &dyn LanguageModel),
        ));
    }
    // 3. train as one
    let results = train_members(&training, &mut objectives, env, recorder, on_event)?;
    // 4. each member's end
    let stacked = training.len();
    for ((i, ctx, teacher), (objective, result)) in
        training.iter().zip(objectives.iter_mut().zip(results))
    {
        let step = match (objective.take_error(), result) {
            (Some(error), _) => Step::Failed(error.into()),
            (None, MemberResult::Trained(result)) => {
                with_stack_facts(trained(ctx, *result, *teacher), stacked)
            }
            (None, MemberResult::Crashed(crash)) => Step::Failed(crash.into()),
        };
        outcomes[*i] = Some(end(ctx, step, recorder, on_event)?);
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Failed))
        .collect())
}

/// How one member's training came out: its own outcome, or the whole stack crashed.
enum MemberResult {
    /// The member trained (or its training failed on its own).
    Trained(Box<Result<crate::train::TrainOutcome, crate::train::TrainError>>),
    /// A panic stopped the stack; the message says why.
    Crashed(String),
}

/// Trains the members as one stack, recording every member's events; a panic inside fails
/// every member with its reason.
fn train_members(
    members: &[(usize, &Ctx, Option<&dyn LanguageModel>)],
    objectives: &mut [MemberObjective],
    env: &ExecEnv,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Vec<MemberResult>, RunError> {
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let checkpoints: Vec<PathBuf> = members
        .iter()
        .map(|(_, ctx, _)| env.layout.checkpoint(&ctx.run.id))
        .collect();
    let ids: Vec<&RunId> = members.iter().map(|(_, ctx, _)| &ctx.run.id).collect();
    let stack_members: Vec<StackMember> = members
        .iter()
        .zip(&checkpoints)
        .zip(objectives.iter_mut())
        .filter_map(|(((_, ctx, _), checkpoint), objective)| {
            Some(StackMember {
                job: ctx.train_job(checkpoint)?, // every member has training settings (checked)
                objective: objective.as_dyn(),
            })
        })
        .collect();
    let mut record_error: Option<RecordError> = None;
    let mut forward = |k: usize, event: TrainEvent| {
        let id = ids[k];
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
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train_stack(stack_members, &mut forward)
    }));
    if let Some(e) = record_error {
        return Err(e.into());
    }
    Ok(match attempt {
        Ok(results) => results
            .into_iter()
            .map(|r| MemberResult::Trained(Box::new(r)))
            .collect(),
        Err(panic) => {
            let reason = panic_reason(panic.as_ref());
            let error = format!(
                "crashed in a stack of {} runs: {reason}\n\nhint: run again with `--stack off --retry-failed` to train them alone",
                members.len()
            );
            members
                .iter()
                .map(|_| MemberResult::Crashed(error.clone()))
                .collect()
        }
    })
}

/// A finished member's result row, noting the stack it trained in.
fn with_stack_facts(step: Step, members: usize) -> Step {
    match step {
        Step::Done(mut row) => {
            let mut extra = row
                .extra_json
                .as_deref()
                .and_then(|j| serde_json::from_str::<serde_json::Value>(j).ok())
                .unwrap_or_else(|| serde_json::json!({}));
            extra["stack_members"] = serde_json::json!(members);
            row.extra_json = Some(extra.to_string());
            Step::Done(row)
        }
        other => other,
    }
}
