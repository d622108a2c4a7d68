//! A `logits` run: the finished teacher's pass over the student token stream into the logit
//! store, with its progress as training events and the store's size and truncation recorded.

use super::core::{Attempt, Ctx, Step, add_extra, result_row};
use super::teacher::{in_precision, load_teacher};
use crate::distill::{TruncateOn, logits_run};
use crate::run::error::{RecordError, RunError};
use crate::run::events::RunEvent;
use crate::run::record::Recorder;
use crate::train::{self, TrainEvent};

/// A `logits` run: the teacher's pass over the student token stream into the logit store.
pub(crate) fn logits_pass(
    ctx: &Ctx,
    recorder: &mut dyn Recorder,
    on_event: &mut dyn FnMut(RunEvent),
) -> Result<Step, RunError> {
    let Some(logits) = ctx.config.logits.as_ref() else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    let (teacher, sha) = match load_teacher(ctx, &logits.teacher)? {
        Attempt::Ready(t) => t,
        Attempt::Failed(why) => return Ok(Step::Failed(why)),
    };
    let teacher = match in_precision(ctx, teacher, logits.precision) {
        Ok(t) => t,
        Err(why) => return Ok(Step::Failed(why)),
    };
    let Some(spec) = ctx.config.store_spec() else {
        return Ok(Step::Failed("logits run has no store settings".into()));
    };
    // an aligned store: the students' windows in bytes decide the teacher windows it covers
    let aligned = match logits.students.as_ref() {
        Some(students) => match aligned_windows(ctx, students, &spec) {
            Ok(a) => Some(a),
            Err(why) => return Ok(Step::Failed(why)),
        },
        None => None,
    };
    let header = logits_run::expected_header(
        ctx.run.id.as_str(),
        &spec,
        &sha,
        &ctx.prepared.info.key,
        aligned.as_ref().map(|a| a.1.clone()),
    );
    let needed = match &aligned {
        Some((_, _, needed)) => needed.clone(),
        None => match logits_run::windows_needed(spec.reads, &ctx.prepared, spec.data.context) {
            Ok(n) => n,
            Err(e) => return Ok(Step::Failed(e.into())),
        },
    };
    let id = ctx.run.id.clone();
    let start = std::time::Instant::now();
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
            let tokens = done * header.window_positions;
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
    let dir = ctx.env.layout.logit_store(&ctx.run.id);
    let pass = logits_run::PassDevice {
        teacher: &teacher,
        device: &ctx.device,
        truncate_on: TruncateOn::for_backend(ctx.env.backend),
    };
    let written = logits_run::write_store(
        &spec,
        &header,
        &pass,
        &ctx.prepared,
        &needed,
        aligned.as_ref().map(|a| &a.0.teacher),
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
        Err(e) => return Ok(Step::Failed(e.into())),
    };
    let context = ctx.config.data.context as usize;
    let (val_loss, val_bpb) = train::evaluate(
        &teacher,
        &ctx.prepared.val,
        context,
        &ctx.device,
        ctx.prepared.info.val_bytes_per_token,
    );
    let fidelity = logits_run::fidelity(
        &teacher,
        &ctx.device,
        &ctx.prepared.val,
        &header,
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
    let mut row = result_row(ctx, val_loss, val_bpb, summary.wall_s, summary.tokens_per_s);
    let truncated_on = match pass.truncate_on {
        TruncateOn::Host => "host",
        TruncateOn::Device => "device",
    };
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
    Ok(Step::Done(row))
}

/// For an aligned store: the alignment of the students' stream (`students`) with the
/// teacher's, the teacher tokenizer's SHA-256, and the teacher windows holding every position
/// the students' windows (of `spec.reads`) align with.
fn aligned_windows(
    ctx: &Ctx,
    students: &crate::data::DataConfig,
    spec: &logits_run::StoreSpec,
) -> Result<
    (
        crate::distill::aligned::Aligner,
        String,
        std::collections::BTreeSet<u64>,
    ),
    crate::error::Cause,
> {
    let (dir, cache) = (ctx.env.layout.sweep_dir(), ctx.env.layout.cache());
    let student_prepared = crate::data::prepare(students, dir, &cache, 0)?;
    let (aligner, sha) = super::teacher::aligner(
        students,
        &student_prepared,
        &ctx.config.data,
        &ctx.prepared,
        ctx.env,
    )?;
    let student_windows =
        logits_run::windows_needed(spec.reads, &student_prepared, students.context)?;
    let needed = aligner.teacher_windows(student_windows);
    Ok((aligner, sha, needed))
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
