//! The capacity gap: student loss against teacher size, one panel per student size and budget,
//! one series per distillation config. Each teacher's students are drawn as their mean over
//! seeds (with the range and each seed faint); the no-teacher baseline is a dashed line at its
//! seed mean (with its range shaded). With a fit: the fitted curve, and T* with its interval
//! only where the data support an interior optimum; otherwise the panel says "edge of grid"
//! with the direction to extend it, or why the optimum is not supported.

use super::Figure;
use crate::report::canvas::Area;
use crate::report::data::{CapacityGapView, GapVerdict, ReportData};
use crate::report::error::ReportError;
use crate::report::numbers::si;
use crate::report::style::{
    self, Axis, INK, LegendEntry, LineKind, MUTED, Marker, TickFormat, color, faint, panel,
    replicates, with_legend,
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

    fn views(&self) -> impl Iterator<Item = &&'a CapacityGapView> {
        self.panels.iter().flatten()
    }

    fn fitted(&self) -> bool {
        self.views()
            .any(|v| (v.fitted.is_some() && v.verdict.is_none()) || v.t_star.is_some())
    }

    fn judged(&self) -> bool {
        self.views().any(|v| v.verdict.is_some())
    }

    fn seeded(&self) -> bool {
        self.views()
            .any(|v| v.seeds() > 1 || v.baseline_losses.len() > 1)
    }

    fn config_index(&self, config: &str) -> usize {
        self.configs.iter().position(|c| c == config).unwrap_or(0)
    }

    fn cols(&self) -> usize {
        if self.panels.len() > 1 { 2 } else { 1 }
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
        if self.seeded() {
            c += " With several seeds, each marker is the mean over seeds, the bar their range, \
                   and the faint dots the seeds themselves; the baseline is its seed mean, its \
                   range shaded grey.";
        }
        if self.fitted() || self.judged() {
            c += " Solid lines: the fitted curve, drawn only where it supports an optimum: a \
                   vertical line and shaded band mark the optimal teacher T* and its bootstrap \
                   interval where the best measured teacher is inside the grid and inside the \
                   interval, and the curve follows the points there. Elsewhere dashed lines \
                   join the measured means and the panel says \"edge of grid\" (the arrow points \
                   where to extend the grid) or that the fitted optimum is not supported.";
        } else {
            c += " Thin dashed lines join the measured means. No capacity-gap fit yet (run \
                   `pdsweep fit`): T* is not located beyond the best teacher on the grid.";
        }
        c
    }

    fn size_in(&self) -> (f64, f64) {
        let rows = self.panels.len().div_ceil(self.cols());
        (style::WIDTH_IN, style::height_in(rows))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let multi = self.configs.len() > 1 || !self.configs[0].is_empty();
        let mut entries: Vec<LegendEntry> = Vec::new();
        for (i, c) in self.configs.iter().enumerate() {
            let label = if multi {
                c.clone()
            } else if self.seeded() {
                // Panels may have different seed counts (seeds added for one size alone).
                "distilled (seed mean)".into()
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
        if self.seeded() {
            entries.push(LegendEntry {
                label: "single seeds".into(),
                color: faint(color(0)),
                line: LineKind::None,
                marker: Some((Marker::Circle, true)),
            });
        }
        entries.push(LegendEntry::line(
            "no teacher (baseline)",
            INK,
            LineKind::Dashed,
        ));
        if self.views().any(|v| baseline_range(v).is_some()) {
            entries.push(LegendEntry::line(
                "baseline seed range",
                MUTED,
                LineKind::Band,
            ));
        }
        if self.views().any(|v| v.t_star.is_some()) {
            entries.push(LegendEntry::line(
                "T* and interval",
                color(0),
                LineKind::Band,
            ));
        }
        let plot_area = with_legend(area, &entries, 1.9)?;
        let areas = style::grid(&plot_area, self.panels.len(), self.cols());
        for (views, area) in self.panels.iter().zip(&areas) {
            self.draw_panel(views, area)?;
        }
        Ok(())
    }
}

impl CapacityGap<'_> {
    fn draw_panel(&self, views: &[&CapacityGapView], area: &Area<'_>) -> Result<(), ReportError> {
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
        losses.extend(views.iter().flat_map(|v| v.baseline_losses.iter().copied()));
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
            "student {}, {} tokens",
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
        // One baseline per panel (same student size and budget): its seed mean and range.
        if let Some(v) = views.iter().find(|v| v.baseline_loss.is_some()) {
            if let Some((lo, hi)) = baseline_range(v) {
                let span = plot.x.lo..plot.x.hi;
                plot.band(&[(span.start, lo, hi), (span.end, lo, hi)], MUTED)?;
            }
            if let Some(b) = v.baseline_loss {
                plot.hline(b, INK, LineKind::Dashed)?;
            }
        }
        for v in views {
            let i = self.config_index(&v.config);
            let pts: Vec<(f64, f64)> = v
                .points
                .iter()
                .map(|p| (p.teacher_n, p.student_loss))
                .collect();
            let reps = replicates(&pts);
            // The fitted curve only where it supports an optimum; otherwise the means joined.
            match (&v.fitted, v.verdict.is_none()) {
                (Some(curve), true) => {
                    plot.line(curve, color(i), LineKind::Solid, style::size::LINE)?
                }
                _ => {
                    let means: Vec<(f64, f64)> = reps.iter().map(|r| (r.x, r.mean)).collect();
                    plot.line(&means, color(i), LineKind::Dashed, 1.0)?;
                }
            }
            plot.replicates(&reps, color(i), Marker::nth(i), style::filled(i))?;
            // The verdict at the top of the panel, above the best measured teacher.
            let top = plot.y.hi;
            let row = 8.0 + 11.0 * i as f64;
            match &v.verdict {
                Some(GapVerdict::Edge { at, edge, .. }) => {
                    let arrow = if edge == "largest" {
                        "edge of grid: extend →"
                    } else {
                        "← edge of grid: extend"
                    };
                    plot.text((*at, top), row, arrow, color(i))?;
                }
                Some(GapVerdict::Unsupported { at, .. }) => {
                    plot.text((*at, top), row, "no supported optimum", color(i))?;
                }
                None => {}
            }
        }
        Ok(())
    }
}

/// The lowest and highest loss over a view's baseline seeds, when there are several that differ
/// (the grey band of its panel).
fn baseline_range(v: &CapacityGapView) -> Option<(f64, f64)> {
    if v.baseline_loss.is_none() || v.baseline_losses.len() < 2 {
        return None;
    }
    let (lo, hi) = v
        .baseline_losses
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), l| {
            (a.min(*l), b.max(*l))
        });
    (hi > lo).then_some((lo, hi))
}
