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
