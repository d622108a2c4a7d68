//! Finished runs out as Hugging Face model folders: `config.json`, `model.safetensors` (f32),
//! the tokenizer the run's tokens came from (`tokenizer.json`, with the `tokenizer_config.json`
//! and `special_tokens_map.json` that sit beside it), and a model card (`README.md`) with the
//! run's settings and held-out results; `transformers` loads such a folder with
//! `AutoModelForCausalLM.from_pretrained`.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde_json::{Map, Value};

use super::card::Card;
use crate::hf::{HfError, LlamaConfig, SINGLE, read_config, write_safetensors};
use crate::plan::{RunConfig, RunKind};
use crate::store::{RunRow, RunState, SweepDb, SweepLayout};
use crate::train::checkpoint;

/// Where things are for an export.
pub struct ExportPaths<'a> {
    /// Where the sweep's files are (its corpus, tokenizer and pre-trained paths are relative
    /// to its sweep file's folder; checkpoints and caches are under `results/NAME/`).
    pub layout: &'a SweepLayout,
    /// The folder that receives one sub-folder per run.
    pub out: &'a Path,
}

/// What an export did.
#[derive(Debug, Default)]
pub struct ExportSummary {
    /// Runs written, with their folders.
    pub written: Vec<(String, PathBuf)>,
    /// Runs not written, with the reason.
    pub skipped: Vec<(String, String)>,
}

fn read_error(path: &Path, e: impl Into<crate::error::Cause>) -> HfError {
    HfError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

/// Writes every finished teacher, student and baseline of the current plan of `db` (or only the
/// runs named or numbered in `only`) as a model folder `paths.out/RUN_NAME`.
///
/// Pre-trained teachers are skipped: they are model folders already.
pub fn export_models(
    db: &SweepDb,
    paths: &ExportPaths,
    only: &[String],
    on_written: &mut dyn FnMut(&str, &Path),
) -> Result<ExportSummary, HfError> {
    let db_error = |e: crate::store::StoreError| read_error(db.path(), e);
    let Some(plan) = db.current_plan().map_err(db_error)? else {
        return Err(read_error(db.path(), "the sweep has no plan yet"));
    };
    let info = db.plan_info(plan).map_err(db_error)?;
    let rows = db.run_rows(plan).map_err(db_error)?;
    if let Some(missing) = only.iter().find(|o| {
        !rows
            .iter()
            .any(|r| &r.name == *o || r.id.as_str() == o.as_str())
    }) {
        return Err(read_error(
            db.path(),
            format!("the current plan has no run named `{missing}`"),
        ));
    }
    let device = Device::flex();
    let token_ids = special_token_ids(&rows, paths.layout.sweep_dir());
    let mut summary = ExportSummary::default();
    for row in &rows {
        let wanted = only.is_empty() || only.iter().any(|o| o == &row.name || o == row.id.as_str());
        if !wanted || row.kind == RunKind::Logits {
            continue;
        }
        let config: RunConfig =
            serde_json::from_str(&row.config_json).map_err(|e| read_error(db.path(), e))?;
        if config.model.pretrained.is_some() {
            summary.skipped.push((
                row.name.clone(),
                "pre-trained: it is a model folder already".into(),
            ));
            continue;
        }
        if row.state != RunState::Done {
            summary
                .skipped
                .push((row.name.clone(), format!("not finished (`{}`)", row.state)));
            continue;
        }
        let teacher = row
            .teacher_id
            .as_ref()
            .and_then(|t| rows.iter().find(|r| &r.id == t));
        let dir = paths.out.join(&row.name);
        let card = Card {
            sweep: info.as_ref().map_or("", |i| i.sweep_name.as_str()),
            version: info.as_ref().map_or("", |i| i.pdsweep_version.as_str()),
            run: row,
            config: &config,
            teacher,
            has_tokenizer: false,
        };
        export_run(&config, card, &token_ids, paths, &dir, &device)?;
        on_written(&row.name, &dir);
        summary.written.push((row.name.clone(), dir));
    }
    Ok(summary)
}

/// The special-token ids (BOS, EOS, padding) of the first pre-trained teacher of the plan:
/// the tokenizer a sweep with pre-trained teachers shares is theirs, and so are its ids.
fn special_token_ids(rows: &[RunRow], sweep_dir: &Path) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        out.insert(key.into(), Value::Null);
    }
    let source = rows
        .iter()
        .filter_map(|r| serde_json::from_str::<RunConfig>(&r.config_json).ok())
        .find_map(|c| c.model.pretrained);
    let Some(source) = source else {
        return out;
    };
    let path = sweep_dir.join(&source.path).join("config.json");
    let value: Option<Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    if let Some(Value::Object(obj)) = value {
        for (key, v) in out.iter_mut() {
            if let Some(found) = obj.get(key) {
                *v = found.clone();
            }
        }
    }
    out
}

/// Writes one run's folder.
fn export_run(
    config: &RunConfig,
    mut card: Card,
    token_ids: &Map<String, Value>,
    paths: &ExportPaths,
    dir: &Path,
    device: &Device,
) -> Result<(), HfError> {
    let id = &card.run.id;
    let ckpt = paths.layout.checkpoint(id);
    let loaded = checkpoint::load(&ckpt, id.as_str())
        .map_err(|e| read_error(&ckpt, e))?
        .ok_or_else(|| read_error(&ckpt, "the run is done but its checkpoint is missing"))?;
    let model = loaded
        .model(config.init_model(device))
        .map_err(|e| read_error(&ckpt, e))?;
    std::fs::create_dir_all(dir).map_err(|e| HfError::Write {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    let s = &config.model.shape;
    let llama = LlamaConfig {
        d_model: s.d_model,
        n_layers: s.n_layers,
        n_heads: s.n_heads,
        n_kv_heads: s.n_kv_heads,
        d_ff: s.d_ff,
        vocab: s.vocab,
        tie_embeddings: s.tie_embeddings,
        rope_theta: config.model.rope_theta,
        norm_eps: config.model.norm_eps,
        max_positions: config.data.context,
    };
    write(
        &dir.join("config.json"),
        llama.to_json(token_ids).as_bytes(),
    )?;
    read_config(dir)?; // what was written reads back as the same architecture
    write_safetensors(&dir.join(SINGLE), &model.named_weights())?;
    let (sweep_dir, cache) = (paths.layout.sweep_dir(), paths.layout.cache());
    if let Some(tokenizer) = crate::data::tokenizer_json(&config.data, sweep_dir, &cache) {
        copy(&tokenizer, &dir.join("tokenizer.json"))?;
        let beside = |name: &str| tokenizer.parent().map(|p| p.join(name));
        let mut has_config = false;
        for name in ["tokenizer_config.json", "special_tokens_map.json"] {
            if let Some(src) = beside(name).filter(|p| p.is_file()) {
                copy(&src, &dir.join(name))?;
                has_config |= name == "tokenizer_config.json";
            }
        }
        if !has_config {
            let minimal = r#"{"tokenizer_class": "PreTrainedTokenizerFast"}"#;
            write(&dir.join("tokenizer_config.json"), minimal.as_bytes())?;
        }
        card.has_tokenizer = true;
    }
    write(&dir.join("README.md"), card.render().as_bytes())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), HfError> {
    crate::atomic::write_atomic(path, &[bytes]).map_err(|e| HfError::Write {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

fn copy(from: &Path, to: &Path) -> Result<(), HfError> {
    let bytes = std::fs::read(from).map_err(|e| read_error(from, e))?;
    write(to, &bytes)
}
