//! Distillation across tokenizers (issue 27), through the binary on real text: students of one
//! trained BPE tokenizer distil from a teacher of another trained BPE of a different size,
//! offline (an aligned logit store) and online, with ULD and GOLD's hybrid; every run
//! finishes, the store records the teacher's tokenizer, offline and online students agree, the
//! fit compares the teacher by bits per byte; a pair of tokenizers without `cross_tokenizer` is
//! refused naming the key.

use std::path::Path;

use crate::common::{pdsweep, stderr, stdout};
use pdsweep::plan::RunKind;
use pdsweep::store::SweepDb;

const PLAYS: [&str; 2] = ["macbeth_gut.txt", "tempest_gut.txt"];

fn sweep(distill: &str) -> String {
    format!(
        r#"
name = "cross"
[corpus]
kind = "text"
path = "books"
tokenizer = "bpe"
vocab_size = 384
val_tokens = "4K"
[model]
context = 32
[teachers]
tokens = ["48K"]
[[teachers.models]]
name = "t-bpe640"
size = "20K"
tokenizer = "bpe"
vocab_size = 640
[students]
sizes = ["8K"]
tokens = ["24K"]
[distill]
top_k = 16
{distill}
[train]
batch_tokens = "1K"
evals = 1
checkpoint_every = 8
"#
    )
}

#[test]
fn students_of_another_bpe_distil_offline_and_online_with_uld_and_gold() {
    let tmp = tempfile::tempdir().unwrap();
    if crate::common::shakespeare_plays(tmp.path(), &PLAYS).is_none() {
        return;
    }
    let root = tmp.path();
    // without `cross_tokenizer` the pair is refused, naming the key
    std::fs::write(root.join("s.toml"), sweep("")).unwrap();
    let out = pdsweep(root, &["plan", "s.toml"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("cross_tokenizer") && err.contains("teachers.models[0]"),
        "{err}"
    );
    std::fs::write(
        root.join("s.toml"),
        sweep("mode = [\"offline\", \"online\"]\ncross_tokenizer = [\"uld\", \"gold\"]"),
    )
    .unwrap();
    let out = pdsweep(root, &["run", "s.toml"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));

    let db = SweepDb::open(&root.join("results/cross/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    let of = |kind| runs.iter().filter(move |r| r.kind == kind);
    assert_eq!(of(RunKind::Student).count(), 4);
    assert!(runs.iter().all(|r| r.state.as_str() == "done"), "{runs:?}");
    // the teacher trains on its own tokens: another vocabulary than its students'
    let vocab = |kind| {
        let r = of(kind).next().unwrap();
        let json: serde_json::Value = serde_json::from_str(&r.config_json).unwrap();
        json["data"]["vocab"].as_u64().unwrap()
    };
    assert_eq!(
        (vocab(RunKind::Teacher), vocab(RunKind::Student)),
        (640, 384)
    );
    // the aligned store names the teacher's tokenizer in every shard
    let store = of(RunKind::Logits).next().unwrap();
    let dir = root.join("results/cross/logits").join(store.id.as_str());
    let shard = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&shard).unwrap();
    let header = String::from_utf8_lossy(&bytes[44..bytes.len().min(4096)]).to_string();
    assert!(header.contains("tokenizer_sha256"), "{header}");

    // offline and online students read the same teacher distribution (the store's quantised)
    let loss = |name_part: &str| -> f64 {
        let r = of(RunKind::Student)
            .find(|r| r.name.contains(name_part))
            .unwrap_or_else(|| panic!("a student named *{name_part}*"));
        db.result(&r.id).unwrap().unwrap().0
    };
    for kind in ["uld", "gold"] {
        let (off, on) = (
            loss(&format!("offline-{kind}")),
            loss(&format!("online-{kind}")),
        );
        assert!(off.is_finite() && on.is_finite());
        assert!((off - on).abs() < 0.02, "{kind}: offline {off} online {on}");
    }
    // each student recorded how much of its text aligned with the teacher's
    let extra = db
        .result_extra(&of(RunKind::Student).next().unwrap().id)
        .unwrap()
        .unwrap();
    let extra: serde_json::Value = serde_json::from_str(&extra).unwrap();
    let aligned = extra["cross"]["aligned_rows"].as_f64().unwrap();
    assert!(aligned > 0.5 && aligned <= 1.0, "{extra}");

    // fit compares the teacher on the students' scale through bits per byte, and measures
    // the students' similarity to it at the sequence granularities (bytes), not the token ones
    let out = pdsweep(root, &["fit", "s.toml", "--bootstrap", "20"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("distillation degree"), "{text}");
    let out = pdsweep(root, &["export", "s.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut csv = csv::Reader::from_path(root.join("results/cross/export/similarity.csv")).unwrap();
    let headers = csv.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|c| c == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    let students: Vec<&csv::StringRecord> = rows
        .iter()
        .filter(|r| &r[col("kind")] == "student")
        .collect();
    assert_eq!(students.len(), 4, "{rows:?}");
    for r in &students {
        let chrf: f64 = r[col("chrf")].parse().unwrap();
        assert!(chrf > 0.0 && chrf <= 1.0, "{r:?}");
        assert!(!r[col("degree_chrf")].is_empty(), "{r:?}");
        assert!(r[col("agreement")].is_empty() && r[col("degree_agreement")].is_empty());
    }
    // the teacher against itself keeps its token measures
    let teacher = rows.iter().find(|r| &r[col("kind")] == "teacher").unwrap();
    assert_eq!(teacher[col("agreement")].parse::<f64>().unwrap(), 1.0);
}

/// The plan of a sweep across tokenizers prices its aligned store: each position keeps its
/// next token (6 more bytes), and the teacher positions are those of the students' bytes.
#[test]
fn the_plan_sizes_an_aligned_store() {
    let tmp = tempfile::tempdir().unwrap();
    let root: &Path = tmp.path();
    std::fs::create_dir_all(root.join("books")).unwrap();
    std::fs::write(root.join("books/a.txt"), "to be or not to be ".repeat(4000)).unwrap();
    std::fs::write(
        root.join("s.toml"),
        sweep("cross_tokenizer = \"gold\"").replace("val_tokens = \"4K\"", "val_tokens = 500"),
    )
    .unwrap();
    let out = pdsweep(root, &["plan", "s.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let runs = plan["runs"].as_array().unwrap();
    let store = runs.iter().find(|r| r["kind"] == "logits").unwrap();
    let per_token = store["disk_bytes"].as_u64().unwrap() / store["tokens"].as_u64().unwrap();
    // 16 entries of 10-bit ids and 8-bit values, then 16 + 32 bits of the next token
    assert_eq!(per_token, (16 * 18 + 48u64).div_ceil(8));
}

/// A released teacher of another tokenizer: byte-level students distil offline from
/// SmolLM2-135M (its own `tokenizer.json`, 49,152 tokens) with GOLD, whose matched tokens are
/// its single-byte ones. Needs the converted folder (`PDSWEEP_SMOLLM2`; required where
/// `PDSWEEP_REQUIRE_SMOLLM2=1`, as in CI).
#[test]
fn byte_students_distil_across_tokenizers_from_smollm2() {
    let required = std::env::var("PDSWEEP_REQUIRE_SMOLLM2").is_ok_and(|v| v == "1");
    let folder = std::env::var_os("PDSWEEP_SMOLLM2").map(std::path::PathBuf::from);
    let Some(folder) = folder.filter(|f| f.join("model.safetensors").is_file()) else {
        assert!(
            !required,
            "PDSWEEP_REQUIRE_SMOLLM2=1 but no converted SmolLM2 folder"
        );
        eprintln!("skipped: PDSWEEP_SMOLLM2 names no converted SmolLM2 folder");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    if crate::common::shakespeare_plays(root, &["tempest_gut.txt", "macbeth_gut.txt"]).is_none() {
        return;
    }
    std::os::unix::fs::symlink(&folder, root.join("smollm2")).unwrap();
    let sweep = r#"
name = "released-cross"
[corpus]
kind = "text"
path = "books"
tokenizer = "byte"
val_tokens = "4K"
[model]
context = 64
[[teachers.models]]
name = "smollm2"
pretrained = "smollm2"
[students]
sizes = ["8K"]
tokens = ["8K"]
[distill]
top_k = 16
cross_tokenizer = "gold"
[train]
batch_tokens = 256
evals = 1
checkpoint_every = 16
"#;
    std::fs::write(root.join("s.toml"), sweep).unwrap();
    // without `cross_tokenizer` its own tokenizer is refused, with the key as a way out
    let refused = sweep.replace("cross_tokenizer = \"gold\"\n", "");
    std::fs::write(root.join("r.toml"), refused).unwrap();
    let out = pdsweep(root, &["plan", "r.toml"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cross_tokenizer"), "{}", stderr(&out));

    let out = pdsweep(root, &["run", "s.toml"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let db = SweepDb::open(&root.join("results/released-cross/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    assert!(runs.iter().all(|r| r.state.as_str() == "done"), "{runs:?}");
    let student = runs.iter().find(|r| r.kind == RunKind::Student).unwrap();
    let extra: serde_json::Value =
        serde_json::from_str(&db.result_extra(&student.id).unwrap().unwrap()).unwrap();
    let cross = &extra["cross"];
    // a byte shares every boundary a SmolLM2 token has: one unit per SmolLM2 token, each of
    // its bytes a student row
    assert!(cross["aligned_rows"].as_f64().unwrap() > 0.9, "{extra}");
    let units = cross["units_per_row"].as_f64().unwrap();
    assert!(
        units > 0.2 && units < 0.5,
        "about one unit per 3 bytes: {extra}"
    );
    let w = cross["gold_weights"][0].as_f64().unwrap();
    assert!(w > 0.0 && w < 0.01, "256 of 49,152 tokens matched: {extra}");
}
