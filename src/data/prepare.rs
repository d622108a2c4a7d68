//! Preparing a run's data from its configuration: the built-in synthetic corpus generated for
//! its seed, or a real-text corpus read from the token cache (built once per sweep).

use std::path::Path;

use super::batches::mix;
use super::config::DataConfig;
use super::corpus;
use super::error::DataError;
use super::prepared::{CorpusInfo, Prepared, unigram_entropy};
use super::stream::Stream;
use super::synthetic::{SyntheticCorpus, SyntheticSpec};
use crate::spec::CorpusKind;

/// Stream seed of the synthetic held-out split (never used for training).
const SYNTHETIC_VAL_STREAM: u64 = 0x0005_EED0_F4E1_D0A7;

/// Prepares the data of a run that trains on `train_tokens` tokens. Paths in `data` are
/// relative to `base_dir` (the sweep file's folder); caches go to `cache_dir`.
pub fn prepare(
    data: &DataConfig,
    base_dir: &Path,
    cache_dir: &Path,
    train_tokens: u64,
) -> Result<Prepared, DataError> {
    match data.corpus {
        CorpusKind::Synthetic => prepare_synthetic(data, train_tokens),
        _ => corpus::prepare_text(data, base_dir, cache_dir),
    }
}

fn prepare_synthetic(data: &DataConfig, train_tokens: u64) -> Result<Prepared, DataError> {
    let vocab = u32::try_from(data.vocab)
        .map_err(|_| DataError::TooSmall(format!("vocabulary `{}` is too large", data.vocab)))?;
    let spec = SyntheticSpec::with_world(
        vocab,
        data.corpus_seed,
        data.synthetic_sources,
        data.synthetic_copies,
    );
    let corpus = SyntheticCorpus::new(spec).map_err(DataError::TooSmall)?;
    let val = corpus.generate(SYNTHETIC_VAL_STREAM, data.val_tokens as usize + 1);
    let train = corpus.generate(mix(data.seed, 0x7A1A), train_tokens as usize + 1);
    let n = val.tokens.len() as f64;
    let info = CorpusInfo {
        description: format!(
            "synthetic (vocab {vocab}, seed {}{})",
            data.corpus_seed,
            spec.world_note()
        ),
        key: format!(
            "synthetic-v1-vocab{vocab}-seed{}{}",
            data.corpus_seed,
            spec.key_suffix()
        ),
        train_tokens: train.tokens.len() as u64,
        val_tokens: val.tokens.len() as u64,
        val_bytes_per_token: 1.0,
        unigram_entropy_nats: unigram_entropy(&val.tokens),
        entropy_rate_nats: Some(val.entropy_sum_nats / n),
        oracle_val_loss: Some(val.nll_sum_nats / n),
        val_split: "a separate generated stream".into(),
        ..CorpusInfo::default()
    };
    Ok(Prepared {
        train: Stream::Memory(train.tokens),
        val: Stream::Memory(val.tokens),
        shuffle: false,
        info,
    })
}
