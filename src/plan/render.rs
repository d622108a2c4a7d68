//! The plan as text: a readable table with totals, one JSON object, or CSV (one row per run).

use std::collections::HashMap;

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{CellAlignment, Table};
use serde_json::{Value, json};

use super::Plan;
use super::run::{Run, RunKind};
use crate::spec::units::{format_bytes, format_count, format_duration};

/// How `plan` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanFormat {
    /// A table and a summary for people.
    Table,
    /// One JSON object with `runs` and `totals`.
    Json,
    /// One CSV row per run.
    Csv,
}

/// Renders `plan` in `format`.
pub fn render(plan: &Plan, format: PlanFormat) -> String {
    match format {
        PlanFormat::Table => table(plan),
        PlanFormat::Json => {
            serde_json::to_string_pretty(&json_value(plan)).unwrap_or_default() + "\n"
        }
        PlanFormat::Csv => csv(plan),
    }
}

fn names_by_id(plan: &Plan) -> HashMap<&str, &str> {
    plan.runs
        .iter()
        .map(|r| (r.id.as_str(), r.name.as_str()))
        .collect()
}

/// Passes over the corpus's training split that `run` makes, when the corpus is known and finite
/// (logit passes read a student's stream and are not counted).
fn run_passes(plan: &Plan, run: &Run) -> Option<f64> {
    let corpus = plan.corpus.as_ref()?;
    (run.kind() != RunKind::Logits)
        .then(|| super::passes(run.tokens(), corpus))
        .flatten()
}

fn run_json(plan: &Plan, run: &Run, names: &HashMap<&str, &str>) -> Value {
    let c = &run.config;
    let s = &c.model.shape;
    let teacher = c
        .distill
        .as_ref()
        .map(|d| &d.teacher)
        .or(c.logits.as_ref().map(|l| &l.teacher));
    json!({
        "id": run.id,
        "kind": run.kind().as_str(),
        "name": run.name,
        "model": c.model.label,
        "target_params": c.model.target,
        "params_total": run.params.total,
        "params_non_embedding": run.params.non_embedding,
        "shape": s,
        "tokens": c.tokens,
        "pretrained": c.model.pretrained.as_ref().map(|p| &p.path),
        "steps": c.train.as_ref().map(|t| t.steps),
        "seed": c.data.seed,
        "flops": run.flops,
        "disk_bytes": run.disk_bytes,
        "store_bytes_per_token": store_layout(run).map(|l| l.bytes_per_token()),
        "memory_bytes": run.memory.total(),
        "memory": {
            "state": run.memory.state, "activations": run.memory.activations,
            "head": run.memory.head, "teacher": run.memory.teacher, "base": run.memory.base,
        },
        "depends_on": run.depends_on.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        "teacher": teacher.map(|t| names.get(t.as_str()).copied().unwrap_or(t.as_str())),
        "distill": c.distill.as_ref().map(|d| json!({
            "mode": d.mode, "loss": d.loss, "alpha": d.alpha, "temperature": d.temperature.0,
            "top_p": d.truncation.top_p.0, "top_k": d.truncation.top_k,
        })),
        "truncation": c.logits.as_ref().map(|l| json!({"top_p": l.truncation.top_p.0, "top_k": l.truncation.top_k})),
        "passes": run_passes(plan, run),
    })
}

/// The plan as one JSON value: `{"sweep", "runs", "totals"}`.
pub fn json_value(plan: &Plan) -> Value {
    let names = names_by_id(plan);
    let t = &plan.totals;
    json!({
        "sweep": {"name": plan.sweep_name, "hash": plan.sweep_hash},
        "runs": plan.runs.iter().map(|r| run_json(plan, r, &names)).collect::<Vec<_>>(),
        "corpus": plan.corpus,
        "warnings": plan.warnings,
        "notes": plan.notes,
        "totals": {
            "runs": t.runs,
            "by_kind": t.by_kind.iter().map(|(k, n)| (k.as_str().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "flops": t.flops,
            "flops_by_kind": t.flops_by_kind.iter().map(|(k, f)| (k.as_str().to_string(), json!(f))).collect::<serde_json::Map<_, _>>(),
            "naive_flops": t.naive_flops,
            "saved_flops": t.saved_flops,
            "logit_store_bytes": t.logit_store_bytes,
            "checkpoint_bytes": t.checkpoint_bytes,
            "flops_per_s": t.throughput.flops_per_s,
            "throughput_source": t.throughput.source,
            "estimated_seconds": t.estimated_seconds,
        },
        "at_scale": at_scale(plan),
    })
}

const CSV_HEADER: [&str; 26] = [
    "id",
    "kind",
    "name",
    "model",
    "params_total",
    "params_non_embedding",
    "d_model",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "d_ff",
    "vocab",
    "tokens",
    "steps",
    "seed",
    "flops",
    "disk_bytes",
    "teacher",
    "mode",
    "loss",
    "temperature",
    "top_p",
    "top_k",
    "depends_on",
    "passes",
    "memory_bytes",
];

fn csv(plan: &Plan) -> String {
    // Why `expect`: the writer writes into memory, which cannot fail, and every field is text.
    csv_records(plan).expect("writing CSV into memory cannot fail")
}

/// The plan's runs as CSV records under [`CSV_HEADER`].
fn csv_records(plan: &Plan) -> Result<String, csv::Error> {
    let names = names_by_id(plan);
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(CSV_HEADER)?;
    for run in &plan.runs {
        let c = &run.config;
        let s = &c.model.shape;
        let d = c.distill.as_ref();
        let trunc = d
            .map(|d| d.truncation)
            .or(c.logits.as_ref().map(|l| l.truncation));
        let teacher = d
            .map(|d| &d.teacher)
            .or(c.logits.as_ref().map(|l| &l.teacher));
        let record = [
            run.id.to_string(),
            run.kind().to_string(),
            run.name.clone(),
            c.model.label.clone(),
            run.params.total.to_string(),
            run.params.non_embedding.to_string(),
            s.d_model.to_string(),
            s.n_layers.to_string(),
            s.n_heads.to_string(),
            s.n_kv_heads.to_string(),
            s.d_ff.to_string(),
            s.vocab.to_string(),
            c.tokens.to_string(),
            c.train
                .as_ref()
                .map_or(String::new(), |t| t.steps.to_string()),
            c.data.seed.to_string(),
            format!("{:e}", run.flops),
            run.disk_bytes.to_string(),
            teacher.map_or(String::new(), |t| {
                names
                    .get(t.as_str())
                    .copied()
                    .unwrap_or(t.as_str())
                    .to_string()
            }),
            d.map_or(String::new(), |d| d.mode.to_string()),
            d.map_or(String::new(), |d| d.loss.to_string()),
            d.map_or(String::new(), |d| d.temperature.0.to_string()),
            trunc.map_or(String::new(), |t| t.top_p.0.to_string()),
            trunc.map_or(String::new(), |t| t.top_k.to_string()),
            run.depends_on
                .iter()
                .map(|d| d.as_str())
                .collect::<Vec<_>>()
                .join(";"),
            run_passes(plan, run).map_or(String::new(), |p| format!("{p:.4}")),
            run.memory.total().to_string(),
        ];
        writer.write_record(&record)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn table(plan: &Plan) -> String {
    let names = names_by_id(plan);
    let mut table = Table::new();
    table.load_style(UTF8_BORDERS_ONLY);
    let mut header = vec![
        "id",
        "kind",
        "name",
        "params",
        "N (non-emb)",
        "shape",
        "tokens",
        "FLOPs",
        "memory",
        "after",
    ];
    if plan.corpus.as_ref().is_some_and(|c| c.files > 0) {
        header.push("passes");
    }
    table.set_header(header.clone());
    for run in &plan.runs {
        let tuned_on = run.config.tune.as_ref();
        let mut after: Vec<String> = run
            .depends_on
            .iter()
            .filter(|d| tuned_on.is_none_or(|t| !t.candidates.contains(d)))
            .map(|d| {
                names
                    .get(d.as_str())
                    .copied()
                    .unwrap_or(d.as_str())
                    .to_string()
            })
            .collect();
        if let Some(t) = tuned_on {
            let of = if run.kind() == RunKind::Teacher {
                "candidates"
            } else {
                "baselines"
            };
            after.push(format!("lr tuned on {} {of}", t.candidates.len()));
        }
        let mut row = vec![
            run.id.as_str()[..8].to_string(),
            run.kind().to_string(),
            run.name.clone(),
            format_count(run.params.total as f64),
            run.params.non_embedding.to_string(),
            match &run.config.model.arch {
                Some(arch) => arch.summary(),
                None => run.config.model.shape.summary(),
            },
            match run.config.model.pretrained {
                Some(_) if run.kind() == RunKind::Teacher => "pre-trained".into(),
                _ => format_count(run.tokens() as f64),
            },
            format!("{:.2e}", run.flops),
            format_bytes(run.memory.total() as f64),
            after.join(", "),
        ];
        if header.len() > row.len() {
            row.push(run_passes(plan, run).map_or(String::new(), |p| format!("{p:.2}")));
        }
        table.add_row(row);
    }
    for column in [3, 4, 6, 7, 8, 10] {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let notes: String = plan.notes.iter().map(|n| format!("note: {n}\n")).collect();
    format!("{table}\n{}{notes}{}", summary(plan), warnings(plan))
}

/// The corpus facts, for the summary.
fn corpus_line(corpus: &crate::data::CorpusInfo) -> String {
    if corpus.files == 0 {
        let rate = corpus
            .entropy_rate_nats
            .map_or(String::new(), |h| format!(", entropy rate {h:.3}"));
        return format!(
            "  corpus       {}: generated as needed, {} held out; unigram entropy {:.3} nats{rate}\n",
            corpus.description,
            format_count(corpus.val_tokens as f64),
            corpus.unigram_entropy_nats
        );
    }
    let mut out = format!(
        "  corpus       {}: {} training tokens, {} held out",
        corpus.description,
        format_count(corpus.train_tokens as f64),
        format_count(corpus.val_tokens as f64)
    );
    if corpus.files > 0 && corpus.documents > 0 {
        out += &format!(
            "\n               {} documents, {} duplicate(s) dropped; {}",
            corpus.documents,
            corpus
                .duplicate_groups
                .iter()
                .map(|g| g.len() - 1)
                .sum::<usize>(),
            corpus.val_split
        );
    }
    out + "\n"
}

/// The design warnings, one block each.
fn warnings(plan: &Plan) -> String {
    plan.warnings
        .iter()
        .map(|w| format!("warning: {w}\n"))
        .collect()
}

/// A logit pass's store layout.
fn store_layout(run: &Run) -> Option<crate::distill::store::Layout> {
    let logits = run.config.logits.as_ref()?;
    Some(
        crate::distill::store::Layout::of(run.config.data.vocab, &logits.truncation)
            .aligned(logits.aligned),
    )
}

/// Corpus sizes `at_scale` prices: 1, 3 and 10 billion tokens.
const SCALE_TOKENS: [u64; 3] = [1_000_000_000, 3_000_000_000, 10_000_000_000];

/// What the sweep's files would weigh at 1–10B tokens: the token cache of each vocabulary
/// (2 bytes a token up to 65,536 ids, else 4) and each kind of logit store at its bytes per
/// position, plus every store of the plan together, as if each read that many positions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AtScale {
    /// Tokens (and store positions).
    pub tokens: u64,
    /// Token cache bytes per vocabulary, largest vocabulary first.
    pub caches: Vec<(u64, u64)>,
    /// Bytes of one store per distinct layout: (bytes per position, bytes).
    pub stores: Vec<(u64, u64)>,
    /// Bytes of all the plan's stores.
    pub all_stores: u64,
}

/// [`AtScale`] for each of [`SCALE_TOKENS`].
pub fn at_scale(plan: &Plan) -> Vec<AtScale> {
    let mut vocabs: Vec<u64> = plan.runs.iter().map(|r| r.config.data.vocab).collect();
    vocabs.sort_unstable_by(|a, b| b.cmp(a));
    vocabs.dedup();
    let per_position: Vec<u64> = plan
        .runs
        .iter()
        .filter_map(store_layout)
        .map(|l| l.bytes_per_token())
        .collect();
    let mut distinct = per_position.clone();
    distinct.sort_unstable();
    distinct.dedup();
    SCALE_TOKENS
        .iter()
        .map(|&tokens| AtScale {
            tokens,
            caches: vocabs
                .iter()
                .map(|&v| (v, tokens.saturating_mul(if v <= 1 << 16 { 2 } else { 4 })))
                .collect(),
            stores: distinct
                .iter()
                .map(|&b| (b, b.saturating_mul(tokens)))
                .collect(),
            all_stores: per_position
                .iter()
                .fold(0u64, |sum, &b| sum.saturating_add(b.saturating_mul(tokens))),
        })
        .collect()
}

/// The `at scale` lines of the table: token caches and stores at 1, 3 and 10B tokens.
fn at_scale_lines(plan: &Plan) -> String {
    let rows = at_scale(plan);
    let sizes = |f: &dyn Fn(&AtScale) -> u64| {
        rows.iter()
            .map(|r| format_bytes(f(r) as f64))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let Some(first) = rows.first() else {
        return String::new();
    };
    let mut out = String::from("  at scale     1B / 3B / 10B tokens:");
    for (i, (vocab, _)) in first.caches.iter().enumerate() {
        out += &format!(
            "\n               token cache (V = {vocab}) {}",
            sizes(&|r| r.caches[i].1)
        );
    }
    for (i, (per, _)) in first.stores.iter().enumerate() {
        out += &format!(
            "\n               one logit store at {per} B/position {}",
            sizes(&|r| r.stores[i].1)
        );
    }
    let count = plan.runs.iter().filter_map(store_layout).count();
    if count > 1 {
        out += &format!(
            "\n               all {count} logit stores {}",
            sizes(&|r| r.all_stores)
        );
    }
    out + "\n"
}

/// One line per logit store: what it keeps, its bytes per token, positions and size.
fn stores(plan: &Plan) -> String {
    let mut out = String::new();
    for run in &plan.runs {
        let (Some(layout), Some(logits)) = (store_layout(run), run.config.logits.as_ref()) else {
            continue;
        };
        let what = match logits.truncation.targets {
            crate::spec::Targets::TopK => format!("top-{}", layout.top_k),
            crate::spec::Targets::Sampled => format!("{} draws", layout.top_k),
        };
        let tail = if layout.tail { " + tail" } else { "" };
        let aligned = if layout.aligned {
            " + next token and bytes (aligned across tokenizers; teacher positions estimated from bytes per token)"
        } else {
            ""
        };
        out += &format!(
            "  store        {}: {what}{tail}{aligned}, {} B/token x {} positions = {}\n",
            run.name,
            layout.bytes_per_token(),
            run.config.tokens,
            format_bytes(run.disk_bytes as f64)
        );
    }
    out
}

fn summary(plan: &Plan) -> String {
    let t = &plan.totals;
    let kinds: Vec<String> = RunKind::ALL
        .iter()
        .filter_map(|k| t.by_kind.get(k).map(|n| format!("{n} {k}")))
        .collect();
    let saved_share = if t.naive_flops > 0.0 {
        100.0 * t.saved_flops / t.naive_flops
    } else {
        0.0
    };
    let mut out = format!(
        "sweep `{}`: {} runs ({})\n",
        plan.sweep_name,
        t.runs,
        kinds.join(", ")
    );
    out += &format!("  compute      {:.3e} FLOPs", t.flops);
    let parts: Vec<String> = t
        .flops_by_kind
        .iter()
        .map(|(k, f)| format!("{k} {f:.2e}"))
        .collect();
    out += &format!(" ({})\n", parts.join(", "));
    out += &format!(
        "  saved        {:.3e} FLOPs ({saved_share:.1}%) versus training a teacher per student with online logits ({:.3e})\n",
        t.saved_flops, t.naive_flops
    );
    out += &format!(
        "  disk         {} of logit stores + {} of checkpoints\n",
        format_bytes(t.logit_store_bytes as f64),
        format_bytes(t.checkpoint_bytes as f64)
    );
    out += &stores(plan);
    out += &at_scale_lines(plan);
    if let Some(run) = plan.largest_memory() {
        out += &format!(
            "  memory       at most {} per run at its peak ({})\n",
            format_bytes(run.memory.total() as f64),
            run.name
        );
    }
    if let Some(corpus) = &plan.corpus {
        out += &corpus_line(corpus);
    }
    let basis = if t.throughput.source.starts_with("measured") {
        format!("from throughput {}", t.throughput.source)
    } else {
        format!(
            "at {:.1e} FLOP/s ({})",
            t.throughput.flops_per_s, t.throughput.source
        )
    };
    out += &format!(
        "  time         {} one run at a time {basis}\n",
        format_duration(t.estimated_seconds)
    );
    out
}
