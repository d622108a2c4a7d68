//! Checks that need more than one value of the sweep file: corpus consistency, non-empty model
//! groups, explicit shapes that are complete. The shared vocabulary, which the files a sweep
//! names decide, is checked by `plan::files`.

use toml::Spanned;

use super::error::SpecError;
use super::schema::{CorpusSection, GroupSection, ModelEntry};
use super::sweep::Sweep;
use super::values::CorpusKind;

/// The vocabulary of the byte tokenizer.
pub(crate) const BYTE_VOCAB: u64 = 256;
/// The vocabulary of the synthetic corpus when nothing sets it.
pub(crate) const DEFAULT_SYNTHETIC_VOCAB: u64 = 256;

/// Runs every whole-file check that needs nothing but the file itself. (The files it names,
/// and the vocabulary they decide, are checked when the sweep is planned: `plan::files`.)
pub fn check(sweep: &Sweep) -> Result<(), SpecError> {
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
    check_corpus(sweep, &corpus)
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
        ("tokenizer", e.tokenizer.is_some()),
        ("vocab_size", e.vocab_size.is_some()),
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
    check_entry_tokenizer(sweep, entry, key)?;
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

/// A model entry's own `tokenizer` (teachers of text corpora only) and its `vocab_size`
/// (exactly when the tokenizer is `bpe`).
fn check_entry_tokenizer(
    sweep: &Sweep,
    entry: &Spanned<ModelEntry>,
    key: &str,
) -> Result<(), SpecError> {
    let e = entry.get_ref();
    let fail = |k: &str, message: &str, hint: &str| {
        Err(sweep
            .error_at(entry.span(), &format!("{key}.{k}"), message.to_string())
            .with_hint(hint.to_string()))
    };
    if e.tokenizer.is_none() && e.vocab_size.is_none() {
        return Ok(());
    }
    if !key.starts_with("teachers") {
        let k = if e.tokenizer.is_some() {
            "tokenizer"
        } else {
            "vocab_size"
        };
        return fail(
            k,
            "students are tokenised by `[corpus] tokenizer`; only a teacher may have its own",
            "set the students' tokenizer in `[corpus]`, or move the entry to `[[teachers.models]]`",
        );
    }
    let synthetic = sweep
        .file
        .corpus
        .as_ref()
        .is_none_or(|c| c.get_ref().kind == CorpusKind::Synthetic);
    if synthetic {
        return fail(
            "tokenizer",
            "the synthetic corpus has no text to tokenise another way",
            "remove `tokenizer`, or train on a text corpus",
        );
    }
    let bpe = matches!(e.tokenizer, Some(super::values::TokenizerSetting::Bpe));
    match (bpe, e.vocab_size.is_some()) {
        (true, false) => fail(
            "vocab_size",
            "a `bpe` tokenizer needs `vocab_size`",
            "add `vocab_size = 1024` (any size above 256) to this entry",
        ),
        (false, true) => fail(
            "vocab_size",
            "`vocab_size` sizes a `bpe` tokenizer, and this entry's is not one",
            "remove `vocab_size`, or set `tokenizer = \"bpe\"`",
        ),
        _ => Ok(()),
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
    if let Some(micro) = &train.micro_batch_tokens {
        let m = micro.get_ref().0;
        let why = if m < context {
            Some(format!(
                "micro-batch of `{m}` tokens is smaller than one sequence of `{context}`"
            ))
        } else if m > batch {
            Some(format!(
                "micro-batch of `{m}` tokens is larger than the batch of `{batch}` it accumulates into"
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(sweep
                .error_at(micro.span(), "train.micro_batch_tokens", why)
                .with_hint(
                    "a micro-batch is a whole number of sequences, at most `[train] batch_tokens`",
                ));
        }
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
    if let Some(separator) = &corpus.separator
        && *separator.get_ref() == super::values::Separator::Eos
        && corpus.tokenizer.as_ref().and_then(|t| t.file()).is_none()
    {
        return Err(sweep
            .error_at(
                separator.span(),
                "corpus.separator",
                "`eos` ends documents with a released tokenizer's end-of-document token, and \
                 this corpus has no `tokenizer.json` (byte, bpe and synthetic have none)",
            )
            .with_hint(
                "remove `separator` (blank lines join documents), or name a tokenizer file",
            ));
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
