//! Checks that need more than one value of the sweep file: corpus consistency, the shared
//! vocabulary, non-empty model groups, explicit shapes that are complete.

use toml::Spanned;

use super::error::SpecError;
use super::files::{self, SweepFiles};
use super::load::Sweep;
use super::schema::{CorpusSection, GroupSection, ModelEntry};
use super::values::{CorpusKind, TokenizerKind};

/// The vocabulary of the byte tokenizer.
pub const BYTE_VOCAB: u64 = 256;
/// The vocabulary of the synthetic corpus when nothing sets it.
pub const DEFAULT_SYNTHETIC_VOCAB: u64 = 256;

/// Runs every whole-file check and reads the files the sweep names (tokenizer, pre-trained
/// teachers); returns the vocabulary all models share and what those files say.
pub fn check(sweep: &Sweep) -> Result<(u64, SweepFiles), SpecError> {
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
    check_teacher_tune_lr(sweep)?;
    check_train(sweep)?;
    check_constraints(sweep)?;
    let corpus = file
        .corpus
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    check_corpus(sweep, &corpus)?;
    let files = files::read(sweep)?;
    let vocab = match pretrained_vocab(sweep, &corpus, &files)? {
        Some(v) => v,
        None => resolve_vocab(sweep, &corpus, &files)?,
    };
    Ok((vocab, files))
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

/// A `pretrained` entry: only for teachers, and nothing that the folder decides or that only
/// training uses.
fn check_pretrained(
    sweep: &Sweep,
    entry: &Spanned<ModelEntry>,
    key: &str,
) -> Result<(), SpecError> {
    let e = entry.get_ref();
    if !key.starts_with("teachers") {
        return Err(sweep
            .error_at(
                entry.span(),
                &format!("{key}.pretrained"),
                "only teachers can be pre-trained; students are trained by the sweep",
            )
            .with_hint("move the entry to `[[teachers.models]]`"));
    }
    let conflicts = [
        ("size", e.size.is_some()),
        ("d_model", e.d_model.is_some()),
        ("n_layers", e.n_layers.is_some()),
        ("n_heads", e.n_heads.is_some()),
        ("n_kv_heads", e.n_kv_heads.is_some()),
        ("d_ff", e.d_ff.is_some()),
        ("vocab", e.vocab.is_some()),
        ("tie_embeddings", e.tie_embeddings.is_some()),
        ("tokens", e.tokens.is_some()),
        ("seed", e.seed.is_some()),
        ("lr", e.lr.is_some()),
    ];
    match conflicts.iter().find(|(_, set)| *set) {
        Some((other, _)) => Err(sweep
            .error_at(
                entry.span(),
                &format!("{key}.{other}"),
                format!("a `pretrained` teacher takes its shape from its config.json and is not trained, so `{other}` does not apply"),
            )
            .with_hint(format!("remove `{other}` from this entry"))),
        None => Ok(()),
    }
}

fn check_entry(sweep: &Sweep, entry: &Spanned<ModelEntry>, key: &str) -> Result<(), SpecError> {
    let e = entry.get_ref();
    if e.pretrained.is_some() {
        return check_pretrained(sweep, entry, key);
    }
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
    check_tune_lr(sweep)
}

/// `[train] tune_lr`: a valid list of peaks, and baselines to tune them on.
fn check_tune_lr(sweep: &Sweep) -> Result<(), SpecError> {
    let Some(tune) = &sweep.file.train.tune_lr else {
        return Ok(());
    };
    check_peaks(sweep, tune, "train.tune_lr")?;
    if !sweep.file.students.get_ref().trains_baselines() {
        return Err(sweep
            .error_at(
                tune.span(),
                "train.tune_lr",
                "`tune_lr` tunes the learning rate on the baselines, but `[students] baseline = false`",
            )
            .with_hint("set `[students] baseline = true`, or remove `tune_lr`"));
    }
    Ok(())
}

/// `[teachers] tune_lr`: a valid list of peaks; `[students] tune_lr` is refused (students
/// tune on their baselines, `[train] tune_lr`).
fn check_teacher_tune_lr(sweep: &Sweep) -> Result<(), SpecError> {
    if let Some(tune) = &sweep.file.students.get_ref().tune_lr {
        return Err(sweep
            .error_at(
                tune.span(),
                "students.tune_lr",
                "students are tuned on their baselines, not by a `[students] tune_lr`",
            )
            .with_hint("move the list to `[train] tune_lr` (baselines and students) or `[teachers] tune_lr` (teachers)"));
    }
    match &sweep.file.teachers.get_ref().tune_lr {
        Some(tune) => check_peaks(sweep, tune, "teachers.tune_lr"),
        None => Ok(()),
    }
}

/// A list of candidate peaks (`key`): at least two distinct, each finite and positive.
fn check_peaks(sweep: &Sweep, tune: &Spanned<Vec<f64>>, key: &str) -> Result<(), SpecError> {
    let peaks = tune.get_ref();
    let err = |msg: String, hint: &str| sweep.error_at(tune.span(), key, msg).with_hint(hint);
    if let Some(bad) = peaks.iter().find(|p| !p.is_finite() || **p <= 0.0) {
        return Err(err(
            format!("learning rate `{bad}` must be a finite number > 0"),
            "list peak learning rates, e.g. `tune_lr = [1e-3, 3e-3, 1e-2]`",
        ));
    }
    let mut distinct = peaks.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() != peaks.len() || distinct.len() < 2 {
        return Err(err(
            format!(
                "`tune_lr` needs at least two distinct learning rates, each once (got {peaks:?})"
            ),
            "list two or more different peaks, or remove `tune_lr` to train at the schedule's peak",
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
            if let Some(n) = corpus.sources
                && !(1..=4).contains(&n)
            {
                return fail(
                    "corpus.sources",
                    format!("the synthetic corpus has 4 sources; `sources = {n}` is out of range"),
                    "set `sources` to 1, 2, 3 or 4 (the default)",
                );
            }
        }
        kind => {
            if corpus.sources.is_some() || corpus.copies.is_some() {
                let key = if corpus.sources.is_some() {
                    "corpus.sources"
                } else {
                    "corpus.copies"
                };
                return fail(
                    key,
                    format!(
                        "`{}` shapes the synthetic corpus, not a `{kind}` corpus",
                        &key[7..]
                    ),
                    "remove it, or set `kind = \"synthetic\"`",
                );
            }
            if corpus.path.as_deref().is_none_or(str::is_empty) {
                return fail(
                    "corpus.path",
                    format!("a `{kind}` corpus needs a `path`"),
                    "set `path` to a file or folder, relative to the sweep file",
                );
            }
        }
    }
    if let (Some(t), Some(v)) = (&corpus.tokenizer, &corpus.vocab_size)
        && t.file().is_some()
    {
        return Err(sweep
            .error_at(
                v.span(),
                "corpus.vocab_size",
                "the vocabulary of a tokenizer file is the file's",
            )
            .with_hint("remove `vocab_size`"));
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

/// The vocabulary of a sweep with pre-trained teachers: theirs (they must agree), which the
/// corpus tokenizer must fit and every stated `vocab` must equal. `None` without any.
fn pretrained_vocab(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
) -> Result<Option<u64>, SpecError> {
    let entries = files.pretrained(sweep);
    let Some(first) = entries.first() else {
        return Ok(None);
    };
    let vocab = first.model.config.vocab;
    let context = sweep.file.model.context.get_ref().0;
    for e in &entries {
        let c = &e.model.config;
        if c.vocab != vocab {
            return Err(sweep
                .error_at(
                    e.span.clone(),
                    &e.key,
                    format!(
                        "vocabulary `{}` (config.json) differs from vocabulary `{vocab}` of `{}`; teachers and students must share one tokenizer",
                        c.vocab, first.key
                    ),
                )
                .with_hint("distil from teachers of one model family (one tokenizer) per sweep"));
        }
        if context > c.max_positions {
            return Err(sweep
                .error_at(
                    sweep.file.model.context.span(),
                    "model.context",
                    format!(
                        "context `{context}` is longer than the `max_position_embeddings` = `{}` of the teacher at `{}`",
                        c.max_positions, e.key
                    ),
                )
                .with_hint("lower `[model] context`"));
        }
        check_teacher_tokenizer(sweep, corpus, files, e)?;
    }
    if let Some((v, label, span)) = stated_vocabs(sweep)
        .into_iter()
        .find(|(v, _, _)| *v != vocab)
    {
        return Err(sweep
            .error_at(
                span,
                &label,
                format!(
                    "vocabulary `{v}` of {label} differs from the pre-trained teachers' `{vocab}`"
                ),
            )
            .with_hint("remove `vocab`: students take the teachers' vocabulary"));
    }
    match (corpus.kind, corpus.vocab_size.as_ref()) {
        (CorpusKind::Synthetic, Some(v)) if v.get_ref().0 != vocab => Err(sweep
            .error_at(
                v.span(),
                "corpus.vocab_size",
                format!(
                    "`{}` differs from the pre-trained teachers' vocabulary `{vocab}`",
                    v.get_ref().0
                ),
            )
            .with_hint("remove `vocab_size`")),
        _ => Ok(Some(vocab)),
    }
}

/// A pre-trained teacher must read the corpus's tokens as it was trained to: the corpus
/// tokenizer must fit its vocabulary and be its own tokenizer when its folder has one.
fn check_teacher_tokenizer(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
    e: &files::PretrainedEntry,
) -> Result<(), SpecError> {
    let vocab = e.model.config.vocab;
    let own = e.model.tokenizer.as_ref();
    let hint = match own {
        Some(t) => format!(
            "set `[corpus] tokenizer` to the teacher's tokenizer, `{}`",
            t.path.display()
        ),
        None => {
            "set `[corpus] tokenizer` to the tokenizer.json the teacher was trained with".into()
        }
    };
    let fail = |message: String| {
        Err(sweep
            .error_at(e.span.clone(), &e.key, message)
            .with_hint(hint.clone()))
    };
    let kind = corpus.tokenizer.as_ref().map(|t| t.kind());
    match (corpus.kind, kind, &files.tokenizer) {
        (_, Some(TokenizerKind::File), Some(tokenizer)) => {
            if tokenizer.vocab > vocab {
                return fail(format!(
                    "the corpus tokenizer `{}` has ids up to {}, beyond the teacher's vocabulary `{vocab}`",
                    tokenizer.path.display(),
                    tokenizer.vocab - 1
                ));
            }
            match own.map(|t| t.same_vocabulary(tokenizer)) {
                Some(Ok(false)) => fail(format!(
                    "the teacher's own `{}` maps tokens differently from the corpus tokenizer `{}`",
                    own.map(|t| t.path.display().to_string()).unwrap_or_default(),
                    tokenizer.path.display()
                )),
                Some(Err(err)) => fail(err.to_string()),
                _ => Ok(()),
            }
        }
        (_, Some(TokenizerKind::Bpe), _) => fail(
            "a pre-trained teacher needs the tokenizer it was trained with, and `bpe` trains a new one".into(),
        ),
        _ if own.is_some() => fail(format!(
            "the teacher comes with its own tokenizer, but the corpus is tokenised by `{}`",
            kind.map_or(corpus.kind.as_str(), |k| k.as_str())
        )),
        (CorpusKind::Synthetic, _, _) => Ok(()),
        _ if vocab != BYTE_VOCAB => fail(format!(
            "the teacher's vocabulary is `{vocab}`, but the `byte` tokenizer has 256 tokens"
        )),
        _ => Ok(()),
    }
}

fn resolve_vocab(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
) -> Result<u64, SpecError> {
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
    if let Some(file) = &files.tokenizer {
        let vocab = from_models.unwrap_or(file.vocab);
        if vocab < file.vocab {
            let (_, label, span) = &stated[0];
            return Err(sweep
                .error_at(
                    span.clone(),
                    label,
                    format!(
                        "vocabulary `{vocab}` of {label} is smaller than the tokenizer's (`{}` has ids up to {})",
                        file.path.display(),
                        file.vocab - 1
                    ),
                )
                .with_hint("remove `vocab` to use the tokenizer's, or raise it"));
        }
        return Ok(vocab);
    }
    let tokenizer = corpus
        .tokenizer
        .as_ref()
        .map(|t| t.kind())
        .unwrap_or_default();
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
        // A tokenizer file returned above.
        (_, TokenizerKind::Byte | TokenizerKind::File, _) => BYTE_VOCAB,
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
