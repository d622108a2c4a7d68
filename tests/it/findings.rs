//! The findings say each number once, on its page: every number the summaries give (the
//! bullets of `docs/src/findings/README.md`, the sentences of `README.md` that link a findings
//! page) must appear, as written, on the page they link. A summary rounded differently from
//! its page, or left behind when the page was rebuilt from new exports, fails here.

use crate::common::root;

/// The numbers of `text` as written: an optional sign where a word begins (`+0.081`,
/// `−0.52`), digits with decimal or thousands separators, and a `K`/`M` suffix (`118K`).
/// Digits inside a word (`d128x4`, `SmolLM2`) and small counts (20 or less without a decimal
/// point or suffix: seeds, teachers) are not findings.
fn numbers(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let before = i.checked_sub(1).map(|j| chars[j]);
        let word_start = before.is_none_or(|c| !c.is_alphanumeric() && c != '.');
        let signed = matches!(chars[i], '+' | '−' | '-')
            && before.is_none_or(|c| c.is_whitespace() || "([".contains(c))
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if !(word_start && (signed || chars[i].is_ascii_digit())) {
            i += 1;
            continue;
        }
        let start = i;
        i += usize::from(signed);
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
        {
            i += 1;
        }
        if i < chars.len() && matches!(chars[i], 'K' | 'M') {
            i += 1;
        }
        if chars.get(i).is_some_and(|c| c.is_alphanumeric()) {
            // a word such as `4x` or `2L`: skip it whole
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            continue;
        }
        let n: String = chars[start..i].iter().collect();
        let bare = n.trim_start_matches(['+', '−', '-']);
        let small =
            bare.chars().all(|c| c.is_ascii_digit()) && bare.parse::<u64>().is_ok_and(|v| v <= 20);
        if !small {
            out.push(n.replace('−', "-").trim_start_matches('+').to_string());
        }
    }
    out
}

/// The findings pages a piece of text links, by file name.
fn linked_pages(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(&format!("]({prefix}"))
        .filter_map(|(at, m)| {
            let rest = &text[at + m.len()..];
            let end = rest.find(')')?;
            rest[..end]
                .ends_with(".md")
                .then(|| rest[..end].to_string())
        })
        .collect()
}

/// Text without its link targets (a page name is not a number of the finding).
fn without_targets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out += &rest[..at + 1];
        rest = rest[at..].find(')').map_or("", |end| &rest[at + end + 1..]);
    }
    out + rest
}

fn page(name: &str) -> String {
    let path = root().join("docs/src/findings").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .replace('−', "-")
}

/// Each number of `summary` missing from every page it links, with the summary's beginning.
fn missing(summary: &str, prefix: &str) -> Vec<String> {
    let pages: String = linked_pages(summary, prefix)
        .iter()
        .map(|p| page(p))
        .collect();
    numbers(&without_targets(summary))
        .into_iter()
        .filter(|n| !pages.contains(n.as_str()))
        .map(|n| {
            let head: String = summary.chars().take(60).collect();
            format!("{n} (in \"{}…\")", head.replace('\n', " "))
        })
        .collect()
}

#[test]
fn numbers_are_read_as_written() {
    assert_eq!(
        numbers("+0.081 [+0.063, +0.101] nats, T* 118K–136K, d128x4 (2.24), −0.52; 14 seeds, 2L"),
        ["0.081", "0.063", "0.101", "118K", "136K", "2.24", "-0.52"]
    );
}

#[test]
fn every_summarised_number_is_on_its_findings_page() {
    let index = std::fs::read_to_string(root().join("docs/src/findings/README.md")).unwrap();
    let mut wrong = Vec::new();
    for bullet in index.split("\n- ").skip(1) {
        assert!(
            !linked_pages(bullet, "").is_empty(),
            "a findings bullet links no page: {bullet}"
        );
        wrong.extend(missing(bullet, ""));
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let prefix = "docs/src/findings/";
    let text = readme.replace("\n> ", " ").replace('\n', " ");
    for sentence in text.split(". ").filter(|s| s.contains(prefix)) {
        wrong.extend(missing(sentence, prefix));
    }
    assert!(
        wrong.is_empty(),
        "numbers of the summaries not on their findings pages:\n{}",
        wrong.join("\n")
    );
}
