//! The order runs go in, shared by every scheduler: which kinds are executed, how many runs
//! each run unblocks (counted through the whole graph), and the tie-break between kinds.

use std::collections::{HashMap, HashSet};

use crate::store::StoredRun;

/// The kinds of run executed.
pub const EXECUTED: [&str; 4] = ["teacher", "logits", "student", "baseline"];

/// For each run, how many runs depend on it directly or through others.
pub fn unblock_counts(runs: &[StoredRun]) -> HashMap<String, usize> {
    let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
    for run in runs {
        for dep in &run.depends_on {
            dependents
                .entry(dep.as_str())
                .or_default()
                .push(run.id.as_str());
        }
    }
    runs.iter()
        .map(|run| {
            let mut seen = HashSet::new();
            let mut stack = vec![run.id.as_str()];
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
pub fn priority(kind: &str) -> u8 {
    match kind {
        "teacher" => 0,
        "baseline" => 1,
        "logits" => 2,
        _ => 3,
    }
}
