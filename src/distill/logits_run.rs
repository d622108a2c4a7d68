//! A `logits` run: the finished teacher passes once over a student token stream and the top k
//! of its distribution at every position is written to the logit store, shard by shard. Shards
//! already written (and verified) are kept, so an interrupted pass resumes.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::tensor::Device;

use super::reader::{blocks_per_shard, shard_name};
use super::store::{
    Shard, ShardError, StoreHeader, VALUE_ENCODING, block_bytes, encode_block,
    logit_bytes_per_token, write_shard,
};
use super::targets::{TruncateOn, teacher_support};
use super::truncate::Truncation;
use crate::data::{Batcher, DataConfig, Prepared};
use crate::model::Transformer;

/// What a finished logit pass wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSummary {
    /// Positions stored.
    pub positions: u64,
    /// Kept (id, value) entries stored.
    pub entries: u64,
    /// Bytes of all shards.
    pub bytes: u64,
    /// Wall time of this session.
    pub wall_s: f64,
    /// Positions per second (this session).
    pub tokens_per_s: f64,
}

/// Why a logit pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum LogitsError {
    /// A shard could not be written or read.
    #[error(transparent)]
    Store(#[from] ShardError),
    /// The run is not a logits run, or its data is too short.
    #[error("{0}")]
    Invalid(String),
    /// A block came out shorter than the header promises (a position with fewer than top-k
    /// entries); writing it would give a store no student can read.
    #[error(
        "block {block} of the logit store encodes to {bytes} bytes, not the {expected} its header promises"
    )]
    Short {
        /// Block number.
        block: u64,
        /// Bytes encoded.
        bytes: u64,
        /// Bytes expected.
        expected: u64,
    },
    /// A stop was requested; finished shards are kept.
    #[error("interrupted (finished shards are kept)")]
    Interrupted,
}

/// What a logit pass stores: the teacher run it reads, the truncation it keeps, and the data
/// order and length it covers.
#[derive(Debug, Clone, Copy)]
pub struct StoreSpec<'a> {
    /// The teacher run.
    pub teacher_run: &'a str,
    /// The truncation stored.
    pub truncation: Truncation,
    /// The student token stream's data settings (corpus, order, context, batch).
    pub data: &'a DataConfig,
    /// Positions scored: whole blocks of `batch_seqs · context`.
    pub tokens: u64,
}

/// The header every shard of the store `spec`, written by run `run_id`, carries (block range
/// aside); `corpus_key` is the prepared corpus's [`crate::data::CorpusInfo::key`].
pub fn expected_header(
    run_id: &str,
    spec: &StoreSpec,
    teacher_checkpoint_sha256: &str,
    corpus_key: &str,
) -> StoreHeader {
    let vocab = spec.data.vocab;
    StoreHeader {
        logits_run: run_id.into(),
        teacher_run: spec.teacher_run.into(),
        teacher_checkpoint_sha256: teacher_checkpoint_sha256.into(),
        data_key: format!(
            "{corpus_key} {}",
            serde_json::to_string(spec.data).unwrap_or_default()
        ),
        vocab,
        top_p: spec.truncation.top_p.0,
        top_k: spec.truncation.top_k.kept(vocab),
        value_encoding: VALUE_ENCODING.into(),
        block_positions: spec.data.batch_seqs * spec.data.context,
        first_block: 0,
        blocks: 0,
    }
}

/// Blocks per shard of a store with this header.
pub fn shard_blocks(header: &StoreHeader) -> u64 {
    blocks_per_shard(logit_bytes_per_token(header.vocab, header.top_k) * header.block_positions)
}

/// Where a logit pass runs: the teacher, its device, and where its logits are truncated.
pub struct PassDevice<'a> {
    /// The finished teacher.
    pub teacher: &'a Transformer,
    /// The plain device it lives on.
    pub device: &'a Device,
    /// Host (CPU backend) or device (GPU backends) truncation.
    pub truncate_on: TruncateOn,
}

/// Runs the teacher over the stream of `spec` and writes the store into `dir`.
pub fn write_store(
    spec: &StoreSpec,
    header: &StoreHeader,
    pass: &PassDevice,
    data: &Prepared,
    dir: &Path,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<StoreSummary, LogitsError> {
    let (context, rows) = (spec.data.context as usize, spec.data.batch_seqs as usize);
    let batcher = Batcher::new(&data.train, context, rows, spec.data.seed, data.shuffle)
        .ok_or_else(|| {
            LogitsError::Invalid("the training split is shorter than one window".into())
        })?;
    let total = spec.tokens / header.block_positions.max(1);
    let per_shard = shard_blocks(header);
    let start = Instant::now();
    let mut computed = 0u64;
    let mut summary = StoreSummary {
        positions: 0,
        entries: 0,
        bytes: 0,
        wall_s: 0.0,
        tokens_per_s: 0.0,
    };
    for shard in 0..total.div_ceil(per_shard) {
        let first = shard * per_shard;
        let blocks = per_shard.min(total - first);
        let path = dir.join(shard_name(shard));
        let expected = StoreHeader {
            first_block: first,
            blocks,
            ..header.clone()
        };
        if Shard::open(&path, &expected).is_ok() {
            on_progress(first + blocks, total);
            summary.bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
            continue;
        }
        let mut encoded = Vec::with_capacity(blocks as usize);
        for block in first..first + blocks {
            if stop.load(Ordering::Relaxed) {
                return Err(LogitsError::Interrupted);
            }
            let kept = teacher_support(
                pass.teacher,
                &batcher.batch(block),
                pass.device,
                header.top_p,
                crate::spec::TopK::Keep(header.top_k),
                pass.truncate_on,
            );
            summary.entries += kept.iter().map(|k| k.ids.len() as u64).sum::<u64>();
            let encoded_block = encode_block(&kept, header.vocab, header.top_k);
            let want = block_bytes(header.block_positions, header.vocab, header.top_k);
            if encoded_block.len() as u64 != want {
                return Err(LogitsError::Short {
                    block,
                    bytes: encoded_block.len() as u64,
                    expected: want,
                });
            }
            encoded.push(encoded_block);
            computed += 1;
            on_progress(block + 1, total);
        }
        write_shard(&path, &expected, &encoded)?;
        summary.bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
    }
    summary.positions = total * header.block_positions;
    summary.wall_s = start.elapsed().as_secs_f64();
    summary.tokens_per_s = (computed * header.block_positions) as f64 / summary.wall_s.max(1e-9);
    Ok(summary)
}
