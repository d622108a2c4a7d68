//! The house rule on length: no function in `src/` (outside `#[cfg(test)]` modules) is longer
//! than [`MAX_LINES`] lines, counted from its `fn` line to its closing brace at the same
//! indentation. A long function is split into small named stages, each a function taking what
//! it needs and returning a value.

use std::collections::BTreeSet;

use super::layers::{rust_files, src};

/// The most lines a function may span.
const MAX_LINES: usize = 120;

/// The lines of `text` outside its `#[cfg(test)]` modules (each dropped from the attribute to
/// the closing brace at the module's indentation).
fn without_test_modules(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let next = lines.get(i + 1).copied().unwrap_or("");
        let opens_module = {
            let t = next.trim_start();
            let t = t.strip_prefix("pub ").unwrap_or(t);
            t.starts_with("mod ") && t.trim_end().ends_with('{')
        };
        if lines[i].trim() == "#[cfg(test)]" && opens_module {
            let close = format!("{}}}", indentation(next));
            i += 2;
            while i < lines.len() && lines[i].trim_end() != close {
                i += 1;
            }
            i += 1;
            continue;
        }
        out.push(lines[i]);
        i += 1;
    }
    out
}

/// The leading whitespace of `line`.
fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The name of the function `line` declares, when it starts one.
fn fn_name(line: &str) -> Option<&str> {
    let mut t = line.trim_start();
    if let Some(rest) = t.strip_prefix("pub(") {
        t = rest.split_once(") ")?.1;
    }
    for prefix in ["pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
        t = t.strip_prefix(prefix).unwrap_or(t);
    }
    let rest = t.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Each function with a body in `lines`: its name and its length in lines, from its `fn` line
/// to its closing brace at the same indentation (a declaration without a body is skipped).
fn function_lengths(lines: &[&str]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else {
            continue;
        };
        let Some(open) = (i..lines.len())
            .find(|&j| lines[j].contains('{') || lines[j].trim_end().ends_with(';'))
        else {
            continue;
        };
        if !lines[open].contains('{') || lines[open].trim_end().ends_with('}') {
            continue; // a declaration, or a body on one line
        }
        let close = format!("{}}}", indentation(line));
        if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j].trim_end() == close) {
            out.push((name.to_string(), end - i + 1));
        }
    }
    out
}

#[test]
fn no_function_in_src_is_longer_than_120_lines() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut long = BTreeSet::new();
    for path in &files {
        let rel = path.strip_prefix(&root).unwrap();
        let rel = rel
            .iter()
            .map(|p| p.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let text = std::fs::read_to_string(path).unwrap();
        for (name, length) in function_lengths(&without_test_modules(&text)) {
            if length > MAX_LINES {
                long.insert((rel.clone(), name, length));
            }
        }
    }
    let new: Vec<String> = long
        .iter()
        .map(|(f, n, l)| format!("src/{f} `{n}` ({l} lines)"))
        .collect();
    assert!(
        new.is_empty(),
        "functions over {MAX_LINES} lines: {}\nsplit each into small named stages (a function per stage, taking what it needs and returning a value)",
        new.join(", ")
    );
}

#[test]
fn the_length_check_counts_from_fn_to_its_closing_brace_outside_test_modules() {
    let text = "pub(crate) fn a(\n    x: u8,\n) -> u8 {\n    x\n}\ntrait T {\n    fn b(&self);\n    fn c(&self) {\n        let _ = 1;\n    }\n}\nfn d() { }\n#[cfg(test)]\nmod tests {\n    fn e() {\n    }\n}\n";
    let lengths = function_lengths(&without_test_modules(text));
    assert_eq!(lengths, vec![("a".to_string(), 5), ("c".to_string(), 3)]);
}

/// The fields named like a cause (`reason`, `cause`, `source`) that an error type of `lines`
/// (one deriving `Error`) declares as `String`: `(type, field)`.
fn causes_as_text(lines: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if !(t.starts_with("#[derive(") && t.contains("Error")) {
            continue;
        }
        let Some(item) = (i + 1..lines.len()).find(|&j| {
            let t = lines[j].trim_start();
            let t = t.strip_prefix("pub(crate) ").unwrap_or(t);
            let t = t.strip_prefix("pub ").unwrap_or(t);
            t.starts_with("enum ") || t.starts_with("struct ")
        }) else {
            continue;
        };
        let close = format!("{}}}", indentation(lines[item]));
        let name = lines[item].trim().trim_end_matches('{').trim().to_string();
        for field in lines[item + 1..]
            .iter()
            .take_while(|l| l.trim_end() != close)
        {
            let f = field.trim_start();
            let f = f.strip_prefix("pub(crate) ").unwrap_or(f);
            let f = f.strip_prefix("pub ").unwrap_or(f);
            for cause in ["reason", "cause", "source"] {
                if f.starts_with(&format!("{cause}: String")) {
                    out.push((name.clone(), cause.to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn errors_keep_their_causes_as_values_not_text() {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut as_text = Vec::new();
    let mut stringified = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let lines = without_test_modules(&text);
        let shown = path.strip_prefix(&root).unwrap().display().to_string();
        for (item, field) in causes_as_text(&lines) {
            as_text.push(format!("src/{shown}: `{item}` field `{field}: String`"));
        }
        for (n, line) in lines.iter().enumerate() {
            if line.contains("map_err(|e| e.to_string())") {
                stringified.push(format!("src/{shown} line {}", n + 1));
            }
        }
    }
    assert!(
        as_text.is_empty(),
        "error types holding their cause as text: {}\nkeep the cause as a value: `#[source] source: crate::error::Cause` (or the error type itself)",
        as_text.join("; ")
    );
    assert!(
        stringified.is_empty(),
        "errors turned into text with `map_err(|e| e.to_string())`: {}\nwrap the error as the `#[source]` of an error type, or `?` it into a `crate::error::Cause`",
        stringified.join("; ")
    );
}

#[test]
fn the_cause_check_finds_a_reason_field_of_an_error_type_only() {
    let text = "#[derive(Debug, thiserror::Error)]\npub enum E {\n    #[error(\"x\")]\n    A {\n        reason: String,\n    },\n}\n#[derive(Debug)]\npub struct Skipped {\n    pub reason: String,\n}\n";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        causes_as_text(&lines),
        vec![("pub enum E".to_string(), "reason".to_string())]
    );
}
