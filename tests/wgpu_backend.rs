//! The GPU code path, run on whatever Vulkan device the machine has; in CI that is Mesa's
//! software driver (lavapipe), which executes the same SPIR-V kernels a GPU does. Where no
//! Vulkan device exists (or the binary lacks the `wgpu` feature) the tests say so and pass,
//! unless `PDSWEEP_REQUIRE_WGPU=1` (set by `.ci/run`), which makes that a failure.
//!
//! What is checked: a run on wgpu starts from exactly the CPU run's weights (they are drawn on
//! the host) and follows its loss curve within float noise; the device-side top-p/top-k
//! truncation equals the host's; a whole tiny sweep (teacher, logit pass, offline and online
//! students, baseline) runs through the binary with `--devices 0` and ends where the same
//! sweep ends on the CPU; f16 training tracks f32; bf16 is refused with a clear message.

mod common;

use std::sync::atomic::AtomicBool;

use burn::tensor::{Device, Int, Tensor, TensorData};
use common::{pdsweep, stderr};
use pdsweep::data::{Prepared, prepare};
use pdsweep::plan::{Plan, PlanOptions, RunConfig, RunKind};
use pdsweep::spec::{Backend, Precision, Sweep, TopK};
use pdsweep::store::SweepDb;
use pdsweep::train::{NextToken, TrainEvent, TrainJob, device_for, init_model, train};

/// The wgpu device, or `None` (with the reason printed) where there is none and none is
/// required.
fn wgpu_or_skip(test: &str) -> Option<Device> {
    let required = std::env::var("PDSWEEP_REQUIRE_WGPU").is_ok_and(|v| v == "1");
    let why = if !cfg!(feature = "wgpu") {
        "this build has no `wgpu` feature".to_string()
    } else {
        match device_for(Backend::Wgpu, 0) {
            Ok(device) => return Some(device),
            Err(e) => e.to_string(),
        }
    };
    assert!(!required, "{test}: PDSWEEP_REQUIRE_WGPU=1 but {why}");
    eprintln!("skipped {test}: {why}");
    None
}

/// burn's device seed is process-wide; tests that build models take turns.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

const SWEEP: &str = r#"
name = "gpu"
backend = "BACKEND"
[corpus]
val_tokens = "4K"
[model]
context = 32
[teachers]
sizes = ["30K"]
tokens = ["64K"]
[students]
sizes = ["8K"]
tokens = ["32K"]
[distill]
mode = ["offline", "online"]
top_k = 8
[train]
batch_tokens = "1K"
evals = 2
log_every = 4
"#;

/// The teacher run of the test sweep, resolved by the real planner, in `precision`.
fn teacher_config(precision: Precision) -> RunConfig {
    let text = SWEEP.replace("BACKEND", "cpu").replace(
        "log_every = 4",
        &format!("log_every = 4\nprecision = \"{precision}\""),
    );
    let sweep = Sweep::parse(std::path::Path::new("gpu.toml"), text).unwrap();
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

/// Trains `config` on `device`; returns the logged training losses and the final held-out loss.
fn curve(
    config: &RunConfig,
    data: &Prepared,
    device: &Device,
    backend: Backend,
) -> (Vec<f64>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let job = TrainJob {
        run_id: "t",
        config,
        data,
        device,
        backend,
        checkpoint: &dir.path().join("t.ckpt"),
        stop: &stop,
    };
    let mut losses = Vec::new();
    let outcome = train(&job, &mut NextToken, &mut |e| {
        if let TrainEvent::Step { loss, .. } = e {
            losses.push(loss);
        }
    })
    .unwrap();
    (losses, outcome.val_loss)
}

fn logits_of(config: &RunConfig, device: &Device) -> Vec<f32> {
    let ids: Vec<i64> = (0..2 * 32).map(|i| (i * 37 % 256) as i64).collect();
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [2, 32]), device);
    init_model(config, device)
        .forward(tokens)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}

/// Initialisation and numerics: the model starts from the same weights on both backends (its
/// first logits agree to float rounding), and training follows the CPU's loss curve.
#[test]
fn a_run_on_wgpu_starts_from_the_cpu_weights_and_follows_its_loss_curve() {
    let Some(gpu) = wgpu_or_skip("a_run_on_wgpu_starts_from_the_cpu_weights") else {
        return;
    };
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let config = teacher_config(Precision::F32);
    let cpu = Device::flex();
    let (a, b) = (logits_of(&config, &cpu), logits_of(&config, &gpu));
    let max_diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(max_diff < 1e-4, "first logits differ by {max_diff}");

    let data = data(&config);
    let (cpu_curve, cpu_val) = curve(&config, &data, &cpu, Backend::Cpu);
    let (gpu_curve, gpu_val) = curve(&config, &data, &gpu, Backend::Wgpu);
    assert_eq!(cpu_curve.len(), gpu_curve.len());
    let worst = cpu_curve
        .iter()
        .zip(&gpu_curve)
        .map(|(c, g)| (c - g).abs())
        .fold(0f64, f64::max);
    eprintln!(
        "loss curves: cpu {cpu_curve:?}\n             wgpu {gpu_curve:?}\nworst {worst:.2e}; held-out {cpu_val} vs {gpu_val}"
    );
    assert!(worst < 2e-3, "training losses differ by up to {worst}");
    assert!(
        (cpu_val - gpu_val).abs() < 2e-3,
        "held-out {cpu_val} vs {gpu_val}"
    );
    assert!(
        cpu_curve.last() < cpu_curve.first(),
        "it learns: {cpu_curve:?}"
    );
}

/// The device truncation (what a logit pass and an online student do on a GPU) keeps the
/// same tokens and log-probabilities as the host truncation.
#[test]
fn device_truncation_on_wgpu_equals_the_host_truncation() {
    use pdsweep::distill::device_truncate::{download, truncate_on_device};
    use pdsweep::distill::truncate;
    let Some(gpu) = wgpu_or_skip("device_truncation_on_wgpu_equals_the_host_truncation") else {
        return;
    };
    let (rows, vocab) = (48, 256);
    let z: Vec<f32> = (0..rows * vocab)
        .map(|i| {
            let x = ((i as u64).wrapping_mul(2654435761) % 10007) as f32 / 10007.0;
            x * if (i / vocab) % 2 == 0 { 12.0 } else { 3.0 }
        })
        .collect();
    for (p, k) in [
        (1.0, TopK::Keep(32)),
        (0.9, TopK::Keep(64)),
        (0.95, TopK::All),
    ] {
        let t = Tensor::<2>::from_data(TensorData::new(z.clone(), [rows, vocab]), &gpu);
        let got = download(truncate_on_device(t, p, k));
        assert_eq!(got.len(), rows);
        for (row, kept) in got.iter().enumerate() {
            let want = truncate(&z[row * vocab..(row + 1) * vocab], p, k);
            assert_eq!(kept.ids, want.ids, "p={p} k={k:?} row {row}");
        }
    }
}

/// Runs the test sweep through the binary on `backend` (`--devices 0` on wgpu); returns the
/// held-out loss of every run by name, and the database.
fn sweep_losses(backend: &str) -> (Vec<(String, f64)>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("gpu.toml"),
        SWEEP.replace("BACKEND", backend),
    )
    .unwrap();
    let mut args = vec!["run", "gpu.toml"];
    if backend == "wgpu" {
        args.extend(["--devices", "0"]);
    }
    let out = pdsweep(tmp.path(), &args);
    assert!(out.status.success(), "{backend}: {}", stderr(&out));
    let db = SweepDb::open(&tmp.path().join("results/gpu/sweep.db")).unwrap();
    let mut losses = Vec::new();
    for run in db.runs().unwrap() {
        assert_eq!(run.state, "done", "{backend}: {}", run.name);
        losses.push((run.name.clone(), db.result(&run.id).unwrap().unwrap().0));
    }
    losses.sort_by(|a, b| a.0.cmp(&b.0));
    (losses, tmp)
}

/// A logit pass, an offline and an online student and a baseline run end to end on wgpu
/// through `pdsweep run --devices 0`, truncating on the device, and end where the same sweep
/// ends on the CPU.
#[test]
fn a_tiny_sweep_runs_end_to_end_on_wgpu_with_devices_0_like_on_the_cpu() {
    if wgpu_or_skip("a_tiny_sweep_runs_end_to_end_on_wgpu").is_none() {
        return;
    }
    let (gpu, tmp) = sweep_losses("wgpu");
    let (cpu, _cpu_tmp) = sweep_losses("cpu");
    assert_eq!(gpu.len(), 5, "{gpu:?}"); // teacher, logits, two students, baseline
    for ((name, g), (_, c)) in gpu.iter().zip(&cpu) {
        eprintln!("{name}: wgpu {g:.5} cpu {c:.5}");
        assert!((g - c).abs() < 5e-3, "{name}: wgpu {g} vs cpu {c}");
    }
    let db = SweepDb::open(&tmp.path().join("results/gpu/sweep.db")).unwrap();
    let conn = rusqlite::Connection::open(tmp.path().join("results/gpu/sweep.db")).unwrap();
    let (on, device): (String, String) = conn
        .query_row(
            "SELECT json_extract(extra_json, '$.truncated_on'), json_extract(extra_json, '$.device')
             FROM results JOIN runs ON runs.id = results.run_id WHERE runs.kind = 'logits'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(on, "device");
    assert!(!device.is_empty() && device != "cpu", "{device}");
    drop(db);
}

/// f16 on the GPU path tracks f32 (loss scaling on, parameters f32); bf16, which burn 0.22's
/// wgpu backend cannot compute in, is refused with a message naming the key and the way out.
#[test]
fn f16_on_wgpu_tracks_f32_and_bf16_is_refused() {
    let Some(gpu) = wgpu_or_skip("f16_on_wgpu_tracks_f32_and_bf16_is_refused") else {
        return;
    };
    let _alone = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let f32_config = teacher_config(Precision::F32);
    let data = data(&f32_config);
    let (f32_curve, f32_val) = curve(&f32_config, &data, &gpu, Backend::Wgpu);
    let (f16_curve, f16_val) = curve(&teacher_config(Precision::F16), &data, &gpu, Backend::Wgpu);
    eprintln!("f32 {f32_curve:?} {f32_val}\nf16 {f16_curve:?} {f16_val}");
    assert!(
        (f32_val - f16_val).abs() < 0.03,
        "held-out f32 {f32_val} vs f16 {f16_val}"
    );

    let bf16 = teacher_config(Precision::Bf16);
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let job = TrainJob {
        run_id: "t",
        config: &bf16,
        data: &data,
        device: &gpu,
        backend: Backend::Wgpu,
        checkpoint: &dir.path().join("t.ckpt"),
        stop: &stop,
    };
    if gpu.supports_dtype(burn::tensor::FloatDType::BF16) {
        return; // a future burn or driver may compute in bf16; then it simply trains
    }
    let err = train(&job, &mut NextToken, &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`[train] precision = \"bf16\"`") && err.contains("hint:"),
        "{err}"
    );
}
