//! The finished models of a sweep and their text: a run's model loaded from its final
//! checkpoint (or its Hugging Face folder, for a pre-trained teacher), its held-out split, and
//! the tokenizer that turns its tokens back into text. What `pdsweep sample` and the
//! distillation degree read.

use crate::data::DataError;
use crate::error::Cause;
use std::path::Path;

use burn::tensor::Device;

use crate::data::{self, Prepared, Tokenizer};
use crate::model::Transformer;
use crate::plan::{RunConfig, RunId};
use crate::store::SweepLayout;
use crate::train::checkpoint;

/// The model of finished run `id` with configuration `config`; `Err` says why it cannot be
/// loaded (a missing or corrupt checkpoint, a changed pre-trained folder), naming the file.
pub fn load_model(
    config: &RunConfig,
    id: &RunId,
    layout: &SweepLayout,
    device: &Device,
) -> Result<Transformer, Cause> {
    if let Some(source) = &config.model.pretrained {
        let dir = layout.sweep_dir().join(&source.path);
        let arch = config.model.transformer(config.data.context);
        let model = crate::hf::load_model(&dir, &arch, &source.config_sha256, device)?;
        return model.into_transformer().ok_or_else(|| {
            Cause::from(format!(
                "`{}` runs as the released decoder (any architecture but a plain LLaMA): sampling from it and the distillation degree need pdsweep's own decoder with a key/value cache, which such teachers do not run yet",
                dir.display()
            ))
        });
    }
    let path = layout.checkpoint(id);
    let loaded = checkpoint::load(&path, id.as_str())?
        .ok_or_else(|| format!("checkpoint `{}` is missing", path.display()))?;
    Ok(loaded.model(config.init_model(device))?)
}

/// The run's data (its held-out split is what prefixes come from).
pub fn run_data(config: &RunConfig, layout: &SweepLayout) -> Result<Prepared, DataError> {
    data::prepare(&config.data, layout.sweep_dir(), &layout.cache(), 0)
}

/// Tokens to text and to the symbols similarity compares (bytes of the text; the ids
/// themselves for the synthetic corpus, which has no text).
pub struct TextOf {
    tokenizer: Option<Tokenizer>,
}

impl TextOf {
    /// The text of run `config`'s tokens.
    pub fn new(
        config: &RunConfig,
        sweep_dir: &Path,
        cache_dir: &Path,
    ) -> Result<TextOf, DataError> {
        let tokenizer = data::run_tokenizer(&config.data, sweep_dir, cache_dir)?;
        Ok(TextOf { tokenizer })
    }

    /// Whether the tokens are text (not the synthetic corpus).
    pub fn is_text(&self) -> bool {
        self.tokenizer.is_some()
    }

    /// `tokens` as text (space-separated ids for the synthetic corpus).
    pub fn text(&self, tokens: &[u32]) -> String {
        match &self.tokenizer {
            Some(t) => t.decode(tokens).unwrap_or_else(|e| format!("<{e}>")),
            None => tokens
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// `tokens` as the symbols n-gram measures compare.
    pub fn symbols(&self, tokens: &[u32]) -> Vec<u32> {
        match &self.tokenizer {
            Some(Tokenizer::Byte) => tokens.to_vec(),
            Some(_) => self.text(tokens).bytes().map(u32::from).collect(),
            None => tokens.to_vec(),
        }
    }

    /// `text` as tokens of the run (`Err` for the synthetic corpus, which has no text).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, crate::error::Cause> {
        let Some(t) = &self.tokenizer else {
            return Err(
                "the synthetic corpus has no text: use --held-out instead of --prompt".into(),
            );
        };
        let mut out = Vec::new();
        t.encode_plain(text, &mut out)?;
        Ok(out)
    }
}

/// `count` prefixes of `tokens` tokens each, evenly spaced over the held-out split (fewer
/// when it is too short).
pub fn held_out_prefixes(prepared: &Prepared, count: usize, tokens: usize) -> Vec<Vec<u32>> {
    let len = prepared.val.len();
    if count == 0 || tokens == 0 || len < tokens {
        return Vec::new();
    }
    let room = len - tokens;
    let count = count.min(room + 1);
    (0..count)
        .map(|i| {
            let start = if count == 1 {
                0
            } else {
                i * room / (count - 1)
            };
            prepared.val.slice(start, start + tokens)
        })
        .collect()
}
