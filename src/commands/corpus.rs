//! The sweep's real-text corpus, prepared once before anything trains: `plan` and `run` check
//! that its path holds readable text (exit code 2 otherwise, naming the path as written and as
//! resolved), build the token cache (training a BPE tokenizer once), and attach the corpus facts
//! and its design warnings to the plan. Workers then only open the cache.

use std::path::Path;

use pdsweep::data::{self, DataError};
use pdsweep::plan::Plan;
use pdsweep::spec::Sweep;
use pdsweep::store::SweepLayout;

use super::UsageError;

/// Prepares the corpus of `plan` (a no-op for the synthetic corpus), its files where `layout` says.
///
/// With `write_cache` false (`plan --dry-run`) nothing is written and the corpus is not read: its
/// size and preparation time are estimated from its files' sizes and a sample (`data::estimate`),
/// and the plan's stores, passes and disk limit are checked against that.
pub fn prepare(
    plan: &mut Plan,
    sweep: &Sweep,
    layout: &SweepLayout,
    write_cache: bool,
) -> anyhow::Result<()> {
    let Some(config) = plan.text_corpus().cloned() else {
        // The synthetic corpus: its held-out facts (unigram entropy, entropy rate) are cheap to
        // generate and feed the design checks.
        if let Some(run) = plan.runs.first() {
            let data = run.config.data.clone();
            let prepared =
                data::prepare(&data, Path::new(""), layout.root(), 0).map_err(user_error)?;
            plan.attach_corpus(prepared.info, sweep)?;
        }
        return Ok(());
    };
    let base_dir = layout.sweep_dir();
    if !write_cache {
        // priced from the files' sizes and a sample, without reading the whole corpus
        let (estimate, path) = data::estimate(&config, base_dir).map_err(user_error)?;
        plan.attach_corpus(estimate.info(&config, &path), sweep)?;
        return Ok(());
    }
    let prepared = data::prepare(&config, base_dir, &layout.cache(), 0).map_err(user_error)?;
    plan.attach_corpus(prepared.info, sweep)?;
    Ok(())
}

/// Problems the user fixes in the sweep file or the corpus exit with code 2; others (a full
/// disk, a corrupt cache) with code 1.
fn user_error(e: DataError) -> anyhow::Error {
    match e {
        DataError::CorpusPath { .. }
        | DataError::Empty { .. }
        | DataError::Invalid { .. }
        | DataError::Missing { .. }
        | DataError::TooSmall(_)
        | DataError::Tokenizer(_) => UsageError(pdsweep::error::chain(&e)).into(),
        other => other.into(),
    }
}
