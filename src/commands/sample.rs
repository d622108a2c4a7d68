//! `pdsweep sample SWEEP --run NAME`: text from any finished run (teacher, student, baseline,
//! pre-trained teacher), continuing a prompt or held-out prefixes with a key/value cache,
//! greedy or sampled; readable text or JSON with the token ids.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use burn::tensor::Device;
use pdsweep::generate::{Sampling, generate};
use pdsweep::plan::{RunConfig, RunKind};
use pdsweep::similarity::{TextOf, held_out_prefixes, load_model, run_data};
use pdsweep::store::{RunState, SweepDb};
use serde_json::json;

use super::UsageError;
use super::locate::locate;

/// Where the prompts come from.
#[derive(Debug, Clone)]
pub enum PromptSource {
    /// This text, tokenized by the run's tokenizer.
    Text(String),
    /// This many prefixes of the held-out split, of `tokens` tokens each.
    HeldOut {
        /// How many.
        count: usize,
        /// Tokens per prefix.
        tokens: usize,
    },
}

/// Options of `pdsweep sample`.
#[derive(Debug, Clone)]
pub struct SampleCommand {
    /// The sweep file or name (the only sweep under `results` when absent).
    pub sweep: Option<PathBuf>,
    /// Results folder.
    pub results: PathBuf,
    /// The run (name or id).
    pub run: String,
    /// The prompts.
    pub prompt: PromptSource,
    /// Tokens to generate per prompt.
    pub tokens: usize,
    /// How the next token is chosen.
    pub sampling: Sampling,
    /// Sampling seed.
    pub seed: u64,
    /// JSON instead of text.
    pub json: bool,
}

/// Runs `pdsweep sample`.
pub fn sample(cmd: SampleCommand) -> anyhow::Result<()> {
    cmd.sampling.check().map_err(UsageError)?;
    let located = locate(cmd.sweep.as_deref(), &cmd.results)?;
    let db = SweepDb::open(&located.db_path())?;
    let layout = located.with_sweep_dir(&db)?;
    let plan = db
        .current_plan()?
        .ok_or_else(|| UsageError("the sweep has no plan yet: run it first".into()))?;
    let rows = db.run_rows(plan)?;
    let row = rows
        .iter()
        .find(|r| r.name == cmd.run || r.id.as_str() == cmd.run)
        .ok_or_else(|| {
            UsageError(format!(
                "the current plan has no run named `{}`\n\nhint: `pdsweep status` lists the runs",
                cmd.run
            ))
        })?;
    if row.kind == RunKind::Logits {
        return Err(UsageError(format!("`{}` is a logit pass, not a model", row.name)).into());
    }
    if row.state != RunState::Done {
        return Err(UsageError(format!(
            "run `{}` is not finished (`{}`): only finished runs have a model to sample",
            row.name, row.state
        ))
        .into());
    }
    let config: RunConfig = serde_json::from_str(&row.config_json)
        .with_context(|| format!("run `{}` has an unreadable configuration", row.name))?;
    let device = Device::flex();
    let model = load_model(&config, &row.id, &layout, &device)
        .map_err(anyhow::Error::from_boxed)
        .with_context(|| format!("run `{}`", row.name))?;
    let text = TextOf::new(&config, layout.sweep_dir(), &layout.cache())
        .with_context(|| format!("run `{}`", row.name))?;
    let prompts = match &cmd.prompt {
        PromptSource::Text(_) if !text.is_text() => {
            return Err(UsageError(
                "the synthetic corpus has no text: use --held-out instead of --prompt".into(),
            )
            .into());
        }
        PromptSource::Text(t) => vec![text.encode(t).map_err(anyhow::Error::from_boxed)?],
        PromptSource::HeldOut { count, tokens } => {
            let prepared =
                run_data(&config, &layout).with_context(|| format!("run `{}`", row.name))?;
            let p = held_out_prefixes(&prepared, *count, *tokens);
            if p.is_empty() {
                return Err(UsageError(format!(
                    "the held-out split ({} tokens) is shorter than one prefix of {tokens}",
                    prepared.val.len()
                ))
                .into());
            }
            p
        }
    };
    let start = Instant::now();
    let out = generate(
        &model,
        &prompts,
        cmd.tokens,
        &cmd.sampling,
        cmd.seed,
        0,
        &device,
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let generated: usize = out.tokens.iter().map(Vec::len).sum();
    if cmd.json {
        let samples: Vec<_> = prompts
            .iter()
            .zip(&out.tokens)
            .map(|(p, t)| {
                json!({
                    "prompt": text.text(p),
                    "prompt_ids": p,
                    "text": text.text(t),
                    "ids": t,
                })
            })
            .collect();
        let doc = json!({
            "run": row.name,
            "run_id": row.id.as_str(),
            "kind": row.kind.as_str(),
            "sampling": cmd.sampling,
            "seed": cmd.seed,
            "tokens": cmd.tokens,
            "context": model.context(),
            "samples": samples,
            "seconds": seconds,
            "tokens_per_s": generated as f64 / seconds.max(1e-9),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    for (i, (p, t)) in prompts.iter().zip(&out.tokens).enumerate() {
        if prompts.len() > 1 {
            println!("── sample {} ──", i + 1);
        }
        println!("{}\u{2503}{}", text.text(p), text.text(t));
    }
    eprintln!(
        "{generated} tokens from `{}` in {seconds:.2} s ({:.0} tokens/s; ┃ marks where the prompt ends)",
        row.name,
        generated as f64 / seconds.max(1e-9)
    );
    Ok(())
}
