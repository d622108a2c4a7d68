//! Supervised fits: held-out loss of teachers and baselines against N for each D and against
//! D for each N, with the fitted law drawn through them and its residuals when fitted.

use super::Figure;
use crate::plan::RunKind;
use crate::report::canvas::Area;
use crate::report::data::{LawView, ReportData, SupervisedPoint, sig};
use crate::report::error::ReportError;
use crate::report::numbers::si;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, MUTED, Marker, TickFormat, ordered_color, panel, replicates,
    with_legend,
};

/// The supervised law and its data.
pub(crate) struct SupervisedFits<'a> {
    points: &'a [SupervisedPoint],
    law: Option<&'a LawView>,
}

impl<'a> SupervisedFits<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "Supervised scaling (teachers and baselines)";

    /// The finished supervised runs; an error when there are none.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let points = data.fits.supervised.points.as_slice();
        if points.is_empty() {
            return Err("no teacher or baseline has finished yet".into());
        }
        Ok(SupervisedFits {
            points,
            law: data.fits.supervised.law.as_ref(),
        })
    }

    /// Distinct values of `key`, sorted.
    fn distinct(&self, key: impl Fn(&SupervisedPoint) -> f64) -> Vec<f64> {
        let mut v: Vec<f64> = self.points.iter().map(key).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    }

    fn law_name(&self) -> String {
        match self.law.map(|l| l.law.as_str()) {
            Some("chinchilla") => "fitted law: E + A/N^α + B/D^β".into(),
            Some("busbridge") => "fitted law: E + (A/N^α + B/D^β)^γ".into(),
            Some(other) => format!("fitted law ({other})"),
            None => String::new(),
        }
    }
}

/// One of the two top panels: loss against N (one series per D) or against D (per N).
struct LawPanel<'a> {
    title: &'a str,
    /// Whether N is on the horizontal axis.
    vs_n: bool,
    /// The values that make the series (D for `vs_n`, else N).
    groups: &'a [f64],
    x_axis: &'a Axis,
    /// Where the law's curve is sampled along the horizontal axis.
    samples: &'a [f64],
}

/// Log-spaced samples from `lo` to `hi`.
fn logspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..n)
        .map(|i| (a + (b - a) * i as f64 / (n - 1).max(1) as f64).exp())
        .collect()
}

fn marker_of(kind: RunKind) -> Marker {
    if kind == RunKind::Teacher {
        Marker::Circle
    } else {
        Marker::Square
    }
}

impl Figure for SupervisedFits<'_> {
    fn name(&self) -> &'static str {
        "supervised_fits"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        let mut c = String::from(
            "Final held-out loss of the runs trained without a teacher (teachers: circles; \
             baselines: squares) against non-embedding parameters N, one colour per token \
             budget D (left), and against D, one colour per N (right).",
        );
        match self.law {
            Some(law) => {
                c += &format!(
                    " Lines: the {} evaluated at each D (left) and N (right). Bottom: residuals, \
                     100·(log L − log L̂) in percent.",
                    self.law_name().trim_start_matches("fitted law: ")
                );
                if let Some(e) = law.extrapolation_error {
                    c += &format!(
                        " Predicting the largest run from the others is off by {:.1}%.",
                        100.0 * e
                    );
                }
            }
            None => c += " No law fitted yet: run `pdsweep fit`.",
        }
        c += " A law's line is solid where that budget (or size) has runs and dashed beyond \
               them, where it extrapolates. Repeated runs of one size and budget (seeds) are \
               drawn as their mean with their range, each seed faint.";
        c
    }

    fn size_in(&self) -> (f64, f64) {
        let rows = if self.law.is_some() { 2 } else { 1 };
        (
            style::WIDTH_IN,
            style::height_in(rows) + if self.law.is_some() { 0.25 } else { 0.0 },
        )
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let ds = self.distinct(|p| p.d);
        let ns = self.distinct(|p| p.n);
        let rows = if self.law.is_some() { 2 } else { 1 };
        // With a law, a strip at the bottom names it and its parameters.
        let (panels_area, note_area) = if self.law.is_some() {
            let (_, h) = area.dim_in_pixel();
            let (a, b) = area.split_vertically(h as i32 - style::px(16.0) as i32);
            (a, Some(b))
        } else {
            (area.clone(), None)
        };
        let areas = style::grid(&panels_area, 2 * rows, 2);
        let n_axis = Axis::log(
            "Non-embedding parameters N",
            ns.iter().copied(),
            TickFormat::Si,
        );
        let d_axis = Axis::log("Training tokens D", ds.iter().copied(), TickFormat::Si);
        let curve_n = logspace(n_axis.lo, n_axis.hi, 60);
        let curve_d = logspace(d_axis.lo, d_axis.hi, 60);
        let y_axis = self.loss_axis(&ds, &ns, &curve_n, &curve_d);
        let panels = [
            LawPanel {
                title: "Loss vs N, per budget D",
                vs_n: true,
                groups: &ds,
                x_axis: &n_axis,
                samples: &curve_n,
            },
            LawPanel {
                title: "Loss vs D, per size N",
                vs_n: false,
                groups: &ns,
                x_axis: &d_axis,
                samples: &curve_d,
            },
        ];
        for (p, area) in panels.iter().zip(&areas) {
            self.draw_law_panel(area, p, &y_axis)?;
        }
        let Some(law) = self.law else {
            return Ok(());
        };
        for (p, area) in panels.iter().zip(areas.iter().skip(2)) {
            self.draw_residual_panel(area, law, p)?;
        }
        if let Some(note_area) = note_area {
            let params: Vec<String> = law
                .params
                .iter()
                .map(|(k, v)| format!("{k} = {}", sig(*v)))
                .collect();
            let caveat = if law.thin { " (UNDER-DETERMINED)" } else { "" };
            style::note(
                &note_area,
                &format!("{}; {}{caveat}", self.law_name(), params.join(", ")),
            )?;
        }
        Ok(())
    }
}

impl SupervisedFits<'_> {
    /// The loss axis, spanning the runs and the law's curves over both panels.
    fn loss_axis(&self, ds: &[f64], ns: &[f64], curve_n: &[f64], curve_d: &[f64]) -> Axis {
        let mut losses: Vec<f64> = self.points.iter().map(|p| p.loss).collect();
        if let Some(law) = self.law {
            for &d in ds {
                losses.extend(curve_n.iter().filter_map(|&n| law.predict(n, d)));
            }
            for &n in ns {
                losses.extend(curve_d.iter().filter_map(|&d| law.predict(n, d)));
            }
        }
        Axis::linear("Held-out loss (nats/token)", losses, TickFormat::Plain)
    }

    /// The legend of a top panel: one colour per group, the two markers, the dashed
    /// extrapolation when a law is drawn.
    fn legend(&self, p: &LawPanel) -> Vec<LegendEntry> {
        let line = if self.law.is_some() {
            LineKind::Solid
        } else {
            LineKind::None
        };
        let mut entries: Vec<LegendEntry> = p
            .groups
            .iter()
            .enumerate()
            .map(|(k, g)| LegendEntry {
                label: format!("{} = {}", if p.vs_n { "D" } else { "N" }, si(*g)),
                color: ordered_color(k, p.groups.len()),
                line,
                marker: Some((Marker::Circle, true)),
            })
            .collect();
        for (label, marker) in [("teacher", Marker::Circle), ("baseline", Marker::Square)] {
            let mut entry = LegendEntry::series(label, MUTED, Some(marker));
            entry.line = LineKind::None;
            entries.push(entry);
        }
        if self.law.is_some() {
            entries.push(LegendEntry::line("extrapolated", MUTED, LineKind::Dashed));
        }
        entries
    }

    /// The position of a run along a panel's horizontal axis, and the group it belongs to.
    fn x_and_group(p: &LawPanel, point: &SupervisedPoint) -> (f64, f64) {
        if p.vs_n {
            (point.n, point.d)
        } else {
            (point.d, point.n)
        }
    }

    /// A top panel: each group's runs (mean and range of seeds) and the law through them.
    fn draw_law_panel(
        &self,
        area: &Area<'_>,
        p: &LawPanel,
        y_axis: &Axis,
    ) -> Result<(), ReportError> {
        let plot_area = with_legend(area, &self.legend(p), 1.3)?;
        let mut plot = panel(&plot_area, p.title, p.x_axis.clone(), y_axis.clone())?;
        for (k, g) in p.groups.iter().enumerate() {
            let col = ordered_color(k, p.groups.len());
            if let Some(law) = self.law {
                let (curve, extent) = self.law_curve(law, p, *g);
                plot.fit_line(&curve, extent, col, 1.2)?;
            }
            for kind in [RunKind::Teacher, RunKind::Baseline] {
                let pts: Vec<(f64, f64)> = self
                    .points
                    .iter()
                    .filter(|pt| pt.kind == kind && Self::x_and_group(p, pt).1 == *g)
                    .map(|pt| (Self::x_and_group(p, pt).0, pt.loss))
                    .collect();
                plot.replicates(&replicates(&pts), col, marker_of(kind), true)?;
            }
        }
        Ok(())
    }

    /// The law's curve for group `g` of a panel, sampled along its axis and through the group's
    /// own extent (where the solid line starts and stops), with that extent.
    fn law_curve(&self, law: &LawView, p: &LawPanel, g: f64) -> (Vec<(f64, f64)>, (f64, f64)) {
        let at = |x: f64| {
            let (n, d) = if p.vs_n { (x, g) } else { (g, x) };
            law.predict(n, d)
        };
        let xs: Vec<f64> = self
            .points
            .iter()
            .filter(|pt| Self::x_and_group(p, pt).1 == g)
            .map(|pt| Self::x_and_group(p, pt).0)
            .collect();
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut curve: Vec<(f64, f64)> = p
            .samples
            .iter()
            .chain([&lo, &hi])
            .filter_map(|&x| Some((x, at(x)?)))
            .collect();
        curve.sort_by(|a, b| a.0.total_cmp(&b.0));
        (curve, (lo, hi))
    }

    /// A bottom panel: each run's residual against the law, 100·(log L − log L̂) in percent.
    fn draw_residual_panel(
        &self,
        area: &Area<'_>,
        law: &LawView,
        p: &LawPanel,
    ) -> Result<(), ReportError> {
        let residual = |pt: &SupervisedPoint| {
            law.predict(pt.n, pt.d)
                .filter(|l| *l > 0.0)
                .map(|l| 100.0 * (pt.loss.ln() - l.ln()))
        };
        let r_axis = Axis::linear(
            "Residual (%)",
            self.points
                .iter()
                .filter_map(residual)
                .chain([0.0])
                .collect::<Vec<_>>(),
            TickFormat::Plain,
        );
        let entries: Vec<LegendEntry> = p
            .groups
            .iter()
            .enumerate()
            .map(|(k, g)| LegendEntry {
                label: format!("{} = {}", if p.vs_n { "D" } else { "N" }, si(*g)),
                color: ordered_color(k, p.groups.len()),
                line: LineKind::None,
                marker: Some((Marker::Circle, true)),
            })
            .collect();
        let plot_area = with_legend(area, &entries, 1.3)?;
        let title = if p.vs_n {
            "Residuals vs N"
        } else {
            "Residuals vs D"
        };
        let mut plot = panel(&plot_area, title, p.x_axis.clone(), r_axis)?;
        plot.hline(0.0, MUTED, LineKind::Dashed)?;
        for (k, g) in p.groups.iter().enumerate() {
            for kind in [RunKind::Teacher, RunKind::Baseline] {
                let pts: Vec<(f64, f64)> = self
                    .points
                    .iter()
                    .filter(|pt| pt.kind == kind && Self::x_and_group(p, pt).1 == *g)
                    .filter_map(|pt| Some((Self::x_and_group(p, pt).0, residual(pt)?)))
                    .collect();
                plot.replicates(
                    &replicates(&pts),
                    ordered_color(k, p.groups.len()),
                    marker_of(kind),
                    true,
                )?;
            }
        }
        Ok(())
    }
}
