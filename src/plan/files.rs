//! Files a sweep file names besides its corpus: the `[corpus] tokenizer` file and the folders of
//! pre-trained teachers. Their small metadata files (tokenizer.json, config.json) are read
//! before the sweep is expanded, so a bad one is reported at the key that names it, and they
//! decide the vocabulary every model shares (checked here against every `vocab` the file
//! states); weights are left to the runs.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::data::TokenizerRef;
use crate::hf::{PretrainedModel, TokenizerFile};
use crate::spec::{
    BYTE_VOCAB, CorpusKind, CorpusSection, DEFAULT_SYNTHETIC_VOCAB, Separator, SpecError, Sweep,
    TokenizerKind, TokenizerSetting,
};

/// What the files named by a sweep say.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SweepFiles {
    /// The `[corpus] tokenizer` file, when it is one.
    pub tokenizer: Option<TokenizerFile>,
    /// Pre-trained teachers by their index in `[[teachers.models]]`.
    pub teachers: BTreeMap<usize, PretrainedModel>,
    /// The `tokenizer` files of `[[teachers.models]]` entries, by their index.
    pub teacher_tokenizers: BTreeMap<usize, TokenizerFile>,
}

/// A pre-trained teacher entry with where it was written.
pub(crate) struct PretrainedEntry<'a> {
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

/// What the files named by `sweep` say, and the vocabulary every model of the sweep shares.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Resolved {
    /// The files.
    pub files: SweepFiles,
    /// The shared vocabulary.
    pub vocab: u64,
    /// What the plan says about how the vocabulary was decided (a padded teacher cut to its
    /// tokenizer's range), one line each.
    pub notes: Vec<String>,
    /// Teachers with a tokenizer of their own, not the students', by their index in
    /// `[[teachers.models]]`: their students distil across tokenizers.
    pub own_tokenizers: BTreeMap<usize, OwnTokenizer>,
    /// How the corpus joins its documents, for the students' tokenizer and every teacher's.
    pub separator: Separator,
}

/// A teacher's own tokenizer.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnTokenizer {
    /// Its kind.
    pub kind: TokenizerKind,
    /// Its `tokenizer.json` (as written, relative to the sweep file) and hash, for `file`.
    pub file: Option<TokenizerRef>,
    /// The teacher's vocabulary.
    pub vocab: u64,
}

/// Reads the files `sweep` names and decides its vocabulary.
pub(crate) fn resolve_files(sweep: &Sweep) -> Result<Resolved, SpecError> {
    let corpus = sweep
        .file
        .corpus
        .as_ref()
        .map(|c| c.get_ref().clone())
        .unwrap_or_default();
    let files = read(sweep)?;
    let own_tokenizers = own_tokenizers(sweep, &corpus, &files)?;
    let (vocab, notes) = match pretrained_vocab(sweep, &corpus, &files, &own_tokenizers)? {
        Some(decided) => decided,
        None => (resolve_vocab(sweep, &corpus, &files)?, Vec::new()),
    };
    let own_tokenizers = without_students_tokenizer(&corpus, &files, vocab, own_tokenizers);
    if let Some((&i, own)) = own_tokenizers.iter().next()
        && sweep.file.distill.cross_tokenizer.is_none()
    {
        let entry = &sweep.file.teachers.get_ref().models[i];
        return Err(sweep
            .error_at(
                entry.span(),
                &format!("teachers.models[{i}]"),
                format!(
                    "this teacher's tokenizer (`{}`, {} tokens) is not the students' (`[corpus] tokenizer`), and pairs of different tokenizers are distilled only across tokenizers",
                    own.file.as_ref().map_or(own.kind.as_str(), |f| f.path.as_str()),
                    own.vocab
                ),
            )
            .with_hint("set `[distill] cross_tokenizer = \"gold\"` (or `\"uld\"`) to align the two by bytes, or give the teacher the students' tokenizer"));
    }
    let separator = separator(sweep, &corpus, &files, &own_tokenizers)?;
    Ok(Resolved {
        files,
        vocab,
        notes,
        own_tokenizers,
        separator,
    })
}

/// How documents are joined: `[corpus] separator`, else `eos` when the corpus has a
/// `tokenizer.json` and every tokenizer of the sweep has an end-of-document token, else a blank
/// line.
///
/// Every tokenizer of the sweep joins them the same way (one text for students and teachers,
/// aligned by bytes across tokenizers), so an explicit `eos` is refused when one of them has no
/// such token.
fn separator(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
    own: &BTreeMap<usize, OwnTokenizer>,
) -> Result<Separator, SpecError> {
    let mut missing = files
        .tokenizer
        .iter()
        .filter(|t| t.eos.is_none())
        .map(|t| format!("`{}`", t.path.display()))
        .chain(own.iter().filter_map(|(&i, own)| {
            let has_eos = match own.kind {
                TokenizerKind::File => own_file(files, i).is_some_and(|t| t.eos.is_some()),
                TokenizerKind::Byte | TokenizerKind::Bpe => false,
            };
            (!has_eos).then(|| {
                format!(
                    "the tokenizer of `teachers.models[{i}]` (`{}`)",
                    own.file
                        .as_ref()
                        .map_or(own.kind.as_str(), |f| f.path.as_str())
                )
            })
        }));
    let Some(written) = corpus.separator.as_ref() else {
        let eos = files.tokenizer.is_some() && missing.next().is_none();
        return Ok(if eos {
            Separator::Eos
        } else {
            Separator::BlankLine
        });
    };
    match (written.get_ref(), missing.next()) {
        (Separator::Eos, Some(whose)) => Err(sweep
            .error_at(
                written.span(),
                "corpus.separator",
                format!(
                    "`eos` ends documents with their tokenizer's end-of-document token, and {whose} \
                     has none of {}",
                    crate::data::END_OF_DOCUMENT.join(", ")
                ),
            )
            .with_hint("remove `separator` (or set it to `\"blank_line\"`) to join documents by \"\\n\\n\"")),
        (chosen, _) => Ok(*chosen),
    }
}

/// The `tokenizer.json` of teacher `i`: its entry's `tokenizer` file, or its pre-trained
/// folder's.
fn own_file(files: &SweepFiles, i: usize) -> Option<&TokenizerFile> {
    files
        .teacher_tokenizers
        .get(&i)
        .or_else(|| files.teachers.get(&i).and_then(|m| m.tokenizer.as_ref()))
}

/// The teachers with a tokenizer of their own: entries that name a `tokenizer`, and (with
/// `[distill] cross_tokenizer`) pre-trained teachers whose `tokenizer.json` is not the corpus
/// tokenizer.
fn own_tokenizers(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
) -> Result<BTreeMap<usize, OwnTokenizer>, SpecError> {
    let mut out = BTreeMap::new();
    for (i, entry) in sweep.file.teachers.get_ref().models.iter().enumerate() {
        let e = entry.get_ref();
        let key = format!("teachers.models[{i}]");
        if let Some(model) = files.teachers.get(&i) {
            let written = e.pretrained.as_deref().unwrap_or_default();
            if let Some(own) = pretrained_cross(sweep, corpus, files, model, written) {
                out.insert(i, own);
            }
            continue;
        }
        let Some(setting) = &e.tokenizer else {
            continue;
        };
        let (kind, file, tokenizer_vocab) = match setting {
            TokenizerSetting::Byte => (TokenizerKind::Byte, None, BYTE_VOCAB),
            TokenizerSetting::Bpe => {
                let v = e.vocab_size.map_or(0, |v| v.0);
                if v <= BYTE_VOCAB || v > u32::MAX as u64 {
                    return Err(sweep
                        .error_at(
                            entry.span(),
                            &format!("{key}.vocab_size"),
                            format!("a byte-level bpe vocabulary must exceed 256, not `{v}`"),
                        )
                        .with_hint("raise `vocab_size`, or use `tokenizer = \"byte\"`"));
                }
                (TokenizerKind::Bpe, None, v)
            }
            TokenizerSetting::File(path) => {
                let Some(file) = files.teacher_tokenizers.get(&i) else {
                    continue;
                };
                let reference = TokenizerRef {
                    path: path.clone(),
                    sha256: file.sha256.clone(),
                };
                (TokenizerKind::File, Some(reference), file.vocab)
            }
        };
        let vocab = e.vocab.map_or(tokenizer_vocab, |v| v.0);
        if vocab < tokenizer_vocab {
            return Err(sweep
                .error_at(
                    entry.span(),
                    &format!("{key}.vocab"),
                    format!(
                        "vocabulary `{vocab}` is smaller than this teacher's tokenizer's `{tokenizer_vocab}`"
                    ),
                )
                .with_hint("remove `vocab` to use the tokenizer's"));
        }
        out.insert(i, OwnTokenizer { kind, file, vocab });
    }
    Ok(out)
}

/// A pre-trained teacher's own `tokenizer.json` when the sweep distils across tokenizers and
/// it is not the corpus tokenizer (same vocabulary).
fn pretrained_cross(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
    model: &PretrainedModel,
    written: &str,
) -> Option<OwnTokenizer> {
    sweep.file.distill.cross_tokenizer.as_ref()?;
    let own = model.tokenizer.as_ref()?;
    let same = match (
        corpus.tokenizer.as_ref().map(|t| t.kind()),
        &files.tokenizer,
    ) {
        (Some(TokenizerKind::File), Some(t)) => own.same_vocabulary(t).unwrap_or(false),
        _ => false,
    };
    if same {
        return None;
    }
    Some(OwnTokenizer {
        kind: TokenizerKind::File,
        file: Some(TokenizerRef {
            path: format!("{}/tokenizer.json", written.trim_end_matches('/')),
            sha256: own.sha256.clone(),
        }),
        // one past its largest id: padding rows of config.json are cut when it loads
        vocab: own.vocab.min(model.config.arch.vocab),
    })
}

/// Drops the own tokenizers that are the students' after all (the same kind, file and
/// vocabulary as the corpus tokenizer).
fn without_students_tokenizer(
    corpus: &CorpusSection,
    files: &SweepFiles,
    vocab: u64,
    own: BTreeMap<usize, OwnTokenizer>,
) -> BTreeMap<usize, OwnTokenizer> {
    let kind = corpus
        .tokenizer
        .as_ref()
        .map(|t| t.kind())
        .unwrap_or_default();
    let sha = files.tokenizer.as_ref().map(|t| t.sha256.clone());
    own.into_iter()
        .filter(|(_, o)| {
            !(o.kind == kind
                && o.vocab == vocab
                && o.file.as_ref().map(|f| f.sha256.clone()) == sha)
        })
        .collect()
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
        if let Some(TokenizerSetting::File(path)) = &entry.get_ref().tokenizer {
            let tokenizer = TokenizerFile::read(&resolve(sweep, path)).map_err(|e| {
                located(
                    sweep,
                    entry.span(),
                    &format!("teachers.models[{i}].tokenizer"),
                    &e,
                    "point `tokenizer` at a Hugging Face tokenizer.json (relative to the sweep file)",
                )
            })?;
            files.teacher_tokenizers.insert(i, tokenizer);
        }
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

/// Every explicit `vocab` with where it was written.
fn stated_vocabs(sweep: &Sweep) -> Vec<(u64, String, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    for (group, key) in [
        (&sweep.file.teachers, "teachers"),
        (&sweep.file.students, "students"),
    ] {
        for (i, entry) in group.get_ref().models.iter().enumerate() {
            if entry.get_ref().tokenizer.is_some() {
                continue; // the vocabulary of its own tokenizer
            }
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

/// The vocabulary of a sweep with pre-trained teachers, which every stated `vocab` must equal, with
/// the plan's notes on it.
///
/// With a `tokenizer.json` corpus it is the tokenizer's (one past its last id): a teacher with more
/// rows has them as padding (no token id reaches them), cut when it loads; a teacher with fewer is
/// refused. Otherwise it is the teachers' (they must agree). `None` without any pre-trained
/// teacher.
fn pretrained_vocab(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
    own: &BTreeMap<usize, OwnTokenizer>,
) -> Result<Option<(u64, Vec<String>)>, SpecError> {
    let crossing: Vec<String> = own
        .keys()
        .map(|i| format!("teachers.models[{i}].pretrained"))
        .collect();
    let entries: Vec<PretrainedEntry> = files
        .pretrained(sweep)
        .into_iter()
        .filter(|e| !crossing.contains(&e.key))
        .collect();
    let Some(first) = entries.first() else {
        return Ok(None);
    };
    let tokenizer_vocab = match (
        corpus.tokenizer.as_ref().map(|t| t.kind()),
        &files.tokenizer,
    ) {
        (Some(TokenizerKind::File), Some(t)) => Some(t.vocab),
        _ => None,
    };
    let vocab = tokenizer_vocab.unwrap_or(first.model.config.arch.vocab);
    let context = sweep.file.model.context.get_ref().0;
    let mut notes = Vec::new();
    for e in &entries {
        let c = &e.model.config;
        if tokenizer_vocab.is_none() && c.arch.vocab != vocab {
            return Err(sweep
                .error_at(
                    e.span.clone(),
                    &e.key,
                    format!(
                        "vocabulary `{}` (config.json) differs from vocabulary `{vocab}` of `{}`; teachers and students must share one tokenizer",
                        c.arch.vocab, first.key
                    ),
                )
                .with_hint("distil from teachers of one model family (one tokenizer) per sweep"));
        }
        // a teacher trained with BOS sees one position more than the window
        let bos = u64::from(e.model.tokenizer.as_ref().and_then(|t| t.bos).is_some());
        if context + bos > c.max_positions {
            return Err(sweep
                .error_at(
                    sweep.file.model.context.span(),
                    "model.context",
                    format!(
                        "context `{context}`{} is longer than the `max_position_embeddings` = `{}` of the teacher at `{}`",
                        if bos == 1 { " and its BOS token" } else { "" },
                        c.max_positions, e.key
                    ),
                )
                .with_hint("lower `[model] context`"));
        }
        check_teacher_tokenizer(sweep, corpus, files, e)?;
        if c.arch.vocab > vocab {
            notes.push(format!(
                "teacher `{}` ({}): {} vocabulary rows in config.json for a tokenizer of {vocab} tokens; its {} padding rows, which no token id reaches, are cut when it loads, so its logits cover the tokenizer's range (students have {vocab})",
                e.model.dir.display(),
                e.key,
                c.arch.vocab,
                c.arch.vocab - vocab
            ));
        }
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
        _ => Ok(Some((vocab, notes))),
    }
}

/// A pre-trained teacher must read the corpus's tokens as it was trained to: the corpus
/// tokenizer must fit its vocabulary and be its own tokenizer when its folder has one.
fn check_teacher_tokenizer(
    sweep: &Sweep,
    corpus: &CorpusSection,
    files: &SweepFiles,
    e: &PretrainedEntry,
) -> Result<(), SpecError> {
    let vocab = e.model.config.arch.vocab;
    let own = e.model.tokenizer.as_ref();
    let hint = match own {
        Some(t) => format!(
            "set `[corpus] tokenizer` to the teacher's tokenizer, `{}`, or set `[distill] cross_tokenizer = \"gold\"` to distil across tokenizers",
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
