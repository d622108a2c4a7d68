//! The mean and sample standard deviation of repeated runs (seeds), shared by the fits.

/// The arithmetic mean, or `None` of nothing.
pub(super) fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The sample standard deviation (n − 1), from two values on.
pub(super) fn sample_sd(v: &[f64]) -> Option<f64> {
    let m = mean(v)?;
    (v.len() >= 2)
        .then(|| (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt())
}
