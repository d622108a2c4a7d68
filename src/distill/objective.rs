//! The student's objective (1 − α)·L_lm + α·L_kd, with teacher targets from a live teacher
//! (online) or from a logit store (offline), and the teacher–student metrics on held-out text.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, FloatDType, Int, Tensor, TensorData};

use super::device_truncate::{Truncated, download, truncate_on_device};
use super::loss::{SparseTargets, distill_loss};
use super::reader::StoreReader;
use super::store::ShardError;
use super::truncate::{Kept, refine, truncate};
use crate::data::{Batch, Stream, eval_batches};
use crate::model::Transformer;
use crate::plan::DistillConfig;
use crate::train::{
    DistillTerm, LossTerms, Objective, batch_tensors, cross_entropy, eval_rows, schedule,
};

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

/// The distillation objective of one student run.
pub struct DistillObjective<'a> {
    /// The student's distillation settings.
    pub config: &'a DistillConfig,
    /// The teacher targets.
    pub source: TeacherSource<'a>,
    /// The first error reading the store (a training step cannot return one; the runner
    /// checks this after training and fails the run).
    pub error: Option<ShardError>,
}

impl DistillObjective<'_> {
    /// The teacher targets of every position of `batch` (step `step`), truncated to this
    /// student's top-p and top-k, on `device`; `None` when the store failed (the error is
    /// kept in `self.error`). An online teacher truncating on the device hands its targets
    /// over without a trip through the host.
    fn targets(&mut self, step: u64, batch: &Batch, device: &Device) -> Option<SparseTargets> {
        if let TeacherSource::Online {
            teacher,
            device: plain,
            compute,
            truncate_on: TruncateOn::Device,
        } = &self.source
        {
            let t = self.config.truncation;
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
    fn kept(&mut self, step: u64, batch: &Batch) -> Vec<Kept> {
        let t = self.config.truncation;
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

impl Objective for DistillObjective<'_> {
    fn loss(
        &mut self,
        step: u64,
        steps: u64,
        batch: &Batch,
        logits: Tensor<3>,
        targets: Tensor<2, Int>,
    ) -> Tensor<1> {
        let alpha = schedule::value_at(&self.config.alpha.0, step, steps);
        let [b, t, vocab] = logits.dims();
        let device = logits.device();
        let lm = cross_entropy(logits.clone(), targets).mean();
        let Some(sparse) = self.targets(step, batch, &device) else {
            return lm.add_scalar(f64::NAN); // the store failed: stop this run (error recorded)
        };
        let kd = distill_loss(
            self.config.loss,
            logits.reshape([b * t, vocab]),
            &sparse,
            self.config.temperature.0,
        );
        lm.mul_scalar(1.0 - alpha) + kd.mul_scalar(alpha)
    }

    fn terms(&mut self, step: u64, steps: u64, batch: &Batch) -> Result<LossTerms, String> {
        let alpha = schedule::value_at(&self.config.alpha.0, step, steps);
        let kept = self.kept(step, batch);
        if let Some(e) = &self.error {
            return Err(e.to_string());
        }
        if kept.len() != batch.batch * batch.context {
            return Err(format!(
                "the teacher gave {} positions for a batch of {}",
                kept.len(),
                batch.batch * batch.context
            ));
        }
        Ok(LossTerms {
            lm_weight: 1.0 - alpha,
            distill: Some(DistillTerm {
                weight: alpha,
                kind: self.config.loss,
                tau: self.config.temperature.0,
                kept,
            }),
        })
    }
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

/// Teacher–student top-1 agreement and KL(teacher ‖ student) in nats/token (full vocabulary,
/// τ = 1) on every held-out window: a token-level measure of how far the student has become
/// like its teacher.
pub fn agreement(
    student: &Transformer,
    teacher: &Transformer,
    val: &Stream,
    context: usize,
    device: &Device,
) -> (f64, f64) {
    let (mut same, mut kl, mut count) = (0.0f64, 0.0f64, 0usize);
    for batch in eval_batches(val, context, eval_rows(context, teacher.vocab())) {
        let (inputs, _) = batch_tensors(&batch, device);
        let s = log_softmax(student.forward(inputs.clone()), 2);
        let t = log_softmax(teacher.forward(inputs), 2);
        let agree = s
            .clone()
            .argmax(2)
            .equal(t.clone().argmax(2))
            .int()
            .sum()
            .into_scalar::<i64>();
        let divergence = (t.clone().exp() * (t - s)).sum().into_scalar::<f32>();
        same += agree as f64;
        kl += divergence as f64;
        count += batch.batch * batch.context;
    }
    (same / count.max(1) as f64, kl / count.max(1) as f64)
}
