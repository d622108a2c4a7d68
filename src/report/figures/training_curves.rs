//! Training curves: held-out loss against tokens seen, one panel per run kind (teachers,
//! students, baselines), one line per run.

use super::Figure;
use crate::plan::RunKind;
use crate::report::data::{Curve, ReportData, RunState};
use crate::report::error::ReportError;
use crate::report::render::Area;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, Marker, TickFormat, color, panel, with_legend,
};

/// Held-out loss against tokens, per run kind.
pub struct TrainingCurves<'a> {
    panels: Vec<(RunKind, Vec<&'a Curve>)>,
}

impl<'a> TrainingCurves<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "Training curves";

    /// The curves of trained runs; an error when no run has recorded a held-out loss.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let panels: Vec<(RunKind, Vec<&Curve>)> =
            [RunKind::Teacher, RunKind::Student, RunKind::Baseline]
                .into_iter()
                .map(|k| {
                    let mut curves: Vec<&Curve> = data
                        .curves
                        .iter()
                        .filter(|c| c.kind == k && c.points.iter().any(|p| p.0 > 0.0))
                        .collect();
                    curves.sort_by(|a, b| a.n.total_cmp(&b.n).then(a.name.cmp(&b.name)));
                    (k, curves)
                })
                .filter(|(_, c)| !c.is_empty())
                .collect();
        if panels.is_empty() {
            return Err("no run has recorded a held-out loss yet".into());
        }
        Ok(TrainingCurves { panels })
    }
}

fn panel_title(kind: RunKind) -> &'static str {
    match kind {
        RunKind::Teacher => "Teachers",
        RunKind::Student => "Students (distilled)",
        RunKind::Baseline => "Baselines (no teacher)",
        RunKind::Logits => "Logit passes",
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
        "Held-out cross-entropy (nats/token) against tokens seen, one line per run and one panel \
         per run kind; markers are the held-out evaluations; runs that failed or have not finished are marked in the legend. Loss and tokens share one scale \
         across panels."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (7.6, style::rows_height(self.panels.len(), 3.2))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        // One scale for every panel, so kinds compare at a glance.
        let all = || {
            self.panels
                .iter()
                .flat_map(|(_, c)| c.iter())
                .flat_map(|c| c.points.iter())
        };
        let x = Axis::log(
            "Tokens seen",
            all().map(|p| p.0).filter(|t| *t > 0.0),
            TickFormat::Si,
        );
        let y = Axis::linear(
            "Held-out loss (nats/token)",
            all().filter(|p| p.0 > 0.0).map(|p| p.1),
            TickFormat::Plain,
        );
        let areas = style::grid(area, self.panels.len(), 1);
        for ((kind, curves), area) in self.panels.iter().zip(&areas) {
            let entries: Vec<LegendEntry> = curves
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let label = match c.state {
                        RunState::Done => c.name.clone(),
                        other => format!("{} ({})", c.name, other.as_str()),
                    };
                    let mut e = LegendEntry::series(label, color(i), None);
                    e.marker = Some((Marker::nth(i), style::filled(i)));
                    e
                })
                .collect();
            let plot_area = with_legend(area, &entries, 3.0)?;
            let mut plot = panel(&plot_area, panel_title(*kind), x.clone(), y.clone())?;
            for (i, c) in curves.iter().enumerate() {
                let pts: Vec<(f64, f64)> = c.points.iter().copied().filter(|p| p.0 > 0.0).collect();
                plot.line(&pts, color(i), LineKind::Solid, style::size::LINE)?;
                plot.markers(&pts, color(i), Marker::nth(i), style::filled(i))?;
            }
        }
        Ok(())
    }
}
