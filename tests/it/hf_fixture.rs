//! A small real-text setup shared by the Hugging Face tests: a generated English-like corpus, a
//! BPE `tokenizer.json` trained on it, and a sweep that trains an untied GQA teacher with a
//! non-default θ and ε (and a student) on it, then exports them with `pdsweep export --models`.

use std::path::{Path, PathBuf};

use crate::common::{pdsweep, stderr};

/// About 240 KB of sentences from a small grammar (deterministic).
pub fn corpus_text() -> String {
    const SUBJECTS: &[&str] = &[
        "the king",
        "a queen",
        "the old man",
        "my lord",
        "the fool",
        "a young knight",
        "the good friar",
        "her sister",
        "the duke",
        "our captain",
    ];
    const VERBS: &[&str] = &[
        "speaks to",
        "loves",
        "fears",
        "follows",
        "betrays",
        "remembers",
        "defends",
        "forgives",
        "watches",
        "calls",
    ];
    const OBJECTS: &[&str] = &[
        "the crown",
        "his daughter",
        "the night",
        "a stranger",
        "the sea",
        "her brother",
        "the castle gate",
        "the quiet town",
        "an honest man",
        "the storm",
    ];
    const ENDINGS: &[&str] = &[".", "!", ", and says nothing.", " in the morning.", "?"];
    let mut state = 0x2545_F491_u64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % n as u64) as usize
    };
    let mut text = String::new();
    while text.len() < 240_000 {
        let s = next(SUBJECTS.len());
        // the verb depends on the subject, the object on the verb: something to learn
        let v = (s + next(3)) % VERBS.len();
        let o = (v * 3 + next(2)) % OBJECTS.len();
        text += &format!(
            "{} {} {}{}",
            SUBJECTS[s],
            VERBS[v],
            OBJECTS[o],
            ENDINGS[next(ENDINGS.len())]
        );
        text += if next(6) == 0 { "\n\n" } else { " " };
    }
    text
}

/// Writes the corpus to `dir/corpus.txt` and a BPE tokenizer trained on it to
/// `dir/tok/tokenizer.json`.
pub fn corpus_and_tokenizer(dir: &Path) {
    let text = corpus_text();
    std::fs::write(dir.join("corpus.txt"), &text).unwrap();
    std::fs::create_dir_all(dir.join("tok")).unwrap();
    let bpe = pdsweep::data::Tokenizer::train_bpe(std::iter::once(text.as_str()), 384).unwrap();
    bpe.save(&dir.join("tok/tokenizer.json")).unwrap();
}

/// The corpus section every sweep of these tests uses.
pub const CORPUS: &str = r#"
[corpus]
kind = "text"
path = "corpus.txt"
tokenizer = "tok/tokenizer.json"
val_tokens = "6K"
"#;

/// Trains an untied GQA teacher (θ = 50000, ε = 1e-6) and a student on the corpus in `dir`,
/// exports them into `dir/models`, and returns the teacher's folder.
pub fn train_and_export(dir: &Path) -> PathBuf {
    let sweep = format!(
        r#"name = "teach"
{CORPUS}
[model]
context = 48
rope_theta = 50000.0
norm_eps = 1e-6
[[teachers.models]]
name = "t"
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
d_ff = 160
tie_embeddings = false
tokens = "160K"
[students]
sizes = ["20K"]
tokens = ["24K"]
baseline = false
[distill]
mode = "online"
[train]
batch_tokens = "1536"
evals = 1
"#
    );
    std::fs::write(dir.join("teach.toml"), sweep).unwrap();
    let out = pdsweep(dir, &["run", "teach.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = pdsweep(dir, &["export", "teach.toml", "--models", "models"]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir.join("models/teacher-t")
}
