//! The capacity gap: student loss against teacher size, one panel per student size and budget,
//! one series per distillation config, with the no-teacher baseline as a reference line and,
//! when fitted, the fitted curve and the optimal teacher T* with its interval.

use super::Figure;
use crate::report::data::{CapacityGapView, ReportData, mean_by};
use crate::report::error::ReportError;
use crate::report::render::Area;
use crate::report::style::{
    self, Axis, INK, LegendEntry, LineKind, Marker, TickFormat, color, panel, si, with_legend,
};

/// Student loss against teacher size.
pub struct CapacityGap<'a> {
    /// Panels: views sharing a student size and budget.
    panels: Vec<Vec<&'a CapacityGapView>>,
    /// Distillation configs, in legend order.
    configs: Vec<String>,
}

impl<'a> CapacityGap<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "Capacity gap: student loss vs teacher size";

    /// The capacity-gap series; an error when no student has finished.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let views = &data.fits.capacity_gap;
        if views.is_empty() {
            return Err("no distilled student has finished yet".into());
        }
        let mut panels: Vec<Vec<&CapacityGapView>> = Vec::new();
        for v in views {
            match panels
                .iter_mut()
                .find(|p| p[0].student_n == v.student_n && p[0].budget == v.budget)
            {
                Some(p) => p.push(v),
                None => panels.push(vec![v]),
            }
        }
        panels.sort_by(|a, b| {
            a[0].student_n
                .total_cmp(&b[0].student_n)
                .then(a[0].budget.total_cmp(&b[0].budget))
        });
        let mut configs: Vec<String> = views.iter().map(|v| v.config.clone()).collect();
        configs.sort();
        configs.dedup();
        Ok(CapacityGap { panels, configs })
    }

    fn fitted(&self) -> bool {
        self.panels
            .iter()
            .flatten()
            .any(|v| v.fitted.is_some() || v.t_star.is_some())
    }

    fn config_index(&self, config: &str) -> usize {
        self.configs.iter().position(|c| c == config).unwrap_or(0)
    }
}

impl Figure for CapacityGap<'_> {
    fn name(&self) -> &'static str {
        "capacity_gap"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        let mut c = String::from(
            "Final held-out loss of each distilled student against its teacher's non-embedding \
             parameters, one panel per student size and token budget; the dashed black line is \
             the same student trained without a teacher. Below that line distillation helped.",
        );
        if self.fitted() {
            c += " Solid lines: the fitted curve; the vertical line and shaded band mark the \
                   optimal teacher T* and its bootstrap interval.";
        } else {
            c += " Thin dashed lines join the measured points. No capacity-gap fit yet (run \
                   `pdsweep fit`): T* is not located beyond the best teacher on the grid.";
        }
        c
    }

    fn size_in(&self) -> (f64, f64) {
        let cols = if self.panels.len() > 1 { 2 } else { 1 };
        let rows = self.panels.len().div_ceil(cols);
        (2.0 + 3.6 * cols as f64, style::rows_height(rows, 3.5))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let multi = self.configs.len() > 1 || !self.configs[0].is_empty();
        let mut entries: Vec<LegendEntry> = Vec::new();
        for (i, c) in self.configs.iter().enumerate() {
            let label = if multi {
                c.clone()
            } else {
                "distilled student".into()
            };
            entries.push(LegendEntry {
                label,
                color: color(i),
                line: if self.fitted() {
                    LineKind::Solid
                } else {
                    LineKind::Dashed
                },
                marker: Some((Marker::nth(i), style::filled(i))),
            });
        }
        entries.push(LegendEntry::line(
            "no teacher (baseline)",
            INK,
            LineKind::Dashed,
        ));
        if self.fitted() {
            entries.push(LegendEntry::line(
                "T* and interval",
                color(0),
                LineKind::Band,
            ));
        }
        let plot_area = with_legend(area, &entries, 2.0)?;
        let cols = if self.panels.len() > 1 { 2 } else { 1 };
        let areas = style::grid(&plot_area, self.panels.len(), cols);
        for (views, area) in self.panels.iter().zip(&areas) {
            let first = views[0];
            let teachers = views
                .iter()
                .flat_map(|v| v.points.iter().map(|p| p.teacher_n));
            let stars = views
                .iter()
                .filter_map(|v| v.t_star)
                .flat_map(|t| [t.lo, t.hi]);
            let x = Axis::log(
                "Teacher non-embedding parameters",
                teachers.chain(stars).collect::<Vec<_>>(),
                TickFormat::Si,
            );
            let mut losses: Vec<f64> = views
                .iter()
                .flat_map(|v| v.points.iter().map(|p| p.student_loss))
                .collect();
            losses.extend(views.iter().filter_map(|v| v.baseline_loss));
            losses.extend(
                views
                    .iter()
                    .filter_map(|v| v.fitted.as_ref())
                    .flatten()
                    .filter(|(t, _)| *t >= x.lo && *t <= x.hi)
                    .map(|p| p.1),
            );
            let y = Axis::linear(
                "Student held-out loss (nats/token)",
                losses,
                TickFormat::Plain,
            );
            let title = format!(
                "{} student (N = {}), {} tokens",
                first.student,
                si(first.student_n),
                si(first.budget)
            );
            let mut plot = panel(area, &title, x, y)?;
            for v in views {
                let i = self.config_index(&v.config);
                if let Some(t) = v.t_star {
                    plot.vband(t.lo, t.hi, color(i))?;
                    plot.vline(t.value, color(i), LineKind::Solid)?;
                }
            }
            // One baseline per panel (same student size and budget).
            if let Some(b) = views.iter().find_map(|v| v.baseline_loss) {
                plot.hline(b, INK, LineKind::Dashed)?;
            }
            for v in views {
                let i = self.config_index(&v.config);
                match &v.fitted {
                    Some(curve) => {
                        plot.line(curve, color(i), LineKind::Solid, style::size::LINE)?
                    }
                    None => {
                        let means = mean_by(&v.points, |p| (p.teacher_n, p.student_loss));
                        plot.line(&means, color(i), LineKind::Dashed, 1.0)?;
                    }
                }
                let pts: Vec<(f64, f64)> = v
                    .points
                    .iter()
                    .map(|p| (p.teacher_n, p.student_loss))
                    .collect();
                plot.markers(&pts, color(i), Marker::nth(i), style::filled(i))?;
            }
        }
        Ok(())
    }
}
