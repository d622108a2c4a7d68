//! The model card (`README.md`) of an exported model: what it is, how it was trained (and
//! distilled), its held-out results, the exact run configuration, and how to load it.

use std::fmt::{self, Write};

use crate::data::synthetic::SyntheticSpec;
use crate::plan::{RunConfig, RunKind};
use crate::store::RunRow;

/// Everything a card says.
pub struct Card<'a> {
    /// The sweep's name.
    pub sweep: &'a str,
    /// The pdsweep version that planned the sweep.
    pub version: &'a str,
    /// The run.
    pub run: &'a RunRow,
    /// Its configuration.
    pub config: &'a RunConfig,
    /// A student's teacher run.
    pub teacher: Option<&'a RunRow>,
    /// Whether the folder has a tokenizer.json.
    pub has_tokenizer: bool,
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "—".into(), |x| format!("{x:.digits$}"))
}

impl Card<'_> {
    /// The card as Markdown with a YAML header for the Hugging Face Hub.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Why `expect`: a `String`'s `fmt::Write` never fails, and no `Display` impl written
        // here returns an error, so this is a bug, not an input.
        self.write(&mut out)
            .expect("formatting into a String cannot fail");
        out
    }

    fn write(&self, out: &mut String) -> fmt::Result {
        let (r, c) = (self.run, self.config);
        let s = &c.model.shape;
        let p = s.params();
        let mut tags = vec!["pdsweep", "llama"];
        if c.kind == RunKind::Student {
            tags.push("distillation");
        }
        writeln!(
            out,
            "---\nlibrary_name: transformers\npipeline_tag: text-generation"
        )?;
        writeln!(out, "tags:")?;
        for t in tags {
            writeln!(out, "- {t}")?;
        }
        writeln!(out, "---\n\n# {}\n", r.name)?;
        let what = match c.kind {
            RunKind::Teacher => "a teacher pre-trained",
            RunKind::Student => "a student distilled",
            RunKind::Baseline => "a baseline (no teacher) trained",
            RunKind::Logits => "a logit pass",
        };
        writeln!(
            out,
            "A LLaMA-architecture language model: {what} by pdsweep {} in sweep `{}`, run `{}`. Its weights are the run's final checkpoint in float32.\n",
            self.version, self.sweep, r.id
        )?;
        self.architecture(out, p.total, p.non_embedding)?;
        self.training(out)?;
        self.distillation(out)?;
        self.results(out)?;
        self.usage(out)?;
        writeln!(
            out,
            "## Run configuration\n\nThe resolved configuration pdsweep stored for this run (its id is a hash of it):\n\n```json\n{}\n```",
            serde_json::to_string_pretty(c).unwrap_or_default()
        )
    }

    fn architecture(&self, out: &mut String, total: u64, non_embedding: u64) -> fmt::Result {
        let m = &self.config.model;
        let s = &m.shape;
        writeln!(out, "## Architecture\n\n| | |\n|---|---|")?;
        let rows = [
            (
                "parameters",
                format!("{total} ({non_embedding} without embedding and head)"),
            ),
            ("layers × width", format!("{} × {}", s.n_layers, s.d_model)),
            (
                "attention heads (key/value)",
                format!("{} ({})", s.n_heads, s.n_kv_heads),
            ),
            ("SwiGLU width", s.d_ff.to_string()),
            ("vocabulary", s.vocab.to_string()),
            ("tied embeddings", s.tie_embeddings.to_string()),
            (
                "RoPE θ, RMSNorm ε",
                format!("{}, {}", m.rope_theta, m.norm_eps),
            ),
            ("context", self.config.data.context.to_string()),
        ];
        for (k, v) in rows {
            writeln!(out, "| {k} | {v} |")?;
        }
        out.push('\n');
        Ok(())
    }

    fn training(&self, out: &mut String) -> fmt::Result {
        let c = self.config;
        let d = &c.data;
        let corpus = match &d.path {
            Some(path) => format!("`{}` corpus at `{path}`", d.corpus),
            None => {
                let world = SyntheticSpec::with_world(
                    0,
                    d.corpus_seed,
                    d.synthetic_sources,
                    d.synthetic_copies,
                );
                format!(
                    "`{}` corpus (seed {}{})",
                    d.corpus,
                    d.corpus_seed,
                    world.world_note()
                )
            }
        };
        let tokenizer = match (&d.tokenizer_file, d.tokenizer) {
            (Some(f), _) => format!("the tokenizer `{}` (SHA-256 `{}`)", f.path, f.sha256),
            (None, Some(t)) => format!("the `{t}` tokenizer"),
            (None, None) => "the corpus's own token ids".into(),
        };
        writeln!(out, "## Training\n")?;
        writeln!(
            out,
            "- data: {corpus}, tokenised with {tokenizer}; held-out split of {} tokens",
            d.val_tokens
        )?;
        if let Some(t) = &c.train {
            writeln!(
                out,
                "- {} tokens in {} steps of {} sequences × {} tokens, data-order seed {}",
                c.tokens, t.steps, d.batch_seqs, d.context, d.seed
            )?;
            writeln!(
                out,
                "- AdamW (β = {:?}, weight decay {}), learning rate `{}`, gradient clip {}",
                t.betas,
                t.weight_decay,
                t.lr.label(),
                t.grad_clip
            )?;
        }
        if !self.has_tokenizer {
            writeln!(
                out,
                "- no tokenizer.json: token ids are {}",
                match d.tokenizer {
                    Some(crate::spec::TokenizerKind::Byte) => "the UTF-8 bytes of the text (0–255)",
                    _ => "those of the corpus (see the run configuration)",
                }
            )?;
        }
        out.push('\n');
        Ok(())
    }

    fn distillation(&self, out: &mut String) -> fmt::Result {
        let Some(dc) = &self.config.distill else {
            return Ok(());
        };
        writeln!(out, "## Distillation\n")?;
        let teacher = self.teacher.map_or_else(
            || format!("run `{}`", dc.teacher),
            |t| {
                format!(
                    "`{}` ({} non-embedding parameters, held-out loss {} nats/token)",
                    t.name,
                    t.params_non_embedding,
                    num(t.val_loss, 4)
                )
            },
        );
        writeln!(out, "- teacher: {teacher}")?;
        writeln!(
            out,
            "- objective: (1 − α)·cross-entropy + α·`{}`, α = `{}`, τ = {}, teacher truncated to top-p {} then top-k {}, {} (teacher logits {})",
            dc.loss,
            dc.alpha.0.label(),
            dc.temperature.0,
            dc.truncation.top_p.0,
            dc.truncation.top_k,
            dc.mode,
            match dc.mode {
                crate::spec::DistillMode::Offline => "read from a stored logit pass",
                crate::spec::DistillMode::Online => "computed in every step",
            }
        )?;
        out.push('\n');
        Ok(())
    }

    fn results(&self, out: &mut String) -> fmt::Result {
        let r = self.run;
        writeln!(out, "## Held-out results\n\n| metric | value |\n|---|---|")?;
        writeln!(
            out,
            "| cross-entropy (nats/token) | {} |",
            num(r.val_loss, 4)
        )?;
        writeln!(out, "| bits per byte | {} |", num(r.val_bpb, 4))?;
        if self.config.kind == RunKind::Student {
            writeln!(
                out,
                "| top-1 agreement with the teacher | {} |",
                num(r.agreement, 4)
            )?;
            writeln!(
                out,
                "| KL(teacher ‖ student) (nats/token) | {} |",
                num(r.kl_teacher_student, 4)
            )?;
            writeln!(
                out,
                "| gain over the no-teacher baseline (nats/token) | {} |",
                num(r.gain, 4)
            )?;
        }
        writeln!(
            out,
            "| training throughput (tokens/s), wall time (s) | {}, {} |\n",
            num(r.tokens_per_s, 0),
            num(r.wall_s, 1)
        )?;
        Ok(())
    }

    fn usage(&self, out: &mut String) -> fmt::Result {
        writeln!(
            out,
            "## Use\n\n```python\nfrom transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained(\"path/to/this/folder\")\n```\n"
        )?;
        Ok(())
    }
}
