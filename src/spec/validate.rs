//! Checks that need more than one value of the sweep file: corpus consistency, the shared
//! vocabulary, non-empty model groups, explicit shapes that are complete.

use toml::Spanned;

use super::error::SpecError;
use super::load::Sweep;
use super::schema::{CorpusSection, GroupSection, ModelEntry};
use super::values::{CorpusKind, TokenizerKind};

/// The vocabulary of the byte tokenizer.
pub const BYTE_VOCAB: u64 = 256;
/// The vocabulary of the synthetic corpus when nothing sets it.
pub const DEFAULT_SYNTHETIC_VOCAB: u64 = 256;

/// Runs every whole-file check; returns the vocabulary all models share.
pub fn check(sweep: &Sweep) -> Result<u64, SpecError> {
    let file = &sweep.file;
    check_group(sweep, &file.teachers, "teachers")?;
    check_group(sweep, &file.students, "students")?;
    if let Some(baseline) = &file.teachers.get_ref().baseline {
        return Err(sweep
            .error_at(
                baseline.span(),
                "teachers.baseline",
                "`baseline` applies to students only",
            )
            .with_hint("move `baseline = true` to the `[students]` table"));
    }
    check_train(sweep)?;
    check_constraints(sweep)?;
    let corpus = file
        .corpus
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    check_corpus(sweep, &corpus)?;
    resolve_vocab(sweep, &corpus)
}

fn check_group(sweep: &Sweep, group: &Spanned<GroupSection>, key: &str) -> Result<(), SpecError> {
    let g = group.get_ref();
    if g.sizes.is_empty() && g.models.is_empty() {
        return Err(sweep
            .error_at(group.span(), key, format!("`[{key}]` lists no models"))
            .with_hint(format!(
                "add `sizes = [\"2M\", ...]` or a `[[{key}.models]]` entry"
            )));
    }
    let mut names = std::collections::HashSet::new();
    for (i, entry) in g.models.iter().enumerate() {
        let entry_key = format!("{key}.models[{i}]");
        check_entry(sweep, entry, &entry_key)?;
        if let Some(name) = &entry.get_ref().name
            && !names.insert(name.clone())
        {
            return Err(sweep.error_at(
                entry.span(),
                &format!("{entry_key}.name"),
                format!("model name `{name}` is used twice in `[{key}]`"),
            ));
        }
    }
    Ok(())
}

/// The explicit-shape keys of a model entry and whether each is set.
fn explicit_keys(e: &ModelEntry) -> [(&'static str, bool); 4] {
    [
        ("d_model", e.d_model.is_some()),
        ("n_layers", e.n_layers.is_some()),
        ("n_heads", e.n_heads.is_some()),
        ("d_ff", e.d_ff.is_some()),
    ]
}

fn check_entry(sweep: &Sweep, entry: &Spanned<ModelEntry>, key: &str) -> Result<(), SpecError> {
    let e = entry.get_ref();
    let keys = explicit_keys(e);
    let any_explicit =
        keys.iter().any(|(_, set)| *set) || e.n_kv_heads.is_some() || e.vocab.is_some();
    match (e.size.is_some(), any_explicit) {
        (true, true) => Err(sweep
            .error_at(
                entry.span(),
                key,
                "give either `size` or an explicit shape, not both",
            )
            .with_hint("remove `size`, or remove d_model/n_layers/n_heads/n_kv_heads/d_ff/vocab")),
        (false, false) => Err(sweep
            .error_at(
                entry.span(),
                key,
                "model entry has neither `size` nor an explicit shape",
            )
            .with_hint("add `size = \"4M\"`, or `d_model`, `n_layers`, `n_heads` and `d_ff`")),
        (false, true) => match keys.iter().find(|(_, set)| !set) {
            Some((missing, _)) => Err(sweep
                .error_at(
                    entry.span(),
                    key,
                    format!("explicit shape is missing `{missing}`"),
                )
                .with_hint("an explicit shape needs d_model, n_layers, n_heads and d_ff")),
            None => Ok(()),
        },
        (true, false) => Ok(()),
    }
}

fn check_train(sweep: &Sweep) -> Result<(), SpecError> {
    let train = &sweep.file.train;
    let context = sweep.file.model.context.get_ref().0;
    let batch = train.batch_tokens.get_ref().0;
    if batch < context {
        return Err(sweep
            .error_at(
                train.batch_tokens.span(),
                "train.batch_tokens",
                format!("batch of `{batch}` tokens is smaller than one sequence of `{context}`"),
            )
            .with_hint("raise `[train] batch_tokens` or lower `[model] context`"));
    }
    if !train.grad_clip.is_finite() || train.grad_clip < 0.0 {
        return Err(SpecError::whole_file(
            &sweep.path,
            format!(
                "key `train.grad_clip`: `{}` must be a finite number ≥ 0",
                train.grad_clip
            ),
        ));
    }
    Ok(())
}

fn check_constraints(sweep: &Sweep) -> Result<(), SpecError> {
    let Some(c) = &sweep.file.constraints else {
        return Ok(());
    };
    if let (Some(low), Some(high)) = (c.get_ref().min_teacher_ratio, c.get_ref().max_teacher_ratio)
        && low.0 > high.0
    {
        return Err(sweep.error_at(
            c.span(),
            "constraints",
            format!(
                "min_teacher_ratio `{}` is above max_teacher_ratio `{}`",
                low.0, high.0
            ),
        ));
    }
    Ok(())
}

fn check_corpus(sweep: &Sweep, corpus: &CorpusSection) -> Result<(), SpecError> {
    let span = sweep.file.corpus.as_ref().map(|c| c.span()).unwrap_or(0..0);
    let fail = |key: &str, message: String, hint: &str| {
        Err(sweep
            .error_at(span.clone(), key, message)
            .with_hint(hint.to_string()))
    };
    match corpus.kind {
        CorpusKind::Synthetic => {
            if corpus.val_path.is_some() {
                return fail(
                    "corpus.val_path",
                    "the synthetic corpus generates its own held-out stream and reads no `val_path`"
                        .into(),
                    "remove `val_path`",
                );
            }
            if corpus.path.is_some() {
                return fail(
                    "corpus.path",
                    "the synthetic corpus is generated and reads no `path`".into(),
                    "remove `path`, or set `kind = \"text\"` (or jsonl, parquet)",
                );
            }
            if corpus.tokenizer.is_some() {
                return fail(
                    "corpus.tokenizer",
                    "the synthetic corpus produces token ids directly and uses no `tokenizer`"
                        .into(),
                    "remove `tokenizer`; set `vocab_size` to size its vocabulary",
                );
            }
        }
        kind => {
            if corpus.path.as_deref().is_none_or(str::is_empty) {
                return fail(
                    "corpus.path",
                    format!("a `{kind}` corpus needs a `path`"),
                    "set `path` to a file or folder, relative to the sweep file",
                );
            }
        }
    }
    if corpus.text_column.is_some()
        && !matches!(corpus.kind, CorpusKind::Jsonl | CorpusKind::Parquet)
    {
        return fail(
            "corpus.text_column",
            format!(
                "`text_column` applies to jsonl and parquet corpora, not `{}`",
                corpus.kind
            ),
            "remove `text_column`",
        );
    }
    Ok(())
}

/// Every explicit `vocab` with where it was written.
fn stated_vocabs(sweep: &Sweep) -> Vec<(u64, String, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    for (group, key) in [
        (&sweep.file.teachers, "teachers"),
        (&sweep.file.students, "students"),
    ] {
        for (i, entry) in group.get_ref().models.iter().enumerate() {
            if let Some(v) = entry.get_ref().vocab {
                let label = match &entry.get_ref().name {
                    Some(name) => format!("{key}.models[{i}] (`{name}`)"),
                    None => format!("{key}.models[{i}]"),
                };
                out.push((v.0, label, entry.span()));
            }
        }
    }
    out
}

fn resolve_vocab(sweep: &Sweep, corpus: &CorpusSection) -> Result<u64, SpecError> {
    let stated = stated_vocabs(sweep);
    if let Some((first, rest)) = stated.split_first()
        && let Some(other) = rest.iter().find(|(v, _, _)| *v != first.0)
    {
        return Err(sweep
            .error_at(
                other.2.clone(),
                &other.1,
                format!(
                    "vocabulary `{}` of {} differs from vocabulary `{}` of {}; teacher and student must share one tokenizer",
                    other.0, other.1, first.0, first.1
                ),
            )
            .with_hint("give every model the same `vocab` (or leave `vocab` out to use the corpus tokenizer's)"));
    }
    let from_models = stated.first().map(|(v, _, _)| *v);
    let tokenizer = corpus.tokenizer.unwrap_or_default();
    let corpus_vocab = corpus
        .vocab_size
        .as_ref()
        .map(|v| (v.get_ref().0, v.span()));
    let vocab = match (corpus.kind, tokenizer, corpus_vocab) {
        (CorpusKind::Synthetic, _, Some((v, _))) => v,
        (CorpusKind::Synthetic, _, None) => from_models.unwrap_or(DEFAULT_SYNTHETIC_VOCAB),
        (_, TokenizerKind::Byte, Some((v, span))) if v != BYTE_VOCAB => {
            return Err(sweep
                .error_at(
                    span,
                    "corpus.vocab_size",
                    format!("the byte tokenizer has vocabulary 256, not `{v}`"),
                )
                .with_hint("remove `vocab_size`, or set `tokenizer = \"bpe\"`"));
        }
        (_, TokenizerKind::Byte, _) => BYTE_VOCAB,
        (_, TokenizerKind::Bpe, Some((v, _))) => v,
        (_, TokenizerKind::Bpe, None) => match from_models {
            Some(v) => v,
            None => {
                return Err(sweep
                    .error_at(
                        0..0,
                        "corpus.vocab_size",
                        "a `bpe` tokenizer needs `vocab_size`",
                    )
                    .with_hint("set `[corpus] vocab_size = 4096` (for example)"));
            }
        },
    };
    if vocab < 2 || vocab > u32::MAX as u64 {
        return Err(sweep.error_at(
            0..0,
            "corpus.vocab_size",
            format!("vocabulary `{vocab}` must lie in [2, 2^32)"),
        ));
    }
    if tokenizer == TokenizerKind::Bpe
        && corpus.kind != CorpusKind::Synthetic
        && vocab <= BYTE_VOCAB
    {
        return Err(sweep
            .error_at(
                0..0,
                "corpus.vocab_size",
                format!("a byte-level bpe vocabulary must exceed 256, not `{vocab}`"),
            )
            .with_hint("raise `vocab_size`, or use `tokenizer = \"byte\"`"));
    }
    if let Some((v, label, span)) = stated.into_iter().find(|(v, _, _)| *v != vocab) {
        return Err(sweep
            .error_at(
                span,
                &label,
                format!("vocabulary `{v}` of {label} differs from the corpus tokenizer's `{vocab}`"),
            )
            .with_hint("set `[corpus] vocab_size` to match (bpe or synthetic), or remove `vocab` from the model"));
    }
    Ok(vocab)
}
