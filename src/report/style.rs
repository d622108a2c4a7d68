//! The shared look of every figure: 300-dpi sizes, the embedded font, a colour-blind-safe
//! palette, axes (linear or log, with our own ticks and unit-bearing labels), panels, series
//! drawn in data coordinates, and legends drawn beside the plot so they never cover data.

use std::ops::Range;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::canvas::{Area, Canvas};
use super::error::ReportError;
use super::numbers::{si, trim};

/// Pixels per inch of the PNGs (and of the SVGs' coordinate system).
pub(crate) const DPI: f64 = 300.0;

/// The embedded font's family name.
pub(crate) const FONT_FAMILY: &str = "DejaVu Sans";

/// DejaVu Sans (Bitstream Vera licence, `assets/fonts/LICENSE-DejaVu.txt`), so figures do not
/// depend on the fonts of the machine that draws or shows them.
pub(crate) const FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Points to pixels at [`DPI`].
pub(crate) fn pt(points: f64) -> f64 {
    points * DPI / 72.0
}

/// Points to whole pixels.
pub fn px(points: f64) -> u32 {
    pt(points).round() as u32
}

/// Font sizes in points.
pub mod size {
    /// Panel titles.
    pub const TITLE: f64 = 10.0;
    /// Axis labels.
    pub const LABEL: f64 = 9.0;
    /// Tick labels, legends, notes.
    pub const TICK: f64 = 8.0;
    /// Line width of data series.
    pub const LINE: f64 = 1.5;
    /// Marker radius.
    pub const MARKER: f64 = 3.0;
}

/// Registers the embedded font with plotters (once per process).
pub(crate) fn register_font() -> Result<(), ReportError> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        [FontStyle::Normal, FontStyle::Bold, FontStyle::Italic]
            .into_iter()
            .try_for_each(|style| {
                plotters::style::register_font(FONT_FAMILY, style, FONT_BYTES)
                    .map_err(|_| "DejaVu Sans is not a valid font".to_string())
            })
    })
    .clone()
    .map_err(|reason| ReportError::Font {
        source: reason.into(),
    })
}

/// The embedded font at `points`.
pub fn font(points: f64) -> TextStyle<'static> {
    // plotters sizes text by its line height; DejaVu's is about 1.2 em.
    (FONT_FAMILY, pt(points) * 1.2).into_font().color(&INK)
}

/// Text and axes.
pub(crate) const INK: RGBColor = RGBColor(34, 34, 34);
/// Grid lines.
pub(crate) const GRID: RGBColor = RGBColor(225, 225, 225);
/// Secondary text and reference lines.
pub(crate) const MUTED: RGBColor = RGBColor(110, 110, 110);

/// Okabe & Ito's colour-blind-safe palette (yellow left out: too pale on white), then a few
/// darker extras.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(117, 112, 179),
    RGBColor(140, 86, 75),
    RGBColor(102, 166, 30),
];

/// The `i`-th series colour.
pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// The most series one panel draws: more are split across panels (a legend row each, and
/// colours that stay distinct).
pub(crate) const MAX_SERIES: usize = 10;

/// Figure width in inches: every figure is as wide as a full page column of text (2100 px).
pub(crate) const WIDTH_IN: f64 = 7.0;

/// Height of a figure with one row of panels (1080 px).
pub(crate) const ONE_ROW_IN: f64 = 3.6;

/// Height added by each further row of panels.
pub(crate) const ROW_IN: f64 = 3.2;

/// The height of a figure with `rows` rows of panels.
pub(crate) fn height_in(rows: usize) -> f64 {
    ONE_ROW_IN + ROW_IN * rows.max(1).saturating_sub(1) as f64
}

/// The colour of the `k`-th of `n` series ordered by size (small to large): viridis from deep
/// purple to green, so order reads at a glance (the pale yellow end is left out).
pub(crate) fn ordered_color(k: usize, n: usize) -> RGBColor {
    const STOPS: [(f64, f64, f64); 6] = [
        (68.0, 1.0, 84.0),
        (65.0, 68.0, 135.0),
        (42.0, 120.0, 142.0),
        (34.0, 168.0, 132.0),
        (122.0, 209.0, 81.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if n > 1 {
        0.82 * k as f64 / (n - 1) as f64
    } else {
        0.0
    } * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// `c` washed out towards white, for individual seeds behind their mean.
pub(crate) fn faint(c: RGBColor) -> RGBColor {
    let mix = |x: u8| (f64::from(x) * 0.4 + 255.0 * 0.6).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// The values measured at one x by several replicates (seeds).
#[derive(Debug, Clone, PartialEq)]
pub struct Replicates {
    /// Where.
    pub x: f64,
    /// Their mean.
    pub mean: f64,
    /// The smallest.
    pub lo: f64,
    /// The largest.
    pub hi: f64,
    /// Each replicate's value.
    pub values: Vec<f64>,
}

/// `points` grouped by x (equal within a relative 1e-9), sorted by x.
pub fn replicates(points: &[(f64, f64)]) -> Vec<Replicates> {
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<Replicates> = Vec::new();
    for (x, y) in sorted {
        match out.last_mut() {
            Some(r) if (r.x - x).abs() <= 1e-9 * r.x.abs().max(x.abs()) => r.values.push(y),
            _ => out.push(Replicates {
                x,
                mean: y,
                lo: y,
                hi: y,
                values: vec![y],
            }),
        }
    }
    for r in &mut out {
        r.mean = r.values.iter().sum::<f64>() / r.values.len() as f64;
        r.lo = r.values.iter().copied().fold(f64::INFINITY, f64::min);
        r.hi = r.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    }
    out
}

/// A sequential shade (light to dark grey-blue) for the `k`-th of `n` ordered groups, such as
/// compute budgets from small to large.
pub(crate) fn budget_color(k: usize, n: usize) -> RGBColor {
    let f = if n > 1 {
        k as f64 / (n - 1) as f64
    } else {
        1.0
    };
    let mix = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
    RGBColor(mix(120.0, 8.0), mix(170.0, 48.0), mix(210.0, 107.0))
}

/// Marker shapes, cycled per series where colour alone would not tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A disc.
    Circle,
    /// A square.
    Square,
    /// A triangle pointing up.
    Triangle,
    /// A diamond.
    Diamond,
}

impl Marker {
    /// The `i`-th marker.
    pub fn nth(i: usize) -> Marker {
        [
            Marker::Circle,
            Marker::Triangle,
            Marker::Square,
            Marker::Diamond,
        ][i % 4]
    }
}

/// Whether series `i` gets filled markers: odd series are hollow, so series that coincide
/// (offline and online distillation, say) stay visible on top of each other.
pub fn filled(i: usize) -> bool {
    i.is_multiple_of(2)
}

/// How a legend entry's line sample is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// No line.
    None,
    /// A solid line.
    Solid,
    /// A dashed line.
    Dashed,
    /// A shaded band.
    Band,
}

/// One legend entry.
#[derive(Debug, Clone)]
pub(crate) struct LegendEntry {
    /// Text.
    pub label: String,
    /// Colour.
    pub color: RGBColor,
    /// Line sample.
    pub line: LineKind,
    /// Marker sample (filled, or hollow when the flag is false).
    pub marker: Option<(Marker, bool)>,
}

impl LegendEntry {
    /// An entry with a line and a filled marker.
    pub fn series(label: impl Into<String>, color: RGBColor, marker: Option<Marker>) -> Self {
        LegendEntry {
            label: label.into(),
            color,
            line: LineKind::Solid,
            marker: marker.map(|m| (m, true)),
        }
    }

    /// An entry with only a line of `kind`.
    pub fn line(label: impl Into<String>, color: RGBColor, kind: LineKind) -> Self {
        LegendEntry {
            label: label.into(),
            color,
            line: kind,
            marker: None,
        }
    }
}

/// How tick labels are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickFormat {
    /// Plain decimals.
    Plain,
    /// Counts with K/M/B/T suffixes (parameters, tokens).
    Si,
    /// Powers of ten (FLOPs).
    Power,
    /// Fractions as percentages.
    Percent,
}

/// One axis: its label (with units), scale, range in data units and tick format.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The label, units included.
    pub label: String,
    /// Logarithmic (base 10).
    pub log: bool,
    /// Lower end (data units).
    pub lo: f64,
    /// Upper end (data units).
    pub hi: f64,
    /// Tick label format.
    pub format: TickFormat,
    /// The most major ticks (and labels) the axis gets; [`panel`] lowers it to what the
    /// panel's width or height has room for.
    pub max_ticks: usize,
}

/// Major ticks an axis gets unless its panel has room for fewer.
pub(crate) const MAX_TICKS: usize = 6;

impl Axis {
    /// A linear axis spanning `values` with 6% padding (and `include` values kept in range).
    pub fn linear(label: &str, values: impl IntoIterator<Item = f64>, format: TickFormat) -> Axis {
        let (lo, hi) = extent(values, false);
        let span = hi - lo;
        let pad = if span > 0.0 {
            span * 0.06
        } else {
            (lo.abs() * 0.05).max(0.05)
        };
        Axis {
            label: label.to_string(),
            log: false,
            lo: lo - pad,
            hi: hi + pad,
            format,
            max_ticks: MAX_TICKS,
        }
    }

    /// A log axis spanning the positive `values` with padding of 6% of the decades spanned
    /// (at least a tenth of a decade).
    pub fn log(label: &str, values: impl IntoIterator<Item = f64>, format: TickFormat) -> Axis {
        let (lo, hi) = extent(values, true);
        let (l, h) = (lo.log10(), hi.log10());
        let pad = ((h - l) * 0.06).max(0.1);
        Axis {
            label: label.to_string(),
            log: true,
            lo: 10f64.powf(l - pad),
            hi: 10f64.powf(h + pad),
            format,
            max_ticks: MAX_TICKS,
        }
    }

    /// Widens the range to include `v`.
    pub fn including(mut self, v: f64) -> Axis {
        if v.is_finite() && (!self.log || v > 0.0) {
            self.lo = self.lo.min(v);
            self.hi = self.hi.max(v);
        }
        self
    }

    /// Data value to plot coordinate (log10 on log axes); `None` when it cannot be shown.
    pub fn map(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.log && v <= 0.0) {
            None
        } else if self.log {
            Some(v.log10())
        } else {
            Some(v)
        }
    }

    /// Plot coordinate to data value.
    pub fn unmap(&self, p: f64) -> f64 {
        if self.log { 10f64.powf(p) } else { p }
    }

    fn plot_range(&self) -> Range<f64> {
        if self.log {
            self.lo.log10()..self.hi.log10()
        } else {
            self.lo..self.hi
        }
    }

    /// Major and minor tick positions in plot coordinates.
    pub fn ticks(&self) -> (Vec<f64>, Vec<f64>) {
        let max = self.max_ticks.max(2);
        if self.log {
            log_ticks(self.lo, self.hi, max)
        } else {
            linear_ticks(self.lo, self.hi, max)
        }
    }

    /// The tick label of plot coordinate `p`.
    pub fn tick_label(&self, p: f64) -> String {
        let v = self.unmap(p);
        match self.format {
            TickFormat::Si => si(v),
            TickFormat::Power => power_of_ten(v),
            TickFormat::Percent => format!("{}%", trim(&format!("{:.2}", v * 100.0))),
            TickFormat::Plain => {
                let decimals = self.decimals();
                format!("{v:.decimals$}")
            }
        }
    }

    /// The fewest decimals that write every major tick of a linear axis exactly.
    fn decimals(&self) -> usize {
        let (major, _) = self.ticks();
        let step = major
            .windows(2)
            .map(|w| (w[1] - w[0]).abs())
            .fold(f64::INFINITY, f64::min);
        let tolerance = if step.is_finite() { step * 1e-6 } else { 1e-9 };
        (0..=6)
            .find(|&d| {
                let scale = 10f64.powi(d as i32);
                major
                    .iter()
                    .all(|t| ((t * scale).round() / scale - t).abs() < tolerance)
            })
            .unwrap_or(6)
    }

    fn coord(&self) -> Ticked {
        let (major, minor) = self.ticks();
        let r = self.plot_range();
        Ticked {
            lo: r.start,
            hi: r.end,
            major,
            minor,
        }
    }
}

/// A linear coordinate in plot units whose grid lines and labels sit at our own ticks.
#[derive(Debug, Clone)]
pub(crate) struct Ticked {
    lo: f64,
    hi: f64,
    major: Vec<f64>,
    minor: Vec<f64>,
}

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = (self.hi - self.lo).max(f64::MIN_POSITIVE);
        let f = (v - self.lo) / span;
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.major.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

fn extent(values: impl IntoIterator<Item = f64>, positive: bool) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for v in values {
        if v.is_finite() && (!positive || v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if lo > hi {
        return if positive { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    (lo, hi)
}

fn linear_ticks(lo: f64, hi: f64, max: usize) -> (Vec<f64>, Vec<f64>) {
    let span = (hi - lo).max(1e-12);
    let raw = span / (max as f64 - 1.0).max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0, 20.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= max as f64 + 0.5)
        .unwrap_or(20.0 * mag);
    let ticks = |step: f64| {
        let first = (lo / step).ceil() as i64;
        let last = (hi / step).floor() as i64;
        (first..=last).map(|i| i as f64 * step).collect::<Vec<_>>()
    };
    let major = ticks(step);
    let minor = ticks(step / 2.0)
        .into_iter()
        .filter(|m| !major.iter().any(|t| (t - m).abs() < step * 1e-6))
        .collect();
    (major, minor)
}

fn log_ticks(lo: f64, hi: f64, max: usize) -> (Vec<f64>, Vec<f64>) {
    let (l, h) = (lo.log10(), hi.log10());
    let candidates = |mults: &[f64]| {
        let mut out = Vec::new();
        for e in (l.floor() as i32)..=(h.ceil() as i32) {
            for m in mults {
                let p = (m * 10f64.powi(e)).log10();
                if p >= l - 1e-9 && p <= h + 1e-9 {
                    out.push(p);
                }
            }
        }
        out
    };
    let decades = candidates(&[1.0]);
    let major: Vec<f64> = if decades.len() >= 3 {
        let stride = decades.len().div_ceil(max);
        decades.iter().step_by(stride).copied().collect()
    } else {
        // Less than two decades: the first denser set that gives three ticks, thinned to six.
        let sets: [&[f64]; 4] = [
            &[1.0, 2.0, 5.0],
            &[1.0, 2.0, 3.0, 5.0],
            &[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0],
            &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
        ];
        let mut chosen = candidates(sets[3]);
        for set in sets {
            let c = candidates(set);
            if c.len() >= 3 {
                chosen = c;
                break;
            }
        }
        let stride = chosen.len().div_ceil(max).max(1);
        chosen.into_iter().step_by(stride).collect()
    };
    let minor = candidates(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
        .into_iter()
        .filter(|m| !major.iter().any(|t| (t - m).abs() < 1e-9))
        .collect();
    (major, minor)
}

/// `10¹²`, or `3×10¹²` for a value that is not a power of ten.
pub(crate) fn power_of_ten(v: f64) -> String {
    if v <= 0.0 || !v.is_finite() {
        return trim(&format!("{v:.3}"));
    }
    let e = v.log10().floor();
    let m = v / 10f64.powf(e);
    let sup: String = format!("{}", e as i64)
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect();
    if (m - 1.0).abs() < 1e-6 {
        format!("10{sup}")
    } else {
        format!("{}×10{sup}", trim(&format!("{m:.1}")))
    }
}

/// A chart in plot coordinates with its two axes, drawing in data coordinates.
pub struct Plot<'a, 'b> {
    chart: ChartContext<'a, Canvas<'b>, Cartesian2d<Ticked, Ticked>>,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
}

/// Draws a panel's frame: title, axes with labels, grid; returns the plot to draw series on.
pub fn panel<'a, 'b>(
    area: &'a Area<'b>,
    title: &str,
    x: Axis,
    y: Axis,
) -> Result<Plot<'a, 'b>, ReportError> {
    // As many tick labels as the panel has room for: about 32 pt per label across (44 pt for
    // powers of ten), 22 pt up.
    let (w, h) = area.dim_in_pixel();
    let mut x = x;
    let mut y = y;
    let across = if x.format == TickFormat::Power {
        44.0
    } else {
        32.0
    };
    x.max_ticks = x
        .max_ticks
        .min(((f64::from(w) - pt(60.0)) / pt(across)).floor().max(2.0) as usize);
    y.max_ticks = y
        .max_ticks
        .min(((f64::from(h) - pt(50.0)) / pt(22.0)).floor().max(2.0) as usize);
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(px(7.0))
        .margin_right(px(10.0))
        .margin_left(px(4.0))
        .margin_bottom(px(4.0))
        .x_label_area_size(px(30.0))
        .y_label_area_size(px(46.0));
    if !title.is_empty() {
        builder.caption(title, font(size::TITLE));
    }
    let mut chart = builder.build_cartesian_2d(x.coord(), y.coord())?;
    let x_fmt = |p: &f64| x.tick_label(*p);
    let y_fmt = |p: &f64| y.tick_label(*p);
    chart
        .configure_mesh()
        .x_desc(x.label.as_str())
        .y_desc(y.label.as_str())
        .axis_desc_style(font(size::LABEL))
        .label_style(font(size::TICK))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID.stroke_width(px(0.6)))
        .light_line_style(RGBColor(242, 242, 242).stroke_width(px(0.4)))
        .axis_style(INK.stroke_width(px(0.8)))
        .set_all_tick_mark_size(px(3.0))
        .draw()?;
    let (x2, y2) = (x.clone(), y.clone());
    Ok(Plot {
        chart,
        x: x2,
        y: y2,
    })
}

impl Plot<'_, '_> {
    fn map(&self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        Some((self.x.map(x)?, self.y.map(y)?))
    }

    /// The visible rectangle in plot coordinates: (x range, y range).
    fn rect(&self) -> (Range<f64>, Range<f64>) {
        (self.x.plot_range(), self.y.plot_range())
    }

    fn inside(&self, (x, y): (f64, f64)) -> bool {
        let (rx, ry) = self.rect();
        let (ex, ey) = ((rx.end - rx.start) * 1e-9, (ry.end - ry.start) * 1e-9);
        x >= rx.start - ex && x <= rx.end + ex && y >= ry.start - ey && y <= ry.end + ey
    }

    /// `pts` (data units) mapped and clipped to the visible rectangle: the pieces of the
    /// polyline that are inside it (plotters would otherwise pin outside points to the edge).
    fn clip_polyline(&self, pts: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
        let (rx, ry) = self.rect();
        let mapped: Vec<Option<(f64, f64)>> = pts.iter().map(|p| self.map(*p)).collect();
        let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut current: Vec<(f64, f64)> = Vec::new();
        for w in mapped.windows(2) {
            let (Some(a), Some(b)) = (w[0], w[1]) else {
                if current.len() >= 2 {
                    pieces.push(std::mem::take(&mut current));
                }
                current.clear();
                continue;
            };
            match clip_segment(a, b, &rx, &ry) {
                Some((p, q)) => {
                    if current.last() != Some(&p) {
                        if current.len() >= 2 {
                            pieces.push(std::mem::take(&mut current));
                        }
                        current.clear();
                        current.push(p);
                    }
                    current.push(q);
                }
                None => {
                    if current.len() >= 2 {
                        pieces.push(std::mem::take(&mut current));
                    }
                    current.clear();
                }
            }
        }
        if current.len() >= 2 {
            pieces.push(current);
        }
        pieces
    }

    /// A line through `pts` (data units), solid or dashed, clipped to the plot.
    pub fn line(
        &mut self,
        pts: &[(f64, f64)],
        color: RGBColor,
        kind: LineKind,
        width_pt: f64,
    ) -> Result<(), ReportError> {
        let style = color.stroke_width(px(width_pt));
        for piece in self.clip_polyline(pts) {
            match kind {
                LineKind::Dashed => {
                    self.chart.draw_series(DashedLineSeries::new(
                        piece,
                        px(4.0) as i32,
                        px(2.5) as i32,
                        style,
                    ))?;
                }
                LineKind::None => {}
                _ => {
                    self.chart.draw_series(LineSeries::new(piece, style))?;
                }
            }
        }
        Ok(())
    }

    /// Markers at `pts` (data units) inside the plot, filled or hollow.
    pub fn markers(
        &mut self,
        pts: &[(f64, f64)],
        color: RGBColor,
        marker: Marker,
        filled: bool,
    ) -> Result<(), ReportError> {
        let mapped: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|p| self.map(*p))
            .filter(|p| self.inside(*p))
            .collect();
        let r = px(size::MARKER) as i32;
        let style = if filled {
            color.filled()
        } else {
            color.stroke_width(px(1.2))
        };
        let outline = WHITE.stroke_width(px(0.5));
        match marker {
            Marker::Circle => {
                self.chart.draw_series(
                    mapped
                        .iter()
                        .map(|p| EmptyElement::at(*p) + Circle::new((0, 0), r, style)),
                )?;
                if filled {
                    self.chart.draw_series(
                        mapped
                            .iter()
                            .map(|p| EmptyElement::at(*p) + Circle::new((0, 0), r, outline)),
                    )?;
                }
            }
            Marker::Square => {
                let s = (r as f64 * 0.85) as i32;
                self.chart.draw_series(
                    mapped
                        .iter()
                        .map(|p| EmptyElement::at(*p) + Rectangle::new([(-s, -s), (s, s)], style)),
                )?;
            }
            Marker::Triangle | Marker::Diamond => {
                let shape: Vec<(i32, i32)> = if marker == Marker::Triangle {
                    let h = (r as f64 * 1.15) as i32;
                    vec![(0, -h), (h, h * 3 / 4), (-h, h * 3 / 4)]
                } else {
                    let h = (r as f64 * 1.25) as i32;
                    vec![(0, -h), (h, 0), (0, h), (-h, 0)]
                };
                if filled {
                    self.chart.draw_series(
                        mapped
                            .iter()
                            .map(|p| EmptyElement::at(*p) + Polygon::new(shape.clone(), style)),
                    )?;
                } else {
                    let mut closed = shape.clone();
                    closed.push(shape[0]);
                    self.chart.draw_series(
                        mapped.iter().map(|p| {
                            EmptyElement::at(*p) + PathElement::new(closed.clone(), style)
                        }),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Replicated measurements: where an x has several values, each is a small faint marker,
    /// the range a bar, and the mean the series' marker; single values are plain markers.
    pub fn replicates(
        &mut self,
        reps: &[Replicates],
        color: RGBColor,
        marker: Marker,
        filled: bool,
    ) -> Result<(), ReportError> {
        let several: Vec<&Replicates> = reps.iter().filter(|r| r.values.len() > 1).collect();
        let seeds: Vec<(f64, f64)> = several
            .iter()
            .flat_map(|r| r.values.iter().map(|v| (r.x, *v)))
            .collect();
        self.small_markers(&seeds, faint(color))?;
        let bars: Vec<(f64, f64, f64)> = several.iter().map(|r| (r.x, r.lo, r.hi)).collect();
        self.error_bars(&bars, faint(color))?;
        let means: Vec<(f64, f64)> = reps.iter().map(|r| (r.x, r.mean)).collect();
        self.markers(&means, color, marker, filled)
    }

    /// Small filled discs at `pts` (individual seeds).
    pub fn small_markers(
        &mut self,
        pts: &[(f64, f64)],
        color: RGBColor,
    ) -> Result<(), ReportError> {
        let mapped: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|p| self.map(*p))
            .filter(|p| self.inside(*p))
            .collect();
        let r = (px(size::MARKER) as f64 * 0.6).round() as i32;
        self.chart.draw_series(
            mapped
                .iter()
                .map(|p| EmptyElement::at(*p) + Circle::new((0, 0), r, color.filled())),
        )?;
        Ok(())
    }

    /// A fitted curve `pts` (sorted by x): solid over `[lo, hi]`, where the data are, and
    /// dashed beyond, so a fit is never drawn past the data unmarked.
    pub fn fit_line(
        &mut self,
        pts: &[(f64, f64)],
        (lo, hi): (f64, f64),
        color: RGBColor,
        width_pt: f64,
    ) -> Result<(), ReportError> {
        let [below, inside, above] = split_at_data(pts, (lo, hi));
        self.line(&inside, color, LineKind::Solid, width_pt)?;
        self.line(&below, color, LineKind::Dashed, width_pt * 0.8)?;
        self.line(&above, color, LineKind::Dashed, width_pt * 0.8)
    }

    /// A shaded band between `lo` and `hi` over `x` (each point (x, lo, hi), data units),
    /// clipped to the plot.
    pub fn band(&mut self, pts: &[(f64, f64, f64)], color: RGBColor) -> Result<(), ReportError> {
        let upper: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|&(x, _, hi)| self.map((x, hi)))
            .collect();
        let lower: Vec<(f64, f64)> = pts
            .iter()
            .rev()
            .filter_map(|&(x, lo, _)| self.map((x, lo)))
            .collect();
        if upper.len() < 2 || lower.len() < 2 {
            return Ok(());
        }
        let (rx, ry) = self.rect();
        let polygon = clip_polygon(upper.into_iter().chain(lower).collect(), &rx, &ry);
        if polygon.len() >= 3 {
            self.chart.draw_series(std::iter::once(Polygon::new(
                polygon,
                color.mix(0.18).filled(),
            )))?;
        }
        Ok(())
    }

    /// A vertical band from `x_lo` to `x_hi` across the whole plot (clipped to it).
    pub fn vband(&mut self, x_lo: f64, x_hi: f64, color: RGBColor) -> Result<(), ReportError> {
        let (Some(a), Some(b)) = (self.x.map(x_lo), self.x.map(x_hi)) else {
            return Ok(());
        };
        let (rx, ry) = self.rect();
        let (a, b) = (a.max(rx.start), b.min(rx.end));
        if a < b {
            self.chart.draw_series(std::iter::once(Rectangle::new(
                [(a, ry.start), (b, ry.end)],
                color.mix(0.15).filled(),
            )))?;
        }
        Ok(())
    }

    /// A horizontal line at `y` across the whole plot.
    pub fn hline(&mut self, y: f64, color: RGBColor, kind: LineKind) -> Result<(), ReportError> {
        let r = self.x.plot_range();
        let (lo, hi) = (self.x.unmap(r.start), self.x.unmap(r.end));
        self.line(&[(lo, y), (hi, y)], color, kind, 1.2)
    }

    /// A vertical line at `x` across the whole plot.
    pub fn vline(&mut self, x: f64, color: RGBColor, kind: LineKind) -> Result<(), ReportError> {
        let r = self.y.plot_range();
        let (lo, hi) = (self.y.unmap(r.start), self.y.unmap(r.end));
        self.line(&[(x, lo), (x, hi)], color, kind, 1.2)
    }

    /// Vertical error bars from `lo` to `hi` at each `x`, clipped to the plot.
    pub fn error_bars(
        &mut self,
        pts: &[(f64, f64, f64)],
        color: RGBColor,
    ) -> Result<(), ReportError> {
        let (rx, ry) = self.rect();
        for &(x, lo, hi) in pts {
            let (Some(a), Some(b)) = (self.map((x, lo)), self.map((x, hi))) else {
                continue;
            };
            let Some((a2, b2)) = clip_segment(a, b, &rx, &ry) else {
                continue;
            };
            let w = px(2.5) as i32;
            let style = color.stroke_width(px(1.0));
            self.chart
                .draw_series(std::iter::once(PathElement::new(vec![a2, b2], style)))?;
            for (end, clipped) in [(a, a2), (b, b2)] {
                if end == clipped {
                    self.chart.draw_series(std::iter::once(
                        EmptyElement::at(end) + PathElement::new(vec![(-w, 0), (w, 0)], style),
                    ))?;
                }
            }
        }
        Ok(())
    }

    /// Text beside a data point inside the plot: to its right when the point is in the left
    /// half of the plot, else to its left; `dy_pt` points below (negative: above).
    pub fn text(
        &mut self,
        at: (f64, f64),
        dy_pt: f64,
        text: &str,
        color: RGBColor,
    ) -> Result<(), ReportError> {
        let Some(p) = self.map(at).filter(|p| self.inside(*p)) else {
            return Ok(());
        };
        let (rx, _) = self.rect();
        let right = p.0 < (rx.start + rx.end) / 2.0;
        let gap = pt(6.0) as i32;
        let (dx, h) = if right {
            (gap, plotters::style::text_anchor::HPos::Left)
        } else {
            (-gap, plotters::style::text_anchor::HPos::Right)
        };
        let style = font(size::TICK)
            .color(&color)
            .pos(plotters::style::text_anchor::Pos::new(
                h,
                plotters::style::text_anchor::VPos::Center,
            ));
        self.chart.draw_series(std::iter::once(
            EmptyElement::at(p) + Text::new(text.to_string(), (dx, pt(dy_pt) as i32), style),
        ))?;
        Ok(())
    }
}

/// A curve sorted by x split into the parts below `lo`, within `[lo, hi]` and above `hi` (each
/// part sharing its end point with the next, so they join).
pub(crate) fn split_at_data(pts: &[(f64, f64)], (lo, hi): (f64, f64)) -> [Vec<(f64, f64)>; 3] {
    let eps = 1e-9 * lo.abs().max(hi.abs());
    let part = |keep: &dyn Fn(f64) -> bool| -> Vec<(f64, f64)> {
        pts.iter().copied().filter(|p| keep(p.0)).collect()
    };
    [
        part(&|x| x <= lo + eps),
        part(&|x| x >= lo - eps && x <= hi + eps),
        part(&|x| x >= hi - eps),
    ]
}

/// The part of segment `a`–`b` inside the rectangle (Liang–Barsky), if any.
fn clip_segment(
    a: (f64, f64),
    b: (f64, f64),
    rx: &Range<f64>,
    ry: &Range<f64>,
) -> Option<((f64, f64), (f64, f64))> {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, a.0 - rx.start),
        (dx, rx.end - a.0),
        (-dy, a.1 - ry.start),
        (dy, ry.end - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
        }
    }
    if t0 > t1 {
        return None;
    }
    let at = |t: f64| (a.0 + t * dx, a.1 + t * dy);
    Some((at(t0), at(t1)))
}

/// `polygon` clipped to the rectangle (Sutherland–Hodgman).
fn clip_polygon(polygon: Vec<(f64, f64)>, rx: &Range<f64>, ry: &Range<f64>) -> Vec<(f64, f64)> {
    type Edge = (usize, f64, bool); // axis (0 = x, 1 = y), bound, keep values >= bound
    let edges: [Edge; 4] = [
        (0, rx.start, true),
        (0, rx.end, false),
        (1, ry.start, true),
        (1, ry.end, false),
    ];
    let coord = |p: (f64, f64), axis: usize| if axis == 0 { p.0 } else { p.1 };
    let mut out = polygon;
    for (axis, bound, keep_above) in edges {
        let inside = |p: (f64, f64)| {
            let v = coord(p, axis);
            if keep_above { v >= bound } else { v <= bound }
        };
        let input = std::mem::take(&mut out);
        let n = input.len();
        for i in 0..n {
            let cur = input[i];
            let prev = input[(i + n - 1) % n];
            let cross = |a: (f64, f64), b: (f64, f64)| {
                let (va, vb) = (coord(a, axis), coord(b, axis));
                let t = (bound - va) / (vb - va);
                (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1))
            };
            match (inside(prev), inside(cur)) {
                (true, true) => out.push(cur),
                (true, false) => out.push(cross(prev, cur)),
                (false, true) => {
                    out.push(cross(prev, cur));
                    out.push(cur);
                }
                (false, false) => {}
            }
        }
    }
    out
}

/// Splits a figure into a plot area and, when there are entries, a legend column on the right
/// (`legend_in` inches wide), and draws the legend there.
pub(crate) fn with_legend<'b>(
    area: &Area<'b>,
    entries: &[LegendEntry],
    legend_in: f64,
) -> Result<Area<'b>, ReportError> {
    if entries.is_empty() {
        return Ok(area.clone());
    }
    let (w, _) = area.dim_in_pixel();
    let split = (w as f64 - legend_in * DPI).max(w as f64 * 0.45) as i32;
    let (plot, legend) = area.split_horizontally(split);
    draw_legend(&legend, entries)?;
    Ok(plot)
}

/// Draws legend entries top-down in `area`; entries that do not fit are summarised.
pub(crate) fn draw_legend(area: &Area<'_>, entries: &[LegendEntry]) -> Result<(), ReportError> {
    let (_, h) = area.dim_in_pixel();
    let row = pt(size::TICK * 1.7) as i32;
    let top = pt(14.0) as i32;
    let sample = pt(16.0) as i32;
    let fits = ((h as i32 - top) / row).max(1) as usize;
    let shown = if entries.len() > fits {
        fits - 1
    } else {
        entries.len()
    };
    for (i, e) in entries.iter().take(shown).enumerate() {
        let y = top + i as i32 * row + row / 2;
        let x0 = pt(4.0) as i32;
        match e.line {
            LineKind::Solid => {
                area.draw(&PathElement::new(
                    vec![(x0, y), (x0 + sample, y)],
                    e.color.stroke_width(px(size::LINE)),
                ))?;
            }
            LineKind::Dashed => {
                let dash = sample / 3;
                for k in [0, 2] {
                    area.draw(&PathElement::new(
                        vec![(x0 + k * dash, y), (x0 + (k + 1) * dash, y)],
                        e.color.stroke_width(px(1.2)),
                    ))?;
                }
            }
            LineKind::Band => {
                let half = row / 3;
                area.draw(&Rectangle::new(
                    [(x0, y - half), (x0 + sample, y + half)],
                    e.color.mix(0.25).filled(),
                ))?;
            }
            LineKind::None => {}
        }
        if let Some((marker, filled)) = e.marker {
            let c = (x0 + sample / 2, y);
            let r = px(size::MARKER) as i32;
            let style = if filled {
                e.color.filled()
            } else {
                e.color.stroke_width(px(1.0))
            };
            match marker {
                Marker::Circle => area.draw(&Circle::new(c, r, style))?,
                Marker::Square => {
                    let s = (r as f64 * 0.85) as i32;
                    area.draw(&Rectangle::new(
                        [(c.0 - s, c.1 - s), (c.0 + s, c.1 + s)],
                        style,
                    ))?
                }
                Marker::Triangle | Marker::Diamond => {
                    let h = (r as f64 * 1.2) as i32;
                    let pts = if marker == Marker::Triangle {
                        vec![
                            (c.0, c.1 - h),
                            (c.0 + h, c.1 + h * 3 / 4),
                            (c.0 - h, c.1 + h * 3 / 4),
                        ]
                    } else {
                        vec![
                            (c.0, c.1 - h),
                            (c.0 + h, c.1),
                            (c.0, c.1 + h),
                            (c.0 - h, c.1),
                        ]
                    };
                    if filled {
                        area.draw(&Polygon::new(pts, style))?
                    } else {
                        let mut closed = pts.clone();
                        closed.push(pts[0]);
                        area.draw(&PathElement::new(closed, style))?
                    }
                }
            }
        }
        let text_x = x0 + sample + pt(5.0) as i32;
        let room = (area.dim_in_pixel().0 as i32 - text_x).max(0) as u32;
        area.draw(&Text::new(
            fit_text(area, &e.label, room)?,
            (text_x, y),
            font(size::TICK).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Center,
            )),
        ))?;
    }
    if shown < entries.len() {
        let y = top + shown as i32 * row + row / 2;
        area.draw(&Text::new(
            format!("… and {} more", entries.len() - shown),
            (pt(4.0) as i32, y),
            font(size::TICK).color(&MUTED),
        ))?;
    }
    Ok(())
}

/// `text`, shortened with an ellipsis in the middle if it is wider than `room` pixels at the
/// legend's font.
fn fit_text(area: &Area<'_>, text: &str, room: u32) -> Result<String, ReportError> {
    let style = font(size::TICK);
    let width = |s: &str| area.estimate_text_size(s, &style).map(|(w, _)| w);
    if width(text)? <= room {
        return Ok(text.to_string());
    }
    let chars: Vec<char> = text.chars().collect();
    for keep in (4..chars.len()).rev() {
        let head = keep / 2;
        let tail = keep - head;
        let candidate: String = chars[..head]
            .iter()
            .chain(['…'].iter())
            .chain(chars[chars.len() - tail..].iter())
            .collect();
        if width(&candidate)? <= room {
            return Ok(candidate);
        }
    }
    Ok("…".to_string())
}

/// A line of muted text at the bottom-left of `area` (e.g. what is missing from a figure).
pub fn note(area: &Area<'_>, text: &str) -> Result<(), ReportError> {
    let (_, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        text.to_string(),
        (pt(6.0) as i32, h as i32 - pt(4.0) as i32),
        font(size::TICK)
            .color(&MUTED)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Bottom,
            )),
    ))?;
    Ok(())
}

/// Splits `area` into `n` panels on a grid of at most `cols` columns, row by row.
pub fn grid<'b>(area: &Area<'b>, n: usize, cols: usize) -> Vec<Area<'b>> {
    let cols = cols.clamp(1, n.max(1));
    let rows = n.div_ceil(cols).max(1);
    area.split_evenly((rows, cols))
        .into_iter()
        .take(n)
        .collect()
}

/// Splits `series` into chunks of at most `MAX_SERIES`, as evenly as possible, so no panel
/// carries more than its legend and palette can tell apart.
pub fn chunks<T: Clone>(series: &[T]) -> Vec<Vec<T>> {
    if series.is_empty() {
        return Vec::new();
    }
    let parts = series.len().div_ceil(MAX_SERIES);
    let per = series.len().div_ceil(parts);
    series.chunks(per).map(<[T]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_polygons_are_clipped_to_the_plot() {
        let (rx, ry) = (0.0..1.0, 0.0..1.0);
        assert_eq!(
            clip_segment((-1.0, 0.5), (2.0, 0.5), &rx, &ry),
            Some(((0.0, 0.5), (1.0, 0.5)))
        );
        assert_eq!(clip_segment((2.0, 2.0), (3.0, 3.0), &rx, &ry), None);
        let square = clip_polygon(
            vec![(-1.0, -1.0), (2.0, -1.0), (2.0, 2.0), (-1.0, 2.0)],
            &rx,
            &ry,
        );
        assert_eq!(square.len(), 4);
        assert!(
            square
                .iter()
                .all(|p| (0.0..=1.0).contains(&p.0) && (0.0..=1.0).contains(&p.1))
        );
    }

    #[test]
    fn a_fit_past_the_data_is_split_off_to_be_dashed() {
        // Issue 16: a supervised curve ran far past the data, drawn like the fitted part.
        let curve: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
            .iter()
            .map(|&x| (x, 10.0 / x))
            .collect();
        let [below, inside, above] = split_at_data(&curve, (2.0, 8.0));
        assert_eq!(below.iter().map(|p| p.0).collect::<Vec<_>>(), [1.0, 2.0]);
        assert_eq!(
            inside.iter().map(|p| p.0).collect::<Vec<_>>(),
            [2.0, 4.0, 8.0]
        );
        assert_eq!(
            above.iter().map(|p| p.0).collect::<Vec<_>>(),
            [8.0, 16.0, 32.0]
        );
    }

    #[test]
    fn panels_past_the_legend_limit_are_split_evenly() {
        let series: Vec<usize> = (0..25).collect();
        let parts = chunks(&series);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [9, 9, 7]);
        assert!(parts.iter().all(|p| p.len() <= MAX_SERIES));
        assert_eq!(chunks(&series[..10]).len(), 1);
    }

    #[test]
    fn seeds_are_grouped_into_mean_and_range() {
        let reps = replicates(&[(2.0, 3.0), (1.0, 5.0), (2.0, 4.0), (1.0, 5.0)]);
        assert_eq!(reps.len(), 2);
        assert_eq!(
            (reps[0].x, reps[0].mean, reps[0].values.len()),
            (1.0, 5.0, 2)
        );
        assert_eq!((reps[1].mean, reps[1].lo, reps[1].hi), (3.5, 3.0, 4.0));
    }

    #[test]
    fn si_and_power_labels_read_naturally() {
        assert_eq!(si(27_792.0), "27.8K");
        assert_eq!(si(306_432.0), "306K");
        assert_eq!(si(1.9e9), "1.9B");
        assert_eq!(si(100_000.0), "100K");
        assert_eq!(si(0.5), "0.5");
        assert_eq!(power_of_ten(1e12), "10¹²");
        assert_eq!(power_of_ten(3e-4), "3×10⁻⁴");
    }

    #[test]
    fn log_axis_over_two_teachers_gets_readable_ticks() {
        let axis = Axis::log("N", [1e5, 4e5], TickFormat::Si);
        let (major, _) = axis.ticks();
        let labels: Vec<String> = major.iter().map(|p| axis.tick_label(*p)).collect();
        assert!(labels.len() >= 2, "{labels:?}");
        assert!(labels.contains(&"100K".to_string()), "{labels:?}");
    }

    #[test]
    fn linear_ticks_are_round_numbers() {
        let (major, _) = linear_ticks(4.48, 4.66, MAX_TICKS);
        assert!(major.len() >= 3 && major.len() <= 7, "{major:?}");
        let axis = Axis {
            label: String::new(),
            log: false,
            lo: 4.48,
            hi: 4.66,
            format: TickFormat::Plain,
            max_ticks: MAX_TICKS,
        };
        assert_eq!(axis.tick_label(4.5), "4.50");
        let quarters = Axis {
            lo: 3.9,
            hi: 5.3,
            ..axis
        };
        assert_eq!(quarters.tick_label(4.25), "4.25");
    }
}
