//! `pdsweep size`: exact parameter counts of an explicit shape or of a derived one.

use pdsweep::model::{ModelShape, ShapeRule};
use pdsweep::spec::units::{format_count, parse_count};

use super::UsageError;

/// Options of `pdsweep size`.
#[derive(Debug, Clone)]
pub struct SizeCommand {
    /// Target size to derive a shape from.
    pub target: Option<String>,
    /// A released model's config.json or folder.
    pub config: Option<std::path::PathBuf>,
    /// Explicit width.
    pub d_model: Option<u64>,
    /// Explicit depth.
    pub n_layers: Option<u64>,
    /// Explicit query heads.
    pub n_heads: Option<u64>,
    /// Explicit key/value heads.
    pub n_kv_heads: Option<u64>,
    /// Explicit SwiGLU width.
    pub d_ff: Option<u64>,
    /// Vocabulary.
    pub vocab: u64,
    /// Tie embedding and head.
    pub tie_embeddings: bool,
    /// Derivation: aspect ratio.
    pub aspect_ratio: f64,
    /// Derivation: head width.
    pub head_dim: Option<u64>,
    /// Derivation: query heads per kv head.
    pub kv_groups: u64,
    /// JSON output.
    pub json: bool,
}

/// Runs `pdsweep size`.
pub fn size(cmd: SizeCommand) -> anyhow::Result<()> {
    if let Some(path) = &cmd.config {
        return released(path, cmd.json);
    }
    let (shape, target) = match &cmd.target {
        Some(text) => {
            let target = parse_count(text).map_err(|e| UsageError(format!("SIZE: {e}")))?;
            if !(cmd.aspect_ratio.is_finite() && cmd.aspect_ratio > 0.0) {
                return Err(UsageError(format!(
                    "--aspect-ratio `{}` must be positive",
                    cmd.aspect_ratio
                ))
                .into());
            }
            let rule = ShapeRule {
                aspect_ratio: cmd.aspect_ratio,
                head_dim: cmd.head_dim,
                kv_groups: cmd.kv_groups,
                ffn_multiple: None,
                tie_embeddings: cmd.tie_embeddings,
                vocab: cmd.vocab,
            };
            (rule.derive(target).map_err(UsageError)?, Some(target))
        }
        None => {
            let n_heads = cmd.n_heads.unwrap_or(0);
            let shape = ModelShape {
                d_model: cmd.d_model.unwrap_or(0),
                n_layers: cmd.n_layers.unwrap_or(0),
                n_heads,
                n_kv_heads: cmd.n_kv_heads.unwrap_or(n_heads),
                d_ff: cmd.d_ff.unwrap_or(0),
                vocab: cmd.vocab,
                tie_embeddings: cmd.tie_embeddings,
            };
            shape.validate().map_err(UsageError)?;
            (shape, None)
        }
    };
    let p = shape.params();
    if cmd.json {
        let value = serde_json::json!({
            "target_params": target, "shape": shape, "params_total": p.total,
            "params_non_embedding": p.non_embedding, "embedding": p.embedding, "head": p.head,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        if let Some(t) = target {
            println!(
                "target       {} non-embedding parameters",
                format_count(t as f64)
            );
        }
        println!(
            "shape        d_model {}, n_layers {}, n_heads {}, n_kv_heads {}, d_ff {}, vocab {}, {}",
            shape.d_model,
            shape.n_layers,
            shape.n_heads,
            shape.n_kv_heads,
            shape.d_ff,
            shape.vocab,
            if shape.tie_embeddings {
                "tied"
            } else {
                "untied"
            }
        );
        print_counts(&p);
    }
    Ok(())
}

/// The counts' lines of the text output.
fn print_counts(p: &pdsweep::model::ParamCount) {
    println!(
        "total        {} ({})",
        p.total,
        format_count(p.total as f64)
    );
    println!(
        "non-embed.   {} ({})",
        p.non_embedding,
        format_count(p.non_embedding as f64)
    );
    println!("embedding    {}", p.embedding);
    println!("head         {}", p.head);
}

/// `pdsweep size --config PATH`: a released model's architecture and exact counts, from its
/// folder or its `config.json`.
fn released(path: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let config = if path.is_dir() {
        pdsweep::hf::read_config(path)?.0
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("cannot read `{}`: {e}", path.display())))?;
        pdsweep::hf::parse_config(&text).map_err(|e| {
            UsageError(format!(
                "`{}`: key `{}` {}",
                path.display(),
                e.key,
                e.message
            ))
        })?
    };
    print_released(&config, json)
}

fn print_released(config: &pdsweep::hf::ReleasedConfig, json: bool) -> anyhow::Result<()> {
    let p = config.params();
    let a = &config.arch;
    if json {
        let value = serde_json::json!({
            "family": a.family.model_type(), "architecture": a, "params_total": p.total,
            "params_non_embedding": p.non_embedding, "embedding": p.embedding, "head": p.head,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("family       {}", a.family);
    println!("shape        {}", a.summary());
    print_counts(&p);
    Ok(())
}
