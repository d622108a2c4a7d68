//! A student's teacher targets: the teacher's truncated distribution at every position of a
//! batch, from a live teacher (online, truncated on the host or on the device) or from a logit
//! store (offline), refined to the student's own top-p and top-k; and the teacher's pass that a
//! logit store is written from.

use burn::tensor::{Device, FloatDType, Tensor, TensorData};

use super::device_truncate::{Truncated, download, truncate_on_device};
use super::loss::SparseTargets;
use super::reader::StoreReader;
use super::store::ShardError;
use super::truncate::{Kept, Truncation, refine, truncate};
use crate::data::{Batch, batch_tensors};
use crate::model::Transformer;

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
        teacher: &'a Transformer,
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
    /// The student's top-p and top-k (at most the store's).
    pub truncation: Truncation,
    /// Where the teacher's distribution comes from.
    pub source: TeacherSource<'a>,
    /// The first error reading the store (a training step cannot return one; the runner
    /// checks this after training and fails the run).
    pub error: Option<ShardError>,
}

impl TeacherTargets<'_> {
    /// The teacher targets of every position of `batch` (step `step`), truncated to this
    /// student's top-p and top-k, on `device`; `None` when the store failed (the error is
    /// kept in `self.error`). An online teacher truncating on the device hands its targets
    /// over without a trip through the host.
    pub fn targets(&mut self, step: u64, batch: &Batch, device: &Device) -> Option<SparseTargets> {
        if let TeacherSource::Online {
            teacher,
            device: plain,
            compute,
            truncate_on: TruncateOn::Device,
        } = &self.source
        {
            let t = self.truncation;
            let truncated = online_on_device(teacher, batch, plain, *compute, t.top_p.0, t.top_k);
            if truncated.on_device() {
                // Constants of the student's graph: moved onto its (autodiff) device.
                let sparse = truncated.targets;
                return Some(SparseTargets {
                    ids: sparse.ids.to_device(device),
                    log_probs: sparse.log_probs.to_device(device),
                    mask: sparse.mask.to_device(device),
                });
            }
            // a support wider than the device keeps: padded on the host like a store's
            let kept = download(truncated);
            return (kept.len() == batch.batch * batch.context)
                .then(|| sparse_targets(&kept, device));
        }
        let kept = self.kept(step, batch);
        (kept.len() == batch.batch * batch.context).then(|| sparse_targets(&kept, device))
    }

    /// The kept teacher support of every position of `batch` (step `step`) on the host, already
    /// refined to this student's top-p and top-k; empty when the store failed.
    pub fn kept(&mut self, step: u64, batch: &Batch) -> Vec<Kept> {
        let t = self.truncation;
        let raw = match &mut self.source {
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
            TeacherSource::Offline(reader) => match reader.block(step) {
                Ok(kept) => kept,
                Err(e) => {
                    self.error.get_or_insert(e);
                    return Vec::new();
                }
            },
        };
        raw.into_iter()
            .map(|mut k| {
                let n = refine(&k, t.top_p.0, t.top_k);
                k.ids.truncate(n);
                k.log_probs.truncate(n);
                k
            })
            .collect()
    }
}

/// The online teacher's targets for `batch`, truncated on `device` (the teacher's products in
/// `compute`).
fn online_on_device(
    teacher: &Transformer,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    top_p: f64,
    top_k: crate::spec::TopK,
) -> Truncated {
    let (inputs, _) = batch_tensors(batch, device);
    let logits = teacher.forward_in(inputs, compute);
    let [b, s, vocab] = logits.dims();
    truncate_on_device(logits.reshape([b * s, vocab]), top_p, top_k)
}

/// Teacher logits held at once by [`teacher_support`]: 2^26 values (256 MiB), so a batch at a
/// large vocabulary (16K positions × 49,152 tokens would be 3.2 GB) goes through in parts.
const LOGITS_PER_PASS: usize = 1 << 26;

/// The teacher's truncated distribution at every position of `batch` (the logit pass),
/// computed in f32, in forward passes of at most [`LOGITS_PER_PASS`] logits, each truncated
/// where `truncate_on` says (on the host, positions in parallel; or on the device).
pub fn teacher_support(
    teacher: &Transformer,
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
            for part in passes(batch, teacher.vocab()) {
                let (inputs, _) = batch_tensors(&part, device);
                let logits = teacher.forward(inputs);
                let [b, s, vocab] = logits.dims();
                let sparse = truncate_on_device(logits.reshape([b * s, vocab]), top_p, top_k);
                out.extend(download(sparse));
            }
            out
        }
    }
}

/// `batch` split by rows into parts of at most [`LOGITS_PER_PASS`] logits.
fn passes(batch: &Batch, vocab: usize) -> impl Iterator<Item = Batch> + '_ {
    let per_row = batch.context * vocab;
    let rows = (LOGITS_PER_PASS / per_row.max(1)).clamp(1, batch.batch.max(1));
    (0..batch.batch).step_by(rows).map(move |first| {
        let n = rows.min(batch.batch - first);
        let span = first * batch.context..(first + n) * batch.context;
        Batch {
            inputs: batch.inputs[span.clone()].to_vec(),
            targets: batch.targets[span].to_vec(),
            batch: n,
            context: batch.context,
        }
    })
}

/// [`teacher_support`] truncated on the host, with the teacher's products in `compute`.
fn teacher_support_in(
    teacher: &Transformer,
    batch: &Batch,
    device: &Device,
    compute: FloatDType,
    top_p: f64,
    top_k: crate::spec::TopK,
) -> Vec<Kept> {
    use rayon::prelude::*;
    let mut out = Vec::with_capacity(batch.batch * batch.context);
    for part in passes(batch, teacher.vocab()) {
        let (inputs, _) = batch_tensors(&part, device);
        let logits = teacher.forward_in(inputs, compute);
        let vocab = logits.dims()[2];
        let values: Vec<f32> = logits.into_data().try_to_vec().unwrap_or_default();
        out.par_extend(values.par_chunks(vocab).map(|z| truncate(z, top_p, top_k)));
    }
    out
}

/// Pads the kept supports to a common width as tensors on `device`.
pub fn sparse_targets(kept: &[Kept], device: &Device) -> SparseTargets {
    let width = kept.iter().map(|k| k.ids.len()).max().unwrap_or(1).max(1);
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
