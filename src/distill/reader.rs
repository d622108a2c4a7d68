//! Reading a logit store step by step: the shard holding a step's block is loaded (and verified)
//! once and kept while the student reads through it.

use std::path::{Path, PathBuf};

use super::store::{Shard, ShardError, StoreHeader};
use super::truncate::Kept;

/// File name of shard `n`.
pub fn shard_name(n: u64) -> String {
    format!("shard-{n:05}.bin")
}

/// Blocks per shard for `block_bytes` bytes per block: shards of about 64 MiB.
pub fn blocks_per_shard(block_bytes: u64) -> u64 {
    ((64u64 << 20) / block_bytes.max(1)).max(1)
}

/// A reader over a store folder.
pub struct StoreReader {
    dir: PathBuf,
    expected: StoreHeader,
    per_shard: u64,
    current: Option<(u64, Shard)>,
}

impl StoreReader {
    /// A reader of the store in `dir` that must match `expected` (its block range is ignored)
    /// and holds `per_shard` blocks per shard.
    pub fn new(dir: &Path, expected: StoreHeader, per_shard: u64) -> StoreReader {
        StoreReader {
            dir: dir.to_path_buf(),
            expected,
            per_shard: per_shard.max(1),
            current: None,
        }
    }

    /// The kept teacher support of every position of block (step) `block`.
    pub fn block(&mut self, block: u64) -> Result<Vec<Kept>, ShardError> {
        let n = block / self.per_shard;
        if self.current.as_ref().is_none_or(|(c, _)| *c != n) {
            let path = self.dir.join(shard_name(n));
            let expected = StoreHeader {
                first_block: n * self.per_shard,
                ..self.expected.clone()
            };
            let shard = Shard::open(&path, &expected)?;
            if shard.header.first_block != n * self.per_shard {
                return Err(ShardError::Refused {
                    path,
                    reason: "its first block is not where its name says".into(),
                });
            }
            self.current = Some((n, shard));
        }
        match &self.current {
            Some((_, shard)) => shard.block(block),
            None => Err(ShardError::Refused {
                path: self.dir.clone(),
                reason: "no shard loaded".into(),
            }),
        }
    }
}
