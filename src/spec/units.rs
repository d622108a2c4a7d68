//! Number strings a sweep file uses: parameter counts (`"850K"`, `"1.9B"`), token budgets
//! (`"50M"` or tokens-per-parameter `"20x"`) and byte sizes (`"50G"`, `"2GiB"`).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The largest count pdsweep accepts anywhere (10^15): larger values are typos, and keeping
/// below it means every product of two counts still fits an `f64` exactly enough and a `u64`.
pub(crate) const MAX_COUNT: f64 = 1e15;

/// Parses a decimal count with an optional SI suffix: `K` = 10^3, `M` = 10^6, `B`/`G` = 10^9, `T` =
/// 10^12 (case-insensitive).
///
/// Fractions are allowed (`"1.9B"`) as long as the result is a whole number of at least 1.
pub fn parse_count(text: &str) -> Result<u64, String> {
    let trimmed = text.trim().replace('_', "");
    if trimmed.is_empty() {
        return Err("empty value".into());
    }
    let (number, scale) = split_suffix(
        &trimmed,
        &[("k", 1e3), ("m", 1e6), ("b", 1e9), ("g", 1e9), ("t", 1e12)],
    )
    .ok_or_else(|| format!("`{text}` has an unknown suffix (use K, M, B or T)"))?;
    to_whole(number, scale, text)
}

/// Parses a byte size: decimal suffixes `K`, `M`, `G`, `T` (10^3…), binary `Ki`, `Mi`, `Gi`, `Ti`
/// (2^10…), each optionally followed by `B`.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim().replace('_', "");
    let lower = trimmed.to_ascii_lowercase();
    let body = lower.strip_suffix('b').unwrap_or(&lower);
    if body.is_empty() {
        return Err(format!("`{text}` is not a byte size"));
    }
    const UNITS: &[(&str, f64)] = &[
        ("ki", 1024.0),
        ("mi", 1_048_576.0),
        ("gi", 1_073_741_824.0),
        ("ti", 1_099_511_627_776.0),
        ("k", 1e3),
        ("m", 1e6),
        ("g", 1e9),
        ("t", 1e12),
    ];
    let (number, scale) = split_suffix(body, UNITS).ok_or_else(|| {
        format!("`{text}` has an unknown unit (use K, M, G, T or Ki, Mi, Gi, Ti)")
    })?;
    to_whole(number, scale, text)
}

fn split_suffix<'a>(text: &'a str, units: &[(&str, f64)]) -> Option<(&'a str, f64)> {
    let lower = text.to_ascii_lowercase();
    for (suffix, scale) in units {
        if lower.ends_with(suffix) {
            return Some((&text[..text.len() - suffix.len()], *scale));
        }
    }
    if lower.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        Some((text, 1.0))
    } else {
        None
    }
}

fn to_whole(number: &str, scale: f64, original: &str) -> Result<u64, String> {
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{original}` is not a number"))?;
    let scaled = value * scale;
    if !scaled.is_finite() {
        return Err(format!("`{original}` is not a finite number"));
    }
    if scaled < 1.0 {
        return Err(format!("`{original}` must be at least 1"));
    }
    if scaled > MAX_COUNT {
        return Err(format!("`{original}` is larger than the maximum 1e15"));
    }
    let rounded = scaled.round();
    if (scaled - rounded).abs() > 1e-6 * scaled.max(1.0) {
        return Err(format!("`{original}` is not a whole number"));
    }
    Ok(rounded as u64)
}

/// Writes a count with the largest SI suffix that keeps three significant digits: `1.25M`.
pub fn format_count(value: f64) -> String {
    let abs = value.abs();
    let (scale, suffix) = if abs >= 1e12 {
        (1e12, "T")
    } else if abs >= 1e9 {
        (1e9, "B")
    } else if abs >= 1e6 {
        (1e6, "M")
    } else if abs >= 1e3 {
        (1e3, "K")
    } else {
        (1.0, "")
    };
    let scaled = value / scale;
    let text = if scaled.abs() >= 100.0 || suffix.is_empty() {
        format!("{scaled:.0}")
    } else if scaled.abs() >= 10.0 {
        format!("{scaled:.1}")
    } else {
        format!("{scaled:.2}")
    };
    format!("{}{suffix}", trim_zeros(&text))
}

/// Writes a byte count in binary units: `1.5 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Writes a duration in seconds as `3h 05m`, `12m 30s` or `45s`.
pub fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "unknown".into();
    }
    let total = seconds.round() as u64;
    let (days, hours, minutes, secs) = (
        total / 86_400,
        total / 3600 % 24,
        total / 60 % 60,
        total % 60,
    );
    if days > 0 {
        format!("{days}d {hours:02}h")
    } else if hours > 0 {
        format!("{hours}h {minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m {secs:02}s")
    } else {
        format!("{secs}s")
    }
}

fn trim_zeros(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text.to_string()
    }
}

/// Accepts a TOML integer or string and hands the string form to `parse`.
struct CountVisitor<T> {
    expecting: &'static str,
    parse: fn(&str) -> Result<T, String>,
}

impl<'de, T> Visitor<'de> for CountVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.expecting)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        (self.parse)(&v.to_string()).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        (self.parse)(&v.to_string()).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        (self.parse)(&v.to_string()).map_err(E::custom)
    }
}

macro_rules! count_newtype {
    ($(#[$doc:meta])* $name:ident, $parse:path, $expecting:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $parse(s).map($name)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_any(CountVisitor { expecting: $expecting, parse: |s| s.parse() })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_u64(self.0)
            }
        }
    };
}

count_newtype!(
    /// A parameter count or other plain count, such as `"1.9B"` or `"850K"`.
    Count,
    parse_count,
    "a count such as 850K, 1.9B or 1000000"
);
count_newtype!(
    /// A byte size, such as `"50G"` or `"2GiB"`.
    ByteSize,
    parse_bytes,
    "a byte size such as 50G or 2GiB"
);

/// A token budget: an absolute count (`"50M"`) or tokens per non-embedding parameter (`"20x"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenBudget {
    /// This many tokens.
    Absolute(u64),
    /// This many tokens per non-embedding parameter of the model being trained.
    PerParam(f64),
}

impl TokenBudget {
    /// The number of tokens for a model with `params_non_embedding` parameters.
    pub fn resolve(self, params_non_embedding: u64) -> Result<u64, String> {
        match self {
            TokenBudget::Absolute(n) => Ok(n),
            TokenBudget::PerParam(ratio) => {
                let tokens = (ratio * params_non_embedding as f64).round();
                if tokens < 1.0 {
                    Err(format!("`{self}` gives fewer than one token"))
                } else if tokens > MAX_COUNT {
                    Err(format!("`{self}` gives more than 1e15 tokens"))
                } else {
                    Ok(tokens as u64)
                }
            }
        }
    }
}

impl fmt::Display for TokenBudget {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            TokenBudget::Absolute(n) => f.write_str(&format_count(*n as f64)),
            TokenBudget::PerParam(r) => write!(f, "{}x", trim_zeros(&format!("{r:.3}"))),
        }
    }
}

impl FromStr for TokenBudget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let trimmed = s.trim();
        match trimmed.strip_suffix(['x', 'X']) {
            Some(ratio) => {
                let value: f64 = ratio.trim().parse().map_err(|_| {
                    format!("`{s}` is not a tokens-per-parameter ratio such as 20x")
                })?;
                if !value.is_finite() || value <= 0.0 {
                    return Err(format!("`{s}` must be a positive ratio"));
                }
                if value > 1e6 {
                    return Err(format!("`{s}` is more than 1e6 tokens per parameter"));
                }
                Ok(TokenBudget::PerParam(value))
            }
            None => parse_count(trimmed).map(TokenBudget::Absolute),
        }
    }
}

impl<'de> Deserialize<'de> for TokenBudget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CountVisitor {
            expecting: "a token budget such as 50M or 20x",
            parse: |s| s.parse(),
        })
    }
}

impl Serialize for TokenBudget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TokenBudget::Absolute(n) => s.serialize_u64(*n),
            TokenBudget::PerParam(_) => s.serialize_str(&self.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_suffixes() {
        assert_eq!(parse_count("850K"), Ok(850_000));
        assert_eq!(parse_count("1.9B"), Ok(1_900_000_000));
        assert_eq!(parse_count("16k"), Ok(16_000));
        assert_eq!(parse_count("2_000"), Ok(2000));
        assert_eq!(parse_count("3T"), Ok(3_000_000_000_000));
    }

    #[test]
    fn counts_refuse_nonsense() {
        for bad in [
            "", "-5M", "0", "0.5", "1.5", "abc", "5Q", "NaN", "inf", "1e16", "M",
        ] {
            assert!(parse_count(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn bytes_decimal_and_binary() {
        assert_eq!(parse_bytes("50G"), Ok(50_000_000_000));
        assert_eq!(parse_bytes("50GB"), Ok(50_000_000_000));
        assert_eq!(parse_bytes("2GiB"), Ok(2 * 1_073_741_824));
        assert_eq!(parse_bytes("512"), Ok(512));
        assert!(parse_bytes("B").is_err());
        assert!(parse_bytes("-1G").is_err());
    }

    #[test]
    fn budgets_absolute_and_relative() {
        assert_eq!(
            "50M".parse::<TokenBudget>(),
            Ok(TokenBudget::Absolute(50_000_000))
        );
        assert_eq!(
            "20x".parse::<TokenBudget>(),
            Ok(TokenBudget::PerParam(20.0))
        );
        assert_eq!(
            TokenBudget::PerParam(20.0).resolve(1_500_000),
            Ok(30_000_000)
        );
        assert!("0x".parse::<TokenBudget>().is_err());
        assert!("-3x".parse::<TokenBudget>().is_err());
        assert!("x".parse::<TokenBudget>().is_err());
    }

    #[test]
    fn formatting_is_short() {
        assert_eq!(format_count(1_250_000.0), "1.25M");
        assert_eq!(format_count(850_000.0), "850K");
        assert_eq!(format_count(12.0), "12");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_duration(3725.0), "1h 02m");
    }
}
