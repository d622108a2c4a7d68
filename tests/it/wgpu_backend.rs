//! The GPU code path, run on whatever Vulkan device the machine has; in CI that is Mesa's
//! software driver (lavapipe), which executes the same SPIR-V kernels a GPU does. Where no
//! Vulkan device exists (or the binary lacks the `wgpu` feature) the tests say so and pass,
//! unless `PDSWEEP_REQUIRE_WGPU=1` (set by `.ci/run`), which makes that a failure.
//!
//! What is checked: a run on wgpu starts from exactly the CPU run's weights (they are drawn on
//! the host) and follows its loss curve within float noise, also with its batch accumulated
//! from micro-batches; f16 training tracks f32 and bf16 is
//! refused with a clear message; runs trained as one stack on wgpu follow their solo runs; a
//! whole tiny sweep (teacher, logit pass truncating on the device, offline and online
//! students, baseline) runs through the binary with `--devices 0` and ends where the same
//! sweep ends on the CPU. The device truncation itself is checked in `tests/device_truncate.rs`.
//!
//! Cost: on lavapipe nearly all the time is compiling kernels (each new tensor shape compiles
//! and autotunes its own), so every test here uses one model shape at one batch shape, the
//! tests take turns (one device, no contention), and each one runs under a time limit that
//! fails it, naming it, instead of letting a stuck driver hold CI.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::common::wgpu_or_skip;
use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::data::{Prepared, prepare};
use pdsweep::distill::{TeacherSource, TruncateOn};
use pdsweep::plan::{Plan, PlanOptions, RunConfig, RunKind};
use pdsweep::spec::{Backend, Precision, Sweep};
use pdsweep::store::RunState;
use pdsweep::store::SweepDb;
use pdsweep::train::stack::{StackMember, train_stack};
use pdsweep::train::{NextToken, Objective, TrainEvent, TrainJob, train};

/// One model shape for every run (teacher and students alike: 2 layers, d 24, 17.8K
/// parameters), context 16, 16 rows per batch and 16 held-out windows: one set of kernels.
const SWEEP: &str = r#"
name = "gpu"
backend = "BACKEND"
[corpus]
val_tokens = "256"
[model]
context = 16
[teachers]
sizes = ["12K"]
tokens = ["4K"]
[students]
sizes = ["12K"]
tokens = ["2K"]
[distill]
mode = ["offline", "online"]
top_k = 8
[train]
batch_tokens = "256"
evals = 2
log_every = 2
"#;

/// Most wall time any one test may take (seconds): several times what it needs on a loaded
/// 2-core machine; past it the test fails with its name instead of holding CI.
const LIMIT_S: u64 = 900;

/// The device is shared: the tests take turns (and burn's seed is process-wide).
static DEVICE: Mutex<()> = Mutex::new(());

fn take_turn() -> MutexGuard<'static, ()> {
    DEVICE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends the whole test process, naming `test`, if it is still running after [`LIMIT_S`].
struct Watchdog(std::sync::mpsc::Sender<()>);

fn watchdog(test: &'static str) -> Watchdog {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            rx.recv_timeout(Duration::from_secs(LIMIT_S))
        {
            eprintln!("{test}: still running after {LIMIT_S} s on wgpu; failing the test binary");
            std::process::exit(101);
        }
    });
    Watchdog(tx)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// The run of `kind` in the test sweep, resolved by the real planner, in `precision`.
fn run_config(kind: RunKind, precision: Precision) -> RunConfig {
    let text = SWEEP.replace("BACKEND", "cpu").replace(
        "log_every = 2",
        &format!("log_every = 2\nprecision = \"{precision}\""),
    );
    let sweep = Sweep::parse(Path::new("gpu.toml"), text).unwrap();
    let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
    plan.runs
        .into_iter()
        .find(|r| r.kind() == kind)
        .unwrap()
        .config
}

fn data(config: &RunConfig) -> Prepared {
    let dir = tempfile::tempdir().unwrap();
    prepare(&config.data, dir.path(), dir.path(), config.tokens).unwrap()
}

fn job<'a>(
    config: &'a RunConfig,
    data: &'a Prepared,
    device: &'a Device,
    backend: Backend,
    checkpoint: &'a Path,
    stop: &'a AtomicBool,
) -> TrainJob<'a> {
    TrainJob {
        run_id: "t",
        model: config.transformer(),
        data_config: &config.data,
        train: config.train.as_ref().expect("training settings"),
        data,
        device,
        backend,
        checkpoint,
        stop,
    }
}

/// The logged training losses and the final held-out loss of one run.
type Curve = (Vec<f64>, f64);

/// Trains `config` on `device` with `objective`.
fn curve(
    config: &RunConfig,
    data: &Prepared,
    (device, backend): (&Device, Backend),
    objective: &mut dyn Objective,
) -> Curve {
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let path = dir.path().join("t.ckpt");
    let mut losses = Vec::new();
    let outcome = train(
        &job(config, data, device, backend, &path, &stop),
        objective,
        &mut |e| {
            if let TrainEvent::Step { loss, .. } = e {
                losses.push(loss);
            }
        },
    )
    .unwrap();
    (losses, outcome.val_loss)
}

/// The largest difference between two curves (their held-out losses included).
fn worst(a: &Curve, b: &Curve) -> f64 {
    assert_eq!(a.0.len(), b.0.len(), "{a:?} vs {b:?}");
    a.0.iter()
        .zip(&b.0)
        .map(|(x, y)| (x - y).abs())
        .fold((a.1 - b.1).abs(), f64::max)
}

fn logits_of(config: &RunConfig, device: &Device) -> Vec<f32> {
    let ids: Vec<i64> = (0..16 * 16).map(|i| (i * 37 % 256) as i64).collect();
    let tokens = Tensor::<2, Int>::from_data(TensorData::new(ids, [16, 16]), device);
    config
        .init_model(device)
        .forward(tokens)
        .into_data()
        .try_into_vec_as::<f32>()
        .unwrap()
}

/// Initialisation and numerics: the model starts from the same weights on both backends (its
/// first logits agree to float rounding: the weights are drawn on the host), wgpu runs the
/// burn-op composites of the CPU kernels, and training follows the CPU's loss curve (measured:
/// within 7.2e-7 over 16 steps). The same run with its batch accumulated from four
/// micro-batches (`[train] micro_batch_tokens`) follows the whole batch's curve on wgpu.
#[test]
fn a_run_on_wgpu_starts_from_the_cpu_weights_and_follows_its_loss_curve() {
    let Some(gpu) = wgpu_or_skip("a_run_on_wgpu_follows_the_cpu") else {
        return;
    };
    let _turn = take_turn();
    let _limit = watchdog("a_run_on_wgpu_starts_from_the_cpu_weights");
    let start = Instant::now();
    let config = run_config(RunKind::Teacher, Precision::F32);
    let cpu = Device::flex();
    let (a, b) = (logits_of(&config, &cpu), logits_of(&config, &gpu));
    let first = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(first < 1e-5, "first logits differ by {first}");
    // The fused kernels are flex-only: on wgpu the model already runs the burn-op composites,
    // so turning the kernels off changes no bit there.
    let composite = pdsweep::kernels::composite_only(|| logits_of(&config, &gpu));
    assert_eq!(b, composite, "wgpu took a CPU kernel");

    let data = data(&config);
    let on_cpu = curve(&config, &data, (&cpu, Backend::Cpu), &mut NextToken);
    let on_gpu = curve(&config, &data, (&gpu, Backend::Wgpu), &mut NextToken);
    let gap = worst(&on_cpu, &on_gpu);
    eprintln!(
        "cpu {on_cpu:?}\nwgpu {on_gpu:?}\nfirst logits within {first:.1e}, losses within {gap:.1e}; {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(gap < 1e-4, "the loss curves differ by up to {gap}");
    assert!(on_cpu.0.last() < on_cpu.0.first(), "it learns: {on_cpu:?}");

    // gradient accumulation on the GPU path: 16 rows as 4 micro-batches of 4 step as the
    // whole batch does
    let mut micro = config.clone();
    if let Some(t) = micro.train.as_mut() {
        t.micro_batch_seqs = Some(4);
    }
    let accumulated = curve(&micro, &data, (&gpu, Backend::Wgpu), &mut NextToken);
    let apart = worst(&on_gpu, &accumulated);
    eprintln!("accumulated on wgpu {accumulated:?}: within {apart:.1e} of the whole batch");
    assert!(
        apart < 1e-4,
        "accumulation differs from the whole batch by {apart}"
    );
}

/// f16 on the GPU path tracks f32 (loss scaling on, parameters f32; compared with the CPU's f32
/// run, which the first test shows wgpu's f32 run follows to 1e-6); bf16, which burn 0.22's
/// wgpu backend cannot compute in, is refused with a message naming the key and the way out.
#[test]
fn f16_on_wgpu_tracks_f32_and_bf16_is_refused() {
    let Some(gpu) = wgpu_or_skip("f16_on_wgpu_tracks_f32_and_bf16_is_refused") else {
        return;
    };
    let _turn = take_turn();
    let _limit = watchdog("f16_on_wgpu_tracks_f32_and_bf16_is_refused");
    let start = Instant::now();
    let f32_config = run_config(RunKind::Teacher, Precision::F32);
    let data = data(&f32_config);
    let full = curve(
        &f32_config,
        &data,
        (&Device::flex(), Backend::Cpu),
        &mut NextToken,
    );
    let half = curve(
        &run_config(RunKind::Teacher, Precision::F16),
        &data,
        (&gpu, Backend::Wgpu),
        &mut NextToken,
    );
    let worst = worst(&full, &half);
    eprintln!(
        "f32 {full:?}\nf16 {half:?}\nwithin {worst:.1e}; {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(worst < 0.03, "f16 strays from f32 by {worst}");

    if gpu.supports_dtype(burn::tensor::FloatDType::BF16) {
        return; // a future burn or driver may compute in bf16; then it simply trains
    }
    let bf16 = run_config(RunKind::Teacher, Precision::Bf16);
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let path = dir.path().join("t.ckpt");
    let err = train(
        &job(&bf16, &data, &gpu, Backend::Wgpu, &path, &stop),
        &mut NextToken,
        &mut |_| {},
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("`[train] precision = \"bf16\"`") && err.contains("hint:"),
        "{err}"
    );
}

/// Runs trained as one stack on wgpu (a baseline and an online student whose teacher
/// truncates on the device) follow the same runs trained alone on wgpu.
#[test]
fn runs_stacked_on_wgpu_follow_their_runs_alone() {
    let Some(gpu) = wgpu_or_skip("runs_stacked_on_wgpu_follow_their_runs_alone") else {
        return;
    };
    let _turn = take_turn();
    let _limit = watchdog("runs_stacked_on_wgpu_follow_their_runs_alone");
    let start = Instant::now();
    let teacher_config = run_config(RunKind::Teacher, Precision::F32);
    let teacher = teacher_config.init_model(&gpu);
    let baseline = run_config(RunKind::Baseline, Precision::F32);
    let student = {
        let text = SWEEP.replace("BACKEND", "cpu");
        let sweep = Sweep::parse(Path::new("gpu.toml"), text).unwrap();
        let plan = Plan::build(&sweep, &PlanOptions::default()).unwrap();
        plan.runs
            .into_iter()
            .find(|r| r.kind() == RunKind::Student && r.name.ends_with("online"))
            .unwrap()
            .config
    };
    let (base_data, student_data) = (data(&baseline), data(&student));
    let distill = || {
        student
            .distill
            .as_ref()
            .unwrap()
            .objective(TeacherSource::Online {
                teacher: &teacher,
                device: &gpu,
                compute: burn::tensor::FloatDType::F32,
                truncate_on: TruncateOn::Device,
            })
    };
    let on = (&gpu, Backend::Wgpu);
    let alone = [
        curve(&baseline, &base_data, on, &mut NextToken),
        curve(&student, &student_data, on, &mut distill()),
    ];

    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let paths = [dir.path().join("b.ckpt"), dir.path().join("s.ckpt")];
    let (mut next_token, mut online) = (NextToken, distill());
    let members = vec![
        StackMember {
            job: job(&baseline, &base_data, &gpu, Backend::Wgpu, &paths[0], &stop),
            objective: &mut next_token,
        },
        StackMember {
            job: job(
                &student,
                &student_data,
                &gpu,
                Backend::Wgpu,
                &paths[1],
                &stop,
            ),
            objective: &mut online,
        },
    ];
    let mut losses = [Vec::new(), Vec::new()];
    let outcomes = train_stack(members, &mut |k, e| {
        if let TrainEvent::Step { loss, .. } = e {
            losses[k].push(loss);
        }
    });
    for (k, (outcome, want)) in outcomes.into_iter().zip(&alone).enumerate() {
        let got = (losses[k].clone(), outcome.unwrap().val_loss);
        let worst = worst(want, &got);
        eprintln!(
            "member {k}: alone {want:?}\n          stacked {got:?}\n          within {worst:.1e}"
        );
        assert!(worst < 1e-4, "member {k} stacked strays by {worst}");
    }
    eprintln!("{:.1} s", start.elapsed().as_secs_f64());
}

/// `pdsweep ARGS` in `dir`, killed (and the test failed) past [`LIMIT_S`].
fn pdsweep_limited(dir: &Path, args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pdsweep"))
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(LIMIT_S) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`pdsweep {}` still running after {LIMIT_S} s",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "`pdsweep {}`: {err}", args.join(" "));
}

/// Runs the test sweep through the binary on `backend` (`--devices 0` on wgpu, every run
/// alone); returns the held-out loss of every run by name, and the folder.
fn sweep_losses(backend: &str) -> (Vec<(String, f64)>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("gpu.toml"),
        SWEEP.replace("BACKEND", backend),
    )
    .unwrap();
    let mut args = vec!["run", "gpu.toml", "--stack", "off"];
    if backend == "wgpu" {
        args.extend(["--devices", "0"]);
    }
    pdsweep_limited(tmp.path(), &args);
    let db = SweepDb::open(&tmp.path().join("results/gpu/sweep.db")).unwrap();
    let mut losses = Vec::new();
    for run in db.runs().unwrap() {
        assert_eq!(run.state, RunState::Done, "{backend}: {}", run.name);
        losses.push((run.name.clone(), db.result(&run.id).unwrap().unwrap().0));
    }
    losses.sort_by(|a, b| a.0.cmp(&b.0));
    (losses, tmp)
}

/// A logit pass, an offline and an online student and a baseline run end to end on wgpu
/// through `pdsweep run --devices 0`, truncating on the device, record the device and the
/// precision, and end where the same sweep ends on the CPU.
#[test]
fn a_tiny_sweep_runs_end_to_end_on_wgpu_with_devices_0_like_on_the_cpu() {
    if wgpu_or_skip("a_tiny_sweep_runs_end_to_end_on_wgpu").is_none() {
        return;
    }
    let _turn = take_turn();
    let start = Instant::now();
    let (gpu, tmp) = sweep_losses("wgpu");
    let (cpu, _cpu_tmp) = sweep_losses("cpu");
    assert_eq!(gpu.len(), 5, "{gpu:?}"); // teacher, logits, two students, baseline
    for ((name, g), (_, c)) in gpu.iter().zip(&cpu) {
        eprintln!("{name}: wgpu {g:.6} cpu {c:.6}");
        assert!((g - c).abs() < 1e-3, "{name}: wgpu {g} vs cpu {c}");
    }
    let conn = rusqlite::Connection::open(tmp.path().join("results/gpu/sweep.db")).unwrap();
    let (on, device, precision): (String, String, String) = conn
        .query_row(
            "SELECT json_extract(extra_json, '$.truncated_on'), json_extract(extra_json, '$.device'),
                    json_extract(extra_json, '$.precision')
             FROM results JOIN runs ON runs.id = results.run_id WHERE runs.kind = 'logits'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((on.as_str(), precision.as_str()), ("device", "f32"));
    assert!(!device.is_empty() && device != "cpu", "{device}");
    eprintln!("{:.1} s", start.elapsed().as_secs_f64());
}

/// Random tracked tensors on `device` for the attention tests: `[batch, seq, heads·hd]` for
/// q and `[batch, seq, kv_heads·hd]` for k and v, drawn on the host.
fn attention_inputs(
    device: &Device,
    [batch, seq, heads, kv_heads, hd]: [usize; 5],
) -> Vec<Tensor<3>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut draw = |width: usize| {
        let values: Vec<f32> = (0..batch * seq * width)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect();
        Tensor::<3>::from_data(TensorData::new(values, [batch, seq, width]), device).require_grad()
    };
    vec![draw(heads * hd), draw(kv_heads * hd), draw(kv_heads * hd)]
}

/// Rotary tables `[seq, hd]` as the model builds them.
fn rope_tables(device: &Device, seq: usize, hd: usize) -> (Tensor<2>, Tensor<2>) {
    let half = hd / 2;
    let angle = |t: usize, i: usize| t as f32 / 10000f32.powf((i % half) as f32 / half as f32);
    let table = |f: fn(f32) -> f32| {
        let values: Vec<f32> = (0..seq * hd).map(|j| f(angle(j / hd, j % hd))).collect();
        Tensor::<2>::from_data(TensorData::new(values, [seq, hd]), device)
    };
    (table(f32::cos), table(f32::sin))
}

/// Bytes the device holds in live allocations, after every queued kernel ran.
fn bytes_in_use(device: &Device) -> u64 {
    device.sync().expect("the device runs its queue");
    device
        .memory_pool_usage()
        .expect("wgpu reports its memory pools")
        .bytes_in_use
}

#[test]
fn chunked_attention_on_wgpu_equals_the_fallback_and_keeps_memory_linear_in_context() {
    let Some(gpu) = wgpu_or_skip("chunked_attention_on_wgpu") else {
        return;
    };
    let _turn = take_turn();
    let _limit = watchdog("chunked_attention_on_wgpu");
    let gpu = gpu.autodiff();
    let start = Instant::now();
    let chunked = |x: &[Tensor<3>], rope: &(Tensor<2>, Tensor<2>), heads, kv_heads, chunk| {
        pdsweep::kernels::chunked_causal_attention(
            x[0].clone(),
            x[1].clone(),
            x[2].clone(),
            rope.0.clone(),
            rope.1.clone(),
            heads,
            kv_heads,
            chunk,
        )
    };
    let fallback = |x: &[Tensor<3>], rope: &(Tensor<2>, Tensor<2>), heads, kv_heads| {
        pdsweep::kernels::composite::causal_attention(
            x[0].clone(),
            x[1].clone(),
            x[2].clone(),
            rope.0.clone(),
            rope.1.clone(),
            heads,
            kv_heads,
        )
    };

    // values and gradients: 4 query heads on 2 key/value heads, chunks of 16 over 40 positions
    let rope = rope_tables(&gpu, 40, 8);
    let mut results = Vec::new();
    for use_chunks in [true, false] {
        let x = attention_inputs(&gpu, [2, 40, 4, 2, 8]);
        let out = if use_chunks {
            chunked(&x, &rope, 4, 2, 16)
        } else {
            fallback(&x, &rope, 4, 2)
        };
        let weights = out.clone().sin();
        let grads = (out.clone() * weights).sum().backward();
        let mut all = vec![out.into_data().try_to_vec::<f32>().unwrap()];
        for t in &x {
            all.push(
                t.grad(&grads)
                    .unwrap()
                    .into_data()
                    .try_to_vec::<f32>()
                    .unwrap(),
            );
        }
        results.push(all);
    }
    for (i, (a, b)) in results[0].iter().zip(&results[1]).enumerate() {
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
            .fold(0f32, f32::max);
        let what = ["output", "∂q", "∂k", "∂v"][i];
        assert!(
            worst < 1e-4,
            "{what} differs from the fallback's by {worst}"
        );
    }

    // memory kept for the backward pass after the forward pass, at 3 context lengths
    let kept = |seq: usize, use_chunks: bool| {
        let rope = rope_tables(&gpu, seq, 16);
        let x = attention_inputs(&gpu, [1, seq, 4, 4, 16]);
        let before = bytes_in_use(&gpu);
        let out = if use_chunks {
            chunked(&x, &rope, 4, 4, 64)
        } else {
            fallback(&x, &rope, 4, 4)
        };
        let after = bytes_in_use(&gpu);
        drop(out);
        after.saturating_sub(before)
    };
    // The first call at a shape also leaves the memory pools' own bookkeeping behind (about
    // 0.1 MB on lavapipe), so each variant is warmed up once, and the bound is on the last
    // doubling and on the whole 4× (linear: 2× and 4×; quadratic: 4× and 16×).
    let seqs = [512, 1024, 2048];
    let measure = |use_chunks: bool| -> Vec<u64> {
        kept(seqs[0], use_chunks);
        seqs.iter().map(|&s| kept(s, use_chunks)).collect()
    };
    let chunked_kept = measure(true);
    let fallback_kept = measure(false);
    let growth = |v: &[u64], from: usize| v[2] as f64 / v[from].max(1) as f64;
    eprintln!(
        "bytes kept after the forward pass at context {seqs:?}: chunked {chunked_kept:?} ({:.2}× for 2× the context, {:.2}× for 4×), fallback {fallback_kept:?} ({:.2}×, {:.2}×); {:.1} s",
        growth(&chunked_kept, 1),
        growth(&chunked_kept, 0),
        growth(&fallback_kept, 1),
        growth(&fallback_kept, 0),
        start.elapsed().as_secs_f64()
    );
    assert!(
        growth(&chunked_kept, 1) < 2.6 && growth(&chunked_kept, 0) < 5.5,
        "chunked attention keeps {chunked_kept:?} bytes at contexts {seqs:?}: not linear"
    );
    assert!(
        growth(&fallback_kept, 1) > 3.2,
        "the fallback was expected to keep quadratic memory: {fallback_kept:?}"
    );
}
