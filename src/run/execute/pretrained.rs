//! Pre-trained teachers in a sweep: loading one from its Hugging Face folder (for its logit
//! passes and online students), and measuring it on the sweep's held-out split, which is all
//! its own run does (it trains nothing).

use std::path::Path;
use std::time::Instant;

use burn::tensor::Device;

use crate::data::Prepared;
use crate::model::TeacherModel;
use crate::plan::{PretrainedSource, RunConfig};

/// The model of a pre-trained teacher run `config` whose source is `source` (paths relative to
/// `sweep_dir`), and the hash that identifies its weights (what logit stores record).
pub fn load(
    config: &RunConfig,
    source: &PretrainedSource,
    sweep_dir: &Path,
    device: &Device,
) -> Result<(TeacherModel, String), crate::hf::HfError> {
    let dir = sweep_dir.join(&source.path);
    // a teacher trained with BOS sees it before every window: one position more
    let bos = u64::from(source.bos.is_some());
    let arch = config.model.transformer(config.data.context + bos);
    crate::hf::load_model(&dir, &arch, &source.config_sha256, device)
        .map(|model| (model.with_bos(source.bos), source.weights_sha256.clone()))
}

/// What measuring a pre-trained teacher gave.
pub(crate) struct Measured {
    /// Held-out loss (nats/token).
    pub val_loss: f64,
    /// Held-out bits per byte.
    pub val_bpb: f64,
    /// Seconds spent loading and evaluating.
    pub wall_s: f64,
    /// Held-out tokens scored per second.
    pub tokens_per_s: f64,
}

/// Loads the teacher of run `config` and scores the held-out split of `data`.
pub fn measure(
    config: &RunConfig,
    source: &PretrainedSource,
    sweep_dir: &Path,
    data: &Prepared,
    device: &Device,
) -> Result<Measured, crate::hf::HfError> {
    let start = Instant::now();
    let (model, _) = load(config, source, sweep_dir, device)?;
    let (val_loss, val_bpb) = crate::train::evaluate(
        &model,
        &data.val,
        config.data.context as usize,
        device,
        data.info.val_bytes_per_token,
    );
    let wall_s = start.elapsed().as_secs_f64();
    Ok(Measured {
        val_loss,
        val_bpb,
        wall_s,
        tokens_per_s: data.val.len() as f64 / wall_s.max(1e-9),
    })
}
