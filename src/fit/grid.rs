//! Grids of L-BFGS starting points in a law's θ space: the cartesian product of one list of
//! values per θ coordinate, with a small text syntax to override axes.

use serde::{Deserialize, Serialize};

use super::error::FitError;

/// Starting points: every combination of one value per axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartGrid {
    /// Axis names, in θ order.
    pub names: Vec<String>,
    /// Values of each axis.
    pub axes: Vec<Vec<f64>>,
}

impl StartGrid {
    /// A grid over the θ coordinates `names`.
    pub fn new(names: &[&str], axes: Vec<Vec<f64>>) -> StartGrid {
        StartGrid {
            names: names.iter().map(|s| s.to_string()).collect(),
            axes,
        }
    }

    /// Number of starts.
    pub fn len(&self) -> usize {
        self.axes.iter().map(Vec::len).product()
    }

    /// Whether the grid has no starts.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th start (the last axis varies fastest).
    pub fn start(&self, mut i: usize) -> Vec<f64> {
        let mut theta = vec![0.0; self.axes.len()];
        for (k, axis) in self.axes.iter().enumerate().rev() {
            theta[k] = axis[i % axis.len()];
            i /= axis.len();
        }
        theta
    }

    /// Replaces axes from `spec`: `NAME=START:STOP:STEP` or `NAME=V1,V2,...`, entries separated by
    /// `;`, e.g. `alpha=0:2:0.5;e=-1,0,1`.
    ///
    /// Names are the θ coordinates (`a`, `b`, `e`, `alpha`, `beta`, `gamma`, ...).
    pub fn with_overrides(mut self, spec: &str) -> Result<StartGrid, FitError> {
        for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason: String| {
                FitError::Invalid(format!(
                    "cannot read `--grid` entry `{entry}`: {reason}\n\nhint: write `NAME=START:STOP:STEP` or `NAME=V1,V2,...` separated by `;`; names: {}",
                    self.names.join(", ")
                ))
            };
            let (name, values) = entry.split_once('=').ok_or_else(|| bad("no `=`".into()))?;
            let name = name.trim();
            let k = self
                .names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| bad(format!("unknown axis `{name}`")))?;
            let number = |s: &str| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| bad(format!("`{}` is not a number", s.trim())))
            };
            let axis = if values.contains(':') {
                let parts: Vec<&str> = values.split(':').collect();
                if parts.len() != 3 {
                    return Err(bad("a range needs START:STOP:STEP".into()));
                }
                let (start, stop, step) = (number(parts[0])?, number(parts[1])?, number(parts[2])?);
                if step <= 0.0 || stop < start || (stop - start) / step > 1000.0 {
                    return Err(bad(
                        "the step must be positive and give at most 1000 values".into(),
                    ));
                }
                let n = ((stop - start) / step + 1e-9).floor() as usize;
                (0..=n).map(|i| start + step * i as f64).collect()
            } else {
                values
                    .split(',')
                    .map(number)
                    .collect::<Result<Vec<_>, _>>()?
            };
            if axis.is_empty() {
                return Err(bad("no values".into()));
            }
            self.axes[k] = axis;
        }
        if self.len() > 1_000_000 {
            return Err(FitError::Invalid(format!(
                "the start grid has {} starts; at most 1,000,000\n\nhint: use fewer values in `--grid`",
                self.len()
            )));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use crate::fit::LawKind;

    #[test]
    fn chinchilla_grid_has_4500_starts_in_order() {
        let g = LawKind::Chinchilla.default_grid();
        assert_eq!(g.len(), 4500);
        assert_eq!(g.start(0), vec![0.0, 0.0, -1.0, 0.0, 0.0]);
        assert_eq!(g.start(4499), vec![25.0, 25.0, 1.0, 2.0, 2.0]);
    }

    #[test]
    fn overrides_replace_axes_and_reject_nonsense() {
        let g = LawKind::Chinchilla
            .default_grid()
            .with_overrides("alpha=0:1:0.5; e = -1,1")
            .unwrap();
        assert_eq!(g.axes[3], vec![0.0, 0.5, 1.0]);
        assert_eq!(g.axes[2], vec![-1.0, 1.0]);
        for bad in ["zeta=1", "alpha=1:0:1", "alpha=x", "alpha"] {
            assert!(
                LawKind::Chinchilla
                    .default_grid()
                    .with_overrides(bad)
                    .is_err(),
                "{bad}"
            );
        }
    }
}
