//! Benchmark: distillation with a real tokenizer's vocabulary (default V = 49,152, SmolLM's,
//! and k = 64): the logit store's bytes per kept logit and per token against the plan's
//! prediction, truncation, encode and decode speed, the logit pass (`logits_run::write_store`,
//! teacher forward + top-k + store) in positions/s for a small teacher and a SmolLM-135M-shaped
//! one, and the cost of the sparse distillation loss next to plain cross-entropy (forward and
//! backward) over the full vocabulary.
//!
//! `cargo bench --bench large_vocab [-- VOCAB K]`

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use burn::tensor::{Device, Int, Tensor, TensorData};
use pdsweep::distill::logits_run::{PassDevice, expected_header, write_store};
use pdsweep::distill::store::logit_bytes_per_token;
use pdsweep::distill::store::{decode_block, encode_block};
use pdsweep::distill::{Kept, TruncateOn, distill_loss, sparse_targets, truncate};
use pdsweep::plan::{Plan, PlanOptions, RunKind};
use pdsweep::spec::{LossKind, Sweep, TopK};
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
    let encode_s = time(5, || bytes = encode_block(&kept, vocab as u64, k));
    let mut decoded = Vec::new();
    let decode_s = time(5, || {
        decoded = decode_block(&bytes, positions, vocab as u64, k).expect("decodes")
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
    let header = expected_header(logits_run.id.as_str(), &spec, "bench", &data.info.key);
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

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let vocab: usize = args.first().and_then(|v| v.parse().ok()).unwrap_or(49_152);
    let k: u64 = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(64);
    store_codec(vocab, k);
    let small = "d_model = 128\nn_layers = 2\nn_heads = 4\nd_ff = 352";
    logit_pass(vocab, k, "small", small, 128, "32K");
    let smollm = "d_model = 576\nn_layers = 30\nn_heads = 9\nn_kv_heads = 3\nd_ff = 1536";
    logit_pass(vocab, k, "SmolLM-135M-shaped", smollm, 256, "4K");
    losses(vocab, k);
}
