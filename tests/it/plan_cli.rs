//! `pdsweep plan` through the real binary: JSON and CSV output, exact sizes of explicit shapes,
//! every example sweep, and located errors for malformed files.

use crate::common::{pdsweep, root, stderr, stdout};
use serde_json::Value;

fn plan_json(sweep: &str) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let path = root().join(sweep);
    let out = pdsweep(
        tmp.path(),
        &["plan", path.to_str().unwrap(), "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("valid JSON on stdout")
}

#[test]
fn quickstart_json_has_runs_and_totals() {
    let plan = plan_json("sweeps/quickstart.toml");
    let runs = plan["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for run in runs {
        for key in [
            "id",
            "kind",
            "name",
            "params_total",
            "params_non_embedding",
            "tokens",
            "flops",
            "depends_on",
        ] {
            assert!(!run[key].is_null(), "run lacks `{key}`: {run}");
        }
        for dep in run["depends_on"].as_array().unwrap() {
            assert!(
                ids.contains(&dep.as_str().unwrap()),
                "dangling dependency {dep}"
            );
        }
        assert!(run["params_non_embedding"].as_u64() < run["params_total"].as_u64());
    }
    let kinds: std::collections::BTreeSet<&str> =
        runs.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["baseline", "logits", "student", "teacher"]
    );
    let totals = &plan["totals"];
    let sum: f64 = runs.iter().map(|r| r["flops"].as_f64().unwrap()).sum();
    assert!((totals["flops"].as_f64().unwrap() - sum).abs() <= 1e-9 * sum);
    assert!(
        totals["saved_flops"].as_f64().unwrap() > 0.0,
        "sharing teachers must save compute"
    );
    assert_eq!(totals["runs"].as_u64().unwrap() as usize, runs.len());
}

#[test]
fn students_depend_on_their_logit_store_or_teacher() {
    let plan = plan_json("sweeps/quickstart.toml");
    let runs = plan["runs"].as_array().unwrap();
    let kind_of = |id: &str| {
        runs.iter()
            .find(|r| r["id"] == id)
            .map(|r| r["kind"].as_str().unwrap().to_string())
    };
    for run in runs.iter().filter(|r| r["kind"] == "student") {
        let dep = run["depends_on"][0].as_str().unwrap();
        let expected = if run["distill"]["mode"] == "offline" {
            "logits"
        } else {
            "teacher"
        };
        assert_eq!(kind_of(dep).as_deref(), Some(expected), "{}", run["name"]);
    }
    // one logit store per teacher, shared by every offline student of that teacher
    let stores = runs.iter().filter(|r| r["kind"] == "logits").count();
    let teachers = runs.iter().filter(|r| r["kind"] == "teacher").count();
    assert_eq!(stores, teachers);
}

#[test]
fn csv_has_one_row_per_run() {
    let tmp = tempfile::tempdir().unwrap();
    let path = root().join("sweeps/quickstart.toml");
    let out = pdsweep(
        tmp.path(),
        &[
            "plan",
            path.to_str().unwrap(),
            "--format",
            "csv",
            "--dry-run",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().clone();
    assert_eq!(&header[0], "id");
    assert!(header.iter().any(|h| h == "params_non_embedding"));
    assert_eq!(
        reader.records().count(),
        plan_json("sweeps/quickstart.toml")["runs"]
            .as_array()
            .unwrap()
            .len()
    );
}

#[test]
fn explicit_shape_reports_exact_counts() {
    let plan = plan_json("tests/fixtures/tinyllama.toml");
    let teacher = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "teacher")
        .unwrap();
    assert_eq!(teacher["params_total"], 1_100_048_384u64);
    assert_eq!(
        teacher["params_non_embedding"],
        1_100_048_384u64 - 2 * 65_536_000
    );
    assert_eq!(teacher["name"], "teacher-tinyllama-1.1b");
}

#[test]
fn every_example_sweep_plans() {
    for entry in std::fs::read_dir(root().join("sweeps")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue; // a confirmation round's prediction and its check sit beside its file
        }
        let tmp = tempfile::tempdir().unwrap();
        let out = pdsweep(tmp.path(), &["plan", path.to_str().unwrap(), "--dry-run"]);
        assert!(out.status.success(), "{}: {}", path.display(), stderr(&out));
        assert!(stdout(&out).contains("runs ("), "{}", path.display());
    }
}

/// Writes `text` to a file, plans it, and returns (exit code, stderr).
fn plan_text(text: &str) -> (i32, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("broken.toml");
    std::fs::write(&path, text).unwrap();
    let out = pdsweep(tmp.path(), &["plan", "broken.toml"]);
    (out.status.code().unwrap_or(-1), stderr(&out), stdout(&out))
}

const VALID: &str = "name = \"t\"\n[teachers]\nsizes = [\"2M\"]\n[students]\nsizes = [\"1M\"]\ntokens = [\"10M\"]\n";

#[test]
fn unknown_key_is_refused_with_file_line_and_key() {
    let (code, err, out) = plan_text(&VALID.replace(
        "[students]\n",
        "[students]\nbaseline = true\ntemprature = 2\n",
    ));
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("broken.toml:6:1"), "{err}");
    assert!(err.contains("key `students.temprature`"), "{err}");
    assert_eq!(err.matches("error:").count(), 1, "one message: {err}");
}

#[test]
fn wrong_type_and_bad_values_are_located() {
    let cases = [
        (
            "sizes = [\"1M\"]",
            "sizes = [true]",
            "students.sizes[0]",
            ":5:",
        ),
        (
            "sizes = [\"2M\"]",
            "sizes = [\"-2M\"]",
            "teachers.sizes[0]",
            ":3:",
        ),
        (
            "tokens = [\"10M\"]",
            "tokens = [\"0x\"]",
            "students.tokens[0]",
            ":6:",
        ),
        ("name = \"t\"", "name = \"t/../x\"", "name", ":1:"),
    ];
    for (from, to, key, line) in cases {
        let (code, err, _) = plan_text(&VALID.replace(from, to));
        assert_eq!(code, 2, "{to}: {err}");
        assert!(err.contains(&format!("key `{key}`")), "{to}: {err}");
        assert!(err.contains(line), "{to}: {err}");
    }
}

#[test]
fn empty_teacher_list_and_zero_run_axes_are_refused() {
    let (code, err, _) = plan_text(&VALID.replace("sizes = [\"2M\"]", "sizes = []"));
    assert_eq!(code, 2);
    assert!(err.contains("`[teachers]` lists no models"), "{err}");
    let (code, err, _) = plan_text(&format!("{VALID}[distill]\nloss = []\n"));
    assert_eq!(code, 2);
    assert!(
        err.contains("key `distill.loss`") && err.contains("zero runs"),
        "{err}"
    );
    let zero_pairs =
        VALID.replace("\"2M\"", "\"500K\"") + "[constraints]\nrequire_teacher_larger = true\n";
    let (code, err, _) = plan_text(&zero_pairs);
    assert_eq!(code, 2);
    assert!(err.contains("zero teacher–student pairs"), "{err}");
}

#[test]
fn disk_budget_refuses_with_the_numbers() {
    let (code, err, _) = plan_text(&format!("{VALID}[limits]\ndisk = \"10M\"\n"));
    assert_eq!(code, 2);
    assert!(
        err.contains("key `limits.disk`") && err.contains("but the budget is 9.5 MiB"),
        "{err}"
    );
}

/// `[limits] memory` refuses a plan whose largest run is predicted above it, naming the run and
/// the knob that helps; the same sweep at a large vocabulary is refused by its head's chunk, and
/// a smaller chunk makes it fit.
#[test]
fn memory_limit_refuses_with_the_run_and_the_knob() {
    let (code, err, _) = plan_text(&format!("{VALID}[limits]\nmemory = \"300M\"\n"));
    assert_eq!(code, 2);
    assert!(err.contains("key `limits.memory`"), "{err}");
    assert!(
        err.contains("run `teacher-2M") && err.contains("at its peak"),
        "{err}"
    );
    assert!(err.contains("but the limit is 286.1 MiB"), "{err}");
    let wide = "name = \"t\"\n[corpus]\nkind = \"synthetic\"\nvocab_size = 152064\n[teachers]\n[[teachers.models]]\nname = \"t\"\nd_model = 64\nn_layers = 2\nn_heads = 4\nd_ff = 128\n[students]\nbaseline = false\n[[students.models]]\nname = \"s\"\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\n[train]\nhead_chunk = 4096\n[limits]\nmemory = \"2G\"\n";
    let (code, err, _) = plan_text(wide);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("head_chunk"),
        "the hint names the chunk: {err}"
    );
    let (code, err, out) = plan_text(&wide.replace("head_chunk = 4096", "head_chunk = 256"));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("memory"), "{out}");
}

/// A batch whose activations exceed `[limits] memory` is refused with the largest micro-batch
/// that fits (`plan` chooses it from its memory model); with that micro-batch the same batch
/// plans, accumulated, and one sequence more is refused again. A micro-batch larger than the
/// batch is refused by key.
#[test]
fn a_batch_over_the_memory_limit_is_offered_the_micro_batch_that_fits() {
    let big = format!("{VALID}[train]\nbatch_tokens = \"256K\"\n[limits]\nmemory = \"1G\"\n");
    let (code, err, _) = plan_text(&big);
    assert_eq!(code, 2, "{err}");
    let tokens: u64 = err
        .split("micro_batch_tokens = ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the hint names a micro-batch: {err}"));
    assert!(tokens > 0 && tokens < 256 * 1024, "{tokens}");
    let with = |micro: u64| {
        plan_text(&big.replace(
            "[limits]",
            &format!("micro_batch_tokens = {micro}\n[limits]"),
        ))
    };
    let (code, err, out) = with(tokens);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("memory"), "{out}");
    let (code, err, _) = with(tokens + 256);
    assert_eq!(code, 2, "one sequence more does not fit: {err}");
    let (code, err, _) = with(512 * 1024);
    assert_eq!(code, 2);
    assert!(
        err.contains("key `train.micro_batch_tokens`") && err.contains("larger than the batch"),
        "{err}"
    );
}

#[test]
fn vocabulary_mismatch_between_teacher_and_student_names_both() {
    let text = "name = \"t\"\n[corpus]\nkind = \"synthetic\"\n[teachers]\n[[teachers.models]]\nname = \"big\"\nd_model = 64\nn_layers = 2\nn_heads = 4\nd_ff = 128\nvocab = 512\n[students]\n[[students.models]]\nname = \"small\"\nd_model = 32\nn_layers = 2\nn_heads = 2\nd_ff = 64\nvocab = 256\n";
    let (code, err, _) = plan_text(text);
    assert_eq!(code, 2);
    assert!(err.contains("`big`") && err.contains("`small`"), "{err}");
}

#[test]
fn missing_file_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = pdsweep(tmp.path(), &["plan", "nope.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("cannot read sweep file `nope.toml`"), "{err}");
}

#[test]
fn size_command_counts_explicit_and_derived_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "size",
        "--d-model",
        "4096",
        "--n-layers",
        "32",
        "--n-heads",
        "32",
        "--d-ff",
        "11008",
        "--vocab",
        "32000",
        "--untied",
        "--json",
    ];
    let out = pdsweep(tmp.path(), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["params_total"], 6_738_415_616u64);
    let out = pdsweep(tmp.path(), &["size", "1.9B", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let n = v["params_non_embedding"].as_f64().unwrap();
    assert!((n / 1.9e9 - 1.0).abs() < 0.02, "{v}");
    let out = pdsweep(
        tmp.path(),
        &[
            "size",
            "--d-model",
            "100",
            "--n-layers",
            "2",
            "--n-heads",
            "3",
            "--d-ff",
            "64",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not divisible"));
}

/// The capacity-gap reference trained students for 122 optimiser steps without a word from the
/// tool; a teacher grid that misses the prior optimum was not flagged either.
#[test]
fn plan_warns_on_a_122_step_student_and_on_a_grid_that_misses_the_prior_t_star() {
    let sweep = r#"
name = "thin"
[model]
context = 64
[teachers]
sizes = ["100K", "400K"]
tokens = ["2M"]
[students]
sizes = ["20K"]
tokens = ["976K"]
[train]
batch_tokens = "8K"
"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("thin.toml"), sweep).unwrap();
    let out = pdsweep(
        tmp.path(),
        &["plan", "thin.toml", "--dry-run", "--no-probe"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("train for only 122 optimiser steps (fewer than 500)")
            && text.contains("`student-20K-from-100K`")
            && text.contains("lower `[train] batch_tokens`"),
        "{text}"
    );
    // T* ≈ 2.5 · 20,640 ≈ 51.6K: the grid needs a teacher of at most 25.8K.
    assert!(
        text.contains("students of size `20K`")
            && text.contains("T* ≈ 51600")
            && text.contains("a teacher of at most 25800 (T*/2)"),
        "{text}"
    );
    let strict = pdsweep(
        tmp.path(),
        &["plan", "thin.toml", "--dry-run", "--no-probe", "--strict"],
    );
    assert_eq!(strict.status.code(), Some(2));

    // Longer students and a bracketing grid: no design warnings (the one seed is fine with only
    // two teachers per student).
    let fixed = sweep
        .replace(r#"sizes = ["100K", "400K"]"#, r#"sizes = ["20K", "140K"]"#)
        .replace(r#"tokens = ["976K"]"#, r#"tokens = ["5M"]"#)
        .replace(r#"tokens = ["2M"]"#, r#"tokens = ["5M"]"#);
    std::fs::write(tmp.path().join("thin.toml"), fixed).unwrap();
    let out = pdsweep(
        tmp.path(),
        &["plan", "thin.toml", "--dry-run", "--no-probe", "--strict"],
    );
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(!stdout(&out).contains("warning"), "{}", stdout(&out));

    // The researcher's prior replaces the rule of thumb: T* ≈ 10 · 20,640 = 206.4K is beyond the
    // 140K teacher, so the same grid no longer brackets it, and the warning names the prior.
    let prior = format!(
        "{}\n[prior]\nteacher_ratio = 10\nsource = \"our round-9 sweep\"\n",
        std::fs::read_to_string(tmp.path().join("thin.toml")).unwrap()
    );
    std::fs::write(tmp.path().join("thin.toml"), prior).unwrap();
    let out = pdsweep(
        tmp.path(),
        &["plan", "thin.toml", "--dry-run", "--no-probe"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "T* ≈ 206400 (T* ≈ 10·S, our round-9 sweep, until this sweep's own fits replace it)"
        ),
        "{text}"
    );
}

/// A capacity-gap grid whose teachers all read one budget gets a note (not a warning: `--strict`
/// passes) that teacher size and teacher data are confounded; teachers at several budgets do not.
#[test]
fn plan_notes_a_teacher_grid_at_one_budget() {
    let sweep = r#"
name = "budget"
seed = [1, 2, 3]
[model]
context = 64
[teachers]
sizes = ["20K", "50K", "140K"]
tokens = ["5M"]
[students]
sizes = ["20K"]
tokens = ["5M"]
[train]
batch_tokens = "8K"
"#;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("budget.toml"), sweep).unwrap();
    let args = ["plan", "budget.toml", "--dry-run", "--no-probe", "--strict"];
    let out = pdsweep(tmp.path(), &args);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("note: every teacher of the capacity-gap grid trains on 5M tokens")
            && text.contains("confounded")
            && text.contains(r#"`[teachers] tokens = ["1.25M", "5M", "20M"]`"#),
        "{text}"
    );
    let several = sweep.replace(
        r#"tokens = ["5M"]
[students]"#,
        r#"tokens = ["5M", "10M"]
[students]"#,
    );
    std::fs::write(tmp.path().join("budget.toml"), several).unwrap();
    let out = pdsweep(tmp.path(), &args);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(!stdout(&out).contains("confounded"), "{}", stdout(&out));
}

/// `plan` prices the sweep's files at 1–10B tokens, as a researcher scaling it up would need:
/// the token cache at 2 bytes a token (V ≤ 65,536) and each logit store at its bytes per
/// position, alone and all together, in the table and in JSON.
#[test]
fn plan_prices_caches_and_stores_at_billions_of_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let sweep = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sweeps/quickstart.toml");
    let sweep = sweep.to_string_lossy().to_string();
    let out = pdsweep(
        tmp.path(),
        &["plan", &sweep, "--dry-run", "--format", "json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = plan["at_scale"].as_array().unwrap();
    let tokens: Vec<u64> = rows.iter().map(|r| r["tokens"].as_u64().unwrap()).collect();
    assert_eq!(tokens, [1_000_000_000, 3_000_000_000, 10_000_000_000]);
    let ten = &rows[2];
    assert_eq!(
        ten["caches"][0],
        serde_json::json!([256, 20_000_000_000u64])
    );
    let per = ten["stores"][0][0].as_u64().unwrap();
    assert_eq!(ten["stores"][0][1].as_u64().unwrap(), per * 10_000_000_000);
    let stores = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "logits")
        .count() as u64;
    assert_eq!(
        ten["all_stores"].as_u64().unwrap(),
        stores * per * 10_000_000_000
    );
    let table = pdsweep(tmp.path(), &["plan", &sweep, "--dry-run"]);
    let text = stdout(&table);
    assert!(
        text.contains("at scale     1B / 3B / 10B tokens:")
            && text.contains("token cache (V = 256) 1.9 GiB / 5.6 GiB / 18.6 GiB"),
        "{text}"
    );
}
