//! A run's teacher and a student's targets: the finished teacher loaded from its checkpoint (or
//! its Hugging Face folder), and a student's objective reading that teacher online or its
//! logit store offline.

use super::core::Ctx;
use super::pretrained;
use crate::distill::{StoreReader, TeacherSource, TruncateOn, logits_run};
use crate::model::Transformer;
use crate::plan::{RunId, RunKind};
use crate::run::error::RunError;
use crate::run::unit::UnitRun;
use crate::spec::DistillMode;
use crate::train::{self, DistillObjective, checkpoint};

/// The finished teacher run `teacher_id`: its model loaded from its final checkpoint, and the
/// checkpoint's content hash; `Err` with the reason the run fails otherwise.
pub(crate) fn load_teacher(
    ctx: &Ctx,
    teacher_id: &RunId,
) -> Result<Result<(Transformer, String), String>, RunError> {
    let Some(teacher) = ctx.run.related_config(teacher_id)? else {
        return Ok(Err(format!(
            "teacher run `{teacher_id}` is not in the sweep database"
        )));
    };
    if let Some(source) = &teacher.model.pretrained {
        let dir = ctx.env.layout.sweep_dir();
        return Ok(pretrained::load(&teacher, source, dir, &ctx.device));
    }
    let path = ctx.env.layout.checkpoint(teacher_id);
    let loaded = match checkpoint::load(&path, teacher_id.as_str()) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Ok(Err(format!(
                "teacher checkpoint `{}` is missing",
                path.display()
            )));
        }
        Err(e) => return Ok(Err(e.to_string())),
    };
    let model = match loaded.model(teacher.init_model(&ctx.device)) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e.to_string())),
    };
    Ok(checkpoint::content_hash(&path)
        .map(|h| (model, h))
        .map_err(|e| e.to_string()))
}

/// A student's teacher (loaded from its checkpoint or folder) and its content hash; `Err`
/// with the reason the run fails otherwise.
pub(crate) fn student_teacher(
    ctx: &Ctx,
) -> Result<Result<(Transformer, String), String>, RunError> {
    match ctx.config.distill.as_ref() {
        Some(distill) => load_teacher(ctx, &distill.teacher),
        None => Ok(Err("student run has no distillation settings".into())),
    }
}

/// A student's objective: online from `teacher`, or offline from the logit store it depends
/// on; `Err` with the reason the run fails otherwise.
pub(crate) fn student_objective<'a>(
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
            let Some(spec) = store.store_spec() else {
                return Ok(Err(format!("run `{store_id}` is not a logit store")));
            };
            let header = logits_run::expected_header(
                store_id.as_str(),
                &spec,
                teacher_sha,
                &ctx.prepared.info.key,
            );
            let dir = ctx.env.layout.logit_store(store_id);
            TeacherSource::Offline(Box::new(StoreReader::new(&dir, header)))
        }
    };
    Ok(Ok(distill.objective(source)))
}

/// The logit store among `run`'s dependencies (a tuned student also waits for baselines).
fn logit_store_of(run: &UnitRun) -> Result<Option<&RunId>, RunError> {
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
