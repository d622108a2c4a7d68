//! The integration point between stored fits (`pdsweep fit`, the `fits` table) and the
//! report's views: the one place that turns fitted laws into [`FitViews`] fields.

use super::data::ReportData;
use super::error::ReportError;
use crate::store::SweepDb;

/// Fills the fitted pieces of `data.fits` (laws, fitted capacity-gap curves, T* with intervals,
/// T*(S) fits, the recommendation) from the fits stored in `db`.
///
/// Integration point: the fitting module (`src/fit/`) is not part of this build yet, so there
/// is nothing to convert; a database that already has a `fits` table is said to have fits this
/// report cannot draw yet. When `src/fit/` lands, read its stored results here and fill
/// `data.fits.supervised.law`, each `capacity_gap[i].fitted` / `t_star`,
/// `optimal_teacher.{points, linear, power, better}` and `recommendation`, setting
/// `data.fits.source` to where they came from.
pub fn attach(db: &SweepDb, data: &mut ReportData) -> Result<(), ReportError> {
    let stored = db.raw_table("fits")?;
    if !stored.rows.is_empty() {
        data.fits.notes.push(format!(
            "the database has {} stored fit(s), but this build of pdsweep cannot draw them yet (see `pdsweep export`)",
            stored.rows.len()
        ));
    }
    Ok(())
}
