//! Distillation gain against student size (Peng et al.'s scaling figure): the matching
//! baseline's held-out loss minus the student's, one series per teacher and config.

use super::Figure;
use crate::plan::RunKind;
use crate::report::canvas::Area;
use crate::report::data::{ReportData, RunView};
use crate::report::error::ReportError;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, MUTED, Marker, TickFormat, color, ordered_color, panel,
    replicates, size, with_legend,
};
use plotters::style::RGBColor;

/// One series of students: a teacher (and config) and (student size, value) points.
#[derive(Clone)]
pub(super) struct StudentSeries {
    /// Legend label.
    pub label: String,
    /// Teacher size, for ordering.
    pub teacher_n: f64,
    /// (student non-embedding parameters, value), one per finished student.
    pub points: Vec<(f64, f64)>,
}

/// Finished students grouped by teacher and distillation config, with `value` of each.
pub(super) fn student_series(
    data: &ReportData,
    value: impl Fn(&RunView) -> Option<f64>,
) -> Vec<StudentSeries> {
    let mut series: Vec<StudentSeries> = Vec::new();
    for s in data
        .runs
        .iter()
        .filter(|r| r.kind == RunKind::Student && r.done())
    {
        let (Some(t), Some(v)) = (&s.teacher, value(s)) else {
            continue;
        };
        let mut label = format!("teacher {}", t.label);
        if !s.distill.is_empty() {
            label += ", ";
            label += &s.distill;
        }
        match series.iter_mut().find(|x| x.label == label) {
            Some(x) => x.points.push((s.n, v)),
            None => series.push(StudentSeries {
                label,
                teacher_n: t.n,
                points: vec![(s.n, v)],
            }),
        }
    }
    series.sort_by(|a, b| {
        a.teacher_n
            .total_cmp(&b.teacher_n)
            .then(a.label.cmp(&b.label))
    });
    series
}

/// The colour of series `i` of `series`: ordered by teacher size when every series is its own
/// teacher, else categorical.
fn series_color(series: &[StudentSeries], i: usize) -> RGBColor {
    let mut sizes: Vec<u64> = series.iter().map(|s| s.teacher_n.to_bits()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() == series.len() {
        ordered_color(i, series.len())
    } else {
        color(i)
    }
}

/// Draws `series` against student size on one panel (seeds as their mean, with their range
/// and each seed faint), with its x axis spanning `all` series.
pub(super) fn draw_series(
    area: &Area<'_>,
    title: &str,
    series: &[StudentSeries],
    all: &[StudentSeries],
    y: Axis,
    zero_line: bool,
) -> Result<(), ReportError> {
    let x = Axis::log(
        "Student non-embedding parameters",
        all.iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect::<Vec<_>>(),
        TickFormat::Si,
    );
    let mut plot = panel(area, title, x, y)?;
    if zero_line {
        plot.hline(0.0, MUTED, LineKind::Dashed)?;
    }
    for (i, s) in series.iter().enumerate() {
        let c = series_color(series, i);
        let reps = replicates(&s.points);
        let means: Vec<(f64, f64)> = reps.iter().map(|r| (r.x, r.mean)).collect();
        plot.line(&means, c, LineKind::Solid, size::LINE)?;
        plot.replicates(&reps, c, Marker::nth(i), style::filled(i))?;
    }
    Ok(())
}

/// Legend entries of `series`.
pub(super) fn legend(series: &[StudentSeries]) -> Vec<LegendEntry> {
    series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let c = series_color(series, i);
            let mut e = LegendEntry::series(s.label.clone(), c, Some(Marker::nth(i)));
            e.marker = Some((Marker::nth(i), style::filled(i)));
            e
        })
        .collect()
}

/// Gain against student size.
pub(crate) struct DistillGain {
    series: Vec<StudentSeries>,
}

impl DistillGain {
    /// Title on the report page.
    pub const TITLE: &'static str = "Distillation gain vs student size";

    /// Students with a gain; an error when none has both itself and its baseline finished.
    pub fn build(data: &ReportData) -> Result<Self, String> {
        let series = student_series(data, |r| r.gain);
        if series.is_empty() {
            return Err("no distilled student has a finished baseline to compare with yet".into());
        }
        Ok(DistillGain { series })
    }
}

impl Figure for DistillGain {
    fn name(&self) -> &'static str {
        "distill_gain"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        "Distillation gain: held-out loss of the same student trained without a teacher (its \
         seed-matched baseline) minus the distilled student's (nats/token; above the dashed zero \
         line distillation helped), against student size, one line per teacher, darker = \
         smaller teacher (after Peng et al., 2025, who report the gain on benchmarks). With \
         several seeds, markers and lines are the mean gain, bars the range, faint dots the \
         seeds."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (
            style::WIDTH_IN,
            style::height_in(style::chunks(&self.series).len()),
        )
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let y = Axis::linear(
            "Gain over baseline (nats/token)",
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .chain([0.0])
                .collect::<Vec<_>>(),
            TickFormat::Plain,
        );
        let parts = style::chunks(&self.series);
        let rows = style::grid(area, parts.len(), 1);
        for (part, row) in parts.iter().zip(&rows) {
            let plot_area = with_legend(row, &legend(part), 2.2)?;
            draw_series(
                &plot_area,
                "Baseline loss − student loss",
                part,
                &self.series,
                y.clone(),
                true,
            )?;
        }
        Ok(())
    }
}
