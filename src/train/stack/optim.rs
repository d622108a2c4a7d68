//! AdamW for a stack of runs: the solo optimiser's update (burn's `AdamW`: bias-corrected
//! moments, decoupled weight decay) on stacked weights `[K, rows, cols]`, with each member's
//! own step count, β, weight decay and learning rate, and each member's own global
//! gradient-norm clipping. Member k's state converts to and from the solo optimiser's record
//! (keyed by the solo model's parameter ids), so a member's checkpoint is a solo checkpoint.

use std::collections::HashMap;

use burn::module::ParamId;
use burn::optim::ModuleOptimizer;
use burn::tensor::{Bytes, Device, Tensor, TensorData};
use burn_pack::{Reader, Scalar, Tensor as PackTensor, Writer};

use crate::error::Cause;
use crate::train::TrainConfig;
use crate::train::trainer::{ADAM_EPSILON, optimizer};

/// One member's optimiser settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hyper {
    /// The solo run's training settings (β, weight decay, clipping).
    pub train: TrainConfig,
}

impl Hyper {
    fn beta_1(&self) -> f32 {
        self.train.betas[0] as f32
    }
    fn beta_2(&self) -> f32 {
        self.train.betas[1] as f32
    }
    fn weight_decay(&self) -> f32 {
        self.train.weight_decay as f32
    }
}

/// One value per member, broadcast over `[K, rows, cols]`; a scalar when every member has the
/// same (the common case, and the solo optimiser's own arithmetic).
enum PerMember {
    Same(f32),
    Each(Box<Tensor<3>>),
}

impl PerMember {
    fn new(values: &[f32], device: &Device) -> PerMember {
        match values.first() {
            Some(&v) if values.iter().all(|&x| x.to_bits() == v.to_bits()) => PerMember::Same(v),
            _ => PerMember::Each(Box::new(Tensor::from_data(
                TensorData::new(values.to_vec(), [values.len(), 1, 1]),
                device,
            ))),
        }
    }

    /// `t` · value.
    fn times(&self, t: Tensor<3>) -> Tensor<3> {
        match self {
            PerMember::Same(v) => t.mul_scalar(*v),
            PerMember::Each(v) => t * (**v).clone(),
        }
    }

    /// `t` / value.
    fn divides(&self, t: Tensor<3>) -> Tensor<3> {
        match self {
            PerMember::Same(v) => t.div_scalar(*v),
            PerMember::Each(v) => t / (**v).clone(),
        }
    }

    /// `t` + value.
    fn plus(&self, t: Tensor<3>) -> Tensor<3> {
        match self {
            PerMember::Same(v) => t.add_scalar(*v),
            PerMember::Each(v) => t + (**v).clone(),
        }
    }
}

/// The first and second moments of one member, per weight (`[1, rows, cols]`), and its steps.
pub(crate) struct MemberState {
    /// Optimiser steps taken.
    pub time: usize,
    /// First moments, stacking order.
    pub moment_1: Vec<Tensor<3>>,
    /// Second moments, stacking order.
    pub moment_2: Vec<Tensor<3>>,
}

/// AdamW over a stack.
pub(crate) struct StackedAdamW {
    hyper: Vec<Hyper>,
    time: Vec<usize>,
    moment_1: Vec<Tensor<3>>,
    moment_2: Vec<Tensor<3>>,
}

impl StackedAdamW {
    /// The optimiser of a stack whose member k has settings `hyper[k]` and state `states[k]`
    /// (`None`: fresh), for weights of stacked shapes `shapes` (`[K, rows, cols]`).
    pub fn new(
        hyper: Vec<Hyper>,
        states: Vec<Option<MemberState>>,
        shapes: &[[usize; 3]],
        device: &Device,
    ) -> StackedAdamW {
        let zero = |s: &[usize; 3]| Tensor::<3>::zeros([1, s[1], s[2]], device);
        let time = states
            .iter()
            .map(|s| s.as_ref().map_or(0, |s| s.time))
            .collect();
        let stacked = |pick: &dyn Fn(&MemberState) -> &Vec<Tensor<3>>| -> Vec<Tensor<3>> {
            shapes
                .iter()
                .enumerate()
                .map(|(slot, shape)| {
                    let parts = states
                        .iter()
                        .map(|s| {
                            s.as_ref()
                                .map_or_else(|| zero(shape), |s| pick(s)[slot].clone())
                        })
                        .collect();
                    Tensor::cat(parts, 0)
                })
                .collect()
        };
        StackedAdamW {
            moment_1: stacked(&|s| &s.moment_1),
            moment_2: stacked(&|s| &s.moment_2),
            hyper,
            time,
        }
    }

    /// One AdamW step of every member: `weights[s] ← update(weights[s], grads[s])` with member
    /// k's learning rate `lr[k]`. Element for element the solo optimiser's arithmetic.
    pub fn step(&mut self, weights: &mut [Tensor<3>], grads: Vec<Tensor<3>>, lr: &[f64]) {
        let Some(device) = weights.first().map(Tensor::device) else {
            return;
        };
        for t in &mut self.time {
            *t += 1;
        }
        let per = |f: &dyn Fn(usize, &Hyper) -> f32| {
            let values: Vec<f32> = self
                .hyper
                .iter()
                .enumerate()
                .map(|(k, h)| f(k, h))
                .collect();
            PerMember::new(&values, &device)
        };
        let beta_1 = per(&|_, h| h.beta_1());
        let beta_2 = per(&|_, h| h.beta_2());
        let rest_1 = per(&|_, h| 1.0 - h.beta_1());
        let rest_2 = per(&|_, h| 1.0 - h.beta_2());
        let bias_1 = per(&|k, h| 1.0 - h.beta_1().powi(self.time[k] as i32));
        let bias_2 = per(&|k, h| 1.0 - h.beta_2().powi(self.time[k] as i32));
        let epsilon = PerMember::Same(ADAM_EPSILON);
        // decoupled weight decay: w · (1 − lr·λ), skipped when lr·λ is 0 (as the solo optimiser)
        let decay = per(&|k, h| {
            let rate = lr[k] * f64::from(h.weight_decay());
            if rate == 0.0 {
                1.0
            } else {
                (1.0 - rate) as f32
            }
        });
        let rate = per(&|k, _| lr[k] as f32);
        for (slot, grad) in grads.into_iter().enumerate() {
            let m = beta_1.times(self.moment_1[slot].clone()) + rest_1.times(grad.clone());
            let v = beta_2.times(self.moment_2[slot].clone()) + rest_2.times(grad.square());
            let delta = bias_1.divides(m.clone()) / epsilon.plus(bias_2.divides(v.clone()).sqrt());
            weights[slot] = decay.times(weights[slot].clone()) - rate.times(delta);
            self.moment_1[slot] = m;
            self.moment_2[slot] = v;
        }
    }

    /// The optimiser of the members at `keep` (in that order).
    pub fn select(&self, keep: &[usize]) -> StackedAdamW {
        let Some(first) = self.moment_1.first() else {
            return StackedAdamW {
                hyper: keep.iter().map(|&k| self.hyper[k].clone()).collect(),
                time: keep.iter().map(|&k| self.time[k]).collect(),
                moment_1: Vec::new(),
                moment_2: Vec::new(),
            };
        };
        let index = Tensor::from_data(
            TensorData::new(keep.iter().map(|&k| k as i64).collect(), [keep.len()]),
            &first.device(),
        );
        let pick = |ts: &Vec<Tensor<3>>| {
            ts.iter()
                .map(|t| t.clone().select(0, index.clone()))
                .collect()
        };
        StackedAdamW {
            hyper: keep.iter().map(|&k| self.hyper[k].clone()).collect(),
            time: keep.iter().map(|&k| self.time[k]).collect(),
            moment_1: pick(&self.moment_1),
            moment_2: pick(&self.moment_2),
        }
    }

    /// Member `k`'s state as the solo optimiser of a model whose parameters are `ids` with solo
    /// shapes `shapes` (stacking order): what its solo run would hold at this step.
    pub fn member_optimizer(
        &self,
        k: usize,
        ids: &[ParamId],
        shapes: &[Vec<usize>],
    ) -> Result<ModuleOptimizer, Cause> {
        let fresh = optimizer(&self.hyper[k].train);
        let time = self.time[k];
        if time == 0 {
            return Ok(fresh);
        }
        let mut tensors = Vec::with_capacity(2 * ids.len());
        let mut scalars = Vec::with_capacity(2 * ids.len());
        for (slot, (id, shape)) in ids.iter().zip(shapes).enumerate() {
            let id = id.val();
            for (leaf, moments) in [("moment_1", &self.moment_1), ("moment_2", &self.moment_2)] {
                let member = moments[slot].clone().narrow(0, k, 1);
                let data = match shape[..] {
                    [d] => member.reshape([d]).into_data(),
                    _ => member
                        .reshape([shape[0], shape[shape.len() - 1]])
                        .into_data(),
                };
                let (bytes, dims, dtype) = data.into_parts();
                let name = format!("{id}.momentum.{leaf}");
                tensors.push(PackTensor::new(name, dtype, dims, Some(id), bytes));
            }
            scalars.push((format!("{id}.momentum.time"), Scalar::from(time)));
            scalars.push((format!("{id}.__rank"), Scalar::from(shape.len())));
        }
        let mut writer = Writer::new(tensors);
        for (key, value) in &scalars {
            writer = writer.with_scalar(key, *value);
        }
        let bytes = writer.into_bytes()?;
        Ok(fresh.from_bytes(bytes)?)
    }
}

impl MemberState {
    /// The state a solo optimiser holds for a model whose parameters are `ids` with solo shapes
    /// `shapes` (stacking order); `Ok(None)` when it holds none (a run that has not stepped).
    pub fn from_solo(
        optim: &ModuleOptimizer,
        ids: &[ParamId],
        shapes: &[Vec<usize>],
        device: &Device,
    ) -> Result<Option<MemberState>, Cause> {
        let bytes: Bytes = optim.into_bytes()?;
        let reader = Reader::from_bytes(bytes)?;
        let scalars = reader.scalars().clone();
        let mut by_name: HashMap<String, TensorData> = HashMap::new();
        for tensor in reader.into_tensors()? {
            let (name, dtype, shape, _, bytes) = tensor.into_parts()?;
            by_name.insert(name, TensorData::from_bytes(bytes, shape, dtype));
        }
        if by_name.is_empty() {
            return Ok(None);
        }
        let mut time = None;
        let (mut moment_1, mut moment_2) = (Vec::new(), Vec::new());
        for (id, shape) in ids.iter().zip(shapes) {
            let id = id.val();
            let step = scalars
                .get(&format!("{id}.momentum.time"))
                .and_then(|s| usize::try_from(*s).ok())
                .ok_or_else(|| {
                    format!("the optimiser state has no step count for parameter {id}")
                })?;
            if time.is_some_and(|t| t != step) {
                return Err("the optimiser state's parameters disagree on the step".into());
            }
            time = Some(step);
            for (leaf, out) in [("moment_1", &mut moment_1), ("moment_2", &mut moment_2)] {
                let data = by_name
                    .remove(&format!("{id}.momentum.{leaf}"))
                    .ok_or_else(|| {
                        format!("the optimiser state has no {leaf} for parameter {id}")
                    })?;
                if data.shape().to_vec() != *shape {
                    return Err(
                        format!("the optimiser state of parameter {id} has another shape").into(),
                    );
                }
                let data = data.convert::<f32>();
                out.push(match shape[..] {
                    [d] => Tensor::<1>::from_data(data, device).reshape([1, 1, d]),
                    _ => Tensor::<2>::from_data(data, device).unsqueeze::<3>(),
                });
            }
        }
        Ok(Some(MemberState {
            time: time.unwrap_or(0),
            moment_1,
            moment_2,
        }))
    }
}

/// Scales member k's gradients so that their global L2 norm is at most `max_norm[k]` (skipped
/// where it is 0): the solo run's clipping, per member, never over the stack.
///
/// # Shapes
/// - `grads`: each `[members, rows, cols]`
pub(crate) fn clip_per_member(grads: &mut [Tensor<3>], max_norm: &[f64]) {
    let members = max_norm.len();
    if members == 0 || max_norm.iter().all(|&m| m <= 0.0) {
        return;
    }
    let Some(total) = grads
        .iter()
        .map(|g| {
            let [k, rows, cols] = g.dims();
            g.clone().square().reshape([k, rows * cols]).sum_dim(1)
        })
        .reduce(|a, b| a + b)
    else {
        return;
    };
    let squares: Vec<f32> = total.into_data().try_to_vec_as().unwrap_or_default();
    let factors: Vec<f32> = max_norm
        .iter()
        .zip(squares.iter().chain(std::iter::repeat(&f32::NAN)))
        .map(|(&max, &sq)| {
            let norm = f64::from(sq).sqrt();
            if max > 0.0 && norm.is_finite() && norm > max {
                (max / (norm + 1e-6)) as f32
            } else {
                1.0
            }
        })
        .collect();
    if factors.iter().all(|&f| f == 1.0) {
        return;
    }
    let device = grads[0].device();
    let scale = PerMember::new(&factors, &device);
    for g in grads.iter_mut() {
        *g = scale.times(g.clone());
    }
}
