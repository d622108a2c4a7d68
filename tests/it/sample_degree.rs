//! Samples and the distillation degree (issue 29), through the binary on real text: `sample`
//! from a finished teacher twice with one seed gives the same text and ids, from a prompt and
//! greedily too; `fit` measures every student, baseline and teacher once and prints a degree
//! row per student setting; `export` writes the `similarity` and `degrees` tables.

use std::path::Path;

use crate::common::{pdsweep, stderr, stdout};

const PLAYS: [&str; 2] = ["macbeth_gut.txt", "tempest_gut.txt"];

fn corpus(root: &Path) -> Option<()> {
    crate::common::shakespeare_plays(root, &PLAYS)
}

const SWEEP: &str = r#"
name = "degree"
seed = [1, 2]
[corpus]
kind = "text"
path = "books"
tokenizer = "byte"
val_tokens = "8K"
[model]
context = 32
[teachers]
sizes = ["20K"]
tokens = ["40K"]
seed = 1
[students]
sizes = ["8K"]
tokens = ["32K"]
[distill]
top_k = 8
[train]
batch_tokens = "1K"
evals = 1
"#;

#[test]
fn samples_repeat_with_a_seed_and_fit_gives_a_degree_per_student() {
    let tmp = tempfile::tempdir().unwrap();
    if corpus(tmp.path()).is_none() {
        return;
    }
    std::fs::write(tmp.path().join("d.toml"), SWEEP).unwrap();
    let out = pdsweep(tmp.path(), &["run", "d.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let args = [
        "sample",
        "d.toml",
        "--run",
        "teacher-20K-s1",
        "--held-out",
        "2",
        "--tokens",
        "40",
        "--seed",
        "3",
        "--json",
    ];
    let first = pdsweep(tmp.path(), &args);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = pdsweep(tmp.path(), &args);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    let doc2: serde_json::Value = serde_json::from_str(&stdout(&again)).unwrap();
    assert_eq!(
        doc["samples"], doc2["samples"],
        "the same seed gives the same text"
    );
    let samples = doc["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2);
    for s in samples {
        let ids = s["ids"].as_array().unwrap();
        assert_eq!(ids.len(), 40);
        // byte tokens: the text is the ids' bytes
        let bytes: Vec<u8> = ids.iter().map(|v| v.as_u64().unwrap() as u8).collect();
        assert_eq!(s["text"].as_str().unwrap(), String::from_utf8_lossy(&bytes));
    }
    let other = pdsweep(
        tmp.path(),
        &[
            "sample",
            "d.toml",
            "--run",
            "teacher-20K-s1",
            "--held-out",
            "2",
            "--tokens",
            "40",
            "--seed",
            "4",
            "--json",
        ],
    );
    let doc3: serde_json::Value = serde_json::from_str(&stdout(&other)).unwrap();
    assert_ne!(
        doc["samples"], doc3["samples"],
        "another seed, another text"
    );

    let greedy = pdsweep(
        tmp.path(),
        &[
            "sample",
            "d.toml",
            "--run",
            "baseline-8K-s2",
            "--prompt",
            "MACBETH.",
            "--greedy",
            "--tokens",
            "30",
        ],
    );
    assert!(greedy.status.success(), "{}", stderr(&greedy));
    assert!(
        stdout(&greedy).starts_with("MACBETH.┃"),
        "{}",
        stdout(&greedy)
    );

    let missing = pdsweep(tmp.path(), &["sample", "d.toml", "--run", "no-such-run"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no-such-run"),
        "{}",
        stderr(&missing)
    );

    let fit = pdsweep(tmp.path(), &["fit", "d.toml", "--bootstrap", "20"]);
    assert!(fit.status.success(), "{}", stderr(&fit));
    let text = stdout(&fit);
    assert!(text.contains("distillation degree"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("student-8K-from-20K"))
        .unwrap_or_else(|| panic!("no degree row: {text}"));
    assert!(row.contains(" 2 "), "two seeds: {row}");
    // measured once: a second fit measures nothing new
    let refit = pdsweep(tmp.path(), &["fit", "d.toml", "--bootstrap", "20"]);
    assert!(
        !stderr(&refit).contains("measuring similarity"),
        "{}",
        stderr(&refit)
    );

    let export = pdsweep(tmp.path(), &["export", "d.toml"]);
    assert!(export.status.success(), "{}", stderr(&export));
    let dir = tmp.path().join("results/degree/export");
    let read = |name: &str| {
        let mut r = csv::Reader::from_path(dir.join(name)).unwrap();
        let headers = r.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        (headers, rows)
    };
    let (headers, rows) = read("similarity.csv");
    // two students, two baselines, the teacher against itself
    assert_eq!(rows.len(), 5, "{rows:?}");
    let col = |h: &csv::StringRecord, name: &str| h.iter().position(|c| c == name).unwrap();
    let (kind, degree, agreement) = (
        col(&headers, "kind"),
        col(&headers, "degree_chrf"),
        col(&headers, "agreement"),
    );
    for r in &rows {
        let has_degree = !r[degree].is_empty();
        assert_eq!(has_degree, &r[kind] == "student", "{r:?}");
        let a: f64 = r[agreement].parse().unwrap();
        assert!((0.0..=1.0).contains(&a));
        if &r[kind] == "teacher" {
            assert_eq!(a, 1.0);
        }
    }
    let (headers, rows) = read("degrees.csv");
    assert_eq!(rows.len(), 1, "one student setting: {rows:?}");
    assert_eq!(&rows[0][col(&headers, "seeds")], "2");
}
