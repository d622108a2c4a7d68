//! Training checkpoints: the model, the optimiser state and the run's position, in one
//! checksummed file written atomically (temporary file, fsync, rename).
//!
//! Layout: magic `PDSCKPT1`, then three little-endian u64 lengths (state JSON, model record,
//! optimiser record), the 32-byte SHA-256 of everything after the header, then the three
//! sections. The model and optimiser sections are burn's burnpack records. The data position is
//! the step: batches are a pure function of the seed and the step (see `data::Batcher`), and no
//! other randomness is drawn during training, so the step is the whole RNG state.

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::atomic::{WriteError, write_atomic};
use crate::error::Cause;
use crate::model::Transformer;

const MAGIC: &[u8; 8] = b"PDSCKPT1";
const HEADER: usize = 8 + 3 * 8 + 32;

/// Where a run stands when its checkpoint was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointState {
    /// The run this belongs to.
    pub run_id: String,
    /// Optimiser steps completed.
    pub step: u64,
    /// Training tokens consumed.
    pub tokens: u64,
    /// Wall-clock seconds spent training so far (over all sessions).
    pub wall_s: f64,
    /// Sum of the training losses since the last logged step, so a resumed run logs the same
    /// interval means as an uninterrupted one.
    #[serde(default)]
    pub log_loss_sum: f64,
    /// Steps in that sum.
    #[serde(default)]
    pub log_steps: u64,
    /// The f16 dynamic loss scale (`None` in f32 and bf16 runs).
    #[serde(default)]
    pub loss_scale: Option<f64>,
    /// Clean steps since the loss scale last changed.
    #[serde(default)]
    pub loss_scale_good_steps: u64,
}

/// A checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Writing failed (disk full, permissions).
    #[error("cannot write checkpoint `{}`", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The file is damaged or not a checkpoint; it is never used.
    #[error("checkpoint `{}` is corrupt\n\nhint: delete it to restart the run from scratch", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Which check failed, or the error reading it.
        #[source]
        source: Cause,
    },
    /// The file belongs to another run.
    #[error("checkpoint `{}` belongs to run `{found}`, not `{expected}`", path.display())]
    WrongRun {
        /// The file.
        path: PathBuf,
        /// The run asked for.
        expected: String,
        /// The run in the file.
        found: String,
    },
}

/// Writes a checkpoint of `model` and `optim` at `state` to `path`.
pub fn save(
    path: &Path,
    state: &CheckpointState,
    model: &Transformer,
    optim: Option<&ModuleOptimizer>,
) -> Result<(), CheckpointError> {
    let fail = |source: Cause| CheckpointError::Write {
        path: path.to_path_buf(),
        source,
    };
    let json = serde_json::to_vec(state).map_err(|e| fail(e.into()))?;
    let model_bytes = model
        .clone()
        .into_record()
        .into_bytes()
        .map_err(|e| fail(e.into()))?;
    let optim_bytes = match optim {
        Some(o) => o.into_bytes().map_err(|e| fail(e.into()))?.to_vec(),
        None => Vec::new(),
    };
    write_sections(path, &json, &model_bytes, &optim_bytes).map_err(|e| fail(e.source.into()))
}

/// Writes the three sections under a header (magic, lengths, SHA-256), atomically.
fn write_sections(path: &Path, json: &[u8], model: &[u8], optim: &[u8]) -> Result<(), WriteError> {
    let mut hasher = Sha256::new();
    for part in [json, model, optim] {
        hasher.update(part);
    }
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    for len in [json.len(), model.len(), optim.len()] {
        header.extend_from_slice(&(len as u64).to_le_bytes());
    }
    header.extend_from_slice(&hasher.finalize());
    write_atomic(path, &[&header, json, model, optim])
}

/// The SHA-256 (hex) of a checkpoint's content, read from its header: what a logit store
/// records to prove which teacher it came from.
pub(crate) fn content_hash(path: &Path) -> Result<String, CheckpointError> {
    use std::io::Read;
    let corrupt = |source: Cause| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        source,
    };
    let mut header = [0u8; HEADER];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .map_err(|e| corrupt(e.into()))?;
    if &header[..8] != MAGIC {
        return Err(corrupt("not a pdsweep checkpoint".into()));
    }
    Ok(crate::digest::hex(&header[32..64]))
}

/// A verified checkpoint read back from disk.
pub struct Loaded {
    /// Where the run stood.
    pub state: CheckpointState,
    model: Vec<u8>,
    optim: Vec<u8>,
    path: PathBuf,
}

/// Reads and verifies the checkpoint at `path` for run `run_id`; `Ok(None)` when there is none.
pub fn load(path: &Path, run_id: &str) -> Result<Option<Loaded>, CheckpointError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CheckpointError::Corrupt {
                path: path.to_path_buf(),
                source: e.into(),
            });
        }
    };
    let corrupt = |source: Cause| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        source,
    };
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err(corrupt("not a pdsweep checkpoint".into()));
    }
    let len_at = |i: usize| {
        u64::from_le_bytes(bytes[8 + 8 * i..16 + 8 * i].try_into().unwrap_or_default()) as usize
    };
    let (json_len, model_len, optim_len) = (len_at(0), len_at(1), len_at(2));
    let total = json_len
        .checked_add(model_len)
        .and_then(|n| n.checked_add(optim_len));
    if total.is_none_or(|t| HEADER + t != bytes.len()) {
        return Err(corrupt(
            "its length does not match its header (truncated?)".into(),
        ));
    }
    if Sha256::digest(&bytes[HEADER..])[..] != bytes[32..64] {
        return Err(corrupt("checksum mismatch".into()));
    }
    let body = &bytes[HEADER..];
    let state: CheckpointState =
        serde_json::from_slice(&body[..json_len]).map_err(|e| corrupt(e.into()))?;
    if state.run_id != run_id {
        return Err(CheckpointError::WrongRun {
            path: path.to_path_buf(),
            expected: run_id.into(),
            found: state.run_id,
        });
    }
    Ok(Some(Loaded {
        state,
        model: body[json_len..json_len + model_len].to_vec(),
        optim: body[json_len + model_len..].to_vec(),
        path: path.to_path_buf(),
    }))
}

/// Writes the checkpoint at `src` (of run `from`, verified) to `dst` as run `to`'s: the same model,
/// optimiser and position under the other run's id.
///
/// A tuned teacher adopts its best candidate this way (`run::adopt`) instead of training it again.
pub fn relabel(
    src: &Path,
    from: &str,
    dst: &Path,
    to: &str,
) -> Result<Option<()>, CheckpointError> {
    let Some(loaded) = load(src, from)? else {
        return Ok(None);
    };
    let state = CheckpointState {
        run_id: to.to_string(),
        ..loaded.state
    };
    let fail = |source: Cause| CheckpointError::Write {
        path: dst.to_path_buf(),
        source,
    };
    let json = serde_json::to_vec(&state).map_err(|e| fail(e.into()))?;
    write_sections(dst, &json, &loaded.model, &loaded.optim)
        .map_err(|e| fail(e.source.into()))
        .map(Some)
}

impl Loaded {
    /// Applies the stored weights to `model` (built with the run's shape).
    pub fn model(&self, model: Transformer) -> Result<Transformer, CheckpointError> {
        let corrupt = |source: Cause| CheckpointError::Corrupt {
            path: self.path.clone(),
            source,
        };
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(self.model.clone()))
            .map_err(|e| corrupt(e.into()))?;
        model.try_load_record(record).map_err(|e| corrupt(e.into()))
    }

    /// Applies the stored optimiser state to `optim`.
    pub fn optimizer(&self, optim: ModuleOptimizer) -> Result<ModuleOptimizer, CheckpointError> {
        if self.optim.is_empty() {
            return Ok(optim);
        }
        optim
            .from_bytes(Bytes::from_bytes_vec(self.optim.clone()))
            .map_err(|e| CheckpointError::Corrupt {
                path: self.path.clone(),
                source: e.into(),
            })
    }
}
