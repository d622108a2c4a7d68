//! Where a sweep's files live under `results/NAME/`, next to its database.

use std::path::{Path, PathBuf};

/// Where the logit store of run `id` lives.
pub fn store_dir(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("logits").join(id)
}

/// Where run `id` keeps its checkpoint.
pub fn checkpoint_path(results_dir: &Path, id: &str) -> PathBuf {
    results_dir.join("checkpoints").join(format!("{id}.ckpt"))
}
