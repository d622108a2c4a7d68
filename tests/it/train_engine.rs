//! The training engine on the CPU with tiny real models: exact parameter counts, checkpoints
//! that load back into an identical model, and training that actually learns.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use crate::common::RNG;
use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::data::{Prepared, prepare};
use pdsweep::model::ShapeRule;
use pdsweep::model::TransformerConfig;
use pdsweep::plan::{Plan, PlanOptions, RunConfig, RunKind};
use pdsweep::spec::Sweep;
use pdsweep::train::{NextToken, TrainJob, checkpoint, train};

fn rule(vocab: u64, tie: bool) -> ShapeRule {
    ShapeRule {
        aspect_ratio: 32.0,
        head_dim: None,
        kv_groups: 1,
        ffn_multiple: None,
        tie_embeddings: tie,
        vocab,
    }
}

#[test]
fn burn_model_has_exactly_the_planned_parameters() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::flex();
    for (target, tie, groups) in [(50_000, true, 1), (200_000, false, 1), (400_000, true, 2)] {
        let shape = ShapeRule {
            kv_groups: groups,
            ..rule(256, tie)
        }
        .derive(target)
        .unwrap();
        let model = TransformerConfig::new(shape, 32).init(&device);
        assert_eq!(
            model.param_count() as u64,
            shape.params().total,
            "{shape:?}"
        );
    }
}

fn tokens(batch: usize, seq: usize, device: &Device) -> Tensor<2, Int> {
    let ids: Vec<i64> = (0..batch * seq).map(|i| (i * 7 % 256) as i64).collect();
    Tensor::from_data(TensorData::new(ids, [batch, seq]), device)
}

#[test]
fn a_checkpoint_loads_back_into_an_identical_model() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let device = Device::flex();
    let shape = rule(256, false).derive(60_000).unwrap();
    device.seed(3);
    let model = TransformerConfig::new(shape, 16).init(&device);
    let before: Vec<f32> = model
        .forward(tokens(2, 16, &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.ckpt");
    let state = checkpoint::CheckpointState {
        run_id: "abc".into(),
        step: 7,
        tokens: 100,
        wall_s: 1.5,
        log_loss_sum: 2.5,
        log_steps: 1,
        loss_scale: None,
        loss_scale_good_steps: 0,
    };
    checkpoint::save(&path, &state, &model, None).unwrap();
    device.seed(99);
    let fresh = TransformerConfig::new(shape, 16).init(&device);
    let loaded = checkpoint::load(&path, "abc").unwrap().unwrap();
    assert_eq!(loaded.state, state);
    let restored = loaded.model(fresh).unwrap();
    let after: Vec<f32> = restored
        .forward(tokens(2, 16, &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_eq!(before, after);
    assert!(matches!(
        checkpoint::load(&path, "other"),
        Err(checkpoint::CheckpointError::WrongRun { .. })
    ));
    // relabelled for another run (a tuned teacher adopting its candidate): same weights and
    // position under the new id; a missing source is `None`, a source of another run refused
    let copy = dir.path().join("teacher.ckpt");
    assert_eq!(
        checkpoint::relabel(&path, "abc", &copy, "xyz").unwrap(),
        Some(())
    );
    let relabelled = checkpoint::load(&copy, "xyz").unwrap().unwrap();
    assert_eq!(relabelled.state.step, 7);
    assert_eq!(relabelled.state.run_id, "xyz");
    let again: Vec<f32> = relabelled
        .model(TransformerConfig::new(shape, 16).init(&device))
        .unwrap()
        .forward(tokens(2, 16, &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_eq!(before, again);
    let nowhere = dir.path().join("none.ckpt");
    assert!(
        checkpoint::relabel(&nowhere, "abc", &copy, "xyz")
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        checkpoint::relabel(&path, "other", &copy, "xyz"),
        Err(checkpoint::CheckpointError::WrongRun { .. })
    ));
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = pdsweep::error::chain(&checkpoint::load(&path, "abc").err().unwrap());
    assert!(
        err.contains("checksum mismatch") && err.contains("run.ckpt"),
        "{err}"
    );
}

/// The first teacher of a one-teacher synthetic sweep, resolved by the real planner.
/// `extra` lines go into `[train]`; `evals` and `checkpoint_every` default to 2 and 1000.
fn synthetic_run(extra: &str) -> RunConfig {
    let mut train = extra.to_string();
    for (key, default) in [("evals", "2"), ("checkpoint_every", "1000")] {
        if !extra.contains(key) {
            train += &format!("{key} = {default}\n");
        }
    }
    let text = format!(
        "name = \"t\"\n[corpus]\nval_tokens = \"16K\"\n[model]\ncontext = 64\n[teachers]\nsizes = [\"60K\"]\ntokens = [\"400K\"]\n\
         [students]\nsizes = [\"20K\"]\ntokens = [\"100K\"]\n[train]\nbatch_tokens = \"2K\"\n{train}"
    );
    let sweep = Sweep::parse(std::path::Path::new("t.toml"), text).unwrap();
    let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
    plan.runs
        .into_iter()
        .find(|r| r.kind() == RunKind::Teacher)
        .unwrap()
        .config
}

fn data(config: &RunConfig) -> Prepared {
    let dir = tempfile::tempdir().unwrap();
    prepare(&config.data, dir.path(), dir.path(), config.tokens).unwrap()
}

/// Trains `config` on `data` with a checkpoint in `dir`, collecting the held-out losses.
fn run_training(
    config: &RunConfig,
    data: &Prepared,
    dir: &Path,
    evals: &mut Vec<f64>,
) -> Result<pdsweep::train::TrainOutcome, pdsweep::train::TrainError> {
    let stop = AtomicBool::new(false);
    let device = Device::flex();
    let path = dir.join("t.ckpt");
    let job = TrainJob {
        run_id: "t",
        model: config.transformer(),
        data_config: &config.data,
        train: config.train.as_ref().expect("training settings"),
        data,
        device: &device,
        backend: pdsweep::spec::Backend::Cpu,
        checkpoint: &path,
        stop: &stop,
    };
    train(&job, &mut NextToken, &mut |e| {
        if let pdsweep::train::TrainEvent::Eval { loss, .. } = e {
            evals.push(loss)
        }
    })
}

#[test]
fn training_on_the_synthetic_corpus_learns_but_never_beats_its_entropy() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let config = synthetic_run("");
    let data = data(&config);
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let path = dir.path().join("t.ckpt");
    let mut evals = Vec::new();
    let outcome = run_training(&config, &data, dir.path(), &mut evals).unwrap();
    let untrained =
        pdsweep::train::evaluate(&config.init_model(&device), &data.val, 64, &device, 1.0).0;
    let entropy = data.info.entropy_rate_nats.unwrap();
    assert!(
        (untrained - (256f64).ln()).abs() < 0.2,
        "an untrained model is near uniform: {untrained}"
    );
    assert!(
        outcome.val_loss < data.info.unigram_entropy_nats - 0.3,
        "{} vs unigram {}",
        outcome.val_loss,
        data.info.unigram_entropy_nats
    );
    assert!(
        outcome.val_loss > entropy,
        "{} beats the entropy rate {entropy}",
        outcome.val_loss
    );
    assert_eq!(evals.len(), 2);
    assert!(evals[1] < evals[0]);
    assert!(path.exists(), "a final checkpoint is written");
}

#[test]
fn a_diverging_run_fails_with_its_step() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let config = synthetic_run("lr = 1e6\ngrad_clip = 0.0\n");
    let data = data(&config);
    let dir = tempfile::tempdir().unwrap();
    match run_training(&config, &data, dir.path(), &mut Vec::new()) {
        Err(pdsweep::train::TrainError::Diverged { step, .. }) => {
            assert!(step < config.train.unwrap().steps)
        }
        Err(other) => panic!("expected divergence, got {other}"),
        Ok(o) => panic!("expected divergence, got loss {}", o.val_loss),
    }
}

#[test]
fn the_same_seed_builds_the_same_model() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let config = synthetic_run("");
    let device = Device::flex();
    let a: Vec<f32> = config
        .init_model(&device)
        .forward(tokens(1, 8, &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    let b: Vec<f32> = config
        .init_model(&device)
        .forward(tokens(1, 8, &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_backend_not_built_in_is_a_clear_error() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    use pdsweep::spec::Backend;
    assert!(pdsweep::train::device_for(Backend::Cpu, 0).is_ok());
    if !cfg!(feature = "cuda") {
        let err = pdsweep::train::device_for(Backend::Cuda, 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`cuda` is not built into this pdsweep")
                && err.contains("--features cuda"),
            "{err}"
        );
    }
}

#[test]
fn an_interrupted_run_resumes_to_the_same_result() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let config = synthetic_run("checkpoint_every = 20\nevals = 1\n");
    let data = data(&config);
    let device = Device::flex();
    let uninterrupted = {
        let dir = tempfile::tempdir().unwrap();
        run_training(&config, &data, dir.path(), &mut Vec::new())
            .unwrap()
            .val_loss
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.ckpt");
    let stop = AtomicBool::new(false);
    let job = TrainJob {
        run_id: "t",
        model: config.transformer(),
        data_config: &config.data,
        train: config.train.as_ref().unwrap(),
        data: &data,
        device: &device,
        backend: pdsweep::spec::Backend::Cpu,
        checkpoint: &path,
        stop: &stop,
    };
    let mut steps = 0;
    let first = train(&job, &mut NextToken, &mut |e| {
        if let pdsweep::train::TrainEvent::Step { step, .. } = e {
            steps = step;
            if step >= 70 {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    assert!(
        matches!(
            first,
            Err(pdsweep::train::TrainError::Interrupted { step: 70 })
        ),
        "stopped after step 70"
    );
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut resumed_from = None;
    let resumed = train(&job, &mut NextToken, &mut |e| {
        if let pdsweep::train::TrainEvent::Started { start_step, .. } = e {
            resumed_from = Some(start_step)
        }
    })
    .unwrap();
    assert_eq!(resumed_from, Some(70));
    assert!(
        (resumed.val_loss - uninterrupted).abs() < 1e-6,
        "resumed {} vs uninterrupted {uninterrupted}",
        resumed.val_loss
    );
}

/// Mixed precision on the CPU backend: where flex computes in the dtype, a bf16 or f16 run
/// (f32 weights, products in half precision, f16 with loss scaling) ends within a few
/// hundredths of a nat of the f32 run; where it cannot, the run fails naming the key.
#[test]
fn half_precision_training_tracks_f32_or_is_refused_by_name() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let reference = synthetic_run("evals = 1\n");
    let data = data(&reference);
    let f32_loss = {
        let dir = tempfile::tempdir().unwrap();
        run_training(&reference, &data, dir.path(), &mut Vec::new())
            .unwrap()
            .val_loss
    };
    for precision in ["bf16", "f16"] {
        let config = synthetic_run(&format!("evals = 1\nprecision = \"{precision}\"\n"));
        assert_ne!(config.to_json(), reference.to_json(), "a new run id");
        let dir = tempfile::tempdir().unwrap();
        let dtype =
            pdsweep::train::precision::compute_dtype(config.train.as_ref().unwrap().precision);
        match run_training(&config, &data, dir.path(), &mut Vec::new()) {
            Ok(o) => {
                assert!(Device::flex().supports_dtype(dtype));
                assert!(
                    (o.val_loss - f32_loss).abs() < 0.05,
                    "{precision}: {} vs f32 {f32_loss}",
                    o.val_loss
                );
            }
            Err(e) => {
                assert!(!Device::flex().supports_dtype(dtype), "{precision}: {e}");
                assert!(
                    e.to_string()
                        .contains(&format!("precision = \"{precision}\"")),
                    "{e}"
                );
            }
        }
    }
}

/// The logits of `model` on a fixed input, for comparing trained models.
fn logits_of(model: &pdsweep::model::Transformer) -> Vec<f32> {
    let device = Device::flex();
    model
        .forward(tokens(2, 64, &device))
        .into_data()
        .try_to_vec()
        .unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `[train] micro_batch_tokens` accumulates the batch from smaller passes: one clip and one
/// step per batch, so the run trains as with the whole batch at once (in f32, to within the
/// last bits of summation order: the logits after 24 steps agree to 2e-3, while the same run
/// from another seed is 100× further away). A ragged split (10 + 10 + 10 + 2
/// rows) weights each micro-batch by its share of the positions. A micro-batch is a new run
/// id; one as large as the batch is no micro-batch at all and keeps the id.
#[test]
fn accumulated_micro_batches_train_as_the_whole_batch() {
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let short = "evals = 1\nlog_every = 1\n";
    let whole = synthetic_run(short);
    let prepared = data(&whole);
    let run = |config: &RunConfig| {
        let dir = tempfile::tempdir().unwrap();
        let mut cut = config.clone();
        if let Some(t) = cut.train.as_mut() {
            t.steps = 24;
        }
        run_training(&cut, &prepared, dir.path(), &mut Vec::new()).unwrap()
    };
    let reference = run(&whole);
    let reference_logits = logits_of(&reference.model);
    for micro in ["512", "640"] {
        let config = synthetic_run(&format!("{short}micro_batch_tokens = {micro}\n"));
        assert_ne!(config.to_json(), whole.to_json(), "a new run id");
        let outcome = run(&config);
        let diff = max_abs_diff(&logits_of(&outcome.model), &reference_logits);
        assert!(diff < 2e-3, "micro-batch {micro}: logits differ by {diff}");
        assert!(
            (outcome.val_loss - reference.val_loss).abs() < 1e-4,
            "{micro}: {} vs {}",
            outcome.val_loss,
            reference.val_loss
        );
        assert!(
            (outcome.train_loss - reference.train_loss).abs() < 1e-4,
            "{micro}: training loss {} vs {}",
            outcome.train_loss,
            reference.train_loss
        );
    }
    let same = synthetic_run(&format!("{short}micro_batch_tokens = \"2K\"\n"));
    assert_eq!(
        same.to_json(),
        whole.to_json(),
        "the whole batch keeps its id"
    );
    // the scale of a real difference: the same run from another seed
    let mut reordered = whole.clone();
    reordered.data.seed += 1;
    let other = {
        let data = data(&reordered);
        let dir = tempfile::tempdir().unwrap();
        if let Some(t) = reordered.train.as_mut() {
            t.steps = 24;
        }
        run_training(&reordered, &data, dir.path(), &mut Vec::new()).unwrap()
    };
    let apart = max_abs_diff(&logits_of(&other.model), &reference_logits);
    assert!(
        apart > 0.2,
        "another data order moves the logits by {apart}"
    );
}
