//! A TrueType font cut down to the characters a figure or page uses, so an SVG or the report
//! page embeds a few tens of kilobytes instead of the whole 760 KB font.
//!
//! Glyphs are renumbered (`.notdef` first, then the glyphs the characters map to and the
//! components of composite glyphs); `glyf`, `loca`, `hmtx`, `cmap` (format 4, plus format 12
//! beyond the BMP) and `post` (version 3, no glyph names) are rebuilt; `head`, `hhea` and `maxp`
//! get the new counts; `kern` keeps the pairs between kept glyphs; `OS/2`, `name` (which carries
//! the copyright and licence), `cvt `, `fpgm`, `prep` and `gasp` are copied; the layout tables
//! (`GPOS`, `GSUB`, `GDEF`, `MATH`) and per-glyph device tables (`hdmx`, ...) are dropped. Browsers accept the result (Chromium's OTS sanitiser is
//! checked in `tests/report.rs`), and `tests` below check that text draws pixel for pixel as
//! with the whole font.

use std::collections::{BTreeMap, BTreeSet};

/// Why a font could not be subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetError(pub String);

impl std::fmt::Display for SubsetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(what: impl Into<String>) -> Result<T, SubsetError> {
    Err(SubsetError(what.into()))
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, SubsetError> {
    match b.get(at..at + 2) {
        Some(s) => Ok(u16::from_be_bytes([s[0], s[1]])),
        None => err(format!("truncated font data at byte {at}")),
    }
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, SubsetError> {
    match b.get(at..at + 4) {
        Some(s) => Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
        None => err(format!("truncated font data at byte {at}")),
    }
}

/// The tables of a font file, by tag.
struct Tables<'a>(BTreeMap<[u8; 4], &'a [u8]>);

impl<'a> Tables<'a> {
    fn read(font: &'a [u8]) -> Result<Self, SubsetError> {
        let version = u32_at(font, 0)?;
        if version != 0x0001_0000 && version != u32::from_be_bytes(*b"true") {
            return err("not a TrueType font (glyf outlines)");
        }
        let n = u16_at(font, 4)? as usize;
        let mut map = BTreeMap::new();
        for i in 0..n {
            let rec = 12 + 16 * i;
            let tag: [u8; 4] = match font.get(rec..rec + 4) {
                Some(t) => [t[0], t[1], t[2], t[3]],
                None => return err("truncated table directory"),
            };
            let offset = u32_at(font, rec + 8)? as usize;
            let length = u32_at(font, rec + 12)? as usize;
            match font.get(offset..offset + length) {
                Some(data) => map.insert(tag, data),
                None => return err(format!("table {} lies outside the file", tag_str(&tag))),
            };
        }
        Ok(Tables(map))
    }

    fn get(&self, tag: &[u8; 4]) -> Result<&'a [u8], SubsetError> {
        match self.0.get(tag) {
            Some(t) => Ok(t),
            None => err(format!("the font has no `{}` table", tag_str(tag))),
        }
    }
}

fn tag_str(tag: &[u8; 4]) -> String {
    String::from_utf8_lossy(tag).into_owned()
}

/// Glyph id of `c` by the font's Unicode `cmap` subtable (format 4 or 12); 0 when unmapped.
fn glyph_of(cmap: &[u8], c: char) -> Result<u16, SubsetError> {
    let n = u16_at(cmap, 2)? as usize;
    let mut best: Option<(u8, usize)> = None;
    for i in 0..n {
        let rec = 4 + 8 * i;
        let (platform, encoding) = (u16_at(cmap, rec)?, u16_at(cmap, rec + 2)?);
        let offset = u32_at(cmap, rec + 4)? as usize;
        let format = u16_at(cmap, offset)?;
        let rank = match (platform, encoding, format) {
            (3, 10, 12) | (0, 4, 12) | (0, 6, 12) => 2,
            (3, 1, 4) | (0, 3, 4) | (0, _, 4) => 1,
            _ => continue,
        };
        if best.is_none_or(|(r, _)| rank > r) {
            best = Some((rank, offset));
        }
    }
    let Some((_, at)) = best else {
        return err("the font has no Unicode cmap subtable of format 4 or 12");
    };
    let code = c as u32;
    if u16_at(cmap, at)? == 12 {
        let groups = u32_at(cmap, at + 12)? as usize;
        for g in 0..groups {
            let rec = at + 16 + 12 * g;
            let (start, end, gid) = (
                u32_at(cmap, rec)?,
                u32_at(cmap, rec + 4)?,
                u32_at(cmap, rec + 8)?,
            );
            if (start..=end).contains(&code) {
                return Ok((gid + code - start) as u16);
            }
        }
        return Ok(0);
    }
    if code > 0xFFFF {
        return Ok(0);
    }
    let code = code as u16;
    let segs = u16_at(cmap, at + 6)? as usize / 2;
    let ends = at + 14;
    let starts = ends + 2 * segs + 2;
    let deltas = starts + 2 * segs;
    let ranges = deltas + 2 * segs;
    for s in 0..segs {
        let end = u16_at(cmap, ends + 2 * s)?;
        if code > end {
            continue;
        }
        let start = u16_at(cmap, starts + 2 * s)?;
        if code < start {
            return Ok(0);
        }
        let delta = u16_at(cmap, deltas + 2 * s)?;
        let range = u16_at(cmap, ranges + 2 * s)? as usize;
        if range == 0 {
            return Ok(code.wrapping_add(delta));
        }
        let at = ranges + 2 * s + range + 2 * (code - start) as usize;
        let g = u16_at(cmap, at)?;
        return Ok(if g == 0 { 0 } else { g.wrapping_add(delta) });
    }
    Ok(0)
}

/// The bytes of glyph `gid` in `glyf` by `loca` (`long`: 32-bit offsets).
fn glyph_bytes<'a>(
    glyf: &'a [u8],
    loca: &[u8],
    long: bool,
    gid: u16,
) -> Result<&'a [u8], SubsetError> {
    let i = gid as usize;
    let (a, b) = if long {
        (
            u32_at(loca, 4 * i)? as usize,
            u32_at(loca, 4 * i + 4)? as usize,
        )
    } else {
        (
            2 * u16_at(loca, 2 * i)? as usize,
            2 * u16_at(loca, 2 * i + 2)? as usize,
        )
    };
    match glyf.get(a..b) {
        Some(g) => Ok(g),
        None => err(format!("glyph {gid} lies outside the glyf table")),
    }
}

/// Positions (byte offsets of the glyph index) and glyph ids of a composite glyph's components.
fn components(glyph: &[u8]) -> Result<Vec<(usize, u16)>, SubsetError> {
    if glyph.len() < 10 || (u16_at(glyph, 0)? as i16) >= 0 {
        return Ok(Vec::new());
    }
    const WORDS: u16 = 0x0001;
    const SCALE: u16 = 0x0008;
    const MORE: u16 = 0x0020;
    const XY_SCALE: u16 = 0x0040;
    const TWO_BY_TWO: u16 = 0x0080;
    let mut out = Vec::new();
    let mut at = 10;
    loop {
        let flags = u16_at(glyph, at)?;
        out.push((at + 2, u16_at(glyph, at + 2)?));
        at += 4 + if flags & WORDS != 0 { 4 } else { 2 };
        at += if flags & SCALE != 0 {
            2
        } else if flags & XY_SCALE != 0 {
            4
        } else if flags & TWO_BY_TWO != 0 {
            8
        } else {
            0
        };
        if flags & MORE == 0 {
            return Ok(out);
        }
    }
}

/// A `cmap` table with a format-4 subtable (and a format-12 one when a character is beyond the
/// BMP) mapping `map`'s characters to new glyph ids.
fn build_cmap(map: &BTreeMap<u32, u16>) -> Vec<u8> {
    // Format 4: runs of consecutive codes with consecutive glyph ids share a segment.
    let mut segs: Vec<(u16, u16, u16)> = Vec::new(); // start, end, first glyph
    for (&code, &gid) in map.range(..0x10000) {
        let code = code as u16;
        match segs.last_mut() {
            Some(s) if s.1.wrapping_add(1) == code && s.2 + (code - s.0) == gid => s.1 = code,
            _ => segs.push((code, code, gid)),
        }
    }
    segs.push((0xFFFF, 0xFFFF, 0));
    let n = segs.len();
    let mut f4 = Vec::new();
    let selector = 15 - (n as u16).leading_zeros() as u16; // floor(log2 n)
    let search = 2 * (1u16 << selector);
    let length = 16 + 8 * n;
    for v in [
        4u16,
        length as u16,
        0,
        2 * n as u16,
        search,
        selector,
        2 * n as u16 - search,
    ] {
        f4.extend(v.to_be_bytes());
    }
    segs.iter().for_each(|s| f4.extend(s.1.to_be_bytes()));
    f4.extend(0u16.to_be_bytes());
    segs.iter().for_each(|s| f4.extend(s.0.to_be_bytes()));
    for s in &segs {
        let delta = if s.0 == 0xFFFF {
            1u16
        } else {
            s.2.wrapping_sub(s.0)
        };
        f4.extend(delta.to_be_bytes());
    }
    segs.iter().for_each(|_| f4.extend(0u16.to_be_bytes()));
    let wide: Vec<(u32, u16)> = map.iter().map(|(c, g)| (*c, *g)).collect();
    let needs_12 = wide.iter().any(|(c, _)| *c > 0xFFFF);
    let mut out = Vec::new();
    let subtables: u16 = if needs_12 { 2 } else { 1 };
    out.extend(0u16.to_be_bytes());
    out.extend(subtables.to_be_bytes());
    let first = 4 + 8 * subtables as u32;
    out.extend(3u16.to_be_bytes());
    out.extend(1u16.to_be_bytes());
    out.extend(first.to_be_bytes());
    if needs_12 {
        out.extend(3u16.to_be_bytes());
        out.extend(10u16.to_be_bytes());
        out.extend((first + f4.len() as u32).to_be_bytes());
    }
    out.extend(&f4);
    if needs_12 {
        let mut f12 = Vec::new();
        f12.extend(12u16.to_be_bytes());
        f12.extend(0u16.to_be_bytes());
        f12.extend((16 + 12 * wide.len() as u32).to_be_bytes());
        f12.extend(0u32.to_be_bytes());
        f12.extend((wide.len() as u32).to_be_bytes());
        for (c, g) in wide {
            f12.extend(c.to_be_bytes());
            f12.extend(c.to_be_bytes());
            f12.extend(u32::from(g).to_be_bytes());
        }
        out.extend(f12);
    }
    out
}

/// The `kern` table's format-0 pairs between kept glyphs, renumbered (plotters and browsers
/// both kern with it). `None` when the font has no such pairs.
fn subset_kern(kern: &[u8], new_id: &BTreeMap<u16, u16>) -> Result<Option<Vec<u8>>, SubsetError> {
    if u16_at(kern, 0)? != 0 {
        return Ok(None);
    }
    let mut pairs: Vec<(u16, u16, u16)> = Vec::new();
    let mut coverage = 1u16;
    let mut at = 4;
    for _ in 0..u16_at(kern, 2)? {
        let length = u16_at(kern, at + 2)? as usize;
        let cov = u16_at(kern, at + 4)?;
        if cov >> 8 == 0 {
            coverage = cov;
            let n = u16_at(kern, at + 6)? as usize;
            for i in 0..n {
                let rec = at + 14 + 6 * i;
                let (l, r, v) = (
                    u16_at(kern, rec)?,
                    u16_at(kern, rec + 2)?,
                    u16_at(kern, rec + 4)?,
                );
                if let (Some(&l), Some(&r)) = (new_id.get(&l), new_id.get(&r)) {
                    pairs.push((l, r, v));
                }
            }
        }
        at += length.max(6);
    }
    if pairs.is_empty() {
        return Ok(None);
    }
    pairs.sort_by_key(|p| (p.0, p.1));
    pairs.dedup_by_key(|p| (p.0, p.1));
    let n = pairs.len() as u16;
    let selector = 15 - n.leading_zeros() as u16;
    let search = 6 * (1u16 << selector);
    let mut out = Vec::new();
    for v in [0u16, 1, 0, (14 + 6 * pairs.len()) as u16, coverage] {
        out.extend(v.to_be_bytes());
    }
    for v in [n, search, selector, 6 * n - search] {
        out.extend(v.to_be_bytes());
    }
    for (l, r, v) in pairs {
        for x in [l, r, v] {
            out.extend(x.to_be_bytes());
        }
    }
    Ok(Some(out))
}

fn checksum(data: &[u8]) -> u32 {
    data.chunks(4).fold(0u32, |sum, c| {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        sum.wrapping_add(u32::from_be_bytes(w))
    })
}

/// Writes the tables as a font file (tags sorted, 4-byte aligned, checksums, and the `head`
/// checksum adjustment).
fn assemble(tables: BTreeMap<[u8; 4], Vec<u8>>) -> Vec<u8> {
    let n = tables.len() as u16;
    let pow = 1u16 << (15 - n.leading_zeros() as u16);
    let search = pow * 16;
    let mut out = Vec::new();
    out.extend(0x0001_0000u32.to_be_bytes());
    for v in [n, search, pow.trailing_zeros() as u16, n * 16 - search] {
        out.extend(v.to_be_bytes());
    }
    let mut offset = 12 + 16 * tables.len();
    let mut head_at = None;
    for (tag, data) in &tables {
        out.extend(tag);
        out.extend(checksum(data).to_be_bytes());
        out.extend((offset as u32).to_be_bytes());
        out.extend((data.len() as u32).to_be_bytes());
        if tag == b"head" {
            head_at = Some(offset);
        }
        offset += data.len().div_ceil(4) * 4;
    }
    for data in tables.values() {
        out.extend(data);
        out.resize(out.len().div_ceil(4) * 4, 0);
    }
    if let Some(at) = head_at {
        let adjust = 0xB1B0_AFBAu32.wrapping_sub(checksum(&out));
        out[at + 8..at + 12].copy_from_slice(&adjust.to_be_bytes());
    }
    out
}

/// `font` (TrueType) cut down to the glyphs of `chars` (and `.notdef`).
pub fn subset(font: &[u8], chars: impl IntoIterator<Item = char>) -> Result<Vec<u8>, SubsetError> {
    let t = Tables::read(font)?;
    let (head, hhea, maxp, hmtx, loca, glyf, cmap, post) = (
        t.get(b"head")?,
        t.get(b"hhea")?,
        t.get(b"maxp")?,
        t.get(b"hmtx")?,
        t.get(b"loca")?,
        t.get(b"glyf")?,
        t.get(b"cmap")?,
        t.get(b"post")?,
    );
    let long = u16_at(head, 50)? != 0;
    let num_glyphs = u16_at(maxp, 4)?;
    let metrics = u16_at(hhea, 34)?;

    // Old glyph ids: .notdef, the characters' glyphs, and composite components (transitively).
    let mut by_char: BTreeMap<u32, u16> = BTreeMap::new();
    for c in chars {
        let g = glyph_of(cmap, c)?;
        if g != 0 && g < num_glyphs {
            by_char.insert(c as u32, g);
        }
    }
    let mut keep: BTreeSet<u16> = by_char.values().copied().collect();
    keep.insert(0);
    let mut todo: Vec<u16> = keep.iter().copied().collect();
    while let Some(g) = todo.pop() {
        for (_, c) in components(glyph_bytes(glyf, loca, long, g)?)? {
            if c < num_glyphs && keep.insert(c) {
                todo.push(c);
            }
        }
    }
    let new_id: BTreeMap<u16, u16> = keep
        .iter()
        .enumerate()
        .map(|(i, g)| (*g, i as u16))
        .collect();

    let mut new_glyf = Vec::new();
    let mut new_loca = Vec::new();
    let mut new_hmtx = Vec::new();
    for &old in &keep {
        new_loca.extend((new_glyf.len() as u32).to_be_bytes());
        let mut g = glyph_bytes(glyf, loca, long, old)?.to_vec();
        for (at, c) in components(&g)? {
            let id = new_id.get(&c).copied().unwrap_or(0);
            g[at..at + 2].copy_from_slice(&id.to_be_bytes());
        }
        new_glyf.extend(&g);
        new_glyf.resize(new_glyf.len().div_ceil(4) * 4, 0);
        let m = old.min(metrics.saturating_sub(1)) as usize;
        let advance = u16_at(hmtx, 4 * m)?;
        let lsb = if old < metrics {
            u16_at(hmtx, 4 * m + 2)?
        } else {
            u16_at(hmtx, 4 * metrics as usize + 2 * (old - metrics) as usize)?
        };
        new_hmtx.extend(advance.to_be_bytes());
        new_hmtx.extend(lsb.to_be_bytes());
    }
    new_loca.extend((new_glyf.len() as u32).to_be_bytes());
    let count = keep.len() as u16;

    let mut head = head.to_vec();
    head[8..12].copy_from_slice(&[0; 4]);
    head[50..52].copy_from_slice(&1u16.to_be_bytes());
    let mut hhea = hhea.to_vec();
    hhea[34..36].copy_from_slice(&count.to_be_bytes());
    let mut maxp = maxp.to_vec();
    maxp[4..6].copy_from_slice(&count.to_be_bytes());
    let mut post = post.get(..32).unwrap_or(post).to_vec();
    if post.len() < 32 {
        return err("the post table is too short");
    }
    post[0..4].copy_from_slice(&0x0003_0000u32.to_be_bytes());
    let cmap_map: BTreeMap<u32, u16> = by_char
        .iter()
        .map(|(c, g)| (*c, new_id.get(g).copied().unwrap_or(0)))
        .collect();

    let mut out: BTreeMap<[u8; 4], Vec<u8>> = BTreeMap::new();
    out.insert(*b"head", head);
    out.insert(*b"hhea", hhea);
    out.insert(*b"maxp", maxp);
    out.insert(*b"hmtx", new_hmtx);
    out.insert(*b"loca", new_loca);
    out.insert(*b"glyf", new_glyf);
    out.insert(*b"cmap", build_cmap(&cmap_map));
    out.insert(*b"post", post);
    if let Some(kern) = t.0.get(b"kern")
        && let Some(k) = subset_kern(kern, &new_id)?
    {
        out.insert(*b"kern", k);
    }
    for tag in [b"OS/2", b"name", b"cvt ", b"fpgm", b"prep", b"gasp"] {
        if let Some(data) = t.0.get(tag) {
            out.insert(*tag, data.to_vec());
        }
    }
    Ok(assemble(out))
}

/// Every character of `text` plus printable ASCII (so a figure edited by hand still finds its
/// letters), for [`subset`].
pub(crate) fn chars_of(text: &str) -> BTreeSet<char> {
    let mut set: BTreeSet<char> = (' '..='~').collect();
    set.extend(text.chars().filter(|c| !c.is_control()));
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::style::FONT_BYTES;

    #[test]
    fn the_subset_keeps_the_glyphs_of_its_characters_and_is_small() {
        let text = "Held-out loss (nats/token) 10⁹ ×α β γ ‖ T* — ≥ µ Ω";
        let small = subset(FONT_BYTES, chars_of(text)).expect("subset");
        assert!(
            small.len() < 60_000,
            "{} bytes (the whole font is {})",
            small.len(),
            FONT_BYTES.len()
        );
        let t = Tables::read(&small).expect("readable");
        let cmap = t.get(b"cmap").expect("cmap");
        let (glyf, loca) = (t.get(b"glyf").expect("glyf"), t.get(b"loca").expect("loca"));
        let full = Tables::read(FONT_BYTES).expect("font");
        let (fglyf, floca, fcmap) = (
            full.get(b"glyf").expect("glyf"),
            full.get(b"loca").expect("loca"),
            full.get(b"cmap").expect("cmap"),
        );
        let flong = u16_at(full.get(b"head").expect("head"), 50).expect("head") != 0;
        for c in text.chars().filter(|c| *c != ' ') {
            let g = glyph_of(cmap, c).expect("lookup");
            assert_ne!(g, 0, "`{c}` is mapped");
            let ours = glyph_bytes(glyf, loca, true, g).expect("glyph");
            let theirs =
                glyph_bytes(fglyf, floca, flong, glyph_of(fcmap, c).expect("lookup")).expect("g");
            if components(theirs).expect("parse").is_empty() {
                assert_eq!(&ours[..theirs.len()], theirs, "`{c}` keeps its outline");
            }
        }
        assert_eq!(
            glyph_of(cmap, '字').expect("lookup"),
            0,
            "unused glyphs are gone"
        );
        // The checksum adjustment makes the whole file sum to the magic number.
        assert_eq!(checksum(&small), 0xB1B0_AFBA);
    }

    #[test]
    fn text_drawn_with_the_subset_matches_the_whole_font_pixel_for_pixel() {
        use plotters::prelude::*;
        let text = "Loss 4.25 ≥ T* = 2.5·S^0.91 (αβγ) 10¹²";
        let small = subset(FONT_BYTES, chars_of(text)).expect("subset");
        let draw = |family: &'static str, bytes: &'static [u8]| -> Vec<u8> {
            plotters::style::register_font(family, FontStyle::Normal, bytes)
                .map_err(|_| "font")
                .expect("a valid font");
            let mut px = vec![255u8; 900 * 80 * 3];
            {
                let area = BitMapBackend::with_buffer(&mut px, (900, 80)).into_drawing_area();
                area.draw(&Text::new(text, (5, 20), (family, 40.0).into_font()))
                    .expect("draw");
                area.present().expect("present");
            }
            px
        };
        let leaked: &'static [u8] = Box::leak(small.into_boxed_slice());
        let ours = draw("subset-test", leaked);
        let theirs = draw("whole-test", FONT_BYTES);
        assert!(theirs.iter().any(|p| *p < 128), "the text drew something");
        assert!(ours == theirs, "the subset draws the same pixels");
    }
}
