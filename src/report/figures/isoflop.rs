//! The isoFLOP view of runs trained without a teacher (teachers and baselines): held-out loss
//! against training compute C = 6·N·D along each run (one line per model, its seeds averaged),
//! and loss against N at fixed compute budgets read off those lines (the budgets are named in
//! the legend, so their labels never overlap).

use super::Figure;
use crate::plan::RunKind;
use crate::report::canvas::Area;
use crate::report::data::{Curve, ReportData};
use crate::report::error::ReportError;
use crate::report::numbers::si;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, Marker, TickFormat, faint, ordered_color, panel, replicates,
    size, with_legend,
};

/// Loss against compute, and against N per compute budget.
pub(crate) struct IsoFlop<'a> {
    /// One series per model (kind and size), its seeds together, ordered by size.
    models: Vec<Model<'a>>,
}

/// The seeds of one supervised model.
struct Model<'a> {
    kind: RunKind,
    n: f64,
    curves: Vec<&'a Curve>,
}

impl Model<'_> {
    /// (FLOPs, mean loss over seeds) along the run.
    fn mean(&self) -> Vec<(f64, f64)> {
        let pts: Vec<(f64, f64)> = self.curves.iter().flat_map(|c| in_flops(c)).collect();
        replicates(&pts).iter().map(|r| (r.x, r.mean)).collect()
    }

    fn label(&self) -> String {
        let kind = if self.kind == RunKind::Teacher {
            "teacher"
        } else {
            "baseline"
        };
        let seeds = if self.curves.len() > 1 {
            format!(", {} seeds", self.curves.len())
        } else {
            String::new()
        };
        format!("{} {kind}{seeds}", si(self.n))
    }
}

/// A curve in compute: (FLOPs, loss) for positive token counts.
fn in_flops(c: &Curve) -> Vec<(f64, f64)> {
    c.points
        .iter()
        .filter(|p| p.0 > 0.0)
        .map(|&(t, l)| (6.0 * c.n * t, l))
        .collect()
}

/// The loss of a curve at compute `budget`, interpolated linearly in log-compute; `None`
/// outside the curve.
fn loss_at(curve: &[(f64, f64)], budget: f64) -> Option<f64> {
    curve.windows(2).find_map(|w| {
        let ((c0, l0), (c1, l1)) = (w[0], w[1]);
        if budget >= c0 && budget <= c1 && c1 > c0 {
            let f = (budget.ln() - c0.ln()) / (c1.ln() - c0.ln());
            Some(l0 + f * (l1 - l0))
        } else {
            None
        }
    })
}

impl<'a> IsoFlop<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "IsoFLOP view (teachers and baselines)";

    /// The held-out curves of supervised runs; an error when there are none.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let mut models: Vec<Model<'a>> = Vec::new();
        for c in data
            .curves
            .iter()
            .filter(|c| matches!(c.kind, RunKind::Teacher | RunKind::Baseline))
            .filter(|c| c.points.iter().filter(|p| p.0 > 0.0).count() >= 2)
        {
            match models
                .iter_mut()
                .find(|m| m.kind == c.kind && m.n == c.n && m.curves[0].tokens == c.tokens)
            {
                Some(m) => m.curves.push(c),
                None => models.push(Model {
                    kind: c.kind,
                    n: c.n,
                    curves: vec![c],
                }),
            }
        }
        if models.is_empty() {
            return Err("no teacher or baseline has two held-out evaluations yet".into());
        }
        models.sort_by(|a, b| {
            a.n.total_cmp(&b.n)
                .then((a.kind == RunKind::Baseline).cmp(&(b.kind == RunKind::Baseline)))
        });
        Ok(IsoFlop { models })
    }

    /// Up to four compute budgets, log-spaced, each reached by at least two models.
    fn budgets(&self) -> Vec<f64> {
        let curves: Vec<Vec<(f64, f64)>> = self.models.iter().map(Model::mean).collect();
        let lo = curves
            .iter()
            .filter_map(|c| c.first())
            .map(|p| p.0)
            .fold(f64::INFINITY, f64::min);
        let hi = curves
            .iter()
            .filter_map(|c| c.last())
            .map(|p| p.0)
            .fold(0.0, f64::max);
        if !(lo > 0.0 && hi > lo) {
            return Vec::new();
        }
        let mut candidates = Vec::new();
        for e in (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32) {
            for m in [1.0, 2.0, 5.0] {
                let c = m * 10f64.powi(e);
                let covered = curves.iter().filter(|k| loss_at(k, c).is_some()).count();
                if covered >= 2 {
                    candidates.push(c);
                }
            }
        }
        if candidates.len() <= 4 {
            return candidates;
        }
        let step = (candidates.len() - 1) as f64 / 3.0;
        (0..4)
            .map(|i| candidates[(i as f64 * step).round() as usize])
            .collect()
    }
}

impl Figure for IsoFlop<'_> {
    fn name(&self) -> &'static str {
        "isoflop"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        "Left: held-out loss of every model trained without a teacher against training compute          C = 6·N·D at each evaluation, one line per model (colour by non-embedding size N,          darker = smaller; with several seeds the line is their mean and each seed is drawn          faint). Right: loss against N at fixed compute budgets (named in the legend),          interpolated along those lines (in log C). Intermediate evaluations of a run whose          learning rate has not decayed yet overstate what a shorter run would reach, so the          right panel is a view, not a fit."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (style::WIDTH_IN, style::ONE_ROW_IN)
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let n = self.models.len();
        let means: Vec<Vec<(f64, f64)>> = self.models.iter().map(Model::mean).collect();
        let budgets = self.budgets();
        let mut entries: Vec<LegendEntry> = self
            .models
            .iter()
            .enumerate()
            .map(|(i, m)| LegendEntry::series(m.label(), ordered_color(i, n), Some(Marker::nth(i))))
            .collect();
        for (k, b) in budgets.iter().enumerate() {
            entries.push(LegendEntry::series(
                format!("C = {} FLOPs", style::power_of_ten(*b)),
                style::budget_color(k, budgets.len()),
                Some(Marker::Circle),
            ));
        }
        let plot_area = with_legend(area, &entries, 2.0)?;
        let panels = style::grid(&plot_area, 2, 2);
        let all = || {
            self.models
                .iter()
                .flat_map(|m| m.curves.iter())
                .flat_map(|c| in_flops(c))
        };
        let y = Axis::linear(
            "Held-out loss (nats/token)",
            all().map(|p| p.1).collect::<Vec<_>>(),
            TickFormat::Plain,
        );
        let x = Axis::log(
            "Training compute C = 6ND (FLOPs)",
            all().map(|p| p.0).collect::<Vec<_>>(),
            TickFormat::Power,
        );
        let mut plot = panel(&panels[0], "Loss vs compute, per model", x, y.clone())?;
        for (i, (m, mean)) in self.models.iter().zip(&means).enumerate() {
            let c = ordered_color(i, n);
            if m.curves.len() > 1 {
                for curve in &m.curves {
                    plot.line(&in_flops(curve), faint(c), LineKind::Solid, 0.8)?;
                }
            }
            plot.line(mean, c, LineKind::Solid, size::LINE)?;
            plot.markers(mean, c, Marker::nth(i), true)?;
        }
        let x = Axis::log(
            "Non-embedding parameters N",
            self.models.iter().map(|m| m.n).collect::<Vec<_>>(),
            TickFormat::Si,
        );
        let title = if budgets.is_empty() {
            "Loss vs N per budget (no budget reached by two models)"
        } else {
            "Loss vs N at fixed compute"
        };
        let mut plot = panel(&panels[1], title, x, y)?;
        for (k, b) in budgets.iter().enumerate() {
            let pts: Vec<(f64, f64)> = self
                .models
                .iter()
                .zip(&means)
                .filter_map(|(m, curve)| Some((m.n, loss_at(curve, *b)?)))
                .collect();
            let shade = style::budget_color(k, budgets.len());
            plot.line(&pts, shade, LineKind::Solid, 1.2)?;
            plot.markers(&pts, shade, Marker::Circle, true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::loss_at;

    #[test]
    fn loss_at_interpolates_in_log_compute_and_refuses_outside() {
        let curve = [(1e10, 5.0), (1e12, 4.0)];
        let mid = loss_at(&curve, 1e11).unwrap_or(f64::NAN);
        assert!((mid - 4.5).abs() < 1e-12, "{mid}");
        assert_eq!(loss_at(&curve, 1e9), None);
        assert_eq!(loss_at(&curve, 1e13), None);
    }
}
