//! Files a sweep file names besides its corpus: the `[corpus] tokenizer` file and the folders of
//! pre-trained teachers. Their small metadata files (tokenizer.json, config.json) are read when
//! the sweep is loaded, so a bad one is reported at the key that names it and the vocabulary
//! check can use them; weights are left to the plan and the runs.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::error::SpecError;
use super::load::Sweep;
use crate::hf::{PretrainedModel, TokenizerFile};

/// What the files named by a sweep say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepFiles {
    /// The `[corpus] tokenizer` file, when it is one.
    pub tokenizer: Option<TokenizerFile>,
    /// Pre-trained teachers by their index in `[[teachers.models]]`.
    pub teachers: BTreeMap<usize, PretrainedModel>,
}

/// A pre-trained teacher entry with where it was written.
pub struct PretrainedEntry<'a> {
    /// `teachers.models[i].pretrained`.
    pub key: String,
    /// The entry's span in the sweep file.
    pub span: Range<usize>,
    /// What its folder says.
    pub model: &'a PretrainedModel,
}

impl SweepFiles {
    /// The pre-trained teachers with the keys and spans that name them.
    pub fn pretrained<'a>(&'a self, sweep: &Sweep) -> Vec<PretrainedEntry<'a>> {
        let models = &sweep.file.teachers.get_ref().models;
        self.teachers
            .iter()
            .filter_map(|(&i, model)| {
                Some(PretrainedEntry {
                    key: format!("teachers.models[{i}].pretrained"),
                    span: models.get(i)?.span(),
                    model,
                })
            })
            .collect()
    }
}

/// `path` as written in the sweep file, relative to the sweep file's folder.
pub fn resolve(sweep: &Sweep, path: &str) -> PathBuf {
    sweep
        .path
        .parent()
        .unwrap_or_else(|| Path::new(""))
        .join(path)
}

/// Reads the tokenizer file and every pre-trained teacher's folder.
pub fn read(sweep: &Sweep) -> Result<SweepFiles, SpecError> {
    let mut files = SweepFiles::default();
    if let Some(corpus) = &sweep.file.corpus
        && let Some(path) = corpus.get_ref().tokenizer.as_ref().and_then(|t| t.file())
    {
        let tokenizer = TokenizerFile::read(&resolve(sweep, path)).map_err(|e| {
            located(
                sweep,
                corpus.span(),
                "corpus.tokenizer",
                &e,
                "point `tokenizer` at a Hugging Face tokenizer.json (relative to the sweep file)",
            )
        })?;
        files.tokenizer = Some(tokenizer);
    }
    for (i, entry) in sweep.file.teachers.get_ref().models.iter().enumerate() {
        if let Some(path) = &entry.get_ref().pretrained {
            let model = PretrainedModel::read(&resolve(sweep, path)).map_err(|e| {
                located(
                    sweep,
                    entry.span(),
                    &format!("teachers.models[{i}].pretrained"),
                    &e,
                    "`pretrained` names a Hugging Face LLaMA folder (config.json, model.safetensors), relative to the sweep file",
                )
            })?;
            files.teachers.insert(i, model);
        }
    }
    Ok(files)
}

/// `error` located at `span` and `key`, its own hint (if any) kept, else `hint`.
fn located(
    sweep: &Sweep,
    span: Range<usize>,
    key: &str,
    error: &crate::hf::HfError,
    hint: &str,
) -> SpecError {
    let text = error.to_string();
    let (message, own_hint) = match text.split_once("\n\nhint: ") {
        Some((m, h)) => (m.to_string(), h.to_string()),
        None => (text, hint.to_string()),
    };
    sweep.error_at(span, key, message).with_hint(own_hint)
}
