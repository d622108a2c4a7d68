//! The report's figures, one module each behind the [`Figure`] trait; [`all`] lists them in
//! report order, each either ready to draw or skipped with the reason (what is missing).

mod agreement;
mod capacity_gap;
mod distill_gain;
mod isoflop;
mod optimal_teacher;
mod similarity;
mod supervised_fits;
mod training_curves;

use super::canvas::Area;
use super::data::ReportData;
use super::error::ReportError;

pub(crate) use agreement::Agreement;
pub use capacity_gap::CapacityGap;
pub(crate) use distill_gain::DistillGain;
pub(crate) use isoflop::IsoFlop;
pub(crate) use optimal_teacher::OptimalTeacher;
pub(crate) use similarity::SimilarityFigure;
pub(crate) use supervised_fits::SupervisedFits;
pub(crate) use training_curves::TrainingCurves;

/// One figure of the report.
pub trait Figure {
    /// File stem (`capacity_gap` → `capacity_gap.png`, `capacity_gap.svg`).
    fn name(&self) -> &'static str;
    /// A short title for the report page.
    fn title(&self) -> &'static str;
    /// What the figure shows and what is missing from it, for the report page.
    fn caption(&self) -> String;
    /// Size in inches (drawn at 300 dpi).
    fn size_in(&self) -> (f64, f64) {
        (6.0, 4.0)
    }
    /// Draws the figure on a white `area` of [`Figure::size_in`] at 300 dpi.
    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError>;
}

/// A figure of the report: ready to draw, or skipped because its data is missing.
pub enum Planned<'a> {
    /// Ready to draw.
    Draw(Box<dyn Figure + 'a>),
    /// Nothing to draw yet.
    Skip {
        /// File stem.
        name: &'static str,
        /// Title.
        title: &'static str,
        /// What is missing.
        reason: String,
    },
}

fn plan<'a, F: Figure + 'a>(
    name: &'static str,
    title: &'static str,
    built: Result<F, String>,
) -> Planned<'a> {
    match built {
        Ok(f) => Planned::Draw(Box::new(f)),
        Err(reason) => Planned::Skip {
            name,
            title,
            reason,
        },
    }
}

/// Every figure of the report, in order.
pub fn all(data: &ReportData) -> Vec<Planned<'_>> {
    vec![
        plan(
            "training_curves",
            TrainingCurves::TITLE,
            TrainingCurves::build(data),
        ),
        plan(
            "supervised_fits",
            SupervisedFits::TITLE,
            SupervisedFits::build(data),
        ),
        plan("capacity_gap", CapacityGap::TITLE, CapacityGap::build(data)),
        plan(
            "optimal_teacher",
            OptimalTeacher::TITLE,
            OptimalTeacher::build(data),
        ),
        plan("distill_gain", DistillGain::TITLE, DistillGain::build(data)),
        plan("agreement", Agreement::TITLE, Agreement::build(data)),
        plan(
            "similarity",
            SimilarityFigure::TITLE,
            SimilarityFigure::build(data),
        ),
        plan("isoflop", IsoFlop::TITLE, IsoFlop::build(data)),
    ]
}
