//! Design checks of a plan: warnings that name the run (or the corpus) and the fix, printed by
//! `plan` and `run`; `plan --strict` refuses a plan that has any.
//!
//! The corpus checks need the prepared corpus (its training split in tokens, its duplicates and
//! its held-out split), so they run once the corpus is known: passes over the training data per
//! run, documents dropped as duplicates, a held-out split that shares a document with training,
//! held-out text found in training.

use serde::Serialize;

use super::Plan;
use super::run::RunKind;
use crate::data::CorpusInfo;

/// One warning about the design of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DesignWarning {
    /// The run it is about (its name), or `None` for the sweep or corpus as a whole.
    pub run: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it (the key or flag to change).
    pub hint: String,
}

impl std::fmt::Display for DesignWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.run {
            Some(run) => write!(f, "run `{run}`: {}", self.message)?,
            None => f.write_str(&self.message)?,
        }
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", self.hint)?;
        }
        Ok(())
    }
}

/// Passes over the training split above which a teacher is warned about.
pub const MAX_TEACHER_PASSES: f64 = 1.0;

/// Share of held-out windows found in training above which the split is warned about.
pub const MAX_VAL_OVERLAP: f64 = 0.01;

/// Passes over the training split that `run_tokens` tokens make, for a corpus whose training
/// split holds `train_tokens` (`None` for a generated corpus, which never repeats).
pub fn passes(run_tokens: u64, corpus: &CorpusInfo) -> Option<f64> {
    (corpus.files > 0 && corpus.train_tokens > 0)
        .then(|| run_tokens as f64 / corpus.train_tokens as f64)
}

/// Warnings about `plan` on `corpus`.
pub fn corpus_checks(plan: &Plan, corpus: &CorpusInfo) -> Vec<DesignWarning> {
    let mut warnings = Vec::new();
    for run in plan.runs.iter().filter(|r| r.kind() == RunKind::Teacher) {
        if let Some(p) = passes(run.tokens(), corpus).filter(|&p| p > MAX_TEACHER_PASSES) {
            warnings.push(DesignWarning {
                run: Some(run.name.clone()),
                message: format!(
                    "makes {p:.2} passes over the training split ({} tokens of {}); a teacher that sees text again can memorise it, and its logits on that text are then not what a student can learn from held-out-like data",
                    run.tokens(),
                    corpus.train_tokens
                ),
                hint: "use a larger corpus, or a smaller `[teachers] tokens` (or this model's `tokens`)".into(),
            });
        }
    }
    if !corpus.duplicate_groups.is_empty() {
        let dropped: usize = corpus.duplicate_groups.iter().map(|g| g.len() - 1).sum();
        let shown: Vec<String> = corpus
            .duplicate_groups
            .iter()
            .take(5)
            .map(|g| {
                g.iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(" = ")
            })
            .collect();
        let more = corpus.duplicate_groups.len().saturating_sub(5);
        warnings.push(DesignWarning {
            run: None,
            message: format!(
                "corpus: {dropped} byte-identical document(s) dropped (the first of each group is kept): {}{}",
                shown.join("; "),
                if more > 0 { format!("; and {more} more groups") } else { String::new() }
            ),
            hint: "remove the copies from the corpus folder to silence this".into(),
        });
    }
    if corpus.documents == 1 {
        warnings.push(DesignWarning {
            run: None,
            message: "corpus: one document, so the held-out text is the end of the text the runs train on (same source, different text)".into(),
            hint: "split the corpus into several files (documents), or name a separate validation set with `[corpus] val_path`".into(),
        });
    }
    if let Some(overlap) = corpus.val_overlap.filter(|&o| o > MAX_VAL_OVERLAP) {
        warnings.push(DesignWarning {
            run: None,
            message: format!(
                "corpus: {:.1} % of held-out 64-token windows also occur in the training split (boilerplate or near-duplicate documents?); held-out loss partly measures memorisation",
                100.0 * overlap
            ),
            hint: "remove shared boilerplate or near-duplicates from the corpus, or set `[corpus] val_path` to a disjoint validation set".into(),
        });
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_need_a_finite_corpus() {
        let text = CorpusInfo {
            files: 3,
            train_tokens: 1000,
            ..CorpusInfo::default()
        };
        assert_eq!(passes(2500, &text), Some(2.5));
        assert_eq!(passes(2500, &CorpusInfo::default()), None);
    }

    #[test]
    fn warnings_name_the_run_and_the_fix() {
        let w = DesignWarning {
            run: Some("teacher-1M".into()),
            message: "makes 2.00 passes".into(),
            hint: "use a larger corpus".into(),
        };
        assert_eq!(
            w.to_string(),
            "run `teacher-1M`: makes 2.00 passes\n  hint: use a larger corpus"
        );
    }
}
