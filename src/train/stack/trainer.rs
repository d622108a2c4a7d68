//! The training loop of a stack. Each member keeps what its solo run has — weights drawn from
//! its own seed (under the same lock as a solo run), its data order, objective, learning-rate
//! schedule, AdamW state and clipping, evaluations, events and a solo checkpoint — and steps
//! in lockstep with the others: one forward and backward pass of the batched model, one
//! optimiser step. A member that diverges, or whose data, targets or checkpoint fail, ends
//! alone and the stack goes on without it; a member that finishes leaves it the same way.

use std::sync::atomic::Ordering;
use std::time::Instant;

use burn::module::{Module, ParamId};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::loss::stack_loss;
use super::optim::{Hyper, MemberState, StackedAdamW, clip_per_member};
use crate::data::{Batch, Batcher};
use crate::model::{StackedTransformer, Transformer, solo_shapes, solo_weights};
use crate::train::TrainConfig;
use crate::train::checkpoint::{self, CheckpointError, CheckpointState};
use crate::train::{
    LossTerms, Objective, TrainError, TrainEvent, TrainJob, TrainOutcome, evaluate, schedule,
};

/// One run of a stack: its job (as a solo run would get it) and its objective.
pub struct StackMember<'a> {
    /// The run's inputs; every member of a stack must use the same device.
    pub job: TrainJob<'a>,
    /// What the run minimises.
    pub objective: &'a mut dyn Objective,
}

/// A member while it trains.
struct Member<'a> {
    /// Position among the members given to [`train_stack`].
    index: usize,
    job: TrainJob<'a>,
    objective: &'a mut dyn Objective,
    train: &'a TrainConfig,
    batcher: Batcher<'a>,
    /// The member's own model (plain device): its shape and parameter ids.
    template: Transformer,
    ids: Vec<ParamId>,
    shapes: Vec<Vec<usize>>,
    /// Steps completed.
    step: u64,
    steps: u64,
    tokens_per_step: u64,
    eval_every: u64,
    /// Training seconds of earlier sessions.
    wall_before: f64,
    interval_loss: f64,
    interval_steps: u64,
    /// Steps of this session in the interval, for tokens/s.
    timed_steps: u64,
    interval_start: Instant,
    /// Last logged training loss, last held-out loss and bits per byte.
    last: (f64, f64, f64),
}

/// Trains `members` as one stack, reporting each member's events with its position in
/// `members`; returns each member's outcome in that order, as its solo [`crate::train::train`]
/// would.
pub fn train_stack(
    members: Vec<StackMember<'_>>,
    on_event: &mut dyn FnMut(usize, TrainEvent),
) -> Vec<Result<TrainOutcome, TrainError>> {
    let mut results: Vec<Option<Result<TrainOutcome, TrainError>>> =
        members.iter().map(|_| None).collect();
    let Some(device) = members.first().map(|m| m.job.device.clone()) else {
        return Vec::new();
    };
    let mut active = Vec::with_capacity(members.len());
    let mut moments = Vec::with_capacity(members.len());
    for (index, member) in members.into_iter().enumerate() {
        match start(index, member) {
            Ok((m, state)) => {
                on_event(
                    index,
                    TrainEvent::Started {
                        steps: m.steps,
                        start_step: m.step,
                    },
                );
                active.push(m);
                moments.push(state);
            }
            Err(e) => results[index] = Some(Err(e)),
        }
    }
    if !active.is_empty() {
        let templates: Vec<Transformer> = active.iter().map(|m| m.template.clone()).collect();
        match StackedTransformer::stack(&templates) {
            Ok(stack) => {
                let shapes: Vec<[usize; 3]> = stack.weights.iter().map(Tensor::dims).collect();
                let hyper = active
                    .iter()
                    .map(|m| Hyper {
                        train: m.train.clone(),
                    })
                    .collect();
                let optim = StackedAdamW::new(hyper, moments, &shapes, &device);
                run(stack, optim, active, &device, &mut results, on_event);
            }
            Err(e) => {
                for m in &active {
                    results[m.index] = Some(Err(TrainError::NoData(e.to_string())));
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(TrainError::NoData("the stack lost this run".into()))))
        .collect()
}

/// A member ready to train: its model drawn (or restored from its checkpoint) exactly as its
/// solo run's, and its optimiser state.
fn start<'a>(
    index: usize,
    member: StackMember<'a>,
) -> Result<(Member<'a>, Option<MemberState>), TrainError> {
    let StackMember { job, objective } = member;
    let cfg = job.data_config;
    let (train, model, optim, state) = crate::train::trainer::start_or_resume(&job)?;
    let template = model.valid();
    let ids: Vec<ParamId> = solo_weights(&template)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let shapes = solo_shapes(&template);
    let moments = MemberState::from_solo(&optim, &ids, &shapes, job.device).map_err(|reason| {
        CheckpointError::Corrupt {
            path: job.checkpoint.to_path_buf(),
            source: reason,
        }
    })?;
    let (context, rows) = (cfg.context as usize, cfg.batch_seqs as usize);
    let batcher = Batcher::new(&job.data.train, context, rows, cfg.seed, job.data.shuffle)
        .ok_or_else(|| {
            TrainError::NoData(format!(
                "the training split has fewer than {} tokens",
                context + 1
            ))
        })?;
    let steps = train.steps;
    Ok((
        Member {
            index,
            objective,
            train,
            batcher,
            template,
            ids,
            shapes,
            step: state.step,
            steps,
            tokens_per_step: (context * rows) as u64,
            eval_every: steps.div_ceil(train.evals.max(1)).max(1),
            wall_before: state.wall_s,
            interval_loss: state.log_loss_sum,
            interval_steps: state.log_steps,
            timed_steps: 0,
            interval_start: Instant::now(),
            last: (f64::NAN, f64::NAN, f64::NAN),
            job,
        },
        moments,
    ))
}

/// Steps the stack until every member has finished, failed or been stopped.
fn run(
    mut stack: StackedTransformer,
    mut optim: StackedAdamW,
    mut active: Vec<Member>,
    device: &Device,
    results: &mut [Option<Result<TrainOutcome, TrainError>>],
    on_event: &mut dyn FnMut(usize, TrainEvent),
) {
    let session = Instant::now();
    loop {
        // members that are finished (a resumed run may start there) or that ended leave
        let mut keep = Vec::with_capacity(active.len());
        for (pos, m) in active.iter().enumerate() {
            if results[m.index].is_some() {
                continue;
            }
            if m.step >= m.steps {
                results[m.index] = Some(Ok(finish(m, &stack, pos, &session)));
            } else {
                keep.push(pos);
            }
        }
        if keep.len() < active.len() {
            stack = stack.select(&keep);
            optim = optim.select(&keep);
            let mut pos = 0;
            active.retain(|_| {
                pos += 1;
                keep.contains(&(pos - 1))
            });
        }
        if active.is_empty() {
            return;
        }
        if active.iter().any(|m| m.job.stop.load(Ordering::Relaxed)) {
            for (pos, m) in active.iter().enumerate() {
                let saved = save(m, &stack, &optim, pos, &session, m.step);
                results[m.index] = Some(match saved {
                    Ok(()) => Err(TrainError::Interrupted { step: m.step }),
                    Err(e) => Err(e),
                });
            }
            return;
        }
        match step_all(&mut stack, &mut optim, &mut active, device) {
            Err(failed) => {
                for (pos, e) in failed {
                    results[active[pos].index] = Some(Err(e));
                }
            }
            Ok(losses) => {
                for (pos, m) in active.iter_mut().enumerate() {
                    if let Err(e) =
                        after_step(m, losses[pos], &stack, &optim, pos, &session, on_event)
                    {
                        results[m.index] = Some(Err(e));
                    }
                }
            }
        }
    }
}

/// One optimiser step of every member; `Err` with the members (positions) that cannot take
/// it — their targets failed or their loss is not finite — and nothing stepped, so the step is
/// taken again without them, as their solo runs would end there.
fn step_all(
    stack: &mut StackedTransformer,
    optim: &mut StackedAdamW,
    active: &mut [Member],
    device: &Device,
) -> Result<Vec<f64>, Vec<(usize, TrainError)>> {
    let batches: Vec<Batch> = active.iter().map(|m| m.batcher.batch(m.step)).collect();
    let mut terms = Vec::with_capacity(active.len());
    let mut failed = Vec::new();
    for (pos, (m, batch)) in active.iter_mut().zip(&batches).enumerate() {
        match m.objective.terms(m.step, m.steps, batch) {
            Ok(t) => terms.push(t),
            Err(_) => failed.push((
                pos,
                TrainError::Diverged {
                    step: m.step,
                    loss: f64::NAN,
                },
            )),
        }
    }
    if !failed.is_empty() {
        return Err(failed);
    }
    let clip: Vec<f64> = active.iter().map(|m| m.train.grad_clip).collect();
    let lr: Vec<f64> = active
        .iter()
        .map(|m| schedule::value_at(&m.train.lr, m.step, m.steps))
        .collect();
    let step = StepInputs {
        batches: &batches,
        terms: &terms,
        lr: &lr,
        clip: &clip,
    };
    stacked_step(stack, optim, &step, device).map_err(|losses| {
        losses
            .into_iter()
            .map(|(pos, loss)| {
                let step = active[pos].step;
                (pos, TrainError::Diverged { step, loss })
            })
            .collect()
    })
}

/// What one step of a stack needs, per member (in stack order).
pub(crate) struct StepInputs<'a> {
    /// Each member's batch (same rows and context).
    pub batches: &'a [Batch],
    /// Each member's loss terms for its batch.
    pub terms: &'a [LossTerms],
    /// Each member's learning rate.
    pub lr: &'a [f64],
    /// Each member's gradient-norm clip (0: off).
    pub clip: &'a [f64],
}

/// One forward and backward pass of the stack and one AdamW step of every member; returns each
/// member's loss.
///
/// `Err` with the members (position, loss) whose loss is not finite, and nothing stepped.
pub(crate) fn stacked_step(
    stack: &mut StackedTransformer,
    optim: &mut StackedAdamW,
    step: &StepInputs,
    device: &Device,
) -> Result<Vec<f64>, Vec<(usize, f64)>> {
    let ad = device.clone().autodiff();
    let (inputs, targets) = stacked_batch(step.batches, &ad);
    let leaves = stack.leaves();
    let logits = stack.forward(&leaves, inputs);
    let losses = stack_loss(logits, targets, step.terms);
    let values: Vec<f64> = losses
        .clone()
        .into_data()
        .try_to_vec_as::<f32>()
        .unwrap_or_default()
        .into_iter()
        .map(f64::from)
        .collect();
    let failed: Vec<(usize, f64)> = (0..step.batches.len())
        .map(|pos| (pos, values.get(pos).copied().unwrap_or(f64::NAN)))
        .filter(|(_, loss)| !loss.is_finite())
        .collect();
    if !failed.is_empty() {
        return Err(failed);
    }
    let grads = losses.sum().backward();
    let mut grads: Vec<Tensor<3>> = leaves
        .iter()
        .zip(&stack.weights)
        .map(|(leaf, w)| leaf.grad(&grads).unwrap_or_else(|| w.zeros_like()))
        .collect();
    clip_per_member(&mut grads, step.clip);
    optim.step(&mut stack.weights, grads, step.lr);
    Ok(values)
}

/// The members' batches as `[members, batch, seq]` inputs and `[members, batch · seq]`
/// targets.
fn stacked_batch(batches: &[Batch], device: &Device) -> (Tensor<3, Int>, Tensor<2, Int>) {
    let (k, rows, seq) = (batches.len(), batches[0].batch, batches[0].context);
    let inputs: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.inputs.iter().copied())
        .collect();
    let targets: Vec<i64> = batches
        .iter()
        .flat_map(|b| b.targets.iter().copied())
        .collect();
    (
        Tensor::from_data(TensorData::new(inputs, [k, rows, seq]), device),
        Tensor::from_data(TensorData::new(targets, [k, rows * seq]), device),
    )
}

/// A member's bookkeeping after a step with training loss `loss`: its logged interval, its
/// held-out evaluations and its checkpoints, at the steps its solo run has them.
fn after_step(
    m: &mut Member,
    loss: f64,
    stack: &StackedTransformer,
    optim: &StackedAdamW,
    pos: usize,
    session: &Instant,
    on_event: &mut dyn FnMut(usize, TrainEvent),
) -> Result<(), TrainError> {
    let lr = schedule::value_at(&m.train.lr, m.step, m.steps);
    m.interval_loss += loss;
    m.interval_steps += 1;
    m.timed_steps += 1;
    m.step += 1;
    let done = m.step;
    let wall = m.wall_before + session.elapsed().as_secs_f64();
    if done.is_multiple_of(m.train.log_every) || done == m.steps {
        let secs = m.interval_start.elapsed().as_secs_f64().max(1e-9);
        let mean = m.interval_loss / m.interval_steps as f64;
        m.last.0 = mean;
        let tokens_per_s = (m.timed_steps * m.tokens_per_step) as f64 / secs;
        on_event(
            m.index,
            TrainEvent::Step {
                step: done,
                tokens: done * m.tokens_per_step,
                loss: mean,
                lr,
                tokens_per_s,
                wall_s: wall,
            },
        );
        (m.interval_loss, m.interval_steps, m.interval_start) = (0.0, 0, Instant::now());
        m.timed_steps = 0;
    }
    if done.is_multiple_of(m.eval_every) || done == m.steps {
        let (loss, bpb) = evaluate_member(m, stack, pos);
        m.last.1 = loss;
        m.last.2 = bpb;
        on_event(
            m.index,
            TrainEvent::Eval {
                step: done,
                tokens: done * m.tokens_per_step,
                loss,
                bpb,
                wall_s: m.wall_before + session.elapsed().as_secs_f64(),
            },
        );
    }
    if done.is_multiple_of(m.train.checkpoint_every) || done == m.steps {
        save(m, stack, optim, pos, session, done)?;
        on_event(m.index, TrainEvent::Checkpoint { step: done });
    }
    Ok(())
}

/// Held-out loss and bits per byte of member `pos`, by the solo run's evaluation.
fn evaluate_member(m: &Member, stack: &StackedTransformer, pos: usize) -> (f64, f64) {
    evaluate(
        &stack.member(pos, &m.template),
        &m.job.data.val,
        m.job.data_config.context as usize,
        m.job.device,
        m.job.data.info.val_bytes_per_token,
    )
}

/// Writes member `pos`'s solo checkpoint at `step` (its model, its optimiser state, its
/// logging interval).
fn save(
    m: &Member,
    stack: &StackedTransformer,
    optim: &StackedAdamW,
    pos: usize,
    session: &Instant,
    step: u64,
) -> Result<(), TrainError> {
    let state = CheckpointState {
        run_id: m.job.run_id.into(),
        step,
        tokens: step * m.tokens_per_step,
        wall_s: m.wall_before + session.elapsed().as_secs_f64(),
        log_loss_sum: m.interval_loss,
        log_steps: m.interval_steps,
        // stacks train in f32 only (`run::stacks::stack_key`): no loss scale
        loss_scale: None,
        loss_scale_good_steps: 0,
    };
    let solo = optim
        .member_optimizer(pos, &m.ids, &m.shapes)
        .map_err(|reason| CheckpointError::Write {
            path: m.job.checkpoint.to_path_buf(),
            source: reason,
        })?;
    checkpoint::save(
        m.job.checkpoint,
        &state,
        &stack.member(pos, &m.template),
        Some(&solo),
    )?;
    Ok(())
}

/// The outcome of member `pos`, which has run all its steps.
fn finish(m: &Member, stack: &StackedTransformer, pos: usize, session: &Instant) -> TrainOutcome {
    let wall_s = m.wall_before + session.elapsed().as_secs_f64();
    let (val_loss, val_bpb) = if m.last.1.is_nan() {
        evaluate_member(m, stack, pos)
    } else {
        (m.last.1, m.last.2)
    };
    let tokens = m.steps * m.tokens_per_step;
    TrainOutcome {
        model: stack.member(pos, &m.template),
        val_loss,
        val_bpb,
        train_loss: m.last.0,
        steps: m.steps,
        tokens,
        wall_s,
        tokens_per_s: tokens as f64 / wall_s.max(1e-9),
    }
}
