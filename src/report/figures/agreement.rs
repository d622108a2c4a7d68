//! Teacher–student agreement: top-1 agreement and KL(teacher ‖ student) on held-out text
//! against student size, one series per teacher and config.

use super::Figure;
use super::distill_gain::{StudentSeries, draw_series, legend, student_series};
use crate::report::canvas::Area;
use crate::report::data::ReportData;
use crate::report::error::ReportError;
use crate::report::style::{self, Axis, TickFormat, with_legend};

/// Agreement and KL against student size.
pub(crate) struct Agreement {
    agreement: Vec<StudentSeries>,
    kl: Vec<StudentSeries>,
}

impl Agreement {
    /// Title on the report page.
    pub const TITLE: &'static str = "Teacher–student agreement";

    /// Students with agreement measured; an error when there are none.
    pub fn build(data: &ReportData) -> Result<Self, String> {
        let agreement = student_series(data, |r| r.agreement);
        let kl = student_series(data, |r| r.kl_teacher_student);
        if agreement.is_empty() && kl.is_empty() {
            return Err("no finished student has its agreement with the teacher measured".into());
        }
        Ok(Agreement { agreement, kl })
    }
}

impl Agreement {
    /// The series in rows of at most [`style::MAX_SERIES`]: (agreement, KL) per row.
    fn rows(&self) -> Vec<(Vec<StudentSeries>, Vec<StudentSeries>)> {
        let a = style::chunks(&self.agreement);
        let k = style::chunks(&self.kl);
        (0..a.len().max(k.len()))
            .map(|i| {
                (
                    a.get(i).cloned().unwrap_or_default(),
                    k.get(i).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }
}

impl Figure for Agreement {
    fn name(&self) -> &'static str {
        "agreement"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        "How closely each distilled student follows its teacher on held-out text: top-1 \
         agreement (the share of positions where both predict the same next token; left) and \
         KL(teacher ‖ student) in nats/token (right), against student size, one line per \
         teacher (darker = smaller; several seeds: their mean, range and faint dots) — a \
         token-level proxy for the distillation degree of Lee et al. (2025)."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (style::WIDTH_IN, style::height_in(self.rows().len()))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let values = |s: &[StudentSeries]| {
            s.iter()
                .flat_map(|x| x.points.iter().map(|p| p.1))
                .collect::<Vec<_>>()
        };
        let rows = self.rows();
        let row_areas = style::grid(area, rows.len(), 1);
        for ((agreement, kl), row) in rows.iter().zip(&row_areas) {
            let shown = if agreement.is_empty() { kl } else { agreement };
            let plot_area = with_legend(row, &legend(shown), 1.9)?;
            let panels = style::grid(&plot_area, 2, 2);
            if !agreement.is_empty() {
                let y = Axis::linear(
                    "Top-1 agreement",
                    values(&self.agreement),
                    TickFormat::Percent,
                );
                draw_series(
                    &panels[0],
                    "Top-1 agreement",
                    agreement,
                    &self.agreement,
                    y,
                    false,
                )?;
            }
            if !kl.is_empty() {
                let y = Axis::linear(
                    "KL(teacher ‖ student) (nats/token)",
                    values(&self.kl),
                    TickFormat::Plain,
                );
                draw_series(&panels[1], "KL(teacher ‖ student)", kl, &self.kl, y, false)?;
            }
        }
        Ok(())
    }
}
