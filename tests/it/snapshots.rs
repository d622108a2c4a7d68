//! Snapshots of what a user reads: `plan`'s table for the quick-start sweep, `status` of a
//! sweep with failed and waiting runs, and the outline of the HTML report (headings, table
//! headers, paragraphs and list items, with digits masked so a refit's last digit does not
//! matter). A change to any of them fails here until the snapshot is rewritten on purpose:
//! `PDSWEEP_BLESS=1 cargo test --release --features gpu --test it snapshots::` rewrites `tests/snapshots/`.

use std::path::Path;

use crate::common::{load_fixture, pdsweep, root, stderr, stdout};

/// Compares `actual` with `tests/snapshots/NAME`, or writes it there under `PDSWEEP_BLESS`.
fn check_snapshot(name: &str, actual: &str) {
    let path = root().join("tests/snapshots").join(name);
    if std::env::var_os("PDSWEEP_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("folder")).expect("snapshot folder");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected == actual {
        return;
    }
    let first = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    panic!(
        "{} differs from the output, first at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
         if the change is intended: PDSWEEP_BLESS=1 cargo test --release --features gpu --test it snapshots::\n\
         --- actual ---\n{actual}",
        path.display(),
        first + 1,
        expected.lines().nth(first).unwrap_or("<end>"),
        actual.lines().nth(first).unwrap_or("<end>"),
    );
}

/// `text` with the machine's folders named by role.
fn portable(text: &str, tmp: &Path) -> String {
    text.replace(&tmp.display().to_string(), "<tmp>")
        .replace(&root().display().to_string(), "<repo>")
}

#[test]
fn plan_table_of_the_quick_start_sweep() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = tmp.path().join("results").display().to_string();
    let sweep = root().join("sweeps/quickstart.toml").display().to_string();
    let out = pdsweep(
        tmp.path(),
        &[
            "plan",
            &sweep,
            "--results",
            &results,
            "--flops-per-s",
            "1e10",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = format!("{}{}", stdout(&out), stderr(&out));
    check_snapshot("plan-quickstart.txt", &portable(&text, tmp.path()));
}

#[test]
fn status_of_a_sweep_with_failed_and_waiting_runs() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let conn = rusqlite::Connection::open(results.join("gap16/sweep.db")).expect("db");
    conn.execute_batch(
        "UPDATE runs SET state = 'failed', error = 'loss became NaN at step 12'
           WHERE name = 'student-30K-from-200K-s2';
         UPDATE runs SET state = 'planned' WHERE name = 'baseline-30K-s2';",
    )
    .expect("edit the fixture");
    drop(conn);
    let sweep = root()
        .join("tests/fixtures/gap16.toml")
        .display()
        .to_string();
    let out = pdsweep(
        tmp.path(),
        &[
            "status",
            &sweep,
            "--results",
            &results.display().to_string(),
        ],
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    check_snapshot("status-gap16.txt", &portable(&text, tmp.path()));
}

/// The readable outline of a report page: each heading, table header, paragraph, list item
/// and caption as one line, tags and figures dropped, digits masked.
fn outline(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    let skip = ["<style", "<script", "<svg"];
    while let Some(open) = rest.find('<') {
        let after = &rest[open..];
        if let Some(tag) = skip.iter().find(|t| after.starts_with(**t)) {
            let close = format!("</{}>", &tag[1..]);
            rest = after.find(&close).map_or("", |i| &after[i + close.len()..]);
            continue;
        }
        let name: String = after[1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let kept = ["h1", "h2", "h3", "th", "li", "p", "figcaption"];
        let close = format!("</{name}>");
        match (kept.contains(&name.as_str()), after.find(&close)) {
            (true, Some(end)) => {
                let body = &after[..end];
                out.push_str(&format!("{name}: {}\n", masked(&text_of(body))));
                rest = &after[end + close.len()..];
            }
            _ => rest = &after[1..],
        }
    }
    out
}

/// The text of an HTML fragment: tags removed, entities of the page decoded, spaces collapsed.
fn text_of(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every run of digits (with its decimal point and exponent) as `#`.
fn masked(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '.' || *n == 'e')
            {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn report_page_outline_of_the_gap16_sweep() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = load_fixture(tmp.path(), "gap16");
    let db = results.join("gap16/sweep.db").display().to_string();
    let fit = pdsweep(tmp.path(), &["fit", "--db", &db, "--bootstrap", "50"]);
    assert!(fit.status.success(), "{}", stderr(&fit));
    let out_dir = tmp.path().join("out");
    let out = pdsweep(
        tmp.path(),
        &[
            "report",
            "gap16",
            "--results",
            &results.display().to_string(),
            "--out",
            &out_dir.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(out_dir.join("index.html")).expect("page");
    check_snapshot(
        "report-gap16-outline.txt",
        &portable(&outline(&page), tmp.path()),
    );
}

#[test]
fn the_outline_keeps_text_drops_figures_and_masks_digits() {
    let page = "<style>p{}</style><h2 id=\"a\">Fits</h2><svg><text>9</text></svg>\
                <p>T* is <strong>120K</strong> (1.5e3 &amp; 2)</p><td>7</td>";
    assert_eq!(outline(page), "h2: Fits\np: T* is #K (# & #)\n");
}
