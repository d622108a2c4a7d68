//! Draws a [`Figure`] into memory twice, as a PNG (through plotters' bitmap backend) and as an
//! SVG with the embedded font, through one backend type ([`Canvas`]) so each figure is written
//! once for both.

use std::error::Error;
use std::fmt;

use base64::Engine;
use plotters::coord::Shift;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use super::error::ReportError;
use super::figures::Figure;
use super::style::{self, FONT_BYTES, FONT_FAMILY};

/// The drawing area every figure draws on.
pub type Area<'a> = DrawingArea<Canvas<'a>, Shift>;

/// Either of plotters' in-memory backends.
pub enum Canvas<'a> {
    /// RGB pixels.
    Bitmap(BitMapBackend<'a>),
    /// SVG text.
    Svg(SVGBackend<'a>),
}

/// An error of either backend, as text.
#[derive(Debug)]
pub struct CanvasError(String);

impl fmt::Display for CanvasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for CanvasError {}

fn lift<E: Error + Send + Sync>(e: DrawingErrorKind<E>) -> DrawingErrorKind<CanvasError> {
    match e {
        DrawingErrorKind::DrawingError(e) => {
            DrawingErrorKind::DrawingError(CanvasError(e.to_string()))
        }
        DrawingErrorKind::FontError(e) => DrawingErrorKind::FontError(e),
    }
}

/// Forwards one backend call to whichever backend the canvas holds.
macro_rules! forward {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            Canvas::Bitmap($b) => $call.map_err(lift),
            Canvas::Svg($b) => $call.map_err(lift),
        }
    };
}

impl DrawingBackend for Canvas<'_> {
    type ErrorType = CanvasError;

    fn get_size(&self) -> (u32, u32) {
        match self {
            Canvas::Bitmap(b) => b.get_size(),
            Canvas::Svg(b) => b.get_size(),
        }
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.ensure_prepared())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.present())
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_pixel(point, color))
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_line(from, to, style))
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_rect(upper_left, bottom_right, style, fill))
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_path(path, style))
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_circle(center, radius, style, fill))
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.fill_polygon(vert, style))
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.draw_text(text, style, pos))
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<CanvasError>> {
        match self {
            Canvas::Bitmap(b) => b.estimate_text_size(text, style).map_err(lift),
            Canvas::Svg(b) => b.estimate_text_size(text, style).map_err(lift),
        }
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<CanvasError>> {
        forward!(self, b => b.blit_bitmap(pos, size, src))
    }
}

impl From<DrawingAreaErrorKind<CanvasError>> for ReportError {
    fn from(e: DrawingAreaErrorKind<CanvasError>) -> Self {
        // The figure's name is filled in by `render`.
        ReportError::draw("", e)
    }
}

/// Names the figure in a drawing error raised inside it.
fn named(figure: &str, e: ReportError) -> ReportError {
    match e {
        ReportError::Draw { figure: f, reason } if f.is_empty() => {
            ReportError::draw(figure, reason)
        }
        other => other,
    }
}

/// A figure drawn both ways.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The figure's file stem.
    pub name: String,
    /// Pixel size of the PNG (and the SVG's view box).
    pub size_px: (u32, u32),
    /// The PNG file's bytes.
    pub png: Vec<u8>,
    /// The SVG without a font (for inlining into a page that declares the font once).
    pub svg_bare: String,
}

impl Rendered {
    /// The standalone SVG file: the font, cut down to the characters the figure uses, embedded
    /// as a base64 `@font-face`, so it renders the same on machines without DejaVu Sans.
    pub fn svg_file(&self) -> String {
        embed_font(&self.svg_bare)
    }
}

/// The `@font-face` rule that declares the embedded font as a data URL, subset to the
/// characters of `text` (and printable ASCII); the whole font if subsetting fails.
pub fn font_face_css(text: &str) -> String {
    let font = super::font_subset::subset(FONT_BYTES, super::font_subset::chars_of(text))
        .unwrap_or_else(|_| FONT_BYTES.to_vec());
    format!(
        "@font-face{{font-family:'{FONT_FAMILY}';src:url(data:font/ttf;base64,{}) format('truetype');}}",
        base64::engine::general_purpose::STANDARD.encode(font)
    )
}

fn embed_font(svg: &str) -> String {
    let style = format!("<style>{}</style>\n", font_face_css(&svg_text(svg)));
    match svg.find('>') {
        Some(end) => format!("{}\n{style}{}", &svg[..=end], &svg[end + 1..]),
        None => svg.to_string(),
    }
}

/// The characters an SVG shows: the text between tags, with XML entities decoded.
pub fn svg_text(svg: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in svg.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Pixel size of a figure of `size_in` inches at [`style::DPI`].
pub fn pixel_size(size_in: (f64, f64)) -> (u32, u32) {
    (
        (size_in.0 * style::DPI).round() as u32,
        (size_in.1 * style::DPI).round() as u32,
    )
}

/// Draws `figure` as a PNG and as an SVG.
pub fn render(figure: &dyn Figure) -> Result<Rendered, ReportError> {
    style::register_font()?;
    let name = figure.name();
    let (w, h) = pixel_size(figure.size_in());
    let mut pixels = vec![255u8; w as usize * h as usize * 3];
    {
        let area =
            Canvas::Bitmap(BitMapBackend::with_buffer(&mut pixels, (w, h))).into_drawing_area();
        area.fill(&WHITE).map_err(|e| ReportError::draw(name, e))?;
        figure.draw(&area).map_err(|e| named(name, e))?;
        area.present().map_err(|e| ReportError::draw(name, e))?;
    }
    let mut svg = String::new();
    {
        let area = Canvas::Svg(SVGBackend::with_string(&mut svg, (w, h))).into_drawing_area();
        area.fill(&WHITE).map_err(|e| ReportError::draw(name, e))?;
        figure.draw(&area).map_err(|e| named(name, e))?;
        area.present().map_err(|e| ReportError::draw(name, e))?;
    }
    Ok(Rendered {
        name: name.to_string(),
        size_px: (w, h),
        png: encode_png(name, &pixels, (w, h))?,
        svg_bare: svg,
    })
}

/// RGB pixels as a PNG file with a 300-dpi `pHYs` chunk.
fn encode_png(name: &str, rgb: &[u8], (w, h): (u32, u32)) -> Result<Vec<u8>, ReportError> {
    let fail = |e: png::EncodingError| ReportError::Encode {
        figure: name.to_string(),
        reason: e.to_string(),
    };
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let per_metre = (style::DPI / 0.0254).round() as u32;
        encoder.set_pixel_dims(Some(png::PixelDimensions {
            xppu: per_metre,
            yppu: per_metre,
            unit: png::Unit::Meter,
        }));
        let mut writer = encoder.write_header().map_err(fail)?;
        writer.write_image_data(rgb).map_err(fail)?;
        writer.finish().map_err(fail)?;
    }
    Ok(out)
}
