//! How long a run takes: the work of one optimiser step (or logit batch) in three currencies,
//! and a per-backend [`Calibration`] that prices each.
//!
//! 6·N·D counts only the transformer's matrix products. Small models spend most of their time
//! elsewhere, so a step's work is
//! - **matmul FLOPs**: the blocks' projections (2·N per token forward), the output head
//!   (2·d·V, which N leaves out), attention scores and values (4·context·d per layer), ×3 for
//!   training (forward and backward);
//! - **element operations**: passes over activations that are not matrix products: the
//!   vocabulary softmax and the loss (about 8 passes over V per token in training), SwiGLU (8 over
//!   d_ff per layer), attention softmax (8 over heads·context per layer), norms and residuals (20
//!   over d per layer), AdamW (12 passes over every parameter per step), and for students the
//!   distillation loss over the kept support;
//! - **tensor operations** per step (a fixed cost each: dispatch, allocation, threading), about
//!   60 + 70 per layer in training;
//!
//! and seconds = s_flop·flops + s_element·elements + s_op·ops. The three prices come from a short
//! probe on this machine (`train::probe`, priced by [`Calibration::probe`]) or, better, from the
//! runs of the sweep that finished ([`Calibration::fit`]: non-negative least squares on their
//! measured step times).

use serde::{Deserialize, Serialize};

use super::run::{RunConfig, RunKind};
use crate::model::ModelShape;
use crate::spec::{Backend, DistillMode};

/// The work of one step (an optimiser step, or one batch of a logit pass).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StepWork {
    /// Matrix-product FLOPs.
    pub flops: f64,
    /// Element operations (see the module docs).
    pub elements: f64,
    /// Tensor operations.
    pub ops: f64,
}

impl std::ops::Add for StepWork {
    type Output = StepWork;
    fn add(self, o: StepWork) -> StepWork {
        StepWork {
            flops: self.flops + o.flops,
            elements: self.elements + o.elements,
            ops: self.ops + o.ops,
        }
    }
}

/// Forward-pass work of `shape` over `tokens` tokens of `context`.
fn forward(shape: &ModelShape, context: u64, tokens: f64) -> StepWork {
    let (d, l, ff, v) = (
        shape.d_model as f64,
        shape.n_layers as f64,
        shape.d_ff as f64,
        shape.vocab as f64,
    );
    let heads = shape.n_heads as f64;
    let ctx = context as f64;
    let matmul_params = shape.params().non_embedding as f64 - (2.0 * l + 1.0) * d;
    let flops = tokens * (2.0 * matmul_params + 2.0 * d * v + 4.0 * ctx * d * l);
    let elements = tokens * (3.0 * v + l * (3.0 * ff + 3.0 * heads * ctx + 8.0 * d));
    StepWork {
        flops,
        elements,
        ops: 25.0 + 30.0 * l,
    }
}

/// Training-step work of `shape` on `tokens` tokens: forward and backward, loss and AdamW.
pub(crate) fn training_work(shape: &ModelShape, context: u64, tokens: f64) -> StepWork {
    let f = forward(shape, context, tokens);
    let (d, l, ff, v) = (
        shape.d_model as f64,
        shape.n_layers as f64,
        shape.d_ff as f64,
        shape.vocab as f64,
    );
    let heads = shape.n_heads as f64;
    let ctx = context as f64;
    StepWork {
        flops: 3.0 * f.flops,
        elements: tokens * (8.0 * v + l * (8.0 * ff + 8.0 * heads * ctx + 20.0 * d))
            + 12.0 * shape.params().total as f64,
        ops: 60.0 + 70.0 * l,
    }
}

/// The work of one step of `config`; `teacher` is the shape of its teacher (students and
/// logit passes).
pub(crate) fn step_work(config: &RunConfig, teacher: Option<&ModelShape>) -> StepWork {
    let tokens = (config.data.context * config.data.batch_seqs) as f64;
    let ctx = config.data.context;
    let shape = &config.model.shape;
    let vocab = shape.vocab;
    match config.kind {
        RunKind::Teacher | RunKind::Baseline => training_work(shape, ctx, tokens),
        RunKind::Logits => {
            let kept = config
                .logits
                .as_ref()
                .map_or(0, |l| l.truncation.top_k.kept(vocab)) as f64;
            // The teacher's forward pass, then truncation and packing on the host.
            forward(shape, ctx, tokens)
                + StepWork {
                    flops: 0.0,
                    elements: tokens * (4.0 * vocab as f64 + 8.0 * kept),
                    ops: 2.0,
                }
        }
        RunKind::Student => {
            let own = training_work(shape, ctx, tokens);
            let Some(d) = config.distill.as_ref() else {
                return own;
            };
            let kept = d.truncation.top_k.kept(vocab) as f64;
            let loss = StepWork {
                flops: 0.0,
                elements: tokens * (6.0 * vocab as f64 + 16.0 * kept),
                ops: 30.0,
            };
            let live = match (d.mode, teacher) {
                (DistillMode::Online, Some(t)) => {
                    forward(t, ctx, tokens)
                        + StepWork {
                            flops: 0.0,
                            elements: tokens * 4.0 * vocab as f64,
                            ops: 2.0,
                        }
                }
                _ => StepWork::default(),
            };
            own + loss + live
        }
    }
}

/// Steps a run takes (optimiser steps, or logit batches).
pub fn steps(config: &RunConfig) -> u64 {
    let per_step = (config.data.context * config.data.batch_seqs).max(1);
    config
        .train
        .as_ref()
        .map_or(config.tokens.div_ceil(per_step), |t| t.steps)
}

/// Seconds per unit of each kind of work on one backend and machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Seconds per matmul FLOP.
    pub s_per_flop: f64,
    /// Seconds per element operation.
    pub s_per_element: f64,
    /// Seconds per tensor operation.
    pub s_per_op: f64,
    /// Where the prices come from, in words.
    pub source: String,
}

impl Calibration {
    /// Stated prices for `backend` before anything was measured: the FLOP/s of
    /// `super::default_flops_per_s`, element operations at a tenth of that rate, and 20 µs
    /// per tensor operation (CPU) or 10 µs (GPU).
    pub fn stated(backend: Backend) -> Calibration {
        let f = super::default_flops_per_s(backend);
        Calibration {
            s_per_flop: 1.0 / f,
            s_per_element: 10.0 / f,
            s_per_op: if backend == Backend::Cpu {
                20e-6
            } else {
                10e-6
            },
            source: format!("stated defaults for backend `{backend}` (not measured)"),
        }
    }

    /// Only the FLOP/s given (`--flops-per-s`, `[estimate] flops_per_s`): 6·N·D at that rate.
    pub fn flops_only(flops_per_s: f64, source: &str) -> Calibration {
        Calibration {
            s_per_flop: 1.0 / flops_per_s,
            s_per_element: 0.0,
            s_per_op: 0.0,
            source: source.to_string(),
        }
    }

    /// Seconds for one step of `work`.
    pub fn step_seconds(&self, work: &StepWork) -> f64 {
        self.s_per_flop * work.flops + self.s_per_element * work.elements + self.s_per_op * work.ops
    }

    /// Seconds for the whole of run `config`.
    pub fn run_seconds(&self, config: &RunConfig, teacher: Option<&ModelShape>) -> f64 {
        steps(config) as f64 * self.step_seconds(&step_work(config, teacher))
    }

    /// The prices fitted on the calibration probe ([`crate::train::probe`]) of `device`.
    pub fn probe(device: &burn::tensor::Device, source: String) -> Option<Calibration> {
        let samples: Vec<(StepWork, f64)> = crate::train::probe::probe_steps(device)
            .iter()
            .map(|p| {
                let tokens = (p.context * p.seqs) as f64;
                (training_work(&p.shape, p.context, tokens), p.seconds)
            })
            .collect();
        Calibration::fit(&samples, source)
    }

    /// The prices that best explain `samples` (work of a step, measured seconds per step): least
    /// squares on relative errors with every price ≥ 0 (each subset of prices is solved and the
    /// best feasible one kept).
    ///
    /// `None` with fewer than two samples.
    pub fn fit(samples: &[(StepWork, f64)], source: String) -> Option<Calibration> {
        let rows: Vec<([f64; 3], f64)> = samples
            .iter()
            .filter(|(_, s)| s.is_finite() && *s > 0.0)
            .map(|(w, s)| ([w.flops / s, w.elements / s, w.ops / s], 1.0))
            .collect();
        if rows.len() < 2 {
            return None;
        }
        let mut best: Option<([f64; 3], f64)> = None;
        for mask in 1u8..8 {
            let active: Vec<usize> = (0..3).filter(|i| mask & (1 << i) != 0).collect();
            if active.len() > rows.len() {
                continue;
            }
            let Some(x) = least_squares(&rows, &active) else {
                continue;
            };
            if x.iter().any(|&v| v < 0.0) {
                continue;
            }
            let residual: f64 = rows
                .iter()
                .map(|(a, y)| (a[0] * x[0] + a[1] * x[1] + a[2] * x[2] - y).powi(2))
                .sum();
            if best.is_none_or(|(_, r)| residual < r) {
                best = Some((x, residual));
            }
        }
        best.map(|(x, _)| Calibration {
            s_per_flop: x[0],
            s_per_element: x[1],
            s_per_op: x[2],
            source,
        })
    }
}

/// Solves min Σ (a·x − y)² over the `active` coordinates (others 0) by the normal equations.
fn least_squares(rows: &[([f64; 3], f64)], active: &[usize]) -> Option<[f64; 3]> {
    let n = active.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for (a, y) in rows {
        for (i, &p) in active.iter().enumerate() {
            for (j, &q) in active.iter().enumerate() {
                m[i][j] += a[p] * a[q];
            }
            m[i][n] += a[p] * y;
        }
    }
    // Gaussian elimination with partial pivoting.
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, pivot);
        let pivot_row = m[col].clone();
        for (row, values) in m.iter_mut().enumerate() {
            if row != col {
                let f = values[col] / pivot_row[col];
                for (v, p) in values.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    let mut x = [0.0; 3];
    for (i, &p) in active.iter().enumerate() {
        x[p] = m[i][n] / m[i][i];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(flops: f64, elements: f64, ops: f64) -> StepWork {
        StepWork {
            flops,
            elements,
            ops,
        }
    }

    #[test]
    fn the_fit_recovers_known_prices() {
        let truth = Calibration {
            s_per_flop: 2e-11,
            s_per_element: 3e-9,
            s_per_op: 15e-6,
            source: String::new(),
        };
        let works = [
            work(1e9, 1e6, 200.0),
            work(2e10, 4e6, 400.0),
            work(1e8, 5e7, 300.0),
            work(5e8, 2e5, 800.0),
        ];
        let samples: Vec<_> = works.iter().map(|w| (*w, truth.step_seconds(w))).collect();
        let fit = Calibration::fit(&samples, "test".into()).unwrap();
        for (got, want) in [
            (fit.s_per_flop, truth.s_per_flop),
            (fit.s_per_element, truth.s_per_element),
            (fit.s_per_op, truth.s_per_op),
        ] {
            assert!((got / want - 1.0).abs() < 1e-6, "{got} vs {want}");
        }
    }

    #[test]
    fn prices_stay_non_negative() {
        // Data that a free least-squares fit explains with a negative per-op price.
        let samples = [
            (work(1e9, 0.0, 100.0), 0.010),
            (work(2e9, 0.0, 1000.0), 0.019),
            (work(4e9, 0.0, 200.0), 0.041),
        ];
        let fit = Calibration::fit(&samples, String::new()).unwrap();
        assert!(fit.s_per_flop > 0.0 && fit.s_per_element >= 0.0 && fit.s_per_op >= 0.0);
    }

    #[test]
    fn the_head_and_softmax_dominate_a_tiny_model() {
        let shape = crate::model::ShapeRule {
            aspect_ratio: 32.0,
            head_dim: None,
            kv_groups: 1,
            ffn_multiple: None,
            tie_embeddings: true,
            vocab: 256,
        }
        .derive(20_000)
        .unwrap();
        let w = training_work(&shape, 64, 1.0);
        let n = shape.params().non_embedding as f64;
        assert!(
            w.flops > 1.5 * 6.0 * n,
            "the head and attention add more than half of 6N: {} vs {}",
            w.flops,
            6.0 * n
        );
    }
}
