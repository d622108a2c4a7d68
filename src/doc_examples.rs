//! The documentation's examples, checked (a test-only module of the binary): every sweep file
//! a ```` ```toml ```` block of the book or the README shows plans, every `pdsweep` command a
//! ```` ```sh ```` block shows parses with the real command line, the cheap ones (`plan`, `size`,
//! `recommend --law`) run, every script a block names exists, and the command-line reference
//! (`docs/src/reference/cli.md`) is the one the parser generates.

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::cli::{Cli, Command};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README, CONTRIBUTING.md and every chapter of the book.
fn documents() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    walk(&root().join("docs/src"), &mut out);
    out
}

/// A fenced code block: its language, first line number and text.
struct Block {
    file: PathBuf,
    line: usize,
    lang: String,
    text: String,
}

/// The fenced code blocks of every document, and the example commands of tables (a table cell
/// holding only `` `pdsweep …` ``, as in the README's tour), each as a one-line `sh` block.
fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let mut open: Option<Block> = None;
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if open.is_none() && trimmed.starts_with('|') {
                for cell in trimmed.split('|').map(str::trim) {
                    if let Some(cmd) = cell
                        .strip_prefix("`pdsweep ")
                        .and_then(|c| c.strip_suffix('`'))
                    {
                        out.push(Block {
                            file: file.clone(),
                            line: n + 1,
                            lang: "sh".into(),
                            text: format!("pdsweep {cmd}\n"),
                        });
                    }
                }
            }
            match (&mut open, trimmed.strip_prefix("```")) {
                (None, Some(info)) => {
                    open = Some(Block {
                        file: file.clone(),
                        line: n + 1,
                        lang: info.trim().to_string(),
                        text: String::new(),
                    })
                }
                (Some(_), Some(_)) => out.extend(open.take()),
                (Some(b), None) => {
                    b.text.push_str(line);
                    b.text.push('\n');
                }
                (None, None) => {}
            }
        }
    }
    out
}

/// The commands of a shell block: continuation lines joined, comments dropped, split into words
/// as a shell would (quotes kept together).
fn shell_lines(text: &str) -> Vec<Vec<String>> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let words = words(&current);
        if !words.is_empty() {
            lines.push(words);
        }
        current.clear();
    }
    lines
}

fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if !started => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(word);
    }
    out
}

/// The arguments after `pdsweep` of a documented command, when it is one.
fn pdsweep_args(words: &[String]) -> Option<Vec<String>> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let rest = match w.as_slice() {
        ["pdsweep", rest @ ..] | ["target/release/pdsweep", rest @ ..] => rest,
        ["cargo", "run", "--release", "--", rest @ ..] => rest,
        _ => return None,
    };
    Some(rest.iter().map(|s| s.to_string()).collect())
}

fn at(b: &Block) -> String {
    format!(
        "{}:{}",
        b.file.strip_prefix(root()).unwrap_or(&b.file).display(),
        b.line
    )
}

#[test]
fn every_documented_command_parses_and_the_cheap_ones_run() {
    let results = tempfile::tempdir().unwrap();
    let (mut parsed, mut ran) = (0, 0);
    for b in blocks().iter().filter(|b| b.lang == "sh") {
        for words in shell_lines(&b.text) {
            let Some(args) = pdsweep_args(&words) else {
                // a script the docs name must exist
                if words[0].contains('/') && !words[0].starts_with('$') {
                    assert!(
                        root().join(&words[0]).exists(),
                        "{}: no `{}`",
                        at(b),
                        words[0]
                    );
                }
                continue;
            };
            let argv = std::iter::once("pdsweep".to_string()).chain(args.iter().cloned());
            let cli = match Cli::try_parse_from(argv) {
                Ok(cli) => cli,
                Err(e) => panic!(
                    "{}: `pdsweep {}` does not parse:\n{e}",
                    at(b),
                    args.join(" ")
                ),
            };
            parsed += 1;
            let cheap = match &cli.command {
                Command::Plan(_) => {
                    let mut a = args.clone();
                    a.extend(["--results".into(), results.path().display().to_string()]);
                    a.push("--no-probe".into());
                    Some(a)
                }
                Command::Size(_) => Some(args.clone()),
                Command::Recommend(r) if r.law.is_some() => Some(args.clone()),
                _ => None,
            };
            let Some(run) = cheap else { continue };
            let cli = Cli::try_parse_from(std::iter::once("pdsweep".to_string()).chain(run))
                .unwrap_or_else(|e| panic!("{}: {e}", at(b)));
            if let Err(e) = crate::dispatch(cli.command) {
                panic!("{}: `pdsweep {}` failed: {e:#}", at(b), args.join(" "));
            }
            ran += 1;
        }
    }
    assert!(
        parsed >= 30 && ran >= 6,
        "{parsed} commands parsed, {ran} ran"
    );
}

#[test]
fn every_documented_sweep_file_plans() {
    let mut planned = 0;
    for b in blocks().iter().filter(|b| b.lang == "toml") {
        // a whole sweep file names the sweep before its first table; others are fragments
        let top_level = b
            .text
            .lines()
            .take_while(|l| !l.trim_start().starts_with('['));
        if !top_level.clone().any(|l| l.starts_with("name = ")) {
            continue;
        }
        // a block that says which file it is must be that file, word for word
        let first = b.text.lines().next().unwrap_or_default();
        let named = first
            .strip_prefix("# ")
            .and_then(|rest| rest.split(':').next())
            .filter(|p| p.ends_with(".toml"));
        if let Some(file) = named {
            let on_disk = std::fs::read_to_string(root().join(file)).unwrap_or_default();
            assert!(
                on_disk == b.text,
                "{}: the block is not `{file}` as committed",
                at(b)
            );
        }
        let path = match named {
            Some(file) => root().join(file),
            None => root().join("docs").join(format!("example-{}.toml", b.line)),
        };
        let sweep = pdsweep::spec::Sweep::parse(&path, b.text.clone())
            .unwrap_or_else(|e| panic!("{}: the sweep file does not load:\n{e}", at(b)));
        let options = pdsweep::plan::PlanOptions::default();
        if let Err(e) = pdsweep::plan::Plan::build(&sweep, &options) {
            panic!("{}: the sweep file does not plan:\n{e}", at(b));
        }
        planned += 1;
    }
    assert!(planned >= 1, "no whole sweep file in the docs");
}

#[test]
fn the_command_line_reference_is_the_one_the_parser_writes() {
    let path = root().join("docs/src/reference/cli.md");
    let want = reference_markdown();
    if std::env::var_os("PDSWEEP_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is stale: run `PDSWEEP_BLESS=1 cargo test --release --features gpu --bin pdsweep` to rewrite it",
        path.display()
    );
}

/// The command-line reference as the parser describes itself (clap-markdown).
fn reference_markdown() -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("Command line".into())
        .show_footer(false)
        .show_table_of_contents(true);
    let generated = clap_markdown::help_markdown_custom::<Cli>(&options);
    let note = "This chapter is generated from the command-line parser (`src/cli.rs`); \
                `PDSWEEP_BLESS=1 cargo test --release --features gpu --bin pdsweep` rewrites it.\n\n";
    match generated.split_once('\n') {
        Some((title, rest)) => format!("{title}\n\n{note}{}", rest.trim_start()),
        None => generated,
    }
}

#[test]
fn shell_lines_are_split_as_a_shell_would() {
    let text = "pdsweep fit --data x.csv \\\n    --columns \"params=Model Size,loss=l\"  # fit\n# only a comment\n";
    assert_eq!(
        shell_lines(text),
        vec![vec![
            "pdsweep",
            "fit",
            "--data",
            "x.csv",
            "--columns",
            "params=Model Size,loss=l"
        ]]
    );
}
