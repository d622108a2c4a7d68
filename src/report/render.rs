//! Draws a [`Figure`] into memory twice, as a PNG (through plotters' bitmap backend) and as an
//! SVG with the embedded font, through one backend type ([`Canvas`]) so each figure is written
//! once for both.

use base64::Engine;
use plotters::prelude::*;

use super::canvas::Canvas;
use super::error::ReportError;
use super::figures::Figure;
use super::style::{self, FONT_BYTES, FONT_FAMILY};

/// Names the figure in a drawing error raised inside it.
fn named(figure: &str, e: ReportError) -> ReportError {
    match e {
        ReportError::Draw { figure: f, source } if f.is_empty() => ReportError::Draw {
            figure: figure.to_string(),
            source,
        },
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
pub(crate) fn font_face_css(text: &str) -> String {
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
pub(crate) fn svg_text(svg: &str) -> String {
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
pub(crate) fn pixel_size(size_in: (f64, f64)) -> (u32, u32) {
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
        source: e.into(),
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
