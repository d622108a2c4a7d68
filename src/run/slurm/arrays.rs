//! Mapping runs onto Slurm job arrays: one array per kind, resource shape and dependency. A run
//! that waits for exactly one run goes into an array that waits `aftercorr` on that run's
//! array, at the same index (task i starts when task i there succeeded); further runs waiting
//! for the same task go into a second such array, and so on, so a logit pass per teacher is
//! one array and students need as many arrays as a store has students. Other runs wait
//! `afterok` on the exact tasks they need.

use std::collections::HashMap;

use super::settings::Resources;
use crate::plan::{RunId, RunKind};
use crate::run::graph::priority;

/// The most tasks in one array (Slurm's default `MaxArraySize` is 1001: indices 0 to 1000).
pub(crate) const MAX_TASKS: usize = 1000;

/// A run to submit now.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Run id.
    pub id: RunId,
    /// Kind.
    pub kind: RunKind,
    /// What its job asks for.
    pub resources: Resources,
    /// The runs it waits for that are not done (each is in flight, or a candidate too).
    pub waits_for: Vec<RunId>,
}

/// An array job: one already submitted, or one of this batch of submissions.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArrayRef {
    /// Submitted before, with this job id.
    Job(String),
    /// The n-th array of this batch.
    New(usize),
}

/// What an array waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// Nothing.
    None,
    /// Task i waits for task i of this array (`aftercorr`).
    Corr(ArrayRef),
    /// Every task waits for all of these tasks (`afterok`).
    AfterOk(Vec<(ArrayRef, u32)>),
}

impl Dependency {
    /// The value of `--dependency`, with `job_of` giving each array's job id.
    pub fn sbatch_value(&self, job_of: &dyn Fn(&ArrayRef) -> String) -> Option<String> {
        match self {
            Dependency::None => None,
            Dependency::Corr(a) => Some(format!("aftercorr:{}", job_of(a))),
            Dependency::AfterOk(tasks) => Some(format!(
                "afterok:{}",
                tasks
                    .iter()
                    .map(|(a, i)| format!("{}_{i}", job_of(a)))
                    .collect::<Vec<_>>()
                    .join(":")
            )),
        }
    }
}

/// One array job to submit.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayPlan {
    /// The kind of its runs.
    pub kind: RunKind,
    /// What each task asks for.
    pub resources: Resources,
    /// (array index, run id), in index order.
    pub tasks: Vec<(u32, RunId)>,
    /// What it waits for.
    pub dependency: Dependency,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Free(RunKind, Resources, usize),
    Corr(RunKind, Resources, ArrayRef, usize),
    AfterOk(RunKind, Resources, Vec<(ArrayRef, u32)>, usize),
}

/// Groups `candidates` into arrays, in an order where every array comes after the arrays it
/// waits for. `in_flight` gives the (array job id, index) of runs submitted before.
pub fn group(
    candidates: &[Candidate],
    in_flight: &HashMap<RunId, (String, u32)>,
) -> Vec<ArrayPlan> {
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by_key(|c| priority(c.kind)); // stable: teachers, baselines, logit passes, students
    let mut arrays: Vec<ArrayPlan> = Vec::new();
    let mut by_key: HashMap<Key, usize> = HashMap::new();
    let mut placed: HashMap<&RunId, (ArrayRef, u32)> = HashMap::new();
    for c in order {
        let deps: Vec<(ArrayRef, u32)> = c
            .waits_for
            .iter()
            .filter_map(|d| {
                placed.get(d).cloned().or_else(|| {
                    in_flight
                        .get(d)
                        .map(|(job, i)| (ArrayRef::Job(job.clone()), *i))
                })
            })
            .collect();
        let (kind, res) = (c.kind, c.resources.clone());
        let (array, index) = match deps.as_slice() {
            [] => sequential(
                &mut arrays,
                &mut by_key,
                |n| Key::Free(kind, res.clone(), n),
                c,
                Dependency::None,
            ),
            [(dep, i)] => {
                let mut layer = 0;
                loop {
                    let key = Key::Corr(kind, res.clone(), dep.clone(), layer);
                    match by_key.get(&key) {
                        Some(&a) if arrays[a].tasks.iter().any(|(t, _)| t == i) => layer += 1,
                        Some(&a) => {
                            arrays[a].tasks.push((*i, c.id.clone()));
                            break (a, *i);
                        }
                        None => {
                            arrays.push(ArrayPlan {
                                kind,
                                resources: res.clone(),
                                tasks: vec![(*i, c.id.clone())],
                                dependency: Dependency::Corr(dep.clone()),
                            });
                            by_key.insert(key, arrays.len() - 1);
                            break (arrays.len() - 1, *i);
                        }
                    }
                }
            }
            _ => {
                let mut sorted = deps.clone();
                sorted.sort();
                sorted.dedup();
                let dependency = Dependency::AfterOk(sorted.clone());
                sequential(
                    &mut arrays,
                    &mut by_key,
                    |n| Key::AfterOk(kind, res.clone(), sorted.clone(), n),
                    c,
                    dependency,
                )
            }
        };
        placed.insert(&c.id, (ArrayRef::New(array), index));
    }
    for a in &mut arrays {
        a.tasks.sort();
    }
    arrays
}

/// Appends `c` to the array of `key(chunk)` with the next free index, opening a new chunk
/// when an array is full.
fn sequential(
    arrays: &mut Vec<ArrayPlan>,
    by_key: &mut HashMap<Key, usize>,
    key: impl Fn(usize) -> Key,
    c: &Candidate,
    dependency: Dependency,
) -> (usize, u32) {
    let mut chunk = 0;
    loop {
        match by_key.get(&key(chunk)) {
            Some(&a) if arrays[a].tasks.len() >= MAX_TASKS => chunk += 1,
            Some(&a) => {
                let index = arrays[a].tasks.len() as u32;
                arrays[a].tasks.push((index, c.id.clone()));
                return (a, index);
            }
            None => {
                arrays.push(ArrayPlan {
                    kind: c.kind,
                    resources: c.resources.clone(),
                    tasks: vec![(0, c.id.clone())],
                    dependency,
                });
                by_key.insert(key(chunk), arrays.len() - 1);
                return (arrays.len() - 1, 0);
            }
        }
    }
}

/// `--array`'s value: the indices, ranges folded (`0-3,7`), and the `%` throttle.
pub(crate) fn array_spec(tasks: &[(u32, RunId)], max_parallel: Option<u64>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < tasks.len() {
        let start = tasks[i].0;
        let mut end = start;
        while i + 1 < tasks.len() && tasks[i + 1].0 == end + 1 {
            i += 1;
            end += 1;
        }
        parts.push(if end > start {
            format!("{start}-{end}")
        } else {
            start.to_string()
        });
        i += 1;
    }
    let throttle = max_parallel.map_or(String::new(), |n| format!("%{}", n.max(1)));
    format!("{}{throttle}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(time_s: u64) -> Resources {
        Resources {
            partition: None,
            cpus: 1,
            mem_mb: None,
            gpus: 0,
            time_s,
            options: vec![],
        }
    }

    fn id(s: &str) -> RunId {
        RunId::from_stored(s.into())
    }

    fn cand(name: &str, kind: &str, waits_for: &[&str]) -> Candidate {
        Candidate {
            id: id(name),
            kind: RunKind::parse(kind).unwrap(),
            resources: res(600),
            waits_for: waits_for.iter().map(|s| id(s)).collect(),
        }
    }

    #[test]
    fn a_sweep_maps_onto_few_arrays_with_exact_dependencies() {
        // two teachers, a store each, three offline students per store, one online student of
        // t1, two baselines
        let mut c = vec![
            cand("s1a", "student", &["l1"]),
            cand("s1b", "student", &["l1"]),
            cand("s1c", "student", &["l1"]),
            cand("s2a", "student", &["l2"]),
            cand("on1", "student", &["t1"]),
            cand("l1", "logits", &["t1"]),
            cand("l2", "logits", &["t2"]),
            cand("t1", "teacher", &[]),
            cand("t2", "teacher", &[]),
            cand("b1", "baseline", &[]),
            cand("b2", "baseline", &[]),
        ];
        c[4].resources = res(3600); // the online student needs longer
        let arrays = group(&c, &HashMap::new());
        let find = |name: &str| {
            arrays
                .iter()
                .enumerate()
                .find_map(|(a, p)| {
                    p.tasks
                        .iter()
                        .find(|(_, r)| r.as_str() == name)
                        .map(|(i, _)| (a, *i))
                })
                .unwrap()
        };
        assert_eq!(arrays[0].kind, RunKind::parse("teacher").unwrap());
        assert_eq!(arrays[0].tasks, vec![(0, id("t1")), (1, id("t2"))]);
        assert_eq!(arrays[0].dependency, Dependency::None);
        assert_eq!(arrays[1].kind, RunKind::parse("baseline").unwrap());
        // one logits array, task i after teacher task i
        let (la, li) = find("l1");
        assert_eq!(find("l2").0, la);
        assert_eq!(arrays[la].dependency, Dependency::Corr(ArrayRef::New(0)));
        assert_eq!((li, find("l2").1), (0, 1));
        // students of store 1 in three layered arrays, each aftercorr on the logits array
        let layers: std::collections::HashSet<usize> =
            ["s1a", "s1b", "s1c"].iter().map(|s| find(s).0).collect();
        assert_eq!(layers.len(), 3);
        for a in &layers {
            assert_eq!(arrays[*a].dependency, Dependency::Corr(ArrayRef::New(la)));
        }
        assert_eq!(
            find("s2a"),
            (find("s1a").0, 1),
            "s2a shares the first layer at index 1"
        );
        // the online student has other resources: its own array, after teacher task 0
        let (oa, oi) = find("on1");
        assert_eq!(
            (arrays[oa].dependency.clone(), oi),
            (Dependency::Corr(ArrayRef::New(0)), 0)
        );
        assert_eq!(arrays[oa].resources.time_s, 3600);
        // every array comes after the arrays it waits for
        for (a, plan) in arrays.iter().enumerate() {
            if let Dependency::Corr(ArrayRef::New(b)) = plan.dependency {
                assert!(b < a);
            }
        }
        assert_eq!(arrays.len(), 7);
    }

    #[test]
    fn runs_waiting_for_jobs_in_flight_or_for_several_runs_use_exact_tasks() {
        let in_flight = HashMap::from([(id("t1"), ("812".to_string(), 4))]);
        let c = vec![
            cand("l1", "logits", &["t1"]),
            cand("x", "student", &["l1", "t1"]),
        ];
        let arrays = group(&c, &in_flight);
        assert_eq!(arrays[0].tasks, vec![(4, id("l1"))]);
        assert_eq!(
            arrays[0].dependency,
            Dependency::Corr(ArrayRef::Job("812".into()))
        );
        assert_eq!(
            arrays[1].dependency,
            Dependency::AfterOk(vec![
                (ArrayRef::Job("812".into()), 4),
                (ArrayRef::New(0), 4)
            ])
        );
        assert_eq!(arrays[1].tasks, vec![(0, id("x"))]);
    }

    #[test]
    fn big_groups_are_split_and_array_specs_fold_ranges() {
        let c: Vec<Candidate> = (0..2500)
            .map(|i| cand(&format!("b{i}"), "baseline", &[]))
            .collect();
        let arrays = group(&c, &HashMap::new());
        assert_eq!(
            arrays.iter().map(|a| a.tasks.len()).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
        assert_eq!(array_spec(&arrays[2].tasks, Some(8)), "0-499%8");
        let t = |ids: &[u32]| ids.iter().map(|&i| (i, id(""))).collect::<Vec<_>>();
        assert_eq!(array_spec(&t(&[0, 1, 2, 5, 7, 8]), None), "0-2,5,7-8");
        assert_eq!(array_spec(&t(&[3]), Some(0)), "3%1");
    }
}
