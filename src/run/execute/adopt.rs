//! A tuned teacher (`[teachers] tune_lr`) adopts its best candidate instead of training again:
//! the candidate at the chosen peak has the teacher's exact configuration (same seed, data
//! order and initialisation), so its final checkpoint is the one training would write. The
//! teacher's checkpoint is the candidate's, relabelled with the teacher's run id; its held-out
//! loss is measured on that model (bit-identical to the candidate's), and its result records
//! `adopted_from` and no training throughput (it trained nothing, so it stays out of time
//! estimates). Tuning a teacher then costs one run per candidate, not one more.

use std::time::Instant;

use super::core::{Ctx, Step, add_extra, result_row};
use crate::model::Transformer;
use crate::plan::{RunId, RunKind};
use crate::run::error::RunError;
use crate::train::{self, checkpoint};

/// The candidate run `ctx`'s teacher can adopt: a tuned teacher whose chosen candidate has its
/// configuration (less the tuning) and a checkpoint on disk. `None`: train as usual.
pub(crate) fn adoptable(ctx: &Ctx) -> Result<Option<RunId>, RunError> {
    if ctx.config.kind != RunKind::Teacher {
        return Ok(None);
    }
    let Some(candidate) = ctx.run.tuned_lr().and_then(|t| t.baseline.clone()) else {
        return Ok(None);
    };
    let Some(theirs) = ctx.run.related_config(&candidate)? else {
        return Ok(None);
    };
    let mut mine = ctx.config.clone();
    mine.tune = None;
    let on_disk = ctx.env.layout.checkpoint(&candidate).is_file();
    Ok((theirs == mine && on_disk).then_some(candidate))
}

/// Adopts `candidate`'s final checkpoint as `ctx`'s teacher and measures it.
pub(crate) fn adopt(ctx: &Ctx, candidate: &RunId) -> Step {
    let start = Instant::now();
    let model = match adopted_model(ctx, candidate) {
        Ok(m) => m,
        Err(why) => return Step::Failed(why),
    };
    let (val_loss, val_bpb) = train::evaluate(
        &model,
        &ctx.prepared.val,
        ctx.config.data.context as usize,
        &ctx.device,
        ctx.prepared.info.val_bytes_per_token,
    );
    let mut row = result_row(ctx, val_loss, val_bpb, start.elapsed().as_secs_f64(), 0.0);
    add_extra(&mut row, serde_json::json!({ "adopted_from": candidate }));
    Step::Done(row)
}

/// Relabels `candidate`'s checkpoint as the teacher's and loads the model from it; the error
/// names the checkpoint that is missing or damaged.
fn adopted_model(ctx: &Ctx, candidate: &RunId) -> Result<Transformer, crate::error::Cause> {
    let id = &ctx.run.id;
    let layout = &ctx.env.layout;
    let (src, dst) = (layout.checkpoint(candidate), layout.checkpoint(id));
    checkpoint::relabel(&src, candidate.as_str(), &dst, id.as_str())?.ok_or_else(|| {
        format!(
            "the checkpoint of candidate `{candidate}` (`{}`) disappeared",
            src.display()
        )
    })?;
    let loaded = checkpoint::load(&dst, id.as_str())?
        .ok_or_else(|| format!("checkpoint `{}` is missing", dst.display()))?;
    Ok(loaded.model(ctx.config.init_model(&ctx.device))?)
}
