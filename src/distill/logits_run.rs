//! A `logits` run: the finished teacher passes once over every training window its students
//! read (the union over their seeds and budgets) and the top k of its distribution at every
//! position is written to the logit store, shard by shard. Windows the store already holds are
//! never computed again, so an interrupted pass resumes and a new seed or a longer budget only
//! pays for the windows it adds.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use burn::tensor::Device;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::reader::{StoreReader, shard_name, windows_per_shard};
use super::store::decode_block;
use super::store::{ShardError, StoreHeader, VALUE_ENCODING, encode_block, write_shard};
use super::targets::{
    TruncateOn, fill_offsets, for_each_distribution, prepare, teacher_next_support_k,
    teacher_samples, teacher_support,
};
use super::truncate::{Kept, Truncation, draw_seed, sample, truncate};
use crate::data::{Batcher, ByteIndex, DataConfig, Prepared, window_batch};
use crate::model::LanguageModel;

/// What a finished logit pass wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSummary {
    /// Positions the store holds for this pass's students.
    pub positions: u64,
    /// Kept (id, value) entries of those positions.
    pub entries: u64,
    /// Positions this session computed (the windows the store lacked).
    pub computed: u64,
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
    /// A window came out shorter than the header promises (a position with fewer than top-k
    /// entries); writing it would give a store no student can read.
    #[error(
        "window {window} of the logit store encodes to {bytes} bytes, not the {expected} its header promises"
    )]
    Short {
        /// Window number.
        window: u64,
        /// Bytes encoded.
        bytes: u64,
        /// Bytes expected.
        expected: u64,
    },
    /// A stop was requested; finished shards are kept.
    #[error("interrupted (finished shards are kept)")]
    Interrupted,
}

/// One student stream a store serves: a seed's first `tokens` training positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StoreRead {
    /// The students' data seed.
    pub seed: u64,
    /// Positions they read (whole windows of `context`).
    pub tokens: u64,
}

/// What a logit pass stores: the teacher run it reads, the truncation it keeps, the corpus and
/// context, and the student streams whose windows it covers.
#[derive(Debug, Clone, Copy)]
pub struct StoreSpec<'a> {
    /// The teacher run.
    pub teacher_run: &'a str,
    /// The truncation stored.
    pub truncation: Truncation,
    /// The corpus, context and teacher batch (its seed is not used).
    pub data: &'a DataConfig,
    /// The student streams served.
    pub reads: &'a [StoreRead],
    /// For an aligned store: the students' data (their tokenizer), whose windows decide the
    /// teacher windows it covers.
    pub students: Option<&'a DataConfig>,
    /// The arithmetic of the teacher's pass.
    pub precision: crate::spec::TeacherPrecision,
}

/// The header every shard of the store `spec`, written by run `run_id`, carries; `corpus_key` is
/// the prepared corpus's `crate::data::CorpusInfo::key`.
///
/// Neither a seed nor a batch size is part of it (one store serves them all), except the seed of a
/// synthetic corpus, which generates a stream per seed.
pub fn expected_header(
    run_id: &str,
    spec: &StoreSpec,
    teacher_checkpoint_sha256: &str,
    corpus_key: &str,
    tokenizer_sha256: Option<String>,
) -> StoreHeader {
    let vocab = spec.data.vocab;
    // A text corpus has one training stream whatever the seed; a synthetic one is generated
    // per seed, so its store is that seed's.
    let synthetic = spec.data.corpus == crate::spec::CorpusKind::Synthetic;
    let windows = DataConfig {
        seed: if synthetic { spec.data.seed } else { 0 },
        batch_seqs: 0,
        ..spec.data.clone()
    };
    StoreHeader {
        logits_run: run_id.into(),
        teacher_run: spec.teacher_run.into(),
        teacher_checkpoint_sha256: teacher_checkpoint_sha256.into(),
        data_key: format!(
            "{corpus_key} {}",
            serde_json::to_string(&windows).unwrap_or_default()
        ),
        vocab,
        top_p: spec.truncation.top_p.0,
        top_k: spec.truncation.top_k.kept(vocab),
        value_encoding: VALUE_ENCODING.into(),
        window_positions: spec.data.context,
        targets: spec.truncation.targets,
        tail: spec.truncation.missing == crate::spec::Missing::Bucket,
        tokenizer_sha256: spec.students.and(tokenizer_sha256),
        precision: spec.precision,
    }
}

/// The SHA-256 an aligned store's header names the teacher's tokenizer by: of its
/// `tokenizer.json` (a file, or a BPE trained into the cache), or of the word `byte`.
pub fn tokenizer_sha256(tokenizer_json: Option<&Path>) -> Result<String, LogitsError> {
    use sha2::{Digest, Sha256};
    let bytes = match tokenizer_json {
        Some(path) => std::fs::read(path).map_err(|e| {
            LogitsError::Invalid(format!(
                "cannot read the teacher's tokenizer `{}`: {e}",
                path.display()
            ))
        })?,
        None => b"byte".to_vec(),
    };
    Ok(crate::digest::hex(&Sha256::digest(&bytes)))
}

/// The windows of the training split the streams `reads` read (ascending, without repeats).
pub fn windows_needed(
    reads: &[StoreRead],
    data: &Prepared,
    context: u64,
) -> Result<BTreeSet<u64>, LogitsError> {
    let mut needed = BTreeSet::new();
    for read in reads {
        let batcher = Batcher::new(&data.train, context as usize, 1, read.seed, data.shuffle)
            .ok_or_else(|| {
                LogitsError::Invalid("the training split is shorter than one window".into())
            })?;
        needed.extend(batcher.windows_read(read.tokens / context.max(1)));
    }
    Ok(needed)
}

/// Positions a store serving `reads` holds, for a training split of `windows` windows of
/// `context` (when known: else every stream's own positions, summed, as an upper bound), read
/// in a shuffled order or (the synthetic corpus) in stream order.
pub(crate) fn store_positions(
    reads: &[StoreRead],
    windows: Option<u64>,
    shuffle: bool,
    context: u64,
) -> u64 {
    let context = context.max(1);
    if !shuffle {
        let longest = reads.iter().map(|r| r.tokens / context).max().unwrap_or(0);
        return windows.map_or(longest, |w| longest.min(w)) * context;
    }
    let Some(windows) = windows else {
        return reads.iter().map(|r| r.tokens / context * context).sum();
    };
    let mut covered = BTreeSet::new();
    for r in reads {
        covered.extend(crate::data::windows_read(
            windows as usize,
            r.seed,
            true,
            r.tokens / context,
        ));
        if covered.len() as u64 == windows {
            break;
        }
    }
    covered.len() as u64 * context
}

/// Where a logit pass runs: the teacher, its device, and where its logits are truncated.
pub struct PassDevice<'a> {
    /// The finished teacher.
    pub teacher: &'a dyn LanguageModel,
    /// The plain device it lives on.
    pub device: &'a Device,
    /// Host (CPU backend) or device (GPU backends) truncation.
    pub truncate_on: TruncateOn,
}

/// Runs the teacher over the windows of `spec` the store in `dir` does not hold yet and writes them
/// as new shards (shards already there are kept, so an interrupted or extended pass only computes
/// what is missing).
///
/// `on_progress(done, total)` counts missing windows.
#[allow(clippy::too_many_arguments)]
pub fn write_store(
    spec: &StoreSpec,
    header: &StoreHeader,
    pass: &PassDevice,
    data: &Prepared,
    needed: &BTreeSet<u64>,
    teacher_bytes: Option<&ByteIndex>,
    dir: &Path,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(u64, u64),
) -> Result<StoreSummary, LogitsError> {
    let context = spec.data.context;
    let mut reader = StoreReader::new(dir, header.clone());
    let held = reader.held()?;
    let missing: Vec<u64> = needed.difference(&held).copied().collect();
    let layout = header.layout();
    let want = layout.block_bytes(context);
    let per_shard = windows_per_shard(want) as usize;
    let rows = spec.data.batch_seqs.max(1) as usize;
    let start = Instant::now();
    let total = missing.len() as u64;
    let mut done = 0u64;
    on_progress(0, total);
    for windows in missing.chunks(per_shard) {
        let mut encoded = Vec::with_capacity(windows.len());
        for batch_windows in windows.chunks(rows) {
            if stop.load(Ordering::Relaxed) {
                return Err(LogitsError::Interrupted);
            }
            let batch = window_batch(&data.train, context as usize, batch_windows);
            let kept = match (teacher_bytes, header.targets) {
                (Some(index), _) => {
                    let f32 = burn::tensor::FloatDType::F32;
                    let mut kept = teacher_next_support_k(
                        pass.teacher,
                        &batch,
                        pass.device,
                        f32,
                        header.top_k,
                    );
                    fill_offsets(&mut kept, index, batch_windows, context as usize);
                    kept
                }
                (None, crate::spec::Targets::Sampled) => {
                    teacher_samples(pass.teacher, &batch, pass.device, header.top_k)
                }
                (None, crate::spec::Targets::TopK) => teacher_support(
                    pass.teacher,
                    &batch,
                    pass.device,
                    header.top_p,
                    crate::spec::TopK::Keep(header.top_k),
                    pass.truncate_on,
                ),
            };
            for (w, positions) in batch_windows.iter().zip(kept.chunks(context as usize)) {
                let block = encode_block(positions, &layout);
                if block.len() as u64 != want || positions.len() as u64 != context {
                    return Err(LogitsError::Short {
                        window: *w,
                        bytes: block.len() as u64,
                        expected: want,
                    });
                }
                encoded.push(block);
            }
            done += batch_windows.len() as u64;
            on_progress(done, total);
        }
        std::fs::create_dir_all(dir).map_err(|e| ShardError::Write {
            path: dir.into(),
            source: e.into(),
        })?;
        write_shard(&dir.join(shard_name(windows)), header, windows, &encoded)?;
    }
    // every window needed is held now: those found and those just written
    let stored = needed.len() as u64;
    reader.refresh()?;
    let wall_s = start.elapsed().as_secs_f64();
    Ok(StoreSummary {
        positions: stored * context,
        entries: stored * context * header.top_k,
        computed: total * context,
        bytes: reader.bytes()?,
        wall_s,
        tokens_per_s: (total * context) as f64 / wall_s.max(1e-9),
    })
}

/// How faithfully a store, read at one truncation, keeps its teacher's distribution, measured
/// on held-out positions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fidelity {
    /// The truncation the store is read at (the store's own, or a student's).
    pub view: Truncation,
    /// Mean KL(stored ‖ teacher) in nats: the distribution a student reading at `view` is given
    /// (renormalised over its ids, their counts for sampled targets, or with the tail as one
    /// outcome), at τ = 1, against the teacher's full one coarsened to the same outcomes.
    ///
    /// Renormalised top-k gives −ln of the kept mass; finite for every kind, unlike KL(teacher ‖
    /// stored).
    pub kl: f64,
    /// Mean teacher probability of the ids kept.
    pub kept_mass: f64,
    /// Held-out positions measured.
    pub positions: u64,
}

/// Held-out windows a fidelity check reads (at most; fewer when the split is shorter).
pub(crate) const FIDELITY_WINDOWS: u64 = 16;

/// The fidelity of the store `header` describes, read at its own truncation `own` and at each of
/// `views` (its students'), on the first `FIDELITY_WINDOWS` windows of the held-out split `val`:
/// each position is stored as the logit pass would store it (encoded and decoded, so quantisation
/// counts), prepared as a student reads it (`prepare`) and compared with the teacher's full
/// distribution.
///
/// Empty when the split is shorter than one window.
pub fn fidelity(
    teacher: &dyn LanguageModel,
    device: &Device,
    val: &crate::data::Stream,
    header: &StoreHeader,
    own: Truncation,
    views: &[Truncation],
) -> Vec<Fidelity> {
    let context = header.window_positions.max(1);
    let layout = header.layout();
    let windows = ((val.len() as u64).saturating_sub(1) / context).min(FIDELITY_WINDOWS);
    if windows == 0 {
        return Vec::new();
    }
    let mut all = vec![own];
    all.extend(views.iter().filter(|v| **v != own));
    let ids: Vec<u64> = (0..windows).collect();
    let batch = window_batch(val, context as usize, &ids);
    let mut sums = vec![(0.0f64, 0.0f64); all.len()];
    let mut n = 0u64;
    for_each_distribution(teacher, &batch, device, &mut |at, z| {
        // held-out draws get seeds no training window has
        let (window, position) = (u64::MAX - at as u64 / context, at as u64 % context);
        let stored = if layout.counts {
            sample(z, layout.top_k, draw_seed(window, position))
        } else {
            truncate(z, 1.0, crate::spec::TopK::Keep(layout.top_k))
        };
        let block = super::store::encode_block(std::slice::from_ref(&stored), &layout);
        let Some(decoded) = decode_block(&block, 1, &layout) else {
            return;
        };
        for (sum, view) in sums.iter_mut().zip(&all) {
            let (d, m) = position_fidelity(z, &prepare(decoded[0].clone(), view, 1.0));
            sum.0 += d;
            sum.1 += m;
        }
        n += 1;
    });
    if n == 0 {
        return Vec::new();
    }
    all.into_iter()
        .zip(sums)
        .map(|(view, (kl, mass))| Fidelity {
            view,
            kl: kl / n as f64,
            kept_mass: mass / n as f64,
            positions: n,
        })
        .collect()
}

/// KL(given ‖ teacher) and the teacher's mass on the given ids, at one position of logits `z`:
/// `given` as the loss reads it ([`prepare`] at τ = 1), weights e^v over its entries and, with
/// a tail, e^tail for everything else.
fn position_fidelity(z: &[f32], given: &Kept) -> (f64, f64) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let norm: f64 = z.iter().map(|&v| (v as f64 - max).exp()).sum();
    let p = |id: u32| (z[id as usize] as f64 - max).exp() / norm;
    let mass: f64 = given.ids.iter().map(|&i| p(i)).sum();
    let mut weights: Vec<(f64, f64)> = given
        .ids
        .iter()
        .zip(&given.log_probs)
        .map(|(&i, &v)| ((v as f64).exp(), p(i)))
        .collect();
    if let Some(tail) = given.tail {
        weights.push(((tail as f64).exp(), (1.0 - mass).max(0.0)));
    }
    let total: f64 = weights.iter().map(|w| w.0).sum();
    let kl = weights
        .iter()
        .filter(|(q, _)| *q > 0.0)
        .map(|&(q, p)| {
            let q = q / total;
            q * (q / p.max(1e-300)).ln()
        })
        .sum();
    (kl, mass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{CorpusInfo, Stream};
    use crate::distill::store::Layout;
    use crate::model::{ModelShape, Transformer, TransformerConfig};
    use crate::spec::{TopK, TopP};

    const CONTEXT: u64 = 8;

    fn teacher(device: &Device) -> Transformer {
        let shape = ModelShape {
            d_model: 16,
            n_layers: 1,
            n_heads: 2,
            n_kv_heads: 2,
            d_ff: 32,
            vocab: 40,
            tie_embeddings: false,
        };
        crate::train::init_model(&TransformerConfig::new(shape, CONTEXT as usize), 5, device)
    }

    fn data() -> Prepared {
        Prepared {
            train: Stream::Memory((0..801u32).map(|i| (i * 7 + i / 13) % 40).collect()),
            val: Stream::Memory((0..100u32).map(|i| i % 40).collect()),
            shuffle: true,
            info: CorpusInfo::default(),
        }
    }

    fn config() -> DataConfig {
        DataConfig {
            corpus: crate::spec::CorpusKind::Text,
            path: None,
            text_column: None,
            tokenizer: None,
            tokenizer_file: None,
            vocab: 40,
            separator: Default::default(),
            val_tokens: 100,
            corpus_seed: 0,
            synthetic_sources: None,
            synthetic_copies: None,
            context: CONTEXT,
            batch_seqs: 3,
            seed: 0,
            val_path: None,
            split: 2,
            follow: None,
        }
    }

    fn truncation() -> Truncation {
        Truncation {
            top_p: TopP(1.0),
            top_k: TopK::Keep(6),
            targets: crate::spec::Targets::TopK,
            missing: crate::spec::Missing::Renormalise,
        }
    }

    /// The header of the test store (its coverage is not part of it).
    fn header() -> StoreHeader {
        let config = config();
        let spec = StoreSpec {
            teacher_run: "t",
            truncation: truncation(),
            data: &config,
            reads: &[],
            students: None,
            precision: Default::default(),
        };
        expected_header("l", &spec, "sha", "corpus", None)
    }

    fn write(dir: &Path, reads: &[StoreRead], pass: &PassDevice, data: &Prepared) -> StoreSummary {
        let config = config();
        let spec = StoreSpec {
            teacher_run: "t",
            truncation: truncation(),
            data: &config,
            reads,
            students: None,
            precision: Default::default(),
        };
        let stop = AtomicBool::new(false);
        let needed = windows_needed(reads, data, config.context).unwrap();
        write_store(
            &spec,
            &header(),
            pass,
            data,
            &needed,
            None,
            dir,
            &stop,
            &mut |_, _| {},
        )
        .unwrap()
    }

    /// One store serves two seeds exactly as a store of each seed's own steps would (the
    /// teacher's support of a step's batch, encoded and decoded as one block); a third seed
    /// only adds shards, and the first ones stay byte-identical.
    #[test]
    fn fidelity_is_minus_log_kept_mass_for_renormalised_top_k_and_near_zero_with_the_tail() {
        let z: Vec<f32> = (0..64u32).map(|i| ((i * 13) % 29) as f32 / 4.0).collect();
        let top = truncate(&z, 1.0, TopK::Keep(4));
        let mass: f64 = top.log_probs.iter().map(|l| (*l as f64).exp()).sum();
        let layout = Layout {
            tail: true,
            ..Layout::top_k(64, 4)
        };
        let block = crate::distill::store::encode_block(std::slice::from_ref(&top), &layout);
        let stored = &decode_block(&block, 1, &layout).unwrap()[0];
        for (missing, want) in [
            (crate::spec::Missing::Renormalise, -mass.ln()),
            (crate::spec::Missing::Bucket, 0.0),
        ] {
            let view = Truncation {
                missing,
                ..truncation()
            };
            let (kl, kept) = position_fidelity(&z, &prepare(stored.clone(), &view, 1.0));
            assert!((kept - mass).abs() < 1e-6);
            // quantisation (±0.031 nats per value) moves it a little
            assert!((kl - want).abs() < 0.01, "{missing}: {kl} vs {want}");
        }
        // a student's narrower view keeps less mass and is further from the teacher
        let narrow = Truncation {
            top_k: TopK::Keep(2),
            ..truncation()
        };
        let (kl2, kept2) = position_fidelity(&z, &prepare(stored.clone(), &narrow, 1.0));
        assert!(kept2 < mass && kl2 > -mass.ln(), "{kl2} {kept2}");
        // sampled: the KL of the empirical distribution, which shrinks with more draws
        let sampled = |k: u64| Truncation {
            top_k: TopK::Keep(k),
            targets: crate::spec::Targets::Sampled,
            ..truncation()
        };
        let kl_of = |k: u64| {
            (0..20)
                .map(|s| position_fidelity(&z, &prepare(sample(&z, k, s), &sampled(k), 1.0)).0)
                .sum::<f64>()
                / 20.0
        };
        assert!(kl_of(64) < kl_of(8), "{} vs {}", kl_of(64), kl_of(8));
    }

    #[test]
    fn one_store_serves_every_seed_and_grows_without_rewriting() {
        let device = Device::flex();
        let teacher = teacher(&device);
        let pass = PassDevice {
            teacher: &teacher,
            device: &device,
            truncate_on: TruncateOn::Host,
        };
        let data = data();
        let dir = tempfile::tempdir().unwrap();
        let reads = [
            StoreRead {
                seed: 1,
                tokens: 240,
            },
            StoreRead {
                seed: 2,
                tokens: 240,
            },
        ];
        let first = write(dir.path(), &reads, &pass, &data);
        let windows = (data.train.len() as u64 - 1) / CONTEXT;
        assert_eq!(
            first.positions,
            store_positions(&reads, Some(windows), true, CONTEXT)
        );
        assert!(first.positions < 480, "the two seeds share windows");
        let shard_bytes = |d: &Path| -> Vec<(String, Vec<u8>)> {
            let mut v: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| {
                    let p = e.unwrap().path();
                    (p.display().to_string(), std::fs::read(&p).unwrap())
                })
                .collect();
            v.sort();
            v
        };
        let before = shard_bytes(dir.path());
        let mut reader = StoreReader::new(dir.path(), header());
        for seed in [1, 2] {
            let batcher = Batcher::new(&data.train, CONTEXT as usize, 3, seed, true).unwrap();
            for step in 0..10 {
                let batch = batcher.batch(step);
                let per_step = teacher_support(
                    &teacher,
                    &batch,
                    &device,
                    1.0,
                    TopK::Keep(6),
                    TruncateOn::Host,
                );
                let layout = crate::distill::store::Layout::top_k(40, 6);
                let block = encode_block(&per_step, &layout);
                let old = decode_block(&block, batch.batch * batch.context, &layout).unwrap();
                assert_eq!(
                    reader.windows(&batch.windows).unwrap(),
                    old,
                    "seed {seed} step {step}"
                );
            }
        }
        // a window no student of these seeds reads is not there, and is an error naming it
        let unread = (0..windows)
            .find(|w| !reader.held().unwrap().contains(w))
            .unwrap();
        let err = crate::error::chain(&reader.windows(&[unread]).unwrap_err());
        assert!(err.contains(&format!("window {unread}")), "{err}");
        // a third seed computes only the windows it adds; earlier shards are untouched
        let more = [
            reads[0],
            reads[1],
            StoreRead {
                seed: 3,
                tokens: 240,
            },
        ];
        let second = write(dir.path(), &more, &pass, &data);
        assert!(
            second.computed > 0 && second.computed < 240,
            "{}",
            second.computed
        );
        let after = shard_bytes(dir.path());
        assert!(before.iter().all(|b| after.contains(b)));
        assert!(after.len() > before.len());
        // and writing again computes nothing
        assert_eq!(write(dir.path(), &more, &pass, &data).computed, 0);
    }

    #[test]
    fn store_positions_count_the_union_of_windows() {
        let one = [StoreRead {
            seed: 1,
            tokens: 800,
        }];
        assert_eq!(store_positions(&one, Some(1000), true, 8), 800);
        let many: Vec<StoreRead> = (1..=20)
            .map(|seed| StoreRead { seed, tokens: 800 })
            .collect();
        let shared = store_positions(&many, Some(1000), true, 8);
        // 20 draws of 10 % of the windows cover about 1 - 0.9^20 = 88 % of them
        assert!((0.8..0.95).contains(&(shared as f64 / 8000.0)), "{shared}");
        assert_eq!(
            store_positions(&many, None, true, 8),
            16_000,
            "an upper bound"
        );
        assert_eq!(
            store_positions(&one, Some(50), false, 8),
            400,
            "stream order: the longest"
        );
    }
}
