//! Training curves: held-out loss against tokens seen. Teachers and baselines get a panel each,
//! students one panel per student size; each line is one model (a teacher size, or a student's
//! teacher and settings), ordered by size, its seeds drawn faint behind their mean. A panel
//! carries at most [`style::MAX_SERIES`] lines: more are split across panels.

use super::Figure;
use crate::plan::RunKind;
use crate::report::canvas::Area;
use crate::report::data::{Curve, ReportData, RunState};
use crate::report::error::ReportError;
use crate::report::numbers::si;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, Marker, TickFormat, color, faint, ordered_color, panel,
    replicates, with_legend,
};

/// The seeds of one model: one line (their mean) and its legend label.
#[derive(Clone)]
struct Series<'a> {
    label: String,
    /// The size the series is ordered by (the teacher's for students, else the model's).
    size: f64,
    curves: Vec<&'a Curve>,
}

impl Series<'_> {
    /// (tokens, mean loss) over the seeds at each evaluation.
    fn mean(&self) -> Vec<(f64, f64)> {
        let pts: Vec<(f64, f64)> = self.curves.iter().flat_map(|c| points(c)).collect();
        replicates(&pts).iter().map(|r| (r.x, r.mean)).collect()
    }

    fn legend_label(&self) -> String {
        let mut label = self.label.clone();
        if self.curves.len() > 1 {
            label += &format!(" ({} seeds)", self.curves.len());
        }
        let not_done: Vec<&str> = self
            .curves
            .iter()
            .filter(|c| c.state != RunState::Done)
            .map(|c| c.state.as_str())
            .collect();
        if !not_done.is_empty() {
            label += &format!(" ({})", not_done.join(", "));
        }
        label
    }
}

/// One panel: a title and its lines, in size order.
struct Panel<'a> {
    title: String,
    series: Vec<Series<'a>>,
}

/// Held-out loss against tokens, per run kind (and student size).
pub(crate) struct TrainingCurves<'a> {
    panels: Vec<Panel<'a>>,
}

fn points(c: &Curve) -> Vec<(f64, f64)> {
    c.points.iter().copied().filter(|p| p.0 > 0.0).collect()
}

/// Groups curves into series by `key` (same key: seeds of one model), ordered by size.
fn group<'a>(curves: &[&'a Curve], key: impl Fn(&Curve) -> (String, f64)) -> Vec<Series<'a>> {
    let mut series: Vec<Series<'a>> = Vec::new();
    for c in curves {
        let (label, size) = key(c);
        match series.iter_mut().find(|s| s.label == label) {
            Some(s) => s.curves.push(c),
            None => series.push(Series {
                label,
                size,
                curves: vec![c],
            }),
        }
    }
    series.sort_by(|a, b| a.size.total_cmp(&b.size).then(a.label.cmp(&b.label)));
    for s in &mut series {
        s.curves.sort_by_key(|c| c.seed);
    }
    series
}

/// Adds `series` as one panel, or several when they are more than a panel carries.
fn add_panels<'a>(panels: &mut Vec<Panel<'a>>, title: &str, series: Vec<Series<'a>>) {
    let parts = style::chunks(&series);
    let n = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        let title = if n > 1 {
            format!("{title} ({}/{n})", i + 1)
        } else {
            title.to_string()
        };
        panels.push(Panel {
            title,
            series: part,
        });
    }
}

impl<'a> TrainingCurves<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "Training curves";

    /// The curves of trained runs; an error when no run has recorded a held-out loss.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let of = |k: RunKind| -> Vec<&'a Curve> {
            data.curves
                .iter()
                .filter(|c| c.kind == k && c.points.iter().any(|p| p.0 > 0.0))
                .collect()
        };
        let budgets = |cs: &[&Curve]| {
            let mut b: Vec<u64> = cs.iter().map(|c| c.tokens as u64).collect();
            b.sort_unstable();
            b.dedup();
            b.len() > 1
        };
        let mut panels = Vec::new();
        for kind in [RunKind::Teacher, RunKind::Baseline] {
            let curves = of(kind);
            let many = budgets(&curves);
            let series = group(&curves, |c| {
                let mut label = format!("{} (N = {})", c.label, si(c.n));
                if many {
                    label += &format!(", {} tokens", si(c.tokens));
                }
                (label, c.n)
            });
            if !series.is_empty() {
                let title = if kind == RunKind::Teacher {
                    "Teachers"
                } else {
                    "Baselines (no teacher)"
                };
                add_panels(&mut panels, title, series);
            }
        }
        let students = of(RunKind::Student);
        let mut sizes: Vec<(f64, String)> =
            students.iter().map(|c| (c.n, c.label.clone())).collect();
        sizes.sort_by(|a, b| a.0.total_cmp(&b.0));
        sizes.dedup_by(|a, b| a.0 == b.0);
        for (n, label) in sizes {
            let curves: Vec<&Curve> = students.iter().copied().filter(|c| c.n == n).collect();
            let many = budgets(&curves);
            let series = group(&curves, |c| {
                let (t_label, t_n) = c.teacher.clone().unwrap_or(("?".into(), f64::NAN));
                let mut label = format!("teacher {t_label}");
                if !c.distill.is_empty() {
                    label += &format!(", {}", c.distill);
                }
                if many {
                    label += &format!(", {} tokens", si(c.tokens));
                }
                (label, t_n)
            });
            add_panels(
                &mut panels,
                &format!("Students of {label} (N = {}), distilled", si(n)),
                series,
            );
        }
        if panels.is_empty() {
            return Err("no run has recorded a held-out loss yet".into());
        }
        // Teachers, then students by size, then baselines.
        panels.sort_by_key(|p| {
            if p.title.starts_with("Teachers") {
                0
            } else if p.title.starts_with("Baselines") {
                2
            } else {
                1
            }
        });
        Ok(TrainingCurves { panels })
    }
}

impl Figure for TrainingCurves<'_> {
    fn name(&self) -> &'static str {
        "training_curves"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        format!(
            "Held-out cross-entropy (nats/token) against tokens seen: teachers, then students (one \
             panel per student size, one line per teacher, ordered by size, darker = smaller), \
             then baselines. Where a model ran with several seeds, its line and markers are the \
             mean over seeds and each seed is drawn faint behind it. Runs that failed or have \
             not finished are marked in the legend; a panel holds at most {} lines. Loss and \
             tokens share one scale across panels.",
            style::MAX_SERIES
        )
    }

    fn size_in(&self) -> (f64, f64) {
        (style::WIDTH_IN, style::height_in(self.panels.len()))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        // One scale for every panel, so kinds compare at a glance.
        let all = || {
            self.panels
                .iter()
                .flat_map(|p| p.series.iter())
                .flat_map(|s| s.curves.iter())
                .flat_map(|c| points(c))
        };
        let x = Axis::log("Tokens seen", all().map(|p| p.0), TickFormat::Si);
        let y = Axis::linear(
            "Held-out loss (nats/token)",
            all().map(|p| p.1),
            TickFormat::Plain,
        );
        let areas = style::grid(area, self.panels.len(), 1);
        for (p, area) in self.panels.iter().zip(&areas) {
            let mut sizes: Vec<u64> = p.series.iter().map(|s| s.size.to_bits()).collect();
            sizes.sort_unstable();
            sizes.dedup();
            // Colours read as an order only when each line is its own size.
            let ordered = sizes.len() == p.series.len();
            let n = p.series.len();
            let col = |i: usize| {
                if ordered {
                    ordered_color(i, n)
                } else {
                    color(i)
                }
            };
            let entries: Vec<LegendEntry> = p
                .series
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut e = LegendEntry::series(s.legend_label(), col(i), None);
                    e.marker = Some((Marker::nth(i), style::filled(i)));
                    e
                })
                .collect();
            let plot_area = with_legend(area, &entries, 2.3)?;
            let mut plot = panel(&plot_area, &p.title, x.clone(), y.clone())?;
            for (i, s) in p.series.iter().enumerate() {
                if s.curves.len() > 1 {
                    for c in &s.curves {
                        plot.line(&points(c), faint(col(i)), LineKind::Solid, 0.8)?;
                    }
                }
                let mean = s.mean();
                plot.line(&mean, col(i), LineKind::Solid, style::size::LINE)?;
                plot.markers(&mean, col(i), Marker::nth(i), style::filled(i))?;
            }
        }
        Ok(())
    }
}
