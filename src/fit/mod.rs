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

pub use bootstrap::{percentile_interval, quantile, resample_counts};
pub use capacity_gap::{
    CapacityGap, GapCurve, GapPoint, LawOptimum, Level, Optimum, Quadratic, TSTAR_MIN_SIZES,
    TStarFit, TStarScaling, fitted_losses, gap_curve, judge_optimum, levels, near_best_phrase,
    optimal_teacher_loss, paired_gains, seed_resample, size_for_loss, tstar_scaling,
};
pub use data::{ColumnMap, DataPoint, SupervisedSource, Support, check_fittable, read_csv, roles};
pub use error::FitError;
pub use estimate::{Extrapolation, Fit, FitOptions, Residual, UNIDENTIFIED_RATIO, fit};
pub use fitter::{GridFit, LocalFit, Optimiser, minimize, minimize_grid};
pub use grid::StartGrid;
pub use laws::{Busbridge, Chinchilla, DistillLaw, Law, LawKind, MAX_THETA, Point};
pub use objective::{huber, value, value_and_grad};
pub use recommend::{RecommendQuery, Recommendation, recommend_from_fits, recommend_published};
pub use released::{BestTrained, HeldOutStudents, ReleasedCheck, released_checks};
pub use store::{
    FitRecord, FitSummary, SCOPE_CAPACITY_GAP, SCOPE_DISTILL, SCOPE_SUMMARY, SCOPE_SUPERVISED,
    SCOPE_TSTAR, StoredFit, current_call_floor, gap_key, save_fits, stored_fits, tstar_key,
};
pub use sweep::{
    FinishedRun, Role, Skipped, SweepFitOptions, SweepFits, TunedRate, add_failed_candidates,
    config_key, finished_runs, fit_sweep, law_optimum, nats_per_bpb, tuned_baselines, tuned_rates,
};
pub use teacher_budget::{BudgetComparison, BudgetOptimum, BudgetVerdict};
pub use triage::{
    Beyond, RankedTeacher, RankingCheck, TriageError, TriageTarget, check_ranking, rank, spearman,
};
