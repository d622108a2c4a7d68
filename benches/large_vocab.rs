//! Benchmark: distillation with a real tokenizer's vocabulary (default V = 49,152, SmolLM's,
//! and k = 64): the logit store's bytes per kept logit and per token against the plan's
//! prediction, truncation, encode and decode speed, the logit pass (`logits_run::write_store`,
//! teacher forward + top-k + store) in positions/s for a small teacher and a SmolLM-135M-shaped
//! one, and the cost of the sparse distillation loss next to plain cross-entropy (forward and
//! backward) over the full vocabulary; then the fused chunked head against the unfused one
//! (head product + cross-entropy over 1,024 positions at d 128, and a whole distillation step
//! of a d 128 × 4 student at context 256, 0.1·CE + 0.9·KL over top-32 targets), with the peak
//! resident memory of each; the cross-tokenizer head (ULD and GOLD over units of 1–3 rows,
//! width 32, k 32) next to the fused head with a top-32 KL term; and the logit pass of a
//! released teacher (SmolLM2-135M, when `PDSWEEP_SMOLLM2` names its converted folder:
//! `benches/smollm2.py`).
//! `benches/compare_large_vocab.sh` runs this next to PyTorch eager on the same shapes.
//!
//! `cargo bench --bench large_vocab [-- VOCAB K [SECTIONS]]`, SECTIONS a comma list of
//! `store,pass,losses,head,cross,step,released` (default all)

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Distribution, FloatDType, Int, Tensor, TensorData};
use pdsweep::distill::logits_run::{PassDevice, expected_header, write_store};
use pdsweep::distill::store::logit_bytes_per_token;
use pdsweep::distill::store::{Layout, decode_block, encode_block};
use pdsweep::distill::{Kept, TruncateOn, distill_loss, sparse_targets, truncate};
use pdsweep::kernels::cross_reference::Example;
use pdsweep::kernels::{self, CrossDistillation, Distillation, HeadWeight};
use pdsweep::model::{LanguageModel, ModelShape, TransformerConfig};
use pdsweep::plan::{Plan, PlanOptions, RunKind};
use pdsweep::spec::{CrossTokenizer, LossKind, Sweep, TeacherPrecision, TopK};
use pdsweep::train::cross_entropy;

/// Teacher-like logits: a few strong candidates over a Zipf-ish background, seeded.
fn logits(positions: usize, vocab: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) as f32
    };
    (0..positions * vocab)
        .map(|i| 6.0 * next() - 2.0 * (((i % vocab) + 1) as f32).ln() * next())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median seconds of `repeats` calls of `f`.
fn time(repeats: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..repeats)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn store_codec(vocab: usize, k: u64) {
    let positions = 512;
    let z = logits(positions, vocab, 7);
    let mut kept: Vec<Kept> = Vec::new();
    let truncate_s = time(3, || {
        kept = z
            .chunks(vocab)
            .map(|z| truncate(z, 1.0, TopK::Keep(k)))
            .collect();
    });
    let mut bytes = Vec::new();
    let encode_s = time(5, || {
        bytes = encode_block(&kept, &Layout::top_k(vocab as u64, k))
    });
    let mut decoded = Vec::new();
    let decode_s = time(5, || {
        decoded = decode_block(&bytes, positions, &Layout::top_k(vocab as u64, k)).expect("decodes")
    });
    assert_eq!(decoded.len(), positions);
    assert!(kept.iter().zip(&decoded).all(|(a, b)| a.ids == b.ids));
    let per_token = bytes.len() as f64 / positions as f64;
    println!("store codec: vocab {vocab}, top-k {k}, {positions} positions");
    println!(
        "  bytes per kept logit     {:.3}  (⌈log2 V⌉ = {} bits of id + 8 bits of value)",
        per_token / k as f64,
        pdsweep::distill::store::index_bits(vocab as u64)
    );
    println!(
        "  bytes per token          {per_token:.1}  (plan predicts {})",
        logit_bytes_per_token(vocab as u64, k)
    );
    println!(
        "  truncate (top-{k} of {vocab})  {:.0} positions/s",
        positions as f64 / truncate_s
    );
    println!(
        "  encode                   {:.0} positions/s",
        positions as f64 / encode_s
    );
    println!(
        "  decode                   {:.0} positions/s",
        positions as f64 / decode_s
    );
}

/// A sweep whose logit pass runs `teacher` (explicit shape keys) at this vocabulary.
fn sweep(vocab: usize, k: u64, teacher: &str, context: usize, tokens: &str) -> String {
    format!(
        r#"name = "bench"
[corpus]
vocab_size = {vocab}
val_tokens = "4K"
[model]
context = {context}
[[teachers.models]]
name = "t"
{teacher}
tokens = "1M"
[students]
sizes = ["200K"]
tokens = ["{tokens}"]
baseline = false
[distill]
top_k = {k}
[train]
batch_tokens = "{batch}"
"#,
        batch = 8 * context
    )
}

fn logit_pass(vocab: usize, k: u64, label: &str, teacher: &str, context: usize, tokens: &str) {
    let text = sweep(vocab, k, teacher, context, tokens);
    let sweep = Sweep::parse(std::path::Path::new("bench.toml"), text).expect("sweep");
    let plan = Plan::build(&sweep, &PlanOptions::default()).expect("plan");
    let logits_run = plan
        .runs
        .iter()
        .find(|r| r.kind() == RunKind::Logits)
        .expect("a logit pass");
    let teacher_run = plan
        .runs
        .iter()
        .find(|r| r.kind() == RunKind::Teacher)
        .expect("a teacher");
    let config = &logits_run.config;
    let tmp = tempfile::tempdir().expect("tempdir");
    let data =
        pdsweep::data::prepare(&config.data, tmp.path(), tmp.path(), config.tokens).expect("data");
    let device = Device::flex();
    let teacher = teacher_run.config.init_model(&device);
    let spec = config.store_spec().expect("a logit pass's store");
    let header = expected_header(logits_run.id.as_str(), &spec, "bench", &data.info.key, None);
    let needed = pdsweep::distill::logits_run::windows_needed(spec.reads, &data, spec.data.context)
        .expect("windows");
    let stop = AtomicBool::new(false);
    let pass = PassDevice {
        teacher: &teacher,
        device: &device,
        truncate_on: TruncateOn::Host,
    };
    let summary = write_store(
        &spec,
        &header,
        &pass,
        &data,
        &needed,
        None,
        &tmp.path().join("store"),
        &stop,
        &mut |_, _| {},
    )
    .expect("store");
    println!(
        "logit pass, {label} teacher ({} non-embedding parameters), context {context}, {} positions:",
        teacher_run.params.non_embedding, summary.positions
    );
    println!(
        "  {:.0} positions/s; store {:.1} bytes/token, {:.3} bytes per kept logit (plan predicted {} bytes, wrote {}: {:+.2}%)",
        summary.tokens_per_s,
        summary.bytes as f64 / summary.positions as f64,
        summary.bytes as f64 / summary.entries as f64,
        logits_run.disk_bytes,
        summary.bytes,
        100.0 * (summary.bytes as f64 / logits_run.disk_bytes as f64 - 1.0)
    );
}

fn losses(vocab: usize, k: u64) {
    let positions = 1024;
    let device = Device::flex().autodiff();
    let z = logits(positions, vocab, 99);
    let teacher = logits(positions, vocab, 5);
    let kept: Vec<Kept> = teacher
        .chunks(vocab)
        .map(|z| truncate(z, 1.0, TopK::Keep(k)))
        .collect();
    let targets: Vec<i64> = (0..positions as i64)
        .map(|i| i * 7919 % vocab as i64)
        .collect();
    let student = || {
        Tensor::<2>::from_data(TensorData::new(z.clone(), [positions, vocab]), &device)
            .require_grad()
    };
    let ce_s = time(5, || {
        let t =
            Tensor::<2, Int>::from_data(TensorData::new(targets.clone(), [1, positions]), &device);
        let logits = student();
        let loss = cross_entropy(logits.clone().reshape([1, positions, vocab]), t).mean();
        let _ = loss.backward();
    });
    let kd_s = time(5, || {
        let t =
            Tensor::<2, Int>::from_data(TensorData::new(targets.clone(), [1, positions]), &device);
        let logits = student();
        let sparse = sparse_targets(&kept, &device);
        let ce = cross_entropy(logits.clone().reshape([1, positions, vocab]), t).mean();
        let kd = distill_loss(LossKind::Kl, logits, &sparse, 1.0);
        let _ = (ce.mul_scalar(0.1) + kd.mul_scalar(0.9)).backward();
    });
    println!(
        "losses over the full vocabulary ({positions} positions × {vocab}), forward + backward:"
    );
    println!(
        "  cross-entropy            {:.1} ms ({:.0} positions/s)",
        ce_s * 1e3,
        positions as f64 / ce_s
    );
    println!(
        "  0.1·CE + 0.9·KL (top-{k})  {:.1} ms ({:.0} positions/s, {:.2}× cross-entropy)",
        kd_s * 1e3,
        positions as f64 / kd_s,
        kd_s / ce_s
    );
}

/// Resets the kernel's peak-resident-memory mark (Linux; elsewhere a no-op).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident memory since the last [`reset_peak`], in MiB.
fn peak_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// Cross-entropy forward + backward of h · Wᵀ over `positions` positions (W tied, `[vocab,
/// d]`): the fused chunked head against the unfused one (whole logits, then the fused
/// cross-entropy kernel), with the peak memory of each.
fn head(vocab: usize, d: usize, positions: usize) {
    let device = Device::flex().autodiff();
    device.seed(3);
    let h0 = Tensor::<2>::random([positions, d], Distribution::Normal(0.0, 1.0), &device);
    let w0 = Tensor::<2>::random([vocab, d], Distribution::Normal(0.0, 0.3), &device);
    let t: Vec<i64> = (0..positions as i64)
        .map(|i| i * 7919 % vocab as i64)
        .collect();
    let t = Tensor::<1, Int>::from_data(TensorData::new(t, [positions]), &device);
    let n = positions as f64;
    let chunk = kernels::default_head_chunk(vocab);
    println!("head + cross-entropy, {positions} positions × {vocab}, d {d}, forward + backward:");
    // unfused (the whole logits), then the fused head at a quarter, once and four times the
    // default chunk: its peak grows with the chunk, not with positions × V
    for chunk in [0, chunk / 4, chunk, 4 * chunk] {
        let once = || {
            let h = h0.clone().detach().require_grad();
            let w = w0.clone().detach().require_grad();
            let loss = if chunk > 0 {
                let head = HeadWeight {
                    weight: w,
                    tied: true,
                    softcap: None,
                };
                kernels::head_loss(h, &head, t.clone(), None, (1.0 / n, 0.0), chunk)
            } else {
                kernels::cross_entropy(kernels::linear(h, w.transpose()), t.clone()).mean()
            };
            let _ = loss.backward();
        };
        once();
        reset_peak();
        let s = time(5, once);
        let label = if chunk > 0 {
            format!("fused, chunks of {chunk}")
        } else {
            "unfused (before)".into()
        };
        println!(
            "  {label:<28} {:8.1} ms   peak {:.0} MiB",
            s * 1e3,
            peak_mib()
        );
    }
}

/// The fused head with a cross-tokenizer term (ULD and GOLD, units of 1–3 rows, teacher width
/// 32, k 32), forward + backward over `positions` positions at d `d` (W tied), against the
/// fused head with 0.1·CE + 0.9·KL over top-32 targets at the same shapes.
fn cross(vocab: usize, d: usize, positions: usize) {
    let device = Device::flex().autodiff();
    device.seed(5);
    let (width, k) = (32, 32);
    let h0 = Tensor::<2>::random([positions, d], Distribution::Normal(0.0, 1.0), &device);
    let w0 = Tensor::<2>::random([vocab, d], Distribution::Normal(0.0, 0.3), &device);
    let mut span = Vec::with_capacity(positions);
    for len in [1usize, 2, 3].into_iter().cycle() {
        let len = len.min(positions - span.len());
        span.push(len as i32);
        span.extend(std::iter::repeat_n(0, len - 1));
        if span.len() == positions {
            break;
        }
    }
    let ex = Example::new(&span, vocab, width, 7);
    let ints = |v: Vec<i64>, shape: Vec<usize>| {
        Tensor::<2, Int>::from_data(TensorData::new(v, shape), &device)
    };
    let floats = |v: Vec<f64>, shape: Vec<usize>| {
        let v: Vec<f32> = v.into_iter().map(|x| x as f32).collect();
        Tensor::<2>::from_data(TensorData::new(v, shape), &device)
    };
    let targets: Vec<i64> = ex.targets.iter().map(|&t| t as i64).collect();
    let t = Tensor::<1, Int>::from_data(TensorData::new(targets, [positions]), &device);
    let flags: Vec<f32> = ex
        .student_matched
        .iter()
        .map(|&m| f32::from(u8::from(m)))
        .collect();
    let flags = Tensor::<1>::from_data(TensorData::new(flags, [vocab]), &device);
    let span: Vec<i64> = span.iter().map(|&v| i64::from(v)).collect();
    let span = Tensor::<1, Int>::from_data(TensorData::new(span, [positions]), &device);
    let cross_of = |kind| CrossDistillation {
        span: span.clone(),
        log_t: floats(ex.log_t.clone(), vec![positions, width]),
        matched: ints(ex.matched.clone(), vec![positions, width]),
        mask: floats(ex.mask.clone(), vec![positions, width]),
        student_matched: flags.clone(),
        kind,
        tau: 1.0,
        top_k: k,
        gold_weights: (1.0, 1.0),
    };
    let kl = Distillation {
        ids: ints(
            (0..positions * width)
                .map(|i| (i * 7919 % vocab) as i64)
                .collect(),
            vec![positions, width],
        ),
        log_probs: floats(ex.log_t.clone(), vec![positions, width]),
        mask: floats(ex.mask.clone(), vec![positions, width]),
        kind: LossKind::Kl,
        tau: 1.0,
    };
    let n = positions as f64;
    let chunk = kernels::default_head_chunk(vocab);
    println!(
        "cross-tokenizer head, {positions} positions × {vocab}, d {d}, width {width}, k {k}, forward + backward:"
    );
    let mut base = f64::NAN;
    for label in ["fused head, top-32 KL", "fused ULD", "fused GOLD"] {
        let cross = match label {
            "fused ULD" => Some(cross_of(CrossTokenizer::Uld)),
            "fused GOLD" => Some(cross_of(CrossTokenizer::Gold)),
            _ => None,
        };
        let once = || {
            let h = h0.clone().detach().require_grad();
            let head = HeadWeight {
                weight: w0.clone().detach().require_grad(),
                tied: true,
                softcap: None,
            };
            let weights = (0.1 / n, 0.9 / n);
            let loss = match &cross {
                Some(c) => kernels::cross_head_loss(h, &head, t.clone(), c, weights, chunk),
                None => kernels::head_loss(h, &head, t.clone(), Some(&kl), weights, chunk),
            };
            let _ = loss.backward();
        };
        once();
        let s = time(5, once);
        if cross.is_none() {
            base = s;
        }
        println!(
            "  {label:<24} {:8.1} ms   {:.2}× the KL head",
            s * 1e3,
            s / base
        );
    }
}

/// One distillation step (forward, 0.1·CE + 0.9·KL over top-32 targets, backward, AdamW) of a
/// d × 4 student at context 256 with 8 sequences, fused and unfused.
fn step(vocab: usize, d: u64, k: u64) {
    let (context, rows) = (256usize, 8usize);
    let n = context * rows;
    let shape = ModelShape {
        d_model: d,
        n_layers: 4,
        n_heads: 4,
        n_kv_heads: 4,
        d_ff: (8 * d / 3).div_ceil(32) * 32,
        vocab: vocab as u64,
        tie_embeddings: true,
    };
    let teacher = logits(n, vocab, 5);
    let kept: Vec<Kept> = teacher
        .chunks(vocab)
        .map(|z| truncate(z, 1.0, TopK::Keep(k)))
        .collect();
    drop(teacher);
    let tokens: Vec<i64> = (0..rows * (context + 1))
        .map(|i| (i as i64 * 7919 + 13) % vocab as i64)
        .collect();
    let x: Vec<i64> = tokens
        .chunks(context + 1)
        .flat_map(|c| c[..context].to_vec())
        .collect();
    let y: Vec<i64> = tokens
        .chunks(context + 1)
        .flat_map(|c| c[1..].to_vec())
        .collect();
    println!(
        "distillation step, d {d} × 4 layers, V {vocab}, {n} tokens, 0.1·CE + 0.9·KL over top-{k}:"
    );
    for fused in [false, true] {
        let device = Device::flex().autodiff();
        device.seed(1);
        let mut model = TransformerConfig::new(shape, context).init(&device);
        let mut optim = AdamWConfig::new().with_weight_decay(0.1).init();
        let sparse = sparse_targets(&kept, &device);
        let xt = Tensor::<2, Int>::from_data(TensorData::new(x.clone(), [rows, context]), &device);
        let yt = Tensor::<2, Int>::from_data(TensorData::new(y.clone(), [rows, context]), &device);
        let chunk = kernels::default_head_chunk(vocab);
        let mut once = || {
            let loss = if fused {
                let head = pdsweep::train::head_input(&model, xt.clone(), FloatDType::F32, chunk);
                let distill = Distillation {
                    ids: sparse.ids.clone(),
                    log_probs: sparse.log_probs.clone(),
                    mask: sparse.mask.clone(),
                    kind: LossKind::Kl,
                    tau: 1.0,
                };
                let w = (0.1 / n as f64, 0.9 / n as f64);
                kernels::head_loss(
                    head.hidden,
                    &head.weight,
                    yt.clone().reshape([n]),
                    Some(&distill),
                    w,
                    chunk,
                )
            } else {
                let z = model.forward(xt.clone());
                let ce = cross_entropy(z.clone(), yt.clone()).mean();
                let kd = distill_loss(LossKind::Kl, z.reshape([n, vocab]), &sparse, 1.0);
                ce.mul_scalar(0.1) + kd.mul_scalar(0.9)
            };
            let _ = loss.clone().into_scalar::<f32>();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(1e-3, model.clone(), grads);
        };
        once();
        once();
        reset_peak();
        let s = time(5, once);
        let label = if fused {
            "fused chunked head"
        } else {
            "unfused (before)"
        };
        println!(
            "  {label:<28} {:8.0} tokens/s   median {:.0} ms   peak {:.0} MiB",
            n as f64 / s,
            s * 1e3,
            peak_mib()
        );
    }
}

/// The logit pass of the converted released models: SmolLM2-135M (`PDSWEEP_SMOLLM2`, a plain
/// LLaMA on pdsweep's transformer) and Gemma-3-270M (`PDSWEEP_GEMMA3`, V = 262,144, on the
/// released decoder): forward of 16 × 256 positions and top-k truncation, through the same
/// function a logit pass runs.
fn released(k: u64) {
    for (name, var, script) in [
        ("SmolLM2-135M", "PDSWEEP_SMOLLM2", "smollm2.py"),
        ("Gemma-3-270M", "PDSWEEP_GEMMA3", "gemma3.py"),
    ] {
        match std::env::var_os(var).map(std::path::PathBuf::from) {
            Some(dir) => released_pass(k, name, &dir),
            None => {
                println!("released teacher {name}: set {var} to the folder benches/{script} writes")
            }
        }
    }
}

fn released_pass(k: u64, name: &str, dir: &std::path::Path) {
    let pretrained = pdsweep::hf::PretrainedModel::read(dir).expect("a model folder");
    let llama = pretrained.config.as_llama();
    let config = TransformerConfig {
        rope_theta: llama.as_ref().map_or(10_000.0, |l| l.rope_theta),
        norm_eps: llama.as_ref().map_or(1e-5, |l| l.norm_eps),
        ..TransformerConfig::new(pretrained.shape(), 256)
    };
    let device = Device::flex();
    let loaded =
        pdsweep::hf::load_model(dir, &config, &pretrained.config_sha256, &device).expect("weights");
    for precision in [TeacherPrecision::F32, TeacherPrecision::Bf16] {
        let teacher = loaded
            .clone()
            .in_precision(precision, FloatDType::F32, &device)
            .expect("a teacher in bf16");
        released_timed(
            k,
            &format!("{name}, {precision}"),
            dir,
            &pretrained,
            &teacher,
        );
    }
}

fn released_timed(
    k: u64,
    name: &str,
    dir: &std::path::Path,
    pretrained: &pdsweep::hf::PretrainedModel,
    teacher: &pdsweep::model::TeacherModel,
) {
    let device = Device::flex();
    let vocab = pretrained.shape().vocab as i64;
    let (rows, context) = (16usize, 256usize);
    let batch = pdsweep::data::Batch {
        inputs: (0..(rows * context) as i64)
            .map(|i| (i * 7919 + 13) % vocab)
            .collect(),
        targets: vec![0; rows * context],
        batch: rows,
        context,
        windows: (0..rows as u64).collect(),
    };
    let top = TopK::Keep(k);
    let _ = pdsweep::distill::teacher_support(teacher, &batch, &device, 1.0, top, TruncateOn::Host);
    reset_peak();
    let s = time(3, || {
        let _ =
            pdsweep::distill::teacher_support(teacher, &batch, &device, 1.0, top, TruncateOn::Host);
    });
    let peak = peak_mib();
    // where the time goes: the layers (hidden states), the head's products, the truncation
    let inputs = Tensor::<2, Int>::from_data(
        TensorData::new(batch.inputs.clone(), [rows, context]),
        &device,
    );
    let layers_s = time(3, || {
        let _ = teacher
            .hidden_in(inputs.clone(), FloatDType::F32)
            .into_data();
    });
    let hidden = teacher
        .hidden_in(inputs.clone(), FloatDType::F32)
        .reshape([rows * context, pretrained.shape().d_model as usize]);
    let head = teacher.head_weight(FloatDType::F32);
    let chunk = kernels::default_head_chunk(vocab as usize);
    let mut chunks = Vec::new();
    let head_s = time(3, || {
        chunks.clear();
        for first in (0..rows * context).step_by(chunk) {
            let m = chunk.min(rows * context - first);
            let z = kernels::head_logits(hidden.clone().narrow(0, first, m), &head);
            chunks.push(z.into_data().try_to_vec::<f32>().unwrap_or_default());
        }
    });
    let trunc_s = time(3, || {
        use rayon::prelude::*;
        for z in &chunks {
            let _: Vec<Kept> = z
                .par_chunks(vocab as usize)
                .map(|z| truncate(z, 1.0, top))
                .collect();
        }
    });
    println!(
        "logit pass, {name} ({}), {rows} × {context} positions, top-{k}:\n  {:8.0} positions/s   peak {:.0} MiB\n  of which layers {:.0} %, head products {:.0} %, truncation {:.0} % (timed apart: {:.2} s, {:.2} s, {:.2} s)",
        dir.display(),
        (rows * context) as f64 / s,
        peak,
        100.0 * layers_s / s,
        100.0 * head_s / s,
        100.0 * trunc_s / s,
        layers_s,
        head_s,
        trunc_s
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let vocab: usize = args.first().and_then(|v| v.parse().ok()).unwrap_or(49_152);
    let k: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(64);
    let sections = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "store,pass,losses,head,cross,step,released".into());
    let on = |s: &str| sections.split(',').any(|x| x == s);
    println!(
        "CPU vector extensions: {:?}; {} threads",
        kernels::isa(),
        rayon::current_num_threads()
    );
    if on("store") {
        store_codec(vocab, k);
    }
    if on("pass") {
        let small = "d_model = 128\nn_layers = 2\nn_heads = 4\nd_ff = 352";
        logit_pass(vocab, k, "small", small, 128, "32K");
        let smollm = "d_model = 576\nn_layers = 30\nn_heads = 9\nn_kv_heads = 3\nd_ff = 1536";
        logit_pass(vocab, k, "SmolLM-135M-shaped", smollm, 256, "4K");
    }
    if on("losses") {
        losses(vocab, k);
    }
    if on("head") {
        head(vocab, 128, 1024);
    }
    if on("cross") {
        cross(vocab, 128, 1024);
    }
    if on("step") {
        step(vocab, 128, 32);
    }
    if on("released") {
        released(32);
    }
}
