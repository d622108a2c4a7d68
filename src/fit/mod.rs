//! Scaling laws and their fits (`docs/src/science/laws.md`): the Chinchilla and Busbridge
//! supervised laws and Busbridge's distillation law, fitted in log space by L-BFGS on the sum of
//! Huber losses from a grid of starts, with bootstrap confidence intervals; capacity-gap curves and
//! the optimal teacher; `recommend`; fits stored in the sweep database.

mod bootstrap;
mod capacity_gap;
mod data;
mod error;
mod estimate;
mod fitter;
mod grid;
mod laws;
mod moments;
mod objective;
mod recommend;
mod released;
mod store;
mod sweep;
mod teacher_budget;
mod triage;

pub use bootstrap::resample_counts;

pub use capacity_gap::{
    CapacityGap, GapCurve, GapPoint, Optimum, TStarFit, TStarScaling, paired_gains,
};
pub(crate) use capacity_gap::{
    LawOptimum, Quadratic, fitted_losses, gap_curve, judge_optimum, levels, near_best_phrase,
};
pub(crate) use data::Support;
pub use data::{ColumnMap, DataPoint, SupervisedSource, read_csv};
pub use error::FitError;

pub use estimate::{Fit, FitOptions, fit};

pub use fitter::{Optimiser, minimize_grid};
pub use grid::StartGrid;
pub use laws::{Busbridge, Chinchilla, DistillLaw, Law, LawKind};

pub use objective::value;

pub use recommend::{RecommendQuery, Recommendation, recommend_from_fits, recommend_published};
pub use released::ReleasedCheck;

pub use store::{
    FitRecord, FitSummary, SCOPE_CAPACITY_GAP, SCOPE_DISTILL, SCOPE_SUPERVISED, StoredFit, gap_key,
    save_fits, stored_fits,
};
pub(crate) use store::{SCOPE_SUMMARY, current_call_floor};
pub use sweep::{
    FinishedRun, Role, Skipped, SweepFitOptions, SweepFits, TunedRate, add_failed_candidates,
    config_key, finished_runs, fit_sweep, nats_per_bpb, tuned_rates,
};

pub use teacher_budget::BudgetComparison;
#[cfg(test)]
pub(crate) use teacher_budget::{BudgetOptimum, BudgetVerdict};

pub use triage::{
    Beyond, RankedTeacher, RankingCheck, TriageError, TriageTarget, check_ranking, rank, spearman,
};
