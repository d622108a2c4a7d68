//! `pdsweep suggest`'s engine: from a sweep's capacity-gap fits, the next runs that most shrink
//! the T* intervals per hour of compute, as edits of the sweep file. Candidates are teacher
//! sizes beyond the grid's edge where the best teacher sits at it (no interval exists until the
//! grid brackets the optimum: these come first), teacher sizes between the measured optimum and
//! its neighbours, one more seed (for every student, or for one `[[students.models]]` entry
//! where the file lists them: replicates where the noise is widest), and a longer student budget where students have not left
//! the unigram plateau or train too few steps ([`Unconverged`]: taken first, like an edge of the
//! grid, since a curve measured there says when runs leave the plateau, not where the capacity
//! gap lies). Each candidate is priced by planning the edited sweep
//! (the new runs' ids are those the current plan lacks; seconds from the calibrated cost model)
//! and valued by simulation (`expected`): the median T* interval of sweeps drawn from the
//! fitted curve with the measured noise, before and after. The best value per hour is taken
//! greedily until the budget is spent.
//!
//! `prediction` pre-registers a confirmation round (`suggest --confirm SEEDS --predict FILE`)
//! and checks it (`fit --check FILE`).

mod edit;
mod engine;
mod error;
mod expected;
mod prediction;
mod student;

pub use edit::{Edit, apply};
pub use engine::{Budget, Goal, GroupOutlook, Step, Suggestion, Unconverged, suggest};
pub use error::SuggestError;

pub use expected::expected_width;
pub(crate) use prediction::PREDICTION_FORMAT;
pub use prediction::{
    CheckError, GroupCheck, Prediction, Provenance, check, predict, read_prediction,
};

pub use student::{
    Extrapolated, QuantityCheck, StudentPrediction, check_student, predict_student,
    read_student_prediction,
};
