//! A run's teacher and a student's targets: the finished teacher loaded from its checkpoint (or
//! its Hugging Face folder), and a student's objective reading that teacher online or its
//! logit store offline.

use super::core::{Attempt, Ctx};
use super::pretrained;
use crate::data::{self, DataConfig, Prepared};
use crate::distill::aligned::{Aligner, CrossLoss};
use crate::distill::{CrossSide, StoreReader, TeacherSource, TruncateOn, logits_run};
use crate::error::Cause;
use crate::model::TeacherModel;
use crate::plan::{RunId, RunKind};
use crate::run::error::RunError;
use crate::run::unit::UnitRun;
use crate::spec::{DistillMode, TeacherPrecision};
use crate::train::{self, DistillObjective, checkpoint};

/// The finished teacher run `teacher_id`: its model loaded from its final checkpoint, and the
/// checkpoint's content hash; failed with the cause otherwise.
pub(crate) fn load_teacher(
    ctx: &Ctx,
    teacher_id: &RunId,
) -> Result<Attempt<(TeacherModel, String)>, RunError> {
    let Some(teacher) = ctx.run.related_config(teacher_id)? else {
        return Ok(Attempt::Failed(
            format!("teacher run `{teacher_id}` is not in the sweep database").into(),
        ));
    };
    if let Some(source) = &teacher.model.pretrained {
        let dir = ctx.env.layout.sweep_dir();
        return Ok(pretrained::load(&teacher, source, dir, &ctx.device).into());
    }
    let path = ctx.env.layout.checkpoint(teacher_id);
    let loaded = match checkpoint::load(&path, teacher_id.as_str()) {
        Ok(Some(l)) => l,
        Ok(None) => {
            let missing = format!("teacher checkpoint `{}` is missing", path.display());
            return Ok(Attempt::Failed(missing.into()));
        }
        Err(e) => return Ok(Attempt::Failed(e.into())),
    };
    let model = match loaded.model(teacher.init_model(&ctx.device)) {
        Ok(m) => m,
        Err(e) => return Ok(Attempt::Failed(e.into())),
    };
    Ok(checkpoint::content_hash(&path)
        .map(|h| (TeacherModel::own(model, teacher.transformer()), h))
        .into())
}

/// A student's teacher (loaded from its checkpoint or folder) and its content hash; failed
/// with the cause otherwise.
pub(crate) fn student_teacher(ctx: &Ctx) -> Result<Attempt<(TeacherModel, String)>, RunError> {
    let Some(distill) = ctx.config.distill.as_ref() else {
        return Ok(Attempt::Failed(
            "student run has no distillation settings".into(),
        ));
    };
    // an offline student reads the store, whose pass ran in the store's precision
    let precision = match distill.mode {
        DistillMode::Online => distill.teacher_precision,
        DistillMode::Offline => TeacherPrecision::F32,
    };
    Ok(
        load_teacher(ctx, &distill.teacher)?.and_then(|(teacher, sha)| {
            in_precision(ctx, teacher, precision)
                .map(|t| (t, sha))
                .into()
        }),
    )
}

/// `teacher` running in `precision` on the run's device; `Err` says why it cannot.
pub(crate) fn in_precision(
    ctx: &Ctx,
    teacher: TeacherModel,
    precision: TeacherPrecision,
) -> Result<TeacherModel, Cause> {
    train::precision::check_teacher(&ctx.device, ctx.env.backend, precision)?;
    let activations = train::precision::teacher_activations(ctx.env.backend);
    Ok(teacher.in_precision(precision, activations, &ctx.device)?)
}

/// A student's objective: online from `teacher`, or offline from the logit store it depends
/// on; failed with the cause otherwise.
pub(crate) fn student_objective<'a>(
    ctx: &'a Ctx,
    teacher: &'a (TeacherModel, String),
) -> Result<Attempt<DistillObjective<'a>>, RunError> {
    let failed = |why: String| Ok(Attempt::Failed(why.into()));
    let Some(distill) = ctx.config.distill.as_ref() else {
        return failed("student run has no distillation settings".into());
    };
    let (teacher, teacher_sha) = (&teacher.0, &teacher.1);
    let Some(teacher_config) = ctx.run.related_config(&distill.teacher)? else {
        return failed(format!(
            "teacher run `{}` is not in the sweep database",
            distill.teacher
        ));
    };
    // a teacher of another tokenizer: its corpus, both streams' bytes, the loss across them
    let crossing = match distill.cross_tokenizer {
        Some(kind) if !ctx.config.data.same_tokens(&teacher_config.data) => {
            match cross_side(ctx, &teacher_config.data, kind, distill) {
                Ok(c) => Some(c),
                Err(why) => return Ok(Attempt::Failed(why)),
            }
        }
        _ => None,
    };
    let corpus_key = crossing
        .as_ref()
        .map_or(ctx.prepared.info.key.clone(), |(_, p, _)| {
            p.info.key.clone()
        });
    let tokenizer_sha = crossing.as_ref().map(|(_, _, sha)| sha.clone());
    let source = match distill.mode {
        DistillMode::Online => TeacherSource::Online {
            teacher,
            device: &ctx.device,
            compute: train::precision::compute_dtype(ctx.precision()),
            truncate_on: TruncateOn::for_backend(ctx.env.backend),
        },
        DistillMode::Offline => {
            let Some(store_id) = logit_store_of(ctx.run)? else {
                return failed("offline student has no logit store dependency".into());
            };
            let Some(store) = ctx.run.related_config(store_id)? else {
                return failed(format!(
                    "logit store run `{store_id}` is not in the sweep database"
                ));
            };
            let Some(spec) = store.store_spec() else {
                return failed(format!("run `{store_id}` is not a logit store"));
            };
            let header = logits_run::expected_header(
                store_id.as_str(),
                &spec,
                teacher_sha,
                &corpus_key,
                tokenizer_sha,
            );
            let dir = ctx.env.layout.logit_store(store_id);
            TeacherSource::Offline(Box::new(StoreReader::new(&dir, header)))
        }
    };
    let mut objective = distill.objective(source);
    objective.targets.cross = crossing.map(|(side, _, _)| Box::new(side));
    Ok(Attempt::Ready(objective))
}

/// A student's side of a teacher of another tokenizer (`teacher_data`): both training streams
/// in the corpus's bytes, the loss across the two vocabularies, the teacher's prepared corpus
/// and the SHA-256 its aligned store names its tokenizer by.
fn cross_side(
    ctx: &Ctx,
    teacher_data: &DataConfig,
    kind: crate::spec::CrossTokenizer,
    distill: &crate::plan::DistillConfig,
) -> Result<(CrossSide, Prepared, String), Cause> {
    let (dir, cache) = (ctx.env.layout.sweep_dir(), ctx.env.layout.cache());
    let teacher_prepared = data::prepare(teacher_data, dir, &cache, 0)?;
    let (aligner, sha) = aligner(
        &ctx.config.data,
        &ctx.prepared,
        teacher_data,
        &teacher_prepared,
        ctx.env,
    )?;
    let vocab_bytes = |d: &DataConfig| -> Result<Vec<Vec<u8>>, Cause> {
        let t = data::run_tokenizer(d, dir, &cache)?
            .ok_or("the synthetic corpus has no bytes to align")?;
        Ok(t.vocab_bytes(d.vocab)?)
    };
    let loss = CrossLoss::new(
        kind,
        distill.truncation,
        distill.temperature.0,
        &vocab_bytes(&ctx.config.data)?,
        &vocab_bytes(teacher_data)?,
    );
    let side = CrossSide {
        aligner,
        loss,
        teacher_vocab: teacher_data.vocab,
        units: 0,
        unaligned_rows: 0,
        rows: 0,
    };
    Ok((side, teacher_prepared, sha))
}

/// The byte alignment of a student's (`student`, prepared) and a teacher's training streams,
/// and the SHA-256 of the teacher's tokenizer.
pub(crate) fn aligner(
    student: &DataConfig,
    student_prepared: &Prepared,
    teacher: &DataConfig,
    teacher_prepared: &Prepared,
    env: &super::core::ExecEnv,
) -> Result<(Aligner, String), Cause> {
    let (dir, cache) = (env.layout.sweep_dir(), env.layout.cache());
    let index = |d: &DataConfig, p: &Prepared| data::byte_index(d, p, dir, &cache);
    let aligner = Aligner {
        student: index(student, student_prepared)?,
        teacher: index(teacher, teacher_prepared)?,
        student_context: student.context as usize,
        teacher_context: teacher.context as usize,
    };
    let json = data::tokenizer_json(teacher, dir, &cache);
    let sha = logits_run::tokenizer_sha256(json.as_deref())?;
    Ok((aligner, sha))
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
