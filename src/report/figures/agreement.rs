//! Teacher–student agreement: top-1 agreement and KL(teacher ‖ student) on held-out text
//! against student size, one series per teacher and config.

use super::Figure;
use super::distill_gain::{StudentSeries, draw_series, legend, student_series};
use crate::report::data::ReportData;
use crate::report::error::ReportError;
use crate::report::render::Area;
use crate::report::style::{self, Axis, TickFormat, with_legend};

/// Agreement and KL against student size.
pub struct Agreement {
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
         teacher — a token-level proxy for the distillation degree of Lee et al. (2025)."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (9.0, 3.6)
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let shown = if self.agreement.is_empty() {
            &self.kl
        } else {
            &self.agreement
        };
        let plot_area = with_legend(area, &legend(shown), 2.2)?;
        let panels = style::grid(&plot_area, 2, 2);
        let values = |s: &[StudentSeries]| {
            s.iter()
                .flat_map(|x| x.points.iter().map(|p| p.1))
                .collect::<Vec<_>>()
        };
        if !self.agreement.is_empty() {
            let y = Axis::linear(
                "Top-1 agreement",
                values(&self.agreement),
                TickFormat::Percent,
            );
            draw_series(&panels[0], "Top-1 agreement", &self.agreement, y, false)?;
        }
        if !self.kl.is_empty() {
            let y = Axis::linear(
                "KL(teacher ‖ student) (nats/token)",
                values(&self.kl),
                TickFormat::Plain,
            );
            draw_series(&panels[1], "KL(teacher ‖ student)", &self.kl, y, false)?;
        }
        Ok(())
    }
}
