//! The optimal teacher T*(S): T* against student size with its intervals, the linear and
//! power-law fits with their bands, and T = S for reference; without fits, the best teacher on
//! the grid for each student.

use super::Figure;
use crate::report::canvas::Area;
use crate::report::data::{OptimalTeacherView, ReportData, TrendView};
use crate::report::error::ReportError;
use crate::report::style::{
    self, Axis, LegendEntry, LineKind, MUTED, Marker, TickFormat, color, panel, with_legend,
};

/// T*(S).
pub(crate) struct OptimalTeacher<'a> {
    view: &'a OptimalTeacherView,
    /// Whether `pdsweep fit` has run (so "no fit" means "no supported optimum").
    fits_ran: bool,
}

impl<'a> OptimalTeacher<'a> {
    /// Title on the report page.
    pub const TITLE: &'static str = "Optimal teacher size T*(S)";

    /// T*(S); an error when no student has been distilled from two or more teachers.
    pub fn build(data: &'a ReportData) -> Result<Self, String> {
        let view = &data.fits.optimal_teacher;
        if view.points.is_empty() {
            return Err(
                "no student size has finished students from two or more teachers yet".into(),
            );
        }
        Ok(OptimalTeacher {
            view,
            fits_ran: data.fits.source.is_some(),
        })
    }

    fn fitted(&self) -> bool {
        self.view.points.iter().any(|p| p.fitted)
    }
}

fn fit_label(name: &str, fit: &TrendView, better: Option<&str>) -> String {
    let mut label = format!("{name}: {}", fit.formula());
    if let Some(r2) = fit.r2 {
        label += &format!(" (R² {r2:.3})");
    }
    if better == Some(name) {
        label += " (better)";
    }
    label
}

impl Figure for OptimalTeacher<'_> {
    fn name(&self) -> &'static str {
        "optimal_teacher"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        let mut c = String::from(
            "The teacher size that gives each student size its lowest loss (non-embedding \
             parameters, log–log); the dashed grey line, where the axes overlap, is T = S.",
        );
        if self.fitted() {
            c += " Filled markers: T* located on the fitted capacity-gap curve, with its \
                   bootstrap interval.";
        }
        if self.view.points.iter().any(|p| !p.fitted) {
            c += " Hollow markers: the best teacher on the grid where no supported optimum \
                   was fitted; one at the edge of the grid only bounds T* (the arrow points \
                   where the grid should be extended).";
        }
        if self.view.linear.is_some() || self.view.power.is_some() {
            c += " Lines and bands: T* = a·S + b and T* = c·S^k with their intervals, solid \
                   over the student sizes they were fitted to and dashed beyond.";
        }
        c
    }

    fn size_in(&self) -> (f64, f64) {
        (style::WIDTH_IN, style::ONE_ROW_IN)
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let v = self.view;
        let fits: Vec<(&str, &TrendView, usize)> = [
            ("linear", v.linear.as_ref(), 1),
            ("power", v.power.as_ref(), 2),
        ]
        .into_iter()
        .filter_map(|(n, f, c)| Some((n, f?, c)))
        .collect();
        let xs: Vec<f64> = v.points.iter().map(|p| p.student_n).collect();
        let mut ys: Vec<f64> = v.points.iter().map(|p| p.t_star).collect();
        ys.extend(
            v.points
                .iter()
                .filter_map(|p| p.ci)
                .flat_map(|(a, b)| [a, b]),
        );
        for (_, f, _) in &fits {
            ys.extend(f.band.iter().flat_map(|b| [b.1, b.2]));
        }
        let x = Axis::log(
            "Student non-embedding parameters S",
            xs.clone(),
            TickFormat::Si,
        );
        let y = Axis::log("Optimal teacher T* (non-embedding)", ys, TickFormat::Si);
        // T = S crosses the plot only where the two ranges overlap.
        let diagonal = x.lo < y.hi && y.lo < x.hi;
        let mut entries = Vec::new();
        if diagonal {
            entries.push(LegendEntry::line("T = S", MUTED, LineKind::Dashed));
        }
        if self.fitted() {
            entries.push(LegendEntry {
                label: "T* from fit (with interval)".into(),
                color: color(0),
                line: LineKind::None,
                marker: Some((Marker::Circle, true)),
            });
        }
        if v.points.iter().any(|p| !p.fitted) {
            entries.push(LegendEntry {
                label: "best teacher on the grid".into(),
                color: color(0),
                line: LineKind::None,
                marker: Some((Marker::Circle, false)),
            });
        }
        for (name, f, c) in &fits {
            entries.push(LegendEntry::series(
                fit_label(name, f, v.better.as_deref()),
                color(*c),
                None,
            ));
        }
        let plot_area = with_legend(area, &entries, 2.6)?;
        let title = if self.fitted() {
            "T* against student size"
        } else if self.fits_ran {
            "Best teacher on the grid (no supported optimum)"
        } else {
            "Best teacher on the grid (no fit yet)"
        };
        let mut plot = panel(&plot_area, title, x.clone(), y.clone())?;
        if diagonal {
            let (lo, hi) = (x.lo.min(y.lo), x.hi.max(y.hi));
            plot.line(&[(lo, lo), (hi, hi)], MUTED, LineKind::Dashed, 1.0)?;
        }
        let fitted_xs = v.fitted_points.iter().map(|p| p.0);
        let (lo, hi) = fitted_xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| {
            (a.min(s), b.max(s))
        });
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (x.lo, x.hi) };
        for (_, f, c) in &fits {
            plot.band(&f.band, color(*c))?;
            let mut curve: Vec<(f64, f64)> = (0..=60)
                .map(|i| {
                    let s = (x.lo.ln() + (x.hi.ln() - x.lo.ln()) * i as f64 / 60.0).exp();
                    (s, f.predict(s))
                })
                .collect();
            curve.extend([(lo, f.predict(lo)), (hi, f.predict(hi))]);
            curve.sort_by(|a, b| a.0.total_cmp(&b.0));
            plot.fit_line(&curve, (lo, hi), color(*c), 1.5)?;
        }
        let bars: Vec<(f64, f64, f64)> = v
            .points
            .iter()
            .filter_map(|p| p.ci.map(|(a, b)| (p.student_n, a, b)))
            .collect();
        plot.error_bars(&bars, color(0))?;
        for fitted in [true, false] {
            let pts: Vec<(f64, f64)> = v
                .points
                .iter()
                .filter(|p| p.fitted == fitted)
                .map(|p| (p.student_n, p.t_star))
                .collect();
            plot.markers(&pts, color(0), Marker::Circle, fitted)?;
        }
        for p in v.points.iter().filter(|p| !p.fitted && p.at_edge) {
            let text = match p.edge.as_deref() {
                Some("smallest") => "↓ edge of grid",
                Some(_) => "↑ edge of grid",
                None => "edge of grid",
            };
            plot.text((p.student_n, p.t_star), 0.0, text, MUTED)?;
        }
        Ok(())
    }
}
