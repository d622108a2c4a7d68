//! Stacks at the training layer: runs trained as one stack compute what they compute alone
//! (every logged training loss, every held-out loss, the final loss, to 1e-4), whatever their
//! seeds, learning rates, clipping and objectives; a member that diverges fails alone; a
//! stopped stack resumes, alone or stacked, to the same result.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::Device;
use pdsweep::data::{Prepared, prepare};
use pdsweep::distill::TeacherSource;
use pdsweep::model::Transformer;
use pdsweep::plan::{Plan, PlanOptions, RunConfig, RunKind};
use pdsweep::spec::Sweep;
use pdsweep::train::stack::{StackMember, train_stack};
use pdsweep::train::{
    DistillObjective, NextToken, Objective, TrainError, TrainEvent, TrainJob, TrainOutcome, train,
};

use crate::common::RNG;

/// A teacher and a student of a small synthetic sweep, resolved by the real planner.
fn configs() -> (RunConfig, RunConfig) {
    let text = "name = \"s\"\n[corpus]\nval_tokens = \"8K\"\n[model]\ncontext = 32\n\
                [teachers]\nsizes = [\"20K\"]\ntokens = [\"64K\"]\n\
                [students]\nsizes = [\"10K\"]\ntokens = [\"32K\"]\n[distill]\nmode = \"online\"\ntop_k = 8\n\
                [train]\nbatch_tokens = \"1K\"\nevals = 3\ncheckpoint_every = 10\nlog_every = 5\n";
    let sweep = Sweep::parse(Path::new("s.toml"), text.into()).unwrap();
    let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
    let find = |kind| {
        plan.runs
            .iter()
            .find(|r| r.kind() == kind)
            .unwrap()
            .config
            .clone()
    };
    (find(RunKind::Teacher), find(RunKind::Student))
}

/// Four variants of `base`: other seeds (so other weights and data), another learning rate,
/// and a clipping threshold low enough to clip every step.
fn variants(base: &RunConfig) -> Vec<RunConfig> {
    (0..4)
        .map(|k| {
            let mut c = base.clone();
            c.data.seed = 1 + k as u64;
            let train = c.train.as_mut().unwrap();
            match k {
                1 => train.lr = train.lr.with_peak(train.lr.peak() * 0.5).unwrap(),
                2 => train.grad_clip = 0.05,
                3 => train.weight_decay = 0.0,
                _ => {}
            }
            c
        })
        .collect()
}

/// What a run reported: (kind, step) → loss, and its outcome.
type Trace = Vec<(&'static str, u64, f64)>;

fn trace(event: &TrainEvent, out: &mut Trace) {
    match *event {
        TrainEvent::Step { step, loss, .. } => out.push(("train", step, loss)),
        TrainEvent::Eval { step, loss, .. } => out.push(("val", step, loss)),
        _ => {}
    }
}

struct Setup {
    configs: Vec<RunConfig>,
    data: Vec<Prepared>,
    dir: tempfile::TempDir,
    device: Device,
    stop: AtomicBool,
}

impl Setup {
    fn new(configs: Vec<RunConfig>) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data = configs
            .iter()
            .map(|c| prepare(&c.data, dir.path(), dir.path(), c.tokens).unwrap())
            .collect();
        Setup {
            configs,
            data,
            dir,
            device: Device::flex(),
            stop: AtomicBool::new(false),
        }
    }

    fn checkpoint(&self, tag: &str, k: usize) -> PathBuf {
        self.dir.path().join(format!("{tag}-{k}.ckpt"))
    }

    fn job<'a>(&'a self, k: usize, path: &'a Path) -> TrainJob<'a> {
        TrainJob {
            run_id: "r",
            model: self.configs[k].transformer(),
            data_config: &self.configs[k].data,
            train: self.configs[k].train.as_ref().unwrap(),
            data: &self.data[k],
            device: &self.device,
            backend: pdsweep::spec::Backend::Cpu,
            checkpoint: path,
            stop: &self.stop,
        }
    }
}

/// Trains member `k` alone.
fn solo(
    s: &Setup,
    k: usize,
    tag: &str,
    objective: &mut dyn Objective,
) -> (Trace, Result<TrainOutcome, TrainError>) {
    let path = s.checkpoint(tag, k);
    let mut t = Trace::new();
    let out = train(&s.job(k, &path), objective, &mut |e| trace(&e, &mut t));
    (t, out)
}

/// Trains the members `ks` as one stack.
fn stacked(
    s: &Setup,
    ks: &[usize],
    tag: &str,
    objectives: Vec<&mut dyn Objective>,
    mut on_step: impl FnMut(usize, u64),
) -> Vec<(Trace, Result<TrainOutcome, TrainError>)> {
    let paths: Vec<PathBuf> = ks.iter().map(|&k| s.checkpoint(tag, k)).collect();
    let members = ks
        .iter()
        .zip(&paths)
        .zip(objectives)
        .map(|((&k, path), objective)| StackMember {
            job: s.job(k, path),
            objective,
        })
        .collect();
    let mut traces = vec![Trace::new(); ks.len()];
    let outcomes = train_stack(members, &mut |i, e| {
        if let TrainEvent::Step { step, .. } = e {
            on_step(i, step);
        }
        trace(&e, &mut traces[i]);
    });
    traces.into_iter().zip(outcomes).collect()
}

fn assert_same(name: &str, want: &Trace, got: &Trace, want_loss: f64, got_loss: f64) {
    assert_eq!(want.len(), got.len(), "{name}: {want:?} vs {got:?}");
    let worst = want
        .iter()
        .zip(got)
        .map(|(a, b)| (a.2 - b.2).abs())
        .fold((want_loss - got_loss).abs(), f64::max);
    eprintln!("{name}: largest difference alone vs stacked {worst:.2e}");
    for (a, b) in want.iter().zip(got) {
        assert_eq!((a.0, a.1), (b.0, b.1), "{name}");
        assert!(
            (a.2 - b.2).abs() < 1e-4,
            "{name} {} step {}: {} alone, {} stacked",
            a.0,
            a.1,
            a.2,
            b.2
        );
    }
    assert!(
        (want_loss - got_loss).abs() < 1e-4,
        "{name}: held-out {want_loss} alone, {got_loss} stacked"
    );
}

#[test]
fn runs_trained_as_a_stack_of_four_compute_what_they_compute_alone() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let (teacher, _) = configs();
    let s = Setup::new(variants(&teacher));
    let alone: Vec<_> = (0..4)
        .map(|k| solo(&s, k, "solo", &mut NextToken))
        .collect();
    let mut objectives: Vec<NextToken> = vec![NextToken; 4];
    let together = stacked(
        &s,
        &[0, 1, 2, 3],
        "stack",
        objectives
            .iter_mut()
            .map(|o| o as &mut dyn Objective)
            .collect(),
        |_, _| {},
    );
    for (k, ((want, a), (got, b))) in alone.iter().zip(&together).enumerate() {
        let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
        assert_same(&format!("member {k}"), want, got, a.val_loss, b.val_loss);
        assert!(!want.is_empty());
    }
    // the variants really differ (seeds, rates, clipping), so equal curves are not a fluke
    let finals: Vec<f64> = alone
        .iter()
        .map(|(_, o)| o.as_ref().unwrap().val_loss)
        .collect();
    assert!(
        finals.windows(2).all(|w| (w[0] - w[1]).abs() > 1e-4),
        "{finals:?}"
    );
}

#[test]
fn distilled_students_in_a_stack_compute_what_they_compute_alone() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let (teacher_config, student) = configs();
    let device = Device::flex();
    let teacher: Transformer = teacher_config.init_model(&device);
    let mut configs = variants(&student);
    // other distillation settings: α, τ, the loss
    let d = |c: &mut RunConfig| c.distill.as_mut().unwrap().clone();
    for (k, c) in configs.iter_mut().enumerate() {
        let mut distill = d(c);
        match k {
            1 => distill.temperature = pdsweep::spec::Temperature::try_from(2.0).expect("τ = 2"),
            2 => distill.loss = pdsweep::spec::LossKind::ReverseKl,
            3 => distill.alpha = pdsweep::spec::Alpha::constant(0.5).unwrap(),
            _ => {}
        }
        c.distill = Some(distill);
    }
    // a baseline beside them, as in a real stack
    configs[3].distill = None;
    configs[3].kind = RunKind::Baseline;
    let s = Setup::new(configs);
    let distill = |k: usize| {
        s.configs[k]
            .distill
            .as_ref()
            .unwrap()
            .objective(TeacherSource::Online {
                teacher: &teacher,
                device: &device,
                compute: burn::tensor::FloatDType::F32,
                truncate_on: pdsweep::distill::TruncateOn::Host,
            })
    };
    let mut alone: Vec<_> = (0..3)
        .map(|k| solo(&s, k, "solo", &mut distill(k)))
        .collect();
    alone.push(solo(&s, 3, "solo", &mut NextToken));
    let mut students: Vec<DistillObjective> = (0..3).map(distill).collect();
    let mut baseline = NextToken;
    let objectives: Vec<&mut dyn Objective> = students
        .iter_mut()
        .map(|o| o as &mut dyn Objective)
        .chain(std::iter::once(&mut baseline as &mut dyn Objective))
        .collect();
    let together = stacked(&s, &[0, 1, 2, 3], "stack", objectives, |_, _| {});
    for (k, ((want, a), (got, b))) in alone.iter().zip(&together).enumerate() {
        let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
        assert_same(&format!("student {k}"), want, got, a.val_loss, b.val_loss);
    }
}

#[test]
fn a_diverging_member_fails_alone_and_the_others_go_on() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let (teacher, _) = configs();
    let mut configs = variants(&teacher);
    let hot = configs[1].train.as_mut().unwrap();
    hot.lr = hot.lr.with_peak(1e6).unwrap();
    hot.grad_clip = 0.0;
    let s = Setup::new(configs);
    let (want, alone) = solo(&s, 0, "solo", &mut NextToken);
    let mut objectives: Vec<NextToken> = vec![NextToken; 3];
    let together = stacked(
        &s,
        &[0, 1, 2],
        "stack",
        objectives
            .iter_mut()
            .map(|o| o as &mut dyn Objective)
            .collect(),
        |_, _| {},
    );
    assert!(
        matches!(together[1].1, Err(TrainError::Diverged { .. })),
        "the hot member diverges"
    );
    let (got, stacked_outcome) = &together[0];
    assert_same(
        "the member beside it",
        &want,
        got,
        alone.unwrap().val_loss,
        stacked_outcome.as_ref().unwrap().val_loss,
    );
    assert!(together[2].1.is_ok());
}

#[test]
fn stopped_runs_resume_alone_or_stacked_to_the_same_result() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let (teacher, _) = configs();
    let s = Setup::new(variants(&teacher));
    let alone: Vec<f64> = (0..3)
        .map(|k| solo(&s, k, "solo", &mut NextToken).1.unwrap().val_loss)
        .collect();
    // members 0 and 1 stop as a stack after step 15 (between their checkpoints at 10 and 20),
    // member 2 alone after step 10
    let mut objectives: Vec<NextToken> = vec![NextToken; 2];
    let first = stacked(
        &s,
        &[0, 1],
        "resume",
        objectives
            .iter_mut()
            .map(|o| o as &mut dyn Objective)
            .collect(),
        |_, step| {
            if step >= 15 {
                s.stop.store(true, Ordering::Relaxed);
            }
        },
    );
    for (_, outcome) in &first {
        assert!(
            matches!(outcome, Err(TrainError::Interrupted { step: 15 })),
            "stopped at 15"
        );
    }
    s.stop.store(false, Ordering::Relaxed);
    let path = s.checkpoint("resume", 2);
    let stopped = train(&s.job(2, &path), &mut NextToken, &mut |e| {
        if matches!(e, TrainEvent::Step { step, .. } if step >= 10) {
            s.stop.store(true, Ordering::Relaxed);
        }
    });
    assert!(matches!(stopped, Err(TrainError::Interrupted { step: 10 })));
    s.stop.store(false, Ordering::Relaxed);
    // member 0 resumes alone (from a stack's checkpoint); members 1 and 2 as a stack of two,
    // one from a stack's checkpoint at 15, one from a solo checkpoint at 10
    let resumed_solo = solo(&s, 0, "resume", &mut NextToken).1.unwrap().val_loss;
    let mut objectives: Vec<NextToken> = vec![NextToken; 2];
    let resumed_stack = stacked(
        &s,
        &[1, 2],
        "resume",
        objectives
            .iter_mut()
            .map(|o| o as &mut dyn Objective)
            .collect(),
        |_, _| {},
    );
    let got = [
        resumed_solo,
        resumed_stack[0].1.as_ref().unwrap().val_loss,
        resumed_stack[1].1.as_ref().unwrap().val_loss,
    ];
    for k in 0..3 {
        assert!(
            (alone[k] - got[k]).abs() < 1e-4,
            "member {k}: {} uninterrupted, {} resumed",
            alone[k],
            got[k]
        );
    }
}
