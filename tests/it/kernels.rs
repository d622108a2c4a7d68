//! The fused CPU kernels against burn's own ops on the same flex device: every op's value and
//! the gradients of every input, then a whole model (loss and every parameter's gradient).

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use pdsweep::kernels::{self, composite, composite_only};
use pdsweep::model::ModelShape;
use pdsweep::model::TransformerConfig;
use pdsweep::spec::{CrossTokenizer, LossKind};

fn device() -> Device {
    let d = Device::flex();
    d.seed(7);
    d.autodiff()
}

fn random<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.5), device).require_grad()
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0f32, f32::max);
    assert!(worst <= tol, "{what}: worst difference {worst} > {tol}");
}

/// A head's loss and gradients of h and W against another's.
fn assert_head_close(what: &str, got: &HeadRun, want: &HeadRun) {
    assert_close(&format!("{what} loss"), &got.0, &want.0, 1e-5);
    assert_close(&format!("{what} ∂h"), &got.1, &want.1, 1e-4);
    assert_close(&format!("{what} ∂W"), &got.2, &want.2, 1e-4);
}

/// A head's loss and the gradients of h and W.
type HeadRun = (Vec<f32>, Vec<f32>, Vec<f32>);

/// Runs `op` fused and composed on clones of `inputs`; compares the outputs and the gradient
/// of Σ w·out with respect to every input.
fn compare<const D: usize, const O: usize>(
    what: &str,
    inputs: Vec<Tensor<D>>,
    op: impl Fn(Vec<Tensor<D>>) -> Tensor<O>,
) {
    compare_two(what, inputs, &op, |xs| composite_only(|| op(xs)));
}

/// Runs `op` and `reference` on clones of `inputs`; compares the outputs and the gradient of
/// Σ w·out with respect to every input.
fn compare_two<const D: usize, const O: usize>(
    what: &str,
    inputs: Vec<Tensor<D>>,
    op: impl Fn(Vec<Tensor<D>>) -> Tensor<O>,
    reference: impl Fn(Vec<Tensor<D>>) -> Tensor<O>,
) {
    let run = |f: &dyn Fn(Vec<Tensor<D>>) -> Tensor<O>| {
        let xs: Vec<Tensor<D>> = inputs
            .iter()
            .map(|t| Tensor::from_data(t.to_data(), &t.device()).require_grad())
            .collect();
        let out = f(xs.clone());
        let w = Tensor::<O>::from_data(
            TensorData::new(
                (0..out.shape().num_elements())
                    .map(|i| ((i as f32) * 0.37).sin())
                    .collect::<Vec<f32>>(),
                out.shape(),
            ),
            &out.device(),
        );
        let grads = (out.clone() * w).sum().backward();
        let g: Vec<Vec<f32>> = xs.iter().map(|x| values(x.grad(&grads).unwrap())).collect();
        (values(out), g)
    };
    let (out_f, g_f) = run(&op);
    let (out_c, g_c) = run(&reference);
    assert_close(&format!("{what} value"), &out_f, &out_c, 2e-5);
    for (i, (a, b)) in g_f.iter().zip(&g_c).enumerate() {
        assert_close(&format!("{what} gradient of input {i}"), a, b, 1e-4);
    }
}

#[test]
fn swiglu_and_rms_norm_match_burn() {
    let dev = device();
    compare(
        "swiglu",
        vec![random([3, 7, 40], &dev), random([3, 7, 40], &dev)],
        |x| kernels::swiglu(x[0].clone(), x[1].clone()),
    );
    let x = random([4, 9, 24], &dev);
    let gamma: Tensor<3> = random([1, 1, 24], &dev);
    compare("rms_norm", vec![x, gamma], |x| {
        kernels::rms_norm(x[0].clone(), x[1].clone().reshape([24]), 1e-5)
    });
}

#[test]
fn linear_matches_burn_with_a_plain_and_a_transposed_weight() {
    let dev = device();
    compare(
        "linear",
        vec![random([3, 50, 24], &dev), random([1, 24, 40], &dev)],
        |x| kernels::linear(x[0].clone(), x[1].clone().reshape([24, 40])),
    );
    compare(
        "linear (transposed weight)",
        vec![random([3, 50, 24], &dev), random([1, 40, 24], &dev)],
        |x| kernels::linear(x[0].clone(), x[1].clone().reshape([40, 24]).transpose()),
    );
}

#[test]
fn cross_entropy_matches_burn() {
    let dev = device();
    let targets: Vec<i64> = (0..50).map(|i| (i * 13 % 37) as i64).collect();
    let targets = Tensor::<1, Int>::from_data(TensorData::new(targets, [50]), &dev);
    compare("cross_entropy", vec![random([50, 37], &dev)], |x| {
        kernels::cross_entropy(x[0].clone(), targets.clone())
    });
}

#[test]
fn sparse_distillation_matches_burn_for_every_loss() {
    let dev = device();
    let (rows, vocab, width) = (30, 41, 6);
    let ids: Vec<i64> = (0..rows * width).map(|i| (i * 7 % vocab) as i64).collect();
    let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [rows, width]), &dev);
    let lp: Vec<f32> = (0..rows * width)
        .map(|i| -0.2 - (i % width) as f32 * 0.7)
        .collect();
    let lp = Tensor::<2>::from_data(TensorData::new(lp, [rows, width]), &dev);
    let mask: Vec<f32> = (0..rows * width)
        .map(|i| {
            if i % width >= 4 && i % 3 == 0 {
                0.0
            } else {
                1.0
            }
        })
        .collect();
    let mask = Tensor::<2>::from_data(TensorData::new(mask, [rows, width]), &dev);
    for kind in [
        LossKind::Kl,
        LossKind::CeSoft,
        LossKind::ReverseKl,
        LossKind::Mse,
    ] {
        for tau in [0.5, 1.0, 2.0] {
            compare(
                &format!("{kind:?} τ={tau}"),
                vec![random([rows, vocab], &dev)],
                |x| {
                    kernels::sparse_distill(
                        x[0].clone(),
                        ids.clone(),
                        lp.clone(),
                        mask.clone(),
                        kind,
                        tau,
                    )
                },
            );
        }
    }
}

fn rope(seq: usize, hd: usize, dev: &Device) -> (Tensor<2>, Tensor<2>) {
    let half = hd / 2;
    let (mut c, mut s) = (vec![], vec![]);
    for t in 0..seq {
        for j in 0..hd {
            let a = t as f64 * 10_000f64.powf(-2.0 * (j % half) as f64 / hd as f64);
            c.push(a.cos() as f32);
            s.push(a.sin() as f32);
        }
    }
    (
        Tensor::from_data(TensorData::new(c, [seq, hd]), dev),
        Tensor::from_data(TensorData::new(s, [seq, hd]), dev),
    )
}

#[test]
fn attention_matches_burn_with_and_without_grouped_heads() {
    let dev = device();
    for (heads, kv_heads, hd, seq) in [(2, 2, 8, 33), (4, 2, 6, 17), (1, 1, 16, 40)] {
        let (cos, sin) = rope(seq, hd, &dev);
        compare(
            &format!("attention {heads}/{kv_heads} heads"),
            vec![
                random([3, seq, heads * hd], &dev),
                random([3, seq, kv_heads * hd], &dev),
                random([3, seq, kv_heads * hd], &dev),
            ],
            |x| {
                kernels::causal_attention(
                    x[0].clone(),
                    x[1].clone(),
                    x[2].clone(),
                    cos.clone(),
                    sin.clone(),
                    heads,
                    kv_heads,
                )
            },
        );
    }
}

#[test]
fn chunked_attention_matches_burn_in_every_chunking_and_head_grouping() {
    // The memory-efficient attention the GPU backends train with, on flex: chunks that divide
    // the sequence, that do not, one chunk longer than it; grouped heads sharing a key/value
    // head (4 per 1) read in place. Reference: burn's attention with the heads repeated.
    let dev = device();
    for (heads, kv_heads, hd, seq, chunk) in [
        (2, 2, 8, 33, 8),
        (4, 2, 6, 17, 5),
        (4, 1, 8, 40, 16),
        (1, 1, 16, 40, 64),
    ] {
        let (cos, sin) = rope(seq, hd, &dev);
        let (c, s) = (cos.clone(), sin.clone());
        compare_two(
            &format!("chunked attention {heads}/{kv_heads} heads, chunk {chunk} of {seq}"),
            vec![
                random([3, seq, heads * hd], &dev),
                random([3, seq, kv_heads * hd], &dev),
                random([3, seq, kv_heads * hd], &dev),
            ],
            |x| {
                kernels::chunked_causal_attention(
                    x[0].clone(),
                    x[1].clone(),
                    x[2].clone(),
                    cos.clone(),
                    sin.clone(),
                    heads,
                    kv_heads,
                    chunk,
                )
            },
            |x| {
                composite::causal_attention(
                    x[0].clone(),
                    x[1].clone(),
                    x[2].clone(),
                    c.clone(),
                    s.clone(),
                    heads,
                    kv_heads,
                )
            },
        );
    }
}

#[test]
fn composite_ops_are_what_composite_only_runs() {
    // the switch really switches: composite_only gives the composite op's exact bits
    let dev = device();
    let x = random([5, 11], &dev);
    let t = Tensor::<1, Int>::from_data(TensorData::new(vec![1i64, 2, 3, 4, 5], [5]), &dev);
    let a = values(composite_only(|| {
        kernels::cross_entropy(x.clone(), t.clone())
    }));
    let b = values(composite::cross_entropy(x, t));
    assert_eq!(a, b);
}

/// Every parameter's gradient, in visiting order.
struct Grads<'a> {
    grads: &'a burn::tensor::Gradients,
    out: Vec<Vec<f32>>,
}

impl ModuleVisitor for Grads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(g) = param.val().grad(self.grads) {
            self.out.push(values(g));
        }
    }
}

/// The head's sparse support for `rows` positions: ids, log-probabilities and a mask with some
/// padding.
fn support(rows: usize, vocab: usize, width: usize, dev: &Device) -> [Tensor<2>; 2] {
    let lp: Vec<f32> = (0..rows * width)
        .map(|i| -0.2 - (i % width) as f32 * 0.7)
        .collect();
    let mask: Vec<f32> = (0..rows * width)
        .map(|i| {
            if i % width >= 3 && i % 4 == 0 {
                0.0
            } else {
                1.0
            }
        })
        .collect();
    let _ = vocab;
    [
        Tensor::from_data(TensorData::new(lp, [rows, width]), dev),
        Tensor::from_data(TensorData::new(mask, [rows, width]), dev),
    ]
}

/// The fused chunked head (the CPU kernel, and the composite chunked path every other backend
/// runs) against the unfused one: logits = h · W whole, then the cross-entropy and the sparse
/// distillation loss; the value and the gradients of h and W, for every loss, both weight
/// layouts and chunks that do not divide the positions.
#[test]
fn the_fused_chunked_head_matches_the_unfused_head_for_every_loss() {
    let dev = device();
    let (rows, d, vocab, width) = (37, 12, 53, 5);
    let ids: Vec<i64> = (0..rows * width).map(|i| (i * 7 % vocab) as i64).collect();
    let ids = Tensor::<2, Int>::from_data(TensorData::new(ids, [rows, width]), &dev);
    let [lp, mask] = support(rows, vocab, width, &dev);
    let targets: Vec<i64> = (0..rows).map(|r| (r * 11 % vocab) as i64).collect();
    let targets = Tensor::<1, Int>::from_data(TensorData::new(targets, [rows]), &dev);
    let h0 = random([rows, d], &dev);
    let w0 = random([d, vocab], &dev).mul_scalar(0.3);
    let (a, b) = (0.3 / rows as f64, 0.7 / rows as f64);
    for kind in [
        LossKind::Kl,
        LossKind::CeSoft,
        LossKind::ReverseKl,
        LossKind::Mse,
    ] {
        for tau in [1.0, 2.0] {
            for tied in [false, true] {
                let fresh =
                    |t: &Tensor<2>| Tensor::<2>::from_data(t.to_data(), &dev).require_grad();
                let distill = kernels::Distillation {
                    ids: ids.clone(),
                    log_probs: lp.clone(),
                    mask: mask.clone(),
                    kind,
                    tau,
                };
                let w_stored = if tied {
                    w0.clone().transpose()
                } else {
                    w0.clone()
                };
                let run = |how: &str| {
                    let (h, w) = (fresh(&h0), fresh(&w_stored));
                    let head = kernels::HeadWeight {
                        weight: w.clone(),
                        tied,
                        softcap: None,
                    };
                    let loss = match how {
                        "unfused" => {
                            let wt = if tied {
                                w.clone().transpose()
                            } else {
                                w.clone()
                            };
                            let z = kernels::linear(h.clone(), wt);
                            let ce = kernels::cross_entropy(z.clone(), targets.clone());
                            let kd = kernels::sparse_distill(
                                z,
                                ids.clone(),
                                lp.clone(),
                                mask.clone(),
                                kind,
                                tau,
                            );
                            ce.sum().mul_scalar(a) + kd.sum().mul_scalar(b)
                        }
                        "fused" => kernels::head_loss(
                            h.clone(),
                            &head,
                            targets.clone(),
                            Some(&distill),
                            (a, b),
                            8,
                        ),
                        _ => composite_only(|| {
                            kernels::head_loss(
                                h.clone(),
                                &head,
                                targets.clone(),
                                Some(&distill),
                                (a, b),
                                8,
                            )
                        }),
                    };
                    let value = values(loss.clone());
                    let grads = loss.backward();
                    (
                        value,
                        values(h.grad(&grads).unwrap()),
                        values(w.grad(&grads).unwrap()),
                    )
                };
                let want = run("unfused");
                for how in ["fused", "composite"] {
                    let got = run(how);
                    assert_head_close(&format!("{how} {kind:?} τ={tau} tied={tied}"), &got, &want);
                }
            }
        }
    }
}

/// A whole model's training loss through the fused head (what a training step runs) equals
/// the unfused model's logits and cross-entropy, with the same gradients of every parameter.
#[test]
fn a_model_through_the_fused_head_has_the_unfused_loss_and_gradients() {
    for tie in [true, false] {
        let shape = ModelShape {
            d_model: 32,
            n_layers: 1,
            n_heads: 2,
            n_kv_heads: 2,
            d_ff: 96,
            vocab: 300,
            tie_embeddings: tie,
        };
        let dev = device();
        let model = TransformerConfig::new(shape, 24).init(&dev);
        let tokens: Vec<i64> = (0..3 * 25).map(|i| (i * 11 % 300) as i64).collect();
        let x: Vec<i64> = tokens.chunks(25).flat_map(|c| c[..24].to_vec()).collect();
        let y: Vec<i64> = tokens.chunks(25).flat_map(|c| c[1..].to_vec()).collect();
        let x = Tensor::<2, Int>::from_data(TensorData::new(x, [3, 24]), &dev);
        let y = Tensor::<2, Int>::from_data(TensorData::new(y, [3, 24]), &dev);
        let run = |fused: bool| {
            let loss = if fused {
                pdsweep::train::summed_cross_entropy(&model, x.clone(), y.clone(), 10)
            } else {
                pdsweep::train::cross_entropy(model.forward(x.clone()), y.clone()).sum()
            };
            let value = loss.clone().into_scalar::<f32>();
            let grads = loss.backward();
            let mut visitor = Grads {
                grads: &grads,
                out: vec![],
            };
            model.visit(&mut visitor);
            (value, visitor.out)
        };
        let (loss_f, g_f) = run(true);
        let (loss_u, g_u) = run(false);
        assert!(
            (loss_f - loss_u).abs() < 1e-4 * loss_u.abs(),
            "loss {loss_f} vs {loss_u}"
        );
        for (i, (a, b)) in g_f.iter().zip(&g_u).enumerate() {
            assert_close(&format!("tie={tie} parameter {i}"), a, b, 1e-4);
        }
    }
}

#[test]
fn a_whole_model_has_the_same_loss_and_gradients_fused_and_composed() {
    for (n_heads, n_kv_heads, tie) in [(2, 2, true), (4, 2, false)] {
        let shape = ModelShape {
            d_model: 32,
            n_layers: 2,
            n_heads,
            n_kv_heads,
            d_ff: 96,
            vocab: 64,
            tie_embeddings: tie,
        };
        let dev = device();
        let model = TransformerConfig::new(shape, 24).init(&dev);
        let run = |fused: bool| {
            let tokens: Vec<i64> = (0..3 * 25).map(|i| (i * 11 % 64) as i64).collect();
            let x: Vec<i64> = tokens.chunks(25).flat_map(|c| c[..24].to_vec()).collect();
            let y: Vec<i64> = tokens.chunks(25).flat_map(|c| c[1..].to_vec()).collect();
            let x = Tensor::<2, Int>::from_data(TensorData::new(x, [3, 24]), &dev);
            let y = Tensor::<2, Int>::from_data(TensorData::new(y, [3, 24]), &dev);
            let step = || {
                let loss =
                    pdsweep::train::cross_entropy(model.forward(x.clone()), y.clone()).mean();
                let value = loss.clone().into_scalar::<f32>();
                (value, loss.backward())
            };
            let (value, grads) = if fused { step() } else { composite_only(step) };
            let mut visitor = Grads {
                grads: &grads,
                out: vec![],
            };
            model.visit(&mut visitor);
            (value, visitor.out)
        };
        let (loss_f, g_f) = run(true);
        let (loss_c, g_c) = run(false);
        assert!((loss_f - loss_c).abs() < 1e-5, "loss {loss_f} vs {loss_c}");
        assert_eq!(g_f.len(), g_c.len());
        for (i, (a, b)) in g_f.iter().zip(&g_c).enumerate() {
            assert_close(&format!("parameter {i}"), a, b, 1e-4);
        }
    }
}

#[test]
fn a_training_step_gives_the_same_bits_on_one_thread_and_on_three() {
    // large enough that flex threads its matmuls and the kernels split their rows
    let shape = ModelShape {
        d_model: 128,
        n_layers: 1,
        n_heads: 4,
        n_kv_heads: 4,
        d_ff: 384,
        vocab: 256,
        tie_embeddings: true,
    };
    // one model for both runs (the device seed is process-wide: tests beside this one draw
    // from it too)
    let dev = device();
    let model = TransformerConfig::new(shape, 64).init(&dev);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let tokens: Vec<i64> = (0..8 * 65).map(|i| (i * 37 % 256) as i64).collect();
            let x: Vec<i64> = tokens.chunks(65).flat_map(|c| c[..64].to_vec()).collect();
            let y: Vec<i64> = tokens.chunks(65).flat_map(|c| c[1..].to_vec()).collect();
            let x = Tensor::<2, Int>::from_data(TensorData::new(x, [8, 64]), &dev);
            let y = Tensor::<2, Int>::from_data(TensorData::new(y, [8, 64]), &dev);
            // the training step's path: hidden states through the fused chunked head (chunks of
            // 100 positions, so the head's gradient is summed over several)
            let loss = pdsweep::train::summed_cross_entropy(&model, x, y, 100);
            let grads = loss.backward();
            let mut visitor = Grads {
                grads: &grads,
                out: vec![],
            };
            model.visit(&mut visitor);
            (values(loss), visitor.out)
        })
    };
    assert_eq!(run(1), run(3));
}

/// An [`Example`](kernels::cross_reference::Example)'s teacher side as tensors, with the
/// targets.
fn cross_batch(
    ex: &kernels::cross_reference::Example,
    kind: CrossTokenizer,
    tau: f64,
    top_k: usize,
    dev: &Device,
) -> (kernels::CrossDistillation, Tensor<1, Int>) {
    let rows = ex.span.len();
    let width = ex.width;
    let ints = |v: Vec<i64>, shape: Vec<usize>| TensorData::new(v, shape);
    let floats = |v: Vec<f32>, shape: Vec<usize>| TensorData::new(v, shape);
    let cross = kernels::CrossDistillation {
        span: Tensor::from_data(
            ints(ex.span.iter().map(|&v| v as i64).collect(), vec![rows]),
            dev,
        ),
        log_t: Tensor::from_data(
            floats(
                ex.log_t.iter().map(|&v| v as f32).collect(),
                vec![rows, width],
            ),
            dev,
        ),
        matched: Tensor::from_data(ints(ex.matched.clone(), vec![rows, width]), dev),
        mask: Tensor::from_data(
            floats(
                ex.mask.iter().map(|&v| v as f32).collect(),
                vec![rows, width],
            ),
            dev,
        ),
        student_matched: Tensor::from_data(
            floats(
                ex.student_matched
                    .iter()
                    .map(|&m| f32::from(u8::from(m)))
                    .collect(),
                vec![ex.vocab],
            ),
            dev,
        ),
        kind,
        tau,
        top_k,
        gold_weights: (0.6, 0.4),
    };
    let targets = ints(ex.targets.iter().map(|&v| v as i64).collect(), vec![rows]);
    (cross, Tensor::from_data(targets, dev))
}

/// The cross-tokenizer head's loss and the gradients of h and W through
/// [`kernels::cross_head_loss`], fused (`fused`) or composed from burn's ops.
fn cross_run(
    fused: bool,
    (h0, w0): (&Tensor<2>, &Tensor<2>),
    tied: bool,
    cross: &kernels::CrossDistillation,
    targets: &Tensor<1, Int>,
    chunk: usize,
) -> HeadRun {
    let dev = h0.device();
    let fresh = |t: &Tensor<2>| Tensor::<2>::from_data(t.to_data(), &dev).require_grad();
    let (h, w) = (fresh(h0), fresh(w0));
    let head = kernels::HeadWeight {
        weight: w.clone(),
        tied,
        softcap: None,
    };
    let (a, b) = (0.3 / 20.0, 0.7 / 20.0);
    let op = || kernels::cross_head_loss(h.clone(), &head, targets.clone(), cross, (a, b), chunk);
    let loss = if fused { op() } else { composite_only(op) };
    let value = values(loss.clone());
    let grads = loss.backward();
    (
        value,
        values(h.grad(&grads).unwrap()),
        values(w.grad(&grads).unwrap()),
    )
}

/// The fused cross-tokenizer head (ULD and GOLD, the CPU kernel) against its composite twin
/// (what every other backend runs): the loss and the gradients of h and W for both kinds,
/// τ = 1 and 2, k below and past the vocabulary, both weight layouts, and chunks that would
/// split 3-row units.
#[test]
fn the_cross_tokenizer_head_matches_its_composite() {
    let dev = device();
    let span = [
        3, 0, 0, -1, 1, 2, 0, 3, 0, 0, 1, -1, 1, 2, 0, -1, 3, 0, 0, 1,
    ];
    let (rows, d, vocab, width) = (span.len(), 12, 53, 6);
    let ex = kernels::cross_reference::Example::new(&span, vocab, width, 17);
    let h0 = random([rows, d], &dev);
    let w0 = random([d, vocab], &dev).mul_scalar(0.3);
    for kind in [CrossTokenizer::Uld, CrossTokenizer::Gold] {
        for tau in [1.0, 2.0] {
            for (tied, top_k, chunk) in [(false, 8, 2), (true, 8, 7), (false, 60, 5)] {
                let (cross, targets) = cross_batch(&ex, kind, tau, top_k, &dev);
                let w = if tied {
                    w0.clone().transpose()
                } else {
                    w0.clone()
                };
                let fused = cross_run(true, (&h0, &w), tied, &cross, &targets, chunk);
                let composed = cross_run(false, (&h0, &w), tied, &cross, &targets, chunk);
                let what = format!("{kind:?} τ={tau} tied={tied} k={top_k} chunk={chunk}");
                assert_head_close(&what, &fused, &composed);
            }
        }
    }
}

/// Without units (every row unaligned) the cross-tokenizer head is the cross-entropy head, on
/// both paths; a batch of one-row units runs on both and they agree.
#[test]
fn the_cross_tokenizer_head_without_units_is_the_cross_entropy_head() {
    let dev = device();
    let (rows, d, vocab, width) = (10, 8, 31, 4);
    let h0 = random([rows, d], &dev);
    let w0 = random([d, vocab], &dev).mul_scalar(0.3);
    for kind in [CrossTokenizer::Uld, CrossTokenizer::Gold] {
        let ex = kernels::cross_reference::Example::new(&[-1; 10], vocab, width, 3);
        let (cross, targets) = cross_batch(&ex, kind, 2.0, 4, &dev);
        let plain = {
            let (h, w) = (h0.clone().detach(), w0.clone().detach());
            let head = kernels::HeadWeight {
                weight: w,
                tied: false,
                softcap: None,
            };
            let (a, b) = (0.3 / 20.0, 0.7 / 20.0);
            values(kernels::head_loss(
                h,
                &head,
                targets.clone(),
                None,
                (a, b),
                4,
            ))
        };
        for fused in [true, false] {
            let got = cross_run(fused, (&h0, &w0), false, &cross, &targets, 4);
            assert_close(
                &format!("{kind:?} fused={fused} unaligned"),
                &got.0,
                &plain,
                1e-6,
            );
        }
        let ex = kernels::cross_reference::Example::new(&[1; 10], vocab, width, 4);
        let (cross, targets) = cross_batch(&ex, kind, 1.0, 4, &dev);
        let fused = cross_run(true, (&h0, &w0), false, &cross, &targets, 3);
        let composed = cross_run(false, (&h0, &w0), false, &cross, &targets, 3);
        assert_head_close(&format!("{kind:?} one-row units"), &fused, &composed);
    }
}
