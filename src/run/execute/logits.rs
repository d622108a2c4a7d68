//! A `logits` run: the finished teacher's pass over the student token stream into the logit
//! store, with its progress as training events and the store's size and truncation recorded.
//!
//! Three stages: [`plan_pass`] loads the teacher and decides which windows the store needs,
//! [`write_with_progress`] runs the pass while reporting it, and [`result_of`] scores the
//! teacher and describes the store in the run's result row.

use std::collections::BTreeSet;

use super::core::{Attempt, Ctx, Step, add_extra, result_row};
use super::teacher::{in_precision, load_teacher};
use crate::distill::TruncateOn;
use crate::distill::aligned::Aligner;
use crate::distill::logits_run::{self, LogitsError, StoreSpec, StoreSummary};
use crate::distill::store::StoreHeader;
use crate::error::Cause;
use crate::model::TeacherModel;
use crate::run::error::{RecordError, RunError};
use crate::run::events::RunEvent;
use crate::run::record::Recorder;
use crate::store::RunResult;
use crate::train::{self, TrainEvent};

/// A `logits` run: the teacher's pass over the student token stream into the logit store.
pub(crate) fn logits_pass(
    ctx: &Ctx,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let Some(spec) = ctx.config.store_spec() else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let pass = match plan_pass(ctx, &spec)? {
        Attempt::Ready(pass) => pass,
        Attempt::Failed(why) => return Ok(Step::Failed(why)),
    };
    let summary = match write_with_progress(ctx, &spec, &pass, recorder, on_event)? {
        Ok(summary) => summary,
        Err(LogitsError::Interrupted) => return Ok(Step::Interrupted),
        Err(e) => return Ok(Step::Failed(e.into())),
    };
    Ok(Step::Done(result_of(ctx, &pass, &summary)))
}

/// What a pass needs before it starts: the teacher in its precision, the store's header, the
/// windows to hold, and for an aligned store the alignment.
struct Pass {
    teacher: TeacherModel,
    header: StoreHeader,
    needed: BTreeSet<u64>,
    aligned: Option<AlignedWindows>,
}

/// For an aligned store (students of another tokenizer): how the students' stream maps onto
/// the teacher's, which teacher windows that covers, and the teacher tokenizer's SHA-256.
struct AlignedWindows {
    aligner: Aligner,
    tokenizer_sha256: String,
    needed: BTreeSet<u64>,
}

/// Loads the teacher and decides the store's header and windows; a teacher or tokenizer that
/// cannot be used fails the run, a database error fails the sweep.
fn plan_pass(ctx: &Ctx, spec: &StoreSpec) -> Result<Attempt<Pass>, RunError> {
    let Some(logits) = ctx.config.logits.as_ref() else {
        return Ok(Attempt::Failed("logits run has no store settings".into()));
    };
    let (teacher, sha) = match load_teacher(ctx, &logits.teacher)? {
        Attempt::Ready(t) => t,
        Attempt::Failed(why) => return Ok(Attempt::Failed(why)),
    };
    let staged = || -> Result<Pass, Cause> {
        let teacher = in_precision(ctx, teacher, logits.precision)?;
        // an aligned store: the students' windows in bytes decide the teacher windows it covers
        let aligned = match logits.students.as_ref() {
            Some(students) => Some(aligned_windows(ctx, students, spec)?),
            None => None,
        };
        let header = logits_run::expected_header(
            ctx.run.id.as_str(),
            spec,
            &sha,
            &ctx.prepared.info.key,
            aligned.as_ref().map(|a| a.tokenizer_sha256.clone()),
        );
        let needed = match &aligned {
            Some(a) => a.needed.clone(),
            None => logits_run::windows_needed(spec.reads, &ctx.prepared, spec.data.context)?,
        };
        Ok(Pass {
            teacher,
            header,
            needed,
            aligned,
        })
    };
    Ok(match staged() {
        Ok(pass) => Attempt::Ready(pass),
        Err(why) => Attempt::Failed(why),
    })
}

/// Runs the pass, reporting progress as training events and renewing the run's heartbeat every ten
/// windows.
///
/// The outer error is the recorder's (it stops the sweep); the inner one is the pass's own.
fn write_with_progress(
    ctx: &Ctx,
    spec: &StoreSpec,
    pass: &Pass,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Result<StoreSummary, LogitsError>, RunError> {
    let id = ctx.run.id.clone();
    let start = std::time::Instant::now();
    let window_positions = pass.header.window_positions;
    let mut record_error: Option<RecordError> = None;
    let mut started = false;
    // progress counts the windows the store lacks (all of them on a first pass)
    let mut progress = |done: u64, total: u64| {
        if !started {
            started = true;
            on_event(RunEvent::Train {
                id: id.clone(),
                event: TrainEvent::Started {
                    steps: total,
                    start_step: 0,
                },
            });
        }
        if done.is_multiple_of(10) || done == total {
            if record_error.is_none()
                && let Err(e) = recorder.heartbeat(&id)
            {
                record_error = Some(e);
            }
            let tokens = done * window_positions;
            let wall_s = start.elapsed().as_secs_f64();
            let event = TrainEvent::Step {
                step: done,
                tokens,
                loss: f64::NAN,
                lr: 0.0,
                tokens_per_s: tokens as f64 / wall_s.max(1e-9),
                wall_s,
            };
            on_event(RunEvent::Train {
                id: id.clone(),
                event,
            });
        }
    };
    let device = logits_run::PassDevice {
        teacher: &pass.teacher,
        device: &ctx.device,
        truncate_on: TruncateOn::for_backend(ctx.env.backend),
    };
    let written = logits_run::write_store(
        spec,
        &pass.header,
        &device,
        &ctx.prepared,
        &pass.needed,
        pass.aligned.as_ref().map(|a| &a.aligner.teacher),
        &ctx.env.layout.logit_store(&ctx.run.id),
        ctx.env.stop,
        &mut progress,
    );
    match record_error {
        Some(e) => Err(e.into()),
        None => Ok(written),
    }
}

/// The run's result row: the teacher's held-out score, the store's size against the plan's
/// prediction, and how faithfully the kept entries carry the teacher (the store's own
/// truncation first, then each view the students read).
fn result_of(ctx: &Ctx, pass: &Pass, summary: &StoreSummary) -> RunResult {
    let Some(logits) = ctx.config.logits.as_ref() else {
        return result_row(
            ctx,
            f64::NAN,
            f64::NAN,
            summary.wall_s,
            summary.tokens_per_s,
        );
    };
    let (val_loss, val_bpb) = train::evaluate(
        &pass.teacher,
        &ctx.prepared.val,
        ctx.config.data.context as usize,
        &ctx.device,
        ctx.prepared.info.val_bytes_per_token,
    );
    let fidelity = logits_run::fidelity(
        &pass.teacher,
        &ctx.device,
        &ctx.prepared.val,
        &pass.header,
        logits.truncation,
        &logits.views,
    );
    let views: Vec<serde_json::Value> = fidelity
        .iter()
        .map(|f| {
            serde_json::json!({
                "top_p": f.view.top_p.0,
                "top_k": f.view.top_k.to_string(),
                "targets": f.view.targets.as_str(),
                "missing": f.view.missing.as_str(),
                "kl": f.kl,
                "kept_mass": f.kept_mass,
            })
        })
        .collect();
    let own = fidelity.first();
    let truncated_on = match TruncateOn::for_backend(ctx.env.backend) {
        TruncateOn::Host => "host",
        TruncateOn::Device => "device",
    };
    let mut row = result_row(ctx, val_loss, val_bpb, summary.wall_s, summary.tokens_per_s);
    let extra = serde_json::json!({
        "store_bytes": summary.bytes,
        "positions": summary.positions,
        "computed_positions": summary.computed,
        "kept_entries": summary.entries,
        "bytes_per_token": summary.bytes as f64 / summary.positions.max(1) as f64,
        "bytes_per_kept_logit": summary.bytes as f64 / summary.entries.max(1) as f64,
        "predicted_store_bytes": predicted_store_bytes(ctx),
        "truncated_on": truncated_on,
        "teacher_precision": logits.precision.as_str(),
        "fidelity_kl": own.map(|f| f.kl),
        "fidelity_kept_mass": own.map(|f| f.kept_mass),
        "fidelity_positions": own.map(|f| f.positions),
        "fidelity_views": views,
    });
    add_extra(&mut row, extra);
    row
}

/// For an aligned store: the alignment of the students' stream (`students`) with the
/// teacher's, the teacher tokenizer's SHA-256, and the teacher windows holding every position
/// the students' windows (of `spec.reads`) align with.
fn aligned_windows(
    ctx: &Ctx,
    students: &crate::data::DataConfig,
    spec: &StoreSpec,
) -> Result<AlignedWindows, Cause> {
    let (dir, cache) = (ctx.env.layout.sweep_dir(), ctx.env.layout.cache());
    let student_prepared = crate::data::prepare(students, dir, &cache, 0)?;
    let (aligner, tokenizer_sha256) = super::teacher::aligner(
        students,
        &student_prepared,
        &ctx.config.data,
        &ctx.prepared,
        ctx.env,
    )?;
    let student_windows =
        logits_run::windows_needed(spec.reads, &student_prepared, students.context)?;
    let needed = aligner.teacher_windows(student_windows);
    Ok(AlignedWindows {
        aligner,
        tokenizer_sha256,
        needed,
    })
}
/// The plan's predicted disk bytes for the store of `ctx`'s run.
fn predicted_store_bytes(ctx: &Ctx) -> u64 {
    let vocab = ctx.config.data.vocab;
    ctx.config.logits.as_ref().map_or(0, |l| {
        crate::distill::store::Layout::of(vocab, &l.truncation)
            .aligned(l.aligned)
            .bytes_per_token()
    }) * ctx.config.tokens
}
