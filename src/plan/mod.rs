//! Planning: model shapes and exact sizes, grid expansion into the run graph, cost estimates,
//! and the plan's table, JSON and CSV renderings.

mod cost;
mod grid;
mod render;
mod run;
mod shape;

pub use cost::{
    Throughput, Totals, checkpoint_bytes, default_flops_per_s, estimate_tokens_per_s,
    forward_flops, index_bits, logit_bytes_per_token, measured_seconds, training_flops,
};
pub use render::{PlanFormat, render};
pub use run::{
    DataConfig, DistillConfig, LogitsConfig, ModelSpec, PretrainedSource, Run, RunConfig, RunId,
    RunKind, TokenizerRef, TrainConfig, Truncation,
};
pub use shape::{ModelShape, ParamCount, ShapeRule};

use crate::spec::units::format_bytes;
use crate::spec::{SpecError, Sweep};

/// Options that come from the command line rather than the sweep file.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Overrides the FLOP/s used for time estimates.
    pub flops_per_s: Option<f64>,
    /// (non-embedding parameters, training tokens/s) of runs already measured on this backend;
    /// when present (and no FLOP/s is forced) the time estimate comes from them.
    pub measured: Vec<(u64, f64)>,
}

/// The run graph of a sweep with its totals.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The sweep's name.
    pub sweep_name: String,
    /// SHA-256 of the sweep file.
    pub sweep_hash: String,
    /// Runs in graph order (teachers, logit passes, students, baselines).
    pub runs: Vec<Run>,
    /// Sweep-wide numbers.
    pub totals: Totals,
}

impl Plan {
    /// Expands `sweep` into its run graph and checks it against the sweep's limits.
    pub fn build(sweep: &Sweep, options: &PlanOptions) -> Result<Plan, SpecError> {
        let expansion = grid::expand(sweep)?;
        let backend = sweep.file.backend;
        let throughput = match (options.flops_per_s, sweep.file.estimate.flops_per_s) {
            (Some(f), _) => Throughput {
                flops_per_s: f,
                source: "--flops-per-s".into(),
            },
            (None, Some(f)) => Throughput {
                flops_per_s: f.0,
                source: "[estimate] flops_per_s".into(),
            },
            (None, None) => Throughput {
                flops_per_s: default_flops_per_s(backend),
                source: format!("default for backend `{backend}` (not measured yet)"),
            },
        };
        let mut totals = cost::totals(&expansion.runs, expansion.naive_flops, throughput);
        if options.flops_per_s.is_none() && !options.measured.is_empty() {
            let params: std::collections::HashMap<&RunId, u64> = expansion
                .runs
                .iter()
                .map(|r| (&r.id, r.params.non_embedding))
                .collect();
            let teacher_of = |r: &Run| {
                r.config
                    .distill
                    .as_ref()
                    .and_then(|d| params.get(&d.teacher).copied())
            };
            let seconds: Option<f64> = expansion
                .runs
                .iter()
                .map(|r| cost::measured_seconds(r, teacher_of(r), &options.measured))
                .sum();
            if let Some(seconds) = seconds {
                totals.estimated_seconds = seconds;
                totals.throughput.source = format!(
                    "measured on {} finished runs of this backend",
                    options.measured.len()
                );
            }
        }
        let plan = Plan {
            sweep_name: sweep.file.name.to_string(),
            sweep_hash: sweep.hash.clone(),
            runs: expansion.runs,
            totals,
        };
        plan.check_disk(sweep)?;
        Ok(plan)
    }

    fn check_disk(&self, sweep: &Sweep) -> Result<(), SpecError> {
        let Some(limit) = &sweep.file.limits.disk else {
            return Ok(());
        };
        let budget = limit.get_ref().0;
        let t = &self.totals;
        let needed = t.logit_store_bytes.saturating_add(t.checkpoint_bytes);
        if needed <= budget {
            return Ok(());
        }
        Err(sweep
            .error_at(
                limit.span(),
                "limits.disk",
                format!(
                    "the plan needs {} on disk ({} of logit stores + {} of checkpoints) but the budget is {}",
                    format_bytes(needed as f64),
                    format_bytes(t.logit_store_bytes as f64),
                    format_bytes(t.checkpoint_bytes as f64),
                    format_bytes(budget as f64)
                ),
            )
            .with_hint("raise `[limits] disk`, lower `top_k`, or shrink the student token budgets"))
    }
}
