//! A student's teacher targets: the teacher's truncated distribution at every position of a
//! batch, from a live teacher (online, truncated on the host or on the device) or from a logit
//! store (offline), refined to the student's own top-p and top-k; and the teacher's pass that a
//! logit store is written from.

use burn::tensor::{Device, FloatDType, Int, Tensor, TensorData};

use super::aligned::{Aligner, CrossLoss};
use super::device_truncate::{Truncated, download, truncate_on_device};
use super::loss::SparseTargets;
use super::reader::StoreReader;
use super::store::ShardError;
use super::truncate::{Kept, TokenAfter, Truncation, draw_seed, refine, sample, truncate};
use crate::data::{Batch, batch_tensors, window_batch};
use crate::model::LanguageModel;
use crate::spec::{Missing, Targets};

/// Where the teacher's top-p/top-k truncation runs (chosen once, at the edge, from the backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateOn {
    /// On the host from the downloaded logits, in f64 (the CPU backend, where host and device
    /// are the same memory).
    Host,
    /// On the device ([`super::device_truncate`]): a GPU never ships full logits to the host.
    Device,
}

impl TruncateOn {
    /// Host on the CPU backend, device on the GPU backends.
    pub fn for_backend(backend: crate::spec::Backend) -> TruncateOn {
        match backend {
            crate::spec::Backend::Cpu => TruncateOn::Host,
            _ => TruncateOn::Device,
        }
    }
}

/// Where a student's teacher targets come from.
pub enum TeacherSource<'a> {
    /// The teacher runs forward (no gradients) on the plain device inside each step.
    Online {
        /// The finished teacher.
        teacher: &'a dyn LanguageModel,
        /// The plain device it lives on.
        device: &'a Device,
        /// The dtype of its matrix products (the student's precision).
        compute: FloatDType,
        /// Where its logits are truncated.
        truncate_on: TruncateOn,
    },
    /// Targets are read from the teacher's logit store.
    Offline(Box<StoreReader>),
}

/// The teacher targets of one student run: its source and the student's truncation.
pub struct TeacherTargets<'a> {
    /// The student's top-p and top-k (at most the store's), targets and tail.
    pub truncation: Truncation,
    /// The student's temperature τ (sampled targets are reweighted for it).
    pub tau: f64,
    /// Where the teacher's distribution comes from.
    pub source: TeacherSource<'a>,
    /// The first error reading the store (a training step cannot return one; the runner
    /// checks this after training and fails the run).
    pub error: Option<ShardError>,
    /// For a teacher of another tokenizer: how its positions align with the student's and
    /// the loss across tokenizers.
    pub cross: Option<Box<CrossSide>>,
}

/// A teacher of another tokenizer, as its student reads it.
#[derive(Debug, Clone)]
pub struct CrossSide {
    /// Both training streams in bytes.
    pub aligner: Aligner,
    /// The loss across tokenizers.
    pub loss: CrossLoss,
    /// The teacher's vocabulary.
    pub teacher_vocab: u64,
    /// Units and unaligned rows over the batches so far.
    pub units: u64,
    /// Rows in no unit so far.
    pub unaligned_rows: u64,
    /// Rows so far.
    pub rows: u64,
}

impl TeacherTargets<'_> {
    /// The teacher targets of every position of `batch`, truncated to this student's top-p and
    /// top-k, on `device`; `None` when the store failed (the error is kept in `self.error`).
    ///
    /// An online teacher truncating on the device hands its targets over without a trip through the
    /// host.
    pub fn targets(&mut self, batch: &Batch, device: &Device) -> Option<SparseTargets> {
        let t = self.truncation;
        if let TeacherSource::Online {
            teacher,
            device: plain,
            compute,
            truncate_on: TruncateOn::Device,
        } = &self.source
            && t.targets == Targets::TopK
        {
            let truncated = online_on_device(teacher, batch, plain, *compute, t.top_p.0, t.top_k);
            if truncated.on_device() {
                // Constants of the student's graph: moved onto its (autodiff) device.
                let mut sparse = truncated.targets;
                if t.missing == Missing::Bucket {
                    sparse = with_tail_on_device(sparse);
                }
                return Some(SparseTargets {
                    ids: sparse.ids.to_device(device),
                    log_probs: sparse.log_probs.to_device(device),
                    mask: sparse.mask.to_device(device),
                });
            }
            // a support wider than the device keeps: padded on the host like a store's
            let kept: Vec<Kept> = download(truncated)
                .into_iter()
                .map(|k| self.prepared(k))
                .collect();
            return (kept.len() == batch.batch * batch.context)
                .then(|| sparse_targets(&kept, device));
        }
        let kept = self.kept(batch);
        (kept.len() == batch.batch * batch.context).then(|| sparse_targets(&kept, device))
    }

    /// The cross-tokenizer targets of `batch` on `device` and its number of units; `None`
    /// when the teacher's positions could not be had or aligned (the error is kept in
    /// `self.error`) or the teacher shares the student's tokenizer.
    pub fn cross_targets(
        &mut self,
        batch: &Batch,
        device: &Device,
    ) -> Option<(crate::kernels::CrossDistillation, usize)> {
        let cross = self.cross.as_deref()?;
        let (aligner, c) = (&cross.aligner, cross.aligner.teacher_context);
        let windows: Vec<u64> = aligner
            .teacher_windows(batch.windows.iter().copied())
            .into_iter()
            .collect();
        let kept = match &mut self.source {
            TeacherSource::Offline(reader) => reader.windows(&windows),
            TeacherSource::Online {
                teacher,
                device: plain,
                compute,
                ..
            } => {
                let teacher_batch = window_batch(aligner.teacher.stream(), c, &windows);
                let k = cross.loss.top_k(cross.teacher_vocab) as u64;
                let mut kept = teacher_next_support_k(teacher, &teacher_batch, plain, *compute, k);
                fill_offsets(&mut kept, &aligner.teacher, &windows, c);
                Ok(kept)
            }
        };
        let kept = match kept {
            Ok(k) => k,
            Err(e) => {
                self.error.get_or_insert(e);
                return None;
            }
        };
        let at: std::collections::HashMap<u64, usize> =
            windows.iter().enumerate().map(|(i, &w)| (w, i)).collect();
        let position = |j: u64| -> Option<Kept> {
            let i = *at.get(&(j / c as u64))?;
            kept.get(i * c + (j % c as u64) as usize).cloned()
        };
        let targets = cross
            .loss
            .targets(aligner, batch, &position, cross.teacher_vocab);
        let targets = match targets {
            Ok(t) => t,
            Err(reason) => {
                self.error.get_or_insert(ShardError::Align {
                    source: reason.into(),
                });
                return None;
            }
        };
        let tensors = cross.loss.tensors(&targets, device);
        if let Some(side) = self.cross.as_deref_mut() {
            side.units += targets.units as u64;
            side.unaligned_rows += targets.unaligned_rows as u64;
            side.rows += targets.span.len() as u64;
        }
        Some((tensors, targets.units))
    }

    /// The kept teacher support of every position of `batch` on the host, ready for the
    /// loss ([`Self::prepared`]); empty when the store failed.
    pub fn kept(&mut self, batch: &Batch) -> Vec<Kept> {
        let t = self.truncation;
        let raw = match &mut self.source {
            TeacherSource::Online {
                teacher,
                device: plain,
                compute,
                ..
            } if t.targets == Targets::Sampled => teacher_samples_in(
                teacher,
                batch,
                plain,
                *compute,
                t.top_k.kept(teacher.vocab() as u64),
            ),
            TeacherSource::Online {
                teacher,
                device: plain,
                compute,
                truncate_on,
            } => match truncate_on {
                TruncateOn::Host => {
                    teacher_support_in(teacher, batch, plain, *compute, t.top_p.0, t.top_k)
                }
                TruncateOn::Device => download(online_on_device(
                    teacher, batch, plain, *compute, t.top_p.0, t.top_k,
                )),
            },
            TeacherSource::Offline(reader) => match reader.windows(&batch.windows) {
                Ok(kept) => kept,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return Vec::new();
                }
            },
        };
        raw.into_iter().map(|k| self.prepared(k)).collect()
    }

    /// One position's teacher support as the loss reads it: a top-k support refined to this
    /// student's top-p and top-k, with its tail (`Some`) only for `missing = "bucket"`; a
    /// sampled one with weights for τ in place of its log-probabilities.
    ///
    /// Sampled targets are draws from p at τ = 1; the loss renormalises exp(v/τ) over the
    /// entries, so v = τ·ln c + (1 − τ)·ln p gives weights c·p^(1/τ − 1): counts/k at τ = 1
    /// (unbiased), and the self-normalised importance estimate of softmax(z/τ) at other τ.
    pub fn prepared(&self, k: Kept) -> Kept {
        prepare(k, &self.truncation, self.tau)
    }
}

/// Sets where each position's context and next token end (`Kept::next`) for `kept`, the
/// positions of teacher windows `windows` in order, from the teacher's byte index.
pub fn fill_offsets(kept: &mut [Kept], index: &crate::data::ByteIndex, windows: &[u64], c: usize) {
    for (w, positions) in windows.iter().zip(kept.chunks_mut(c)) {
        let a = *w as usize * c;
        let (ends, _) = index.ends(a, a + c + 1);
        for (i, k) in positions.iter_mut().enumerate() {
            if let (Some(next), Some(&from), Some(&to)) =
                (k.next.as_mut(), ends.get(i), ends.get(i + 1))
            {
                next.from = from;
                next.to = to;
            }
        }
    }
}

/// The teacher's `k` most probable tokens (no nucleus cut) at every position of `batch`, with its
/// ln p of the token that actually follows (`Kept::next`, its byte offsets left at 0 for
/// [`fill_offsets`]): what an aligned store keeps and a live teacher of another tokenizer gives its
/// student.
///
/// Computed on the host from each head chunk's logits.
pub(crate) fn teacher_next_support_k(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    k: u64,
) -> Vec<Kept> {
    use rayon::prelude::*;
    let mut out = Vec::with_capacity(batch.batch * batch.context);
    for part in passes(batch) {
        let (inputs, _) = batch_tensors(&part, device);
        for (first, logits) in head_chunks(teacher, inputs, compute) {
            let vocab = logits.dims()[1];
            let values: Vec<f32> = logits.into_data().try_to_vec().unwrap_or_default();
            let targets = &part.targets[first..];
            out.par_extend(
                values
                    .par_chunks(vocab)
                    .zip(targets.par_iter())
                    .map(|(z, &next)| {
                        let mut kept = truncate(z, 1.0, crate::spec::TopK::Keep(k));
                        kept.next = Some(TokenAfter {
                            log_prob: log_prob_of(z, next as usize),
                            from: 0,
                            to: 0,
                        });
                        kept
                    }),
            );
        }
    }
    out
}

/// ln softmax(z)[i] in f64.
fn log_prob_of(z: &[f32], i: usize) -> f32 {
    let max = crate::kernels::row_max(z);
    let log_norm = max as f64 + crate::kernels::exp_sum_f64(z, max).ln();
    z.get(i)
        .map_or(f32::NEG_INFINITY, |&v| (v as f64 - log_norm) as f32)
}

/// [`TeacherTargets::prepared`] for the truncation `t` at temperature `tau`.
pub fn prepare(mut k: Kept, t: &Truncation, tau: f64) -> Kept {
    if t.targets == Targets::Sampled {
        let tau = tau as f32;
        for (v, &c) in k.log_probs.iter_mut().zip(&k.counts) {
            *v = tau * (c as f32).ln() + (1.0 - tau) * *v;
        }
        k.counts.clear();
        k.tail = None;
        return k;
    }
    let n = refine(&k, t.top_p.0, t.top_k);
    k.keep_first(n);
    k.tail = match t.missing {
        Missing::Bucket => Some(k.tail_log_mass()),
        Missing::Renormalise => None,
    };
    k
}

/// Device targets with a tail-bucket entry appended to each row: ln(1 − Σ p) of its real
/// entries (exact log-probabilities on the device), floored at e^-16 as a store's.
fn with_tail_on_device(t: SparseTargets) -> SparseTargets {
    let [rows, _] = t.ids.dims();
    let device = t.ids.device();
    let head = (t.log_probs.clone().exp() * t.mask.clone()).sum_dim(1);
    let tail = head.neg().add_scalar(1.0).clamp_min((-16.0f64).exp()).log();
    SparseTargets {
        ids: Tensor::cat(vec![t.ids.clone(), t.ids.narrow(1, 0, 1)], 1),
        log_probs: Tensor::cat(vec![t.log_probs, tail], 1),
        mask: Tensor::cat(
            vec![
                t.mask,
                Tensor::full([rows, 1], crate::kernels::TAIL_MASK, &device),
            ],
            1,
        ),
    }
}

/// The online teacher's targets for `batch`, truncated on `device` (the teacher's products in
/// `compute`).
fn online_on_device(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    top_p: f64,
    top_k: crate::spec::TopK,
) -> Truncated {
    let (inputs, _) = batch_tensors(batch, device);
    let mut parts = Vec::new();
    let mut wide = Vec::new();
    for (first, logits) in head_chunks(teacher, inputs, compute) {
        let part = truncate_on_device(logits, top_p, top_k);
        wide.extend(part.wide_rows.into_iter().map(|(r, k)| (first + r, k)));
        parts.push(part.targets);
    }
    Truncated {
        targets: cat_targets(parts),
        wide_rows: wide,
    }
}

/// The teacher's logits for `inputs` chunk by chunk of positions: the hidden states of the whole
/// batch, then [`crate::kernels::default_head_chunk`] positions at a time through the head (f32
/// logits), so the `[positions, vocab]` logits never exist at once.
///
/// Yields each chunk's first position and its `[positions, vocab]` logits.
fn head_chunks(
    teacher: &dyn LanguageModel,
    inputs: Tensor<2, Int>,
    compute: FloatDType,
) -> impl Iterator<Item = (usize, Tensor<2>)> {
    let [b, s] = inputs.dims();
    let rows = b * s;
    let hidden = teacher.hidden_in(inputs, compute);
    let d = hidden.dims()[2];
    let hidden = hidden.reshape([rows, d]);
    let head = teacher.head_weight(compute);
    let chunk = crate::kernels::default_head_chunk(teacher.vocab());
    (0..rows).step_by(chunk).map(move |first| {
        let n = chunk.min(rows - first);
        let logits = crate::kernels::head_logits(hidden.clone().narrow(0, first, n), &head);
        let logits = if logits.dtype() == burn::tensor::DType::F32 {
            logits
        } else {
            logits.cast(FloatDType::F32)
        };
        (first, logits)
    })
}

/// Chunks' device targets laid end to end, padded to the widest.
fn cat_targets(parts: Vec<SparseTargets>) -> SparseTargets {
    let width = parts.iter().map(|p| p.ids.dims()[1]).max().unwrap_or(1);
    let pad = |p: SparseTargets| {
        let [rows, w] = p.ids.dims();
        if w == width {
            return p;
        }
        let device = p.ids.device();
        let extra = width - w;
        let first = p.ids.clone().narrow(1, 0, 1).repeat_dim(1, extra);
        SparseTargets {
            ids: Tensor::cat(vec![p.ids, first], 1),
            log_probs: Tensor::cat(vec![p.log_probs, Tensor::zeros([rows, extra], &device)], 1),
            mask: Tensor::cat(vec![p.mask, Tensor::zeros([rows, extra], &device)], 1),
        }
    };
    let (mut ids, mut lps, mut mask) = (vec![], vec![], vec![]);
    for p in parts.into_iter().map(pad) {
        ids.push(p.ids);
        lps.push(p.log_probs);
        mask.push(p.mask);
    }
    SparseTargets {
        ids: Tensor::cat(ids, 0),
        log_probs: Tensor::cat(lps, 0),
        mask: Tensor::cat(mask, 0),
    }
}

/// Positions of one forward pass of [`teacher_support`]: a batch of more goes through in parts,
/// so the activations of a wide teacher stay bounded (its logits are bounded by the head's
/// chunks, [`head_chunks`]).
const POSITIONS_PER_PASS: usize = 4096;

/// The teacher's truncated distribution at every position of `batch` (the logit pass),
/// computed in f32, in forward passes of at most `POSITIONS_PER_PASS` positions whose head
/// runs chunk by chunk (`head_chunks`), each chunk truncated where `truncate_on` says (on
/// the host, positions in parallel; or on the device): no full-vocabulary logits of a whole
/// batch exist at once.
pub fn teacher_support(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    top_p: f64,
    top_k: crate::spec::TopK,
    truncate_on: TruncateOn,
) -> Vec<Kept> {
    match truncate_on {
        TruncateOn::Host => {
            teacher_support_in(teacher, batch, device, FloatDType::F32, top_p, top_k)
        }
        TruncateOn::Device => {
            let mut out = Vec::with_capacity(batch.batch * batch.context);
            for part in passes(batch) {
                let (inputs, _) = batch_tensors(&part, device);
                for (_, logits) in head_chunks(teacher, inputs, FloatDType::F32) {
                    out.extend(download(truncate_on_device(logits, top_p, top_k)));
                }
            }
            out
        }
    }
}

/// `batch` split by rows into parts of at most [`POSITIONS_PER_PASS`] positions.
fn passes(batch: &Batch) -> impl Iterator<Item = Batch> + '_ {
    let rows = (POSITIONS_PER_PASS / batch.context.max(1)).clamp(1, batch.batch.max(1));
    (0..batch.batch).step_by(rows).map(move |first| {
        let n = rows.min(batch.batch - first);
        let span = first * batch.context..(first + n) * batch.context;
        Batch {
            inputs: batch.inputs[span.clone()].to_vec(),
            targets: batch.targets[span].to_vec(),
            batch: n,
            context: batch.context,
            windows: batch.windows[first..first + n].to_vec(),
        }
    })
}

/// [`teacher_support`] truncated on the host, with the teacher's products in `compute`.
fn teacher_support_in(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    top_p: f64,
    top_k: crate::spec::TopK,
) -> Vec<Kept> {
    use rayon::prelude::*;
    let mut out = Vec::with_capacity(batch.batch * batch.context);
    for part in passes(batch) {
        let (inputs, _) = batch_tensors(&part, device);
        for (_, logits) in head_chunks(teacher, inputs, compute) {
            let vocab = logits.dims()[1];
            let values: Vec<f32> = logits.into_data().try_to_vec().unwrap_or_default();
            out.par_extend(values.par_chunks(vocab).map(|z| truncate(z, top_p, top_k)));
        }
    }
    out
}

/// `k` tokens drawn from the teacher's distribution at every position of `batch` (the logit pass of
/// a sampled store, and a live teacher's sampled targets), each position seeded by its window and
/// place in it ([`draw_seed`]), so a store and a live teacher draw the same.
///
/// Sampling needs the whole distribution, so it always runs on the host.
pub(crate) fn teacher_samples(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    k: u64,
) -> Vec<Kept> {
    teacher_samples_in(teacher, batch, device, FloatDType::F32, k)
}

fn teacher_samples_in(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    k: u64,
) -> Vec<Kept> {
    use rayon::prelude::*;
    let context = batch.context.max(1);
    let mut out = Vec::with_capacity(batch.batch * batch.context);
    for part in passes(batch) {
        let (inputs, _) = batch_tensors(&part, device);
        for (first, logits) in head_chunks(teacher, inputs, compute) {
            let vocab = logits.dims()[1];
            let values: Vec<f32> = logits.into_data().try_to_vec().unwrap_or_default();
            out.par_extend(values.par_chunks(vocab).enumerate().map(|(i, z)| {
                let at = first + i;
                let window = part.windows.get(at / context).copied().unwrap_or(0);
                sample(z, k, draw_seed(window, (at % context) as u64))
            }));
        }
    }
    out
}

/// Calls `f(position, logits)` with the teacher's full `[vocab]` logits (f32) at every
/// position of `batch`, in order, a head chunk at a time on the host (a store's fidelity
/// check, [`super::logits_run::fidelity`]).
pub fn for_each_distribution(
    teacher: &dyn LanguageModel,
    batch: &Batch,
    device: &Device,
    f: &mut dyn FnMut(usize, &[f32]),
) {
    let mut at = 0;
    for part in passes(batch) {
        let (inputs, _) = batch_tensors(&part, device);
        for (_, logits) in head_chunks(teacher, inputs, FloatDType::F32) {
            let vocab = logits.dims()[1];
            let values: Vec<f32> = logits.into_data().try_to_vec().unwrap_or_default();
            for z in values.chunks(vocab) {
                f(at, z);
                at += 1;
            }
        }
    }
}

/// Pads the kept supports to a common width as tensors on `device`; a support with a tail
/// (`Kept::tail`) gets one more entry, the tail bucket (mask `crate::kernels::TAIL_MASK`).
pub fn sparse_targets(kept: &[Kept], device: &Device) -> SparseTargets {
    let tails = kept.iter().any(|k| k.tail.is_some());
    let width = kept.iter().map(|k| k.ids.len()).max().unwrap_or(1).max(1) + usize::from(tails);
    let n = kept.len();
    let (mut ids, mut lps, mut mask) = (
        Vec::with_capacity(n * width),
        Vec::with_capacity(n * width),
        Vec::with_capacity(n * width),
    );
    for k in kept {
        for j in 0..width {
            match (k.ids.get(j), k.log_probs.get(j)) {
                (Some(&id), Some(&lp)) => {
                    ids.push(id as i64);
                    lps.push(lp);
                    mask.push(1.0f32);
                }
                _ if j == k.ids.len() && k.tail.is_some() => {
                    ids.push(k.ids.first().copied().unwrap_or(0) as i64);
                    lps.push(k.tail.unwrap_or(0.0));
                    mask.push(crate::kernels::TAIL_MASK);
                }
                _ => {
                    ids.push(k.ids.first().copied().unwrap_or(0) as i64);
                    lps.push(0.0);
                    mask.push(0.0);
                }
            }
        }
    }
    SparseTargets {
        ids: Tensor::from_data(TensorData::new(ids, [n, width]), device),
        log_probs: Tensor::from_data(TensorData::new(lps, [n, width]), device),
        mask: Tensor::from_data(TensorData::new(mask, [n, width]), device),
    }
}
