//! How the report writes numbers: counts with K/M/B/T suffixes and decimals without trailing
//! zeros, in legends, tables and the page.

/// `s` (a formatted decimal) without trailing zeros after the point, nor a bare point.
pub fn trim(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// A count with a K/M/B/T suffix and up to three significant digits: `27.8K`, `1.9B`.
pub(crate) fn si(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "B")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let s = scaled.abs();
    let digits = if s >= 100.0 {
        0
    } else if s >= 10.0 {
        1
    } else {
        2
    };
    format!("{}{suffix}", trim(&format!("{scaled:.digits$}")))
}
