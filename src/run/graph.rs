//! The order runs go in, shared by every scheduler: which kinds are executed, how many runs
//! each run unblocks (counted through the whole graph), and the tie-break between kinds.

use std::collections::{HashMap, HashSet};

use crate::plan::{RunId, RunKind};
use crate::store::StoredRun;

/// The kinds of run executed.
pub(crate) const EXECUTED: [RunKind; 4] = RunKind::ALL;

/// For each run, how many runs depend on it directly or through others.
pub(crate) fn unblock_counts(runs: &[StoredRun]) -> HashMap<RunId, usize> {
    let mut dependents: HashMap<&RunId, Vec<&RunId>> = HashMap::new();
    for run in runs {
        for dep in &run.depends_on {
            dependents.entry(dep).or_default().push(&run.id);
        }
    }
    runs.iter()
        .map(|run| {
            let mut seen = HashSet::new();
            let mut stack = vec![&run.id];
            while let Some(id) = stack.pop() {
                for &next in dependents.get(id).map_or(&[][..], Vec::as_slice) {
                    if seen.insert(next) {
                        stack.push(next);
                    }
                }
            }
            (run.id.clone(), seen.len())
        })
        .collect()
}

/// Tie-break among runs that unblock as many others: teachers (they unblock logit passes and
/// students), then baselines (so a student's gain is known when it finishes), logit passes,
/// students.
pub(crate) fn priority(kind: RunKind) -> u8 {
    match kind {
        RunKind::Teacher => 0,
        RunKind::Baseline => 1,
        RunKind::Logits => 2,
        RunKind::Student => 3,
    }
}
