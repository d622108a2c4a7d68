//! A sweep with a pre-trained teacher and a `tokenizer.json` corpus, end to end on the CPU: a
//! teacher trained by one sweep and exported as a Hugging Face folder becomes the pre-trained
//! teacher of another, which runs its logit pass, offline and online students and baselines;
//! the imported teacher scores exactly what it scored where it was trained; its identity is
//! its files' content; and what such a sweep cannot honour is refused by key.

use crate::hf_fixture as fixture;

use crate::common::{pdsweep, stderr, stdout};
use pdsweep::store::RunState;
use pdsweep::store::SweepDb;

fn sweep(teacher: &str, tokenizer_line: &str) -> String {
    format!(
        r#"name = "pre"
[corpus]
kind = "text"
path = "corpus.txt"
{tokenizer_line}
val_tokens = "6K"
[model]
context = 48
[[teachers.models]]
name = "imported"
pretrained = "{teacher}"
[students]
sizes = ["20K"]
tokens = ["48K"]
[distill]
mode = ["offline", "online"]
top_k = 16
[train]
batch_tokens = "1536"
evals = 2
"#
    )
}

fn plan_ids(dir: &std::path::Path) -> Vec<(String, String)> {
    let out = pdsweep(dir, &["plan", "pre.toml", "--dry-run", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_pretrained_teacher_and_a_tokenizer_json_corpus_run_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture::corpus_and_tokenizer(dir);
    fixture::train_and_export(dir);
    let trained = SweepDb::open(&dir.join("results/teach/sweep.db")).unwrap();
    let teacher_loss = trained
        .runs()
        .unwrap()
        .iter()
        .find(|r| r.name == "teacher-t")
        .map(|r| trained.result(&r.id).unwrap().unwrap().0)
        .unwrap();

    std::fs::write(
        dir.join("pre.toml"),
        sweep("models/teacher-t", r#"tokenizer = "tok/tokenizer.json""#),
    )
    .unwrap();
    let out = pdsweep(dir, &["run", "pre.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db = SweepDb::open(&dir.join("results/pre/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    let kinds: Vec<&str> = runs.iter().map(|r| r.kind.as_str()).collect();
    for kind in ["teacher", "logits", "student", "baseline"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    for r in &runs {
        assert_eq!(r.state, RunState::Done, "{}", r.name);
    }
    let by_name = |name: &str| runs.iter().find(|r| r.name == name).unwrap();
    let teacher = by_name("teacher-imported");
    assert_eq!(teacher.tokens, 0, "a pre-trained teacher trains on nothing");
    let imported_loss = db.result(&teacher.id).unwrap().unwrap().0;
    assert!(
        (imported_loss - teacher_loss).abs() < 1e-6,
        "the exported and re-imported teacher scores {imported_loss}, trained it scored {teacher_loss}"
    );
    assert!(
        !dir.join(format!("results/pre/checkpoints/{}.ckpt", teacher.id))
            .exists(),
        "no checkpoint is written for a pre-trained teacher"
    );
    let loss = |name: &str| db.result(&by_name(name).id).unwrap().unwrap().0;
    let (offline, online, baseline) = (
        loss("student-20K-from-imported-offline"),
        loss("student-20K-from-imported-online"),
        loss("baseline-20K"),
    );
    assert!(
        (offline - online).abs() < 0.05,
        "stored and live teacher logits teach alike: {offline} vs {online}"
    );
    // At 48K tokens a 20K student learns about as much from this small teacher as from the
    // data (a CI machine measured it 0.004 nats worse; the sign follows the CPU's GEMM
    // kernels): what must hold is that the logits teach something sane, not a gain.
    assert!(
        offline < baseline + 0.05,
        "the imported teacher's logits teach about as well as the data: {offline} vs baseline {baseline}"
    );
    for mode in ["offline", "online"] {
        let student = by_name(&format!("student-20K-from-imported-{mode}"));
        let (agreement, kl) = db.agreement(&student.id).unwrap().unwrap();
        assert!(
            agreement > 0.0 && kl.is_finite(),
            "{mode}: {agreement} {kl}"
        );
    }

    padded_teacher_is_cut_to_its_tokenizer(dir, teacher_loss);

    // Trained and pre-trained teachers mix: every student pairs with both.
    let mixed = sweep("models/teacher-t", r#"tokenizer = "tok/tokenizer.json""#).replace(
        "[students]",
        "[teachers]\nsizes = [\"60K\"]\ntokens = [\"96K\"]\n[students]",
    );
    std::fs::write(
        dir.join("mixed.toml"),
        mixed.replace("name = \"pre\"", "name = \"mixed\""),
    )
    .unwrap();
    let out = pdsweep(
        dir,
        &["plan", "mixed.toml", "--dry-run", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let names: Vec<&str> = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for name in [
        "teacher-imported",
        "teacher-60K",
        "student-20K-from-imported-online",
        "student-20K-from-60K-online",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }

    // The teacher's identity is its files: a changed config.json is another teacher.
    let before = plan_ids(dir);
    let config_path = dir.join("models/teacher-t/config.json");
    let config = std::fs::read_to_string(&config_path).unwrap();
    std::fs::write(
        &config_path,
        config.replace("\"rms_norm_eps\": 1e-6", "\"rms_norm_eps\": 1e-5"),
    )
    .unwrap();
    let after = plan_ids(dir);
    assert_ne!(before, after, "every run depends on the teacher");
    assert_eq!(before.len(), after.len());
}

#[test]
fn what_a_pretrained_sweep_cannot_honour_is_refused_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    fixture::corpus_and_tokenizer(dir);
    // A folder that is a real export of a tiny model: no training needed to test refusals.
    let folder = dir.join("teacher");
    std::fs::create_dir_all(&folder).unwrap();
    let config = r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 64, "vocab_size": VOCAB, "tie_word_embeddings": true,
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0}}"#;
    let vocab = pdsweep::hf::TokenizerFile::read(&dir.join("tok/tokenizer.json"))
        .unwrap()
        .vocab;
    std::fs::write(
        folder.join("config.json"),
        config.replace("VOCAB", &vocab.to_string()),
    )
    .unwrap();
    std::fs::copy(
        dir.join("tok/tokenizer.json"),
        folder.join("tokenizer.json"),
    )
    .unwrap();
    let refused = |toml: &str, needles: &[&str]| {
        std::fs::write(dir.join("pre.toml"), toml).unwrap();
        let out = pdsweep(dir, &["plan", "pre.toml", "--dry-run"]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        for needle in needles {
            assert!(err.contains(needle), "`{needle}` not in:\n{err}");
        }
    };
    let with_file = r#"tokenizer = "tok/tokenizer.json""#;
    refused(
        &sweep("teacher", with_file),
        &[
            "teachers.models[0].pretrained",
            "`rope_scaling.rope_type`",
            "`yarn`",
            "config.json",
            "pre.toml:",
        ],
    );
    let plain = config.replace(
        r#""rope_scaling": {"rope_type": "yarn", "factor": 8.0}"#,
        r#""rope_scaling": null"#,
    );
    std::fs::write(
        folder.join("config.json"),
        plain.replace("VOCAB", &vocab.to_string()),
    )
    .unwrap();
    // the teacher's own tokenizer is not the corpus's
    refused(
        &sweep("teacher", r#"tokenizer = "byte""#),
        &["teachers.models[0].pretrained", "own tokenizer", "hint:"],
    );
    refused(
        &sweep("teacher", r#"tokenizer = "bpe""#),
        &["`bpe` trains a new one"],
    );
    // a pre-trained teacher is not trained: no budget
    refused(
        &sweep("teacher", with_file).replace("pretrained =", "tokens = \"1M\"\npretrained ="),
        &["teachers.models[0].tokens", "not trained"],
    );
    // students cannot be pre-trained
    refused(
        &sweep("teacher", with_file).replace(
            "sizes = [\"20K\"]",
            "[[students.models]]\npretrained = \"teacher\"",
        ),
        &["students.models[0].pretrained", "only teachers"],
    );
    // without weights, the plan says so
    let out = {
        std::fs::write(dir.join("pre.toml"), sweep("teacher", with_file)).unwrap();
        pdsweep(dir, &["plan", "pre.toml", "--dry-run"])
    };
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("model.safetensors"),
        "{}",
        stderr(&out)
    );
}

/// Rows added to the exported teacher's vocabulary, as released models pad theirs.
const PADDING: usize = 13;

/// A copy of the exported (untied) teacher with `PADDING` extra rows in its embedding and head,
/// `vocab_size` raised to match: the head's extra rows are large, so a teacher that kept them
/// would put most of its probability on tokens that do not exist.
fn pad_vocabulary(from: &std::path::Path, to: &std::path::Path) -> u64 {
    use pdsweep::model::NamedTensor;
    std::fs::create_dir_all(to).unwrap();
    let bytes = std::fs::read(from.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors = Vec::new();
    let mut stored = 0;
    for (name, view) in st.tensors() {
        assert_eq!(view.dtype(), safetensors::Dtype::F32);
        let mut shape = view.shape().to_vec();
        let mut data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
            stored = shape[0];
            data.extend(std::iter::repeat_n(3.0, PADDING * shape[1]));
            shape[0] += PADDING;
        }
        tensors.push(NamedTensor { name, shape, data });
    }
    pdsweep::hf::write_safetensors(&to.join("model.safetensors"), &tensors).unwrap();
    let config = std::fs::read_to_string(from.join("config.json")).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&config).unwrap();
    config["vocab_size"] = serde_json::json!(stored + PADDING);
    std::fs::write(to.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(from.join("tokenizer.json"), to.join("tokenizer.json")).unwrap();
    stored as u64
}

/// A teacher whose vocabulary is padded past its tokenizer plans with the tokenizer's
/// vocabulary (the plan says so), loads with the padding cut, and scores exactly what the
/// unpadded teacher scored; its students have the tokenizer's vocabulary. A teacher with fewer
/// rows than the tokenizer's ids is refused with both sizes named.
fn padded_teacher_is_cut_to_its_tokenizer(dir: &std::path::Path, teacher_loss: f64) {
    let vocab = pad_vocabulary(&dir.join("models/teacher-t"), &dir.join("models/padded"));
    let toml = sweep("models/padded", r#"tokenizer = "tok/tokenizer.json""#)
        .replace("name = \"pre\"", "name = \"padded\"")
        .replace("mode = [\"offline\", \"online\"]", "mode = \"offline\"")
        .replace("tokens = [\"48K\"]", "tokens = [\"24K\"]\nbaseline = false");
    std::fs::write(dir.join("padded.toml"), &toml).unwrap();
    let out = pdsweep(dir, &["plan", "padded.toml", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    let note = format!(
        "{} vocabulary rows in config.json for a tokenizer of {vocab} tokens; its {PADDING} padding rows",
        vocab + PADDING as u64
    );
    assert!(table.contains(&note), "`{note}` not in:\n{table}");
    let out = pdsweep(
        dir,
        &["plan", "padded.toml", "--dry-run", "--format", "json"],
    );
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for run in plan["runs"].as_array().unwrap() {
        assert_eq!(run["shape"]["vocab"], vocab, "{}", run["name"]);
    }

    let out = pdsweep(dir, &["run", "padded.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let db = SweepDb::open(&dir.join("results/padded/sweep.db")).unwrap();
    let runs = db.runs().unwrap();
    for r in &runs {
        assert_eq!(r.state, RunState::Done, "{}", r.name);
    }
    let teacher = runs.iter().find(|r| r.name == "teacher-imported").unwrap();
    let loss = db.result(&teacher.id).unwrap().unwrap().0;
    assert!(
        (loss - teacher_loss).abs() < 1e-6,
        "the padded teacher, cut, scores {loss}; unpadded it scored {teacher_loss}"
    );

    // Fewer rows than the tokenizer has ids: a real mismatch, refused with both sizes.
    let config_path = dir.join("models/padded/config.json");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let short = vocab - 5;
    std::fs::write(
        &config_path,
        config.replace(
            &format!("\"vocab_size\":{}", vocab + PADDING as u64),
            &format!("\"vocab_size\":{short}"),
        ),
    )
    .unwrap();
    let out = pdsweep(dir, &["plan", "padded.toml", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    for needle in [
        format!("has ids up to {}", vocab - 1),
        format!("the teacher's vocabulary `{short}`"),
    ] {
        assert!(err.contains(&needle), "`{needle}` not in:\n{err}");
    }
}
