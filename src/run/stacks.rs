//! Which runs train together as a stack (`run --stack auto|N|off`): runs of the same model
//! shape, context and batch rows that are runnable at the same time (students of one size from
//! different teachers or settings, seeds, their baselines, teachers of one size) train as one
//! batched model. `auto` stacks only as many as measured faster on this backend: it times one
//! run alone and stacks of 2, 4, 8, 16 and 32 on the shape at hand (a few steps each, once per
//! machine and shape, kept in a cache file), climbing while the throughput still grows, and
//! takes the best stack if it beats one run alone by `AUTO_MARGIN`.
//!
//! On the CPU (flex) stacks of 4 measured 0.70–0.78× and stacks of 8 1.02–1.05× the throughput
//! of the same runs one at a time at the quick start's student shapes (d32 and d48 × 2 layers,
//! `benches/stack_throughput.rs`), and stacks of 16 1.22× (d32) but 0.73× (d48): there `auto`
//! considers only stacks of at least `CPU_MIN_STACK` runs, times one run alone and such
//! stacks, and trains alone otherwise, so small sweeps never pay for the measurement.

use std::collections::HashMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Mutex;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::plan::{RunConfig, RunKind};
use crate::store::StoredRun;
use crate::train::stack::probe;

/// How `run` groups runs into stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StackPolicy {
    /// Every run alone.
    #[default]
    Off,
    /// Up to this many same-shape runs per stack.
    Max(usize),
    /// As many as measured faster on this backend.
    Auto,
}

impl FromStr for StackPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(StackPolicy::Auto),
            "off" | "1" => Ok(StackPolicy::Off),
            n => match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(StackPolicy::Max(n)),
                _ => Err(format!(
                    "`{n}` is not a stack size\n\nhint: use `auto`, `off` or a number of runs such as `8`"
                )),
            },
        }
    }
}

impl std::fmt::Display for StackPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            StackPolicy::Off => f.write_str("off"),
            StackPolicy::Max(n) => write!(f, "{n}"),
            StackPolicy::Auto => f.write_str("auto"),
        }
    }
}

/// The most members a stack may have (`auto` measures up to this).
pub(crate) const MAX_MEMBERS: usize = 32;

/// The fewest runs `auto` stacks on the CPU (there stacks of 4 measured slower and stacks of 8
/// at most 5 % faster, under [`AUTO_MARGIN`]).
pub(crate) const CPU_MIN_STACK: usize = 16;

/// How much faster than one run alone a stack must measure for `auto` to use it.
pub(crate) const AUTO_MARGIN: f64 = 1.1;

/// The largest vocabulary that stacks.
///
/// A stack scores all its members' logits at once (members × positions × vocabulary floats, and as
/// many for their gradient), where a run alone goes through the fused chunked head
/// (`crate::kernels::head_loss`) and holds one chunk: above this a stack would trade bounded memory
/// for little speed, as the head is most of such a step.
pub(crate) const MAX_STACK_VOCAB: u64 = 8192;

/// What runs must share to train as one stack: the model (shape, RoPE θ, RMSNorm ε), the context
/// and the batch rows.
///
/// `None` for runs that never stack (logit passes, pre-trained teachers, runs without training
/// settings, bf16 or f16 runs and accumulated batches: the stacked model computes in f32 on whole
/// batches only; vocabularies above [`MAX_STACK_VOCAB`]; students across tokenizers).
pub(crate) fn stack_key(config: &RunConfig) -> Option<String> {
    if config.kind == RunKind::Logits || config.model.pretrained.is_some() {
        return None;
    }
    if config.model.shape.vocab > MAX_STACK_VOCAB {
        return None;
    }
    // a student of another tokenizer's teacher: its loss is not a stack's
    if config
        .distill
        .as_ref()
        .is_some_and(|d| d.cross_tokenizer.is_some())
    {
        return None;
    }
    let train = config.train.as_ref()?;
    // the stacked step computes in f32 and on whole batches
    if !train.precision.is_f32() || train.micro_batch_seqs.is_some() {
        return None;
    }
    let s = &config.model.shape;
    Some(format!(
        "d{}x{} h{}/{} ff{} v{} tie{} theta{} eps{} ctx{} rows{}",
        s.d_model,
        s.n_layers,
        s.n_heads,
        s.n_kv_heads,
        s.d_ff,
        s.vocab,
        s.tie_embeddings,
        config.model.rope_theta,
        config.model.norm_eps,
        config.data.context,
        config.data.batch_seqs
    ))
}

/// The runs (names, in the order given) that could train together as a stack, by shape: one group
/// per stack key with at least two runs, labelled like `2L d32 h2 ff112, 64×128 tokens`.
///
/// Runs of a group train together when they are runnable at the same time.
pub fn groups<'a>(
    runs: impl IntoIterator<Item = (&'a str, &'a RunConfig)>,
) -> Vec<(String, Vec<&'a str>)> {
    let mut by_key: Vec<(String, String, Vec<&'a str>)> = Vec::new();
    for (name, config) in runs {
        let Some(key) = stack_key(config) else {
            continue;
        };
        match by_key.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, names)) => names.push(name),
            None => {
                let s = &config.model.shape;
                let label = format!(
                    "{}L d{} h{} ff{}, {}×{} tokens",
                    s.n_layers,
                    s.d_model,
                    s.n_heads,
                    s.d_ff,
                    config.data.batch_seqs,
                    config.data.context
                );
                by_key.push((key, label, vec![name]));
            }
        }
    }
    by_key
        .into_iter()
        .filter(|(_, _, names)| names.len() > 1)
        .map(|(_, label, names)| (label, names))
        .collect()
}

/// The stack key of a stored run (its configuration parsed), if it can stack.
pub(crate) fn stored_key(run: &StoredRun) -> Option<String> {
    serde_json::from_str::<RunConfig>(&run.config_json)
        .ok()
        .as_ref()
        .and_then(stack_key)
}

/// The runs of `candidates` (in their order) that can join a stack led by `lead`: the same
/// key, at most `max - 1` of them.
pub(crate) fn partners<'a>(
    lead: &StoredRun,
    candidates: &'a [StoredRun],
    max: usize,
) -> Vec<&'a StoredRun> {
    let Some(key) = stored_key(lead) else {
        return Vec::new();
    };
    candidates
        .iter()
        .filter(|r| r.id != lead.id && stored_key(r).as_deref() == Some(key.as_str()))
        .take(max.saturating_sub(1))
        .collect()
}

/// Measured throughput (tokens/s over all members) by stack size, for one machine, backend
/// and stack key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Measured {
    /// (members, tokens/s); members 1 is one run alone.
    points: Vec<(usize, f64)>,
    /// Whether climbing stopped because the throughput stopped growing (no need to measure
    /// larger stacks).
    saturated: bool,
}

/// Decides `auto` stack sizes from measurements, shared by the workers of one execution.
pub struct StackAdvisor {
    /// `machine | key` → measurements; loaded from and saved to `cache`.
    measured: Mutex<HashMap<String, Measured>>,
    cache: Option<PathBuf>,
    machine: String,
}

impl StackAdvisor {
    /// An advisor keeping its measurements in `cache` (a JSON file; `None`: in memory only)
    /// for the machine described by `machine` (backend, CPU, threads, pdsweep version).
    pub fn new(cache: Option<PathBuf>, machine: String) -> StackAdvisor {
        let measured = cache
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        StackAdvisor {
            measured: Mutex::new(measured),
            cache,
            machine,
        }
    }

    /// The most members a stack of runs like `config` should have on `device` when `available` such
    /// runs are runnable: 1 (alone) unless a stack measured at least `AUTO_MARGIN` times the
    /// throughput of one run alone.
    ///
    /// Measures what it does not know yet. Only stacks of at least `min` members are measured and
    /// taken.
    pub fn members(
        &self,
        config: &RunConfig,
        available: usize,
        min: usize,
        device: &Device,
    ) -> usize {
        let Some(key) = stack_key(config) else {
            return 1;
        };
        if available < min.max(2) {
            return 1;
        }
        let key = format!("{} | {key}", self.machine);
        let mut measured = self
            .measured
            .lock()
            .map(|m| m.get(&key).cloned().unwrap_or_default())
            .unwrap_or_default();
        let fresh = climb(
            &mut measured,
            config,
            available.min(MAX_MEMBERS),
            min,
            device,
        );
        if fresh {
            self.remember(key, measured.clone());
        }
        best(&measured, available)
    }

    fn remember(&self, key: String, measured: Measured) {
        let Ok(mut all) = self.measured.lock() else {
            return;
        };
        all.insert(key, measured);
        if let (Some(path), Ok(json)) = (&self.cache, serde_json::to_vec_pretty(&*all)) {
            // a cache that cannot be written only means measuring again next time
            let _ = crate::atomic::write_atomic(path, &[&json]);
        }
    }
}

/// Stack sizes `auto` measures.
const LADDER: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Measures the sizes of the ladder up to `limit` not measured yet, climbing while the
/// throughput grows by at least 5 % a step; returns whether anything was measured.
fn climb(m: &mut Measured, config: &RunConfig, limit: usize, min: usize, device: &Device) -> bool {
    let mut fresh = false;
    let ladder = LADDER
        .iter()
        .filter(|&&k| k == 1 || (k >= min && k <= limit.max(2)));
    for &k in ladder {
        if m.points.iter().any(|&(n, _)| n == k) {
            continue;
        }
        if m.saturated {
            break;
        }
        let model = config.transformer();
        let measured = config
            .train
            .as_ref()
            .and_then(|train| probe::tokens_per_s(&model, &config.data, train, k, device));
        let Some(tokens_per_s) = measured else {
            m.saturated = true;
            fresh = true;
            break;
        };
        let previous = m.points.last().map(|&(_, t)| t);
        m.points.push((k, tokens_per_s));
        fresh = true;
        if previous.is_some_and(|p| tokens_per_s < 1.05 * p) && k > 2 {
            m.saturated = true;
        }
    }
    fresh
}

/// The best measured stack size up to `available`, or 1 when no stack beats one run alone by
/// [`AUTO_MARGIN`].
fn best(m: &Measured, available: usize) -> usize {
    let alone = m
        .points
        .iter()
        .find(|&&(k, _)| k == 1)
        .map_or(f64::INFINITY, |&(_, t)| t);
    m.points
        .iter()
        .filter(|&&(k, t)| k > 1 && k <= available && t >= AUTO_MARGIN * alone)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(1, |&(k, _)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_one_shape_group_and_others_do_not() {
        let text = "name = \"g\"\n[teachers]\nsizes = [\"20K\"]\ntokens = [\"64K\"]\n\
                    [students]\nsizes = [\"10K\"]\ntokens = [\"32K\"]\n\
                    [distill]\nmode = [\"offline\", \"online\"]\n";
        let sweep = crate::spec::Sweep::parse(std::path::Path::new("g.toml"), text.into()).unwrap();
        let plan = crate::plan::Plan::build(&sweep, &Default::default()).unwrap();
        let groups = groups(plan.runs.iter().map(|r| (r.name.as_str(), &r.config)));
        // the two students and the baseline share a shape; the teacher and the logit pass
        // stack with nothing
        assert_eq!(groups.len(), 1, "{groups:?}");
        let (label, names) = &groups[0];
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("student") || n.starts_with("baseline"))
        );
        assert!(label.contains("tokens"), "{label}");
    }

    #[test]
    fn policies_parse_and_bad_sizes_say_what_is_accepted() {
        assert_eq!("auto".parse(), Ok(StackPolicy::Auto));
        assert_eq!("off".parse(), Ok(StackPolicy::Off));
        assert_eq!("1".parse(), Ok(StackPolicy::Off));
        assert_eq!("8".parse(), Ok(StackPolicy::Max(8)));
        let err = "0".parse::<StackPolicy>().unwrap_err();
        assert!(err.contains("`0`") && err.contains("hint:"), "{err}");
        assert!("lots".parse::<StackPolicy>().is_err());
    }

    #[test]
    fn auto_takes_the_fastest_stack_only_when_it_beats_one_run_alone() {
        let m = |points: Vec<(usize, f64)>| Measured {
            points,
            saturated: true,
        };
        // slower stacked (a CPU at small widths): alone
        assert_eq!(best(&m(vec![(1, 100.0), (2, 80.0), (4, 90.0)]), 8), 1);
        // barely faster: still alone
        assert_eq!(best(&m(vec![(1, 100.0), (2, 105.0)]), 8), 1);
        // a GPU: the fastest size that fits what is runnable
        let gpu = m(vec![
            (1, 100.0),
            (2, 190.0),
            (4, 370.0),
            (8, 700.0),
            (16, 690.0),
        ]);
        assert_eq!(best(&gpu, 32), 8);
        assert_eq!(best(&gpu, 5), 4);
        assert_eq!(best(&gpu, 1), 1);
    }
}
