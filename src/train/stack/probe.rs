//! Measuring whether stacks pay on a backend: the training throughput of one run alone (the
//! solo step) and of a stack of K runs (the stack's step) for one model and batch shape, on
//! synthetic tokens. `run --stack auto` stacks only as many runs as measured faster.

use std::time::Instant;

use burn::tensor::{Device, FloatDType, Tensor};

use super::optim::{Hyper, StackedAdamW};
use super::trainer::{StepInputs, stacked_step};
use crate::data::{Batch, DataConfig};
use crate::model::{StackedTransformer, Transformer, TransformerConfig};
use crate::train::TrainConfig;
use crate::train::trainer::{Update, optimizer, train_step};
use crate::train::{LossTerms, NextToken, init_model};

/// Steps timed after one untimed warm-up step.
const TIMED_STEPS: usize = 2;

/// Training tokens per second, summed over the members, of a stack of `members` runs of
/// `model` with `data`'s context and batch rows and `train`'s optimiser on `device` (`members`
/// = 1: one run alone, through the solo training step); the median of a few steps after a
/// warm-up.
pub fn tokens_per_s(
    model: &TransformerConfig,
    data: &DataConfig,
    train: &TrainConfig,
    members: usize,
    device: &Device,
) -> Option<f64> {
    let (context, rows) = (data.context as usize, data.batch_seqs as usize);
    let vocab = model.shape.vocab as i64;
    let batch = |k: usize| {
        let tokens: Vec<i64> = (0..rows * context)
            .map(|i| ((i + 31 * k) as i64 * 7919 + 13) % vocab)
            .collect();
        Batch {
            inputs: tokens.clone(),
            targets: tokens,
            batch: rows,
            context,
            windows: (0..rows as u64).collect(),
        }
    };
    let ad = device.clone().autodiff();
    let mut times = Vec::with_capacity(TIMED_STEPS);
    if members <= 1 {
        let mut model = init_model(model, data.seed, &ad);
        let mut optim = optimizer(train);
        let batch = batch(0);
        for step in 0..=TIMED_STEPS {
            let start = Instant::now();
            let steps = (step as u64, TIMED_STEPS as u64 + 1);
            let update = Update {
                lr: 1e-4,
                grad_clip: train.grad_clip,
                compute: FloatDType::F32,
                scaler: None,
                head_chunk: train.head_chunk_for(model.vocab()),
                micro_rows: train.micro_rows(data.batch_seqs) as usize,
            };
            train_step(
                &mut model,
                &mut optim,
                &mut NextToken,
                &batch,
                steps,
                update,
                &ad,
            )
            .ok()?;
            times.push(start.elapsed().as_secs_f64());
        }
    } else {
        let models: Vec<Transformer> = (0..members)
            .map(|_| init_model(model, data.seed, device))
            .collect();
        let mut stack = StackedTransformer::stack(&models).ok()?;
        let shapes: Vec<[usize; 3]> = stack.weights.iter().map(Tensor::dims).collect();
        let hyper = vec![
            Hyper {
                train: train.clone()
            };
            members
        ];
        let mut optim =
            StackedAdamW::new(hyper, (0..members).map(|_| None).collect(), &shapes, device);
        let batches: Vec<Batch> = (0..members).map(batch).collect();
        let terms = vec![
            LossTerms {
                lm_weight: 1.0,
                distill: None
            };
            members
        ];
        let (lr, clip) = (vec![1e-4; members], vec![train.grad_clip; members]);
        let step = StepInputs {
            batches: &batches,
            terms: &terms,
            lr: &lr,
            clip: &clip,
        };
        for _ in 0..=TIMED_STEPS {
            let start = Instant::now();
            stacked_step(&mut stack, &mut optim, &step, device).ok()?;
            times.push(start.elapsed().as_secs_f64());
        }
    }
    times.remove(0); // the warm-up
    times.sort_by(f64::total_cmp);
    let seconds = times[times.len() / 2];
    Some((members.max(1) * rows * context) as f64 / seconds.max(1e-9))
}
