//! The distillation losses of `docs/src/science/loss.md` on sparse teacher targets, and the mixed
//! objective (1 − α)·L_lm + α·L_kd.
//!
//! Sparse semantics: the teacher distribution is renormalised over its kept support at
//! temperature τ, q_i = softmax(ln p_i / τ) over the kept i; the student's log-probabilities
//! are log-softmax over the FULL vocabulary at τ, then gathered at the kept ids (never
//! renormalised over them). Per position, with s_i = ln softmax(z_s/τ)_i:
//! - `kl`: Σ_i q_i (ln q_i − s_i), forward KL(teacher ‖ student), scaled by τ²;
//! - `ce_soft`: −Σ_i q_i s_i, cross-entropy against the teacher (Peng et al.'s "NLL"), by τ²;
//! - `reverse_kl`: Σ_i e^{s_i} (s_i − ln q_i), KL(student ‖ teacher) restricted to the kept
//!   support (outside it the teacher has no mass and the divergence is undefined), by τ²;
//! - `mse`: Σ_i (e^{s_i} − q_i)², squared error between probabilities on the kept support
//!   (no τ² factor).
//!
//! With `missing = "bucket"` a row also has a tail entry (mask [`crate::kernels::TAIL_MASK`]):
//! the teacher's mass outside the kept ids, ln m, joins the kept entries as one more outcome
//! (q over the kept ids and the tail, tempered together), and the student's outcome is its
//! own mass outside them, s_t = ln(1 − Σ_i e^{s_i}); each loss above then runs over the kept
//! ids and the tail. At τ = 1 this is the divergence between the two distributions coarsened
//! to (kept ids, everything else); at other τ the teacher's tail is tempered as one token
//! (its tempered mass is not in a store).
//!
//! The τ² factor (Hinton et al.) keeps gradient magnitudes comparable across temperatures. Each
//! loss is averaged over positions. On the CPU the loss and its gradient come from one fused
//! kernel (`crate::kernels::sparse_distill`); the tests below check both it and the burn-op
//! version other backends run against a dense reference and finite differences.

use burn::tensor::{Int, Tensor};

use crate::kernels;
use crate::spec::LossKind;

/// Teacher targets of a batch, padded to a common width.
///
/// # Shapes
/// - `ids`: `[positions, width]` kept token ids (padding repeats a kept id)
/// - `log_probs`: `[positions, width]` ln p at τ = 1 (padding: any finite value)
/// - `mask`: `[positions, width]` 1 for kept entries, 0 for padding
#[derive(Debug, Clone)]
pub struct SparseTargets {
    /// Kept ids.
    pub ids: Tensor<2, Int>,
    /// Their log-probabilities.
    pub log_probs: Tensor<2>,
    /// 1 where an entry is real.
    pub mask: Tensor<2>,
}

/// The distillation loss `kind` at temperature `tau` (mean over positions).
///
/// # Shapes
/// - `student_logits`: `[positions, vocab]`
/// - returns: `[1]`
pub fn distill_loss(
    kind: LossKind,
    student_logits: Tensor<2>,
    targets: &SparseTargets,
    tau: f64,
) -> Tensor<1> {
    distill_loss_rows(kind, student_logits, targets, tau).mean()
}

/// The distillation loss `kind` at temperature `tau` at every position (what
/// [`distill_loss`] averages; a stack of runs weighs each member's positions itself).
///
/// # Shapes
/// - `student_logits`: `[positions, vocab]`
/// - returns: `[positions]`
pub(crate) fn distill_loss_rows(
    kind: LossKind,
    student_logits: Tensor<2>,
    targets: &SparseTargets,
    tau: f64,
) -> Tensor<1> {
    kernels::sparse_distill(
        student_logits,
        targets.ids.clone(),
        targets.log_probs.clone(),
        targets.mask.clone(),
        kind,
        tau,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    const V: usize = 5;

    /// Dense reference in f64, written from the definitions above.
    fn reference(kind: LossKind, z_s: &[[f64; V]], kept: &[Vec<(usize, f64)>], tau: f64) -> f64 {
        let mut total = 0.0;
        for (z, kept) in z_s.iter().zip(kept) {
            let zmax = z.iter().copied().fold(f64::MIN, f64::max);
            let norm = zmax / tau
                + z.iter()
                    .map(|v| (v / tau - zmax / tau).exp())
                    .sum::<f64>()
                    .ln();
            let s = |i: usize| z[i] / tau - norm; // full-vocabulary log-softmax
            let t: Vec<f64> = kept.iter().map(|(_, lp)| lp / tau).collect();
            let tmax = t.iter().copied().fold(f64::MIN, f64::max);
            let tnorm = tmax + t.iter().map(|v| (v - tmax).exp()).sum::<f64>().ln();
            let mut loss = 0.0;
            for (j, (i, _)) in kept.iter().enumerate() {
                let log_q = t[j] - tnorm;
                let q = log_q.exp();
                loss += match kind {
                    LossKind::Kl => q * (log_q - s(*i)),
                    LossKind::CeSoft => -q * s(*i),
                    LossKind::ReverseKl => s(*i).exp() * (s(*i) - log_q),
                    LossKind::Mse => (s(*i).exp() - q).powi(2),
                };
            }
            total += if kind == LossKind::Mse {
                loss
            } else {
                loss * tau * tau
            };
        }
        total / z_s.len() as f64
    }

    /// The bucket reference: the definitions above over the kept ids and the tail outcome.
    fn reference_bucket(
        kind: LossKind,
        z_s: &[[f64; V]],
        kept: &[Vec<(usize, f64)>],
        tau: f64,
    ) -> f64 {
        let mut total = 0.0;
        for (z, kept) in z_s.iter().zip(kept) {
            let ls: Vec<f64> = log_softmax_f64(&z.map(|v| v / tau));
            let mut s: Vec<f64> = kept.iter().map(|(i, _)| ls[*i]).collect();
            s.push((1.0 - s.iter().map(|v| v.exp()).sum::<f64>()).ln());
            let mut t: Vec<f64> = kept.iter().map(|(_, lp)| *lp).collect();
            t.push((1.0 - t.iter().map(|v| v.exp()).sum::<f64>()).ln());
            let t: Vec<f64> = t.iter().map(|v| v / tau).collect();
            let tmax = t.iter().copied().fold(f64::MIN, f64::max);
            let tnorm = tmax + t.iter().map(|v| (v - tmax).exp()).sum::<f64>().ln();
            let mut loss = 0.0;
            for j in 0..t.len() {
                let log_q = t[j] - tnorm;
                let q = log_q.exp();
                loss += match kind {
                    LossKind::Kl => q * (log_q - s[j]),
                    LossKind::CeSoft => -q * s[j],
                    LossKind::ReverseKl => s[j].exp() * (s[j] - log_q),
                    LossKind::Mse => (s[j].exp() - q).powi(2),
                };
            }
            total += if kind == LossKind::Mse {
                loss
            } else {
                loss * tau * tau
            };
        }
        total / z_s.len() as f64
    }

    /// [`targets`] with a tail entry per row (the teacher's exact mass outside its kept ids).
    fn bucket_targets(kept: &[Vec<(usize, f64)>], device: &Device) -> SparseTargets {
        let kept: Vec<crate::distill::Kept> = kept
            .iter()
            .map(|row| {
                let mut k = crate::distill::Kept::new(
                    row.iter().map(|(i, _)| *i as u32).collect(),
                    row.iter().map(|(_, lp)| *lp as f32).collect(),
                );
                k.tail = Some(k.tail_log_mass());
                k
            })
            .collect();
        crate::distill::sparse_targets(&kept, device)
    }

    fn bucket_value(
        kind: LossKind,
        zs: &[[f64; V]],
        kept: &[Vec<(usize, f64)>],
        tau: f64,
        device: &Device,
    ) -> Tensor<1> {
        let flat: Vec<f32> = zs.iter().flatten().map(|&v| v as f32).collect();
        let logits = Tensor::<2>::from_data(TensorData::new(flat, [zs.len(), V]), device);
        distill_loss(kind, logits, &bucket_targets(kept, device), tau)
    }

    #[test]
    fn bucket_losses_match_their_reference_and_finite_differences() {
        let (zs, kept) = cases();
        let plain = Device::flex();
        for composite in [false, true] {
            for kind in KINDS {
                for tau in [1.0, 2.0] {
                    let run =
                        || bucket_value(kind, &zs, &kept, tau, &plain).into_scalar::<f32>() as f64;
                    let got = if composite {
                        kernels::composite_only(run)
                    } else {
                        run()
                    };
                    let want = reference_bucket(kind, &zs, &kept, tau);
                    assert!(
                        (got - want).abs() < 1e-5 * want.abs().max(1.0),
                        "{kind:?} τ={tau} (composite: {composite}): {got} vs {want}"
                    );
                    // the tail is an outcome: the value differs from renormalising
                    let renormalised = reference(kind, &zs, &kept, tau);
                    assert!((want - renormalised).abs() > 1e-3, "{kind:?} τ={tau}");
                }
            }
        }
        // gradients, by finite differences of the reference
        let device = Device::flex().autodiff();
        for (kind, composite) in KINDS.into_iter().flat_map(|k| [(k, false), (k, true)]) {
            let flat: Vec<f32> = zs.iter().flatten().map(|&v| v as f32).collect();
            let logits =
                Tensor::<2>::from_data(TensorData::new(flat, [2, V]), &device).require_grad();
            let loss = || distill_loss(kind, logits.clone(), &bucket_targets(&kept, &device), 2.0);
            let loss = if composite {
                kernels::composite_only(loss)
            } else {
                loss()
            };
            let grads = loss.backward();
            let grad: Vec<f32> = logits
                .grad(&grads)
                .unwrap()
                .into_data()
                .try_to_vec()
                .unwrap();
            for row in 0..2 {
                for col in 0..V {
                    let h = 1e-5;
                    let (mut up, mut down) = (zs.clone(), zs.clone());
                    up[row][col] += h;
                    down[row][col] -= h;
                    let numeric = (reference_bucket(kind, &up, &kept, 2.0)
                        - reference_bucket(kind, &down, &kept, 2.0))
                        / (2.0 * h);
                    let analytic = grad[row * V + col] as f64;
                    assert!(
                        (numeric - analytic).abs() < 1e-4,
                        "{kind:?} (composite: {composite}) [{row},{col}]: {analytic} vs {numeric}"
                    );
                }
            }
        }
    }

    fn targets(kept: &[Vec<(usize, f64)>], device: &Device) -> SparseTargets {
        let width = kept.iter().map(Vec::len).max().unwrap();
        let (mut ids, mut lps, mut mask) = (vec![], vec![], vec![]);
        for row in kept {
            for j in 0..width {
                let (i, lp) = row.get(j).copied().unwrap_or((row[0].0, 0.0));
                ids.push(i as i64);
                lps.push(lp as f32);
                mask.push(if j < row.len() { 1.0f32 } else { 0.0 });
            }
        }
        let n = kept.len();
        SparseTargets {
            ids: Tensor::from_data(TensorData::new(ids, [n, width]), device),
            log_probs: Tensor::from_data(TensorData::new(lps, [n, width]), device),
            mask: Tensor::from_data(TensorData::new(mask, [n, width]), device),
        }
    }

    fn log_softmax_f64(z: &[f64; V]) -> Vec<f64> {
        let m = z.iter().copied().fold(f64::MIN, f64::max);
        let n = m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        z.iter().map(|v| v - n).collect()
    }

    /// A teacher with logits `zt`, truncated to `ids` (log-probs under the full vocabulary).
    fn teacher(zt: &[f64; V], ids: &[usize]) -> Vec<(usize, f64)> {
        let lp = log_softmax_f64(zt);
        ids.iter().map(|&i| (i, lp[i])).collect()
    }

    /// Student logits per position and the teacher's kept (id, log-prob) per position.
    type Cases = (Vec<[f64; V]>, Vec<Vec<(usize, f64)>>);

    fn cases() -> Cases {
        let zs = vec![[0.3, -1.2, 2.0, 0.1, -0.5], [1.5, 0.2, -0.7, 0.9, 0.0]];
        let zt1 = [1.0, -0.5, 2.5, 0.0, -2.0];
        let zt2 = [2.0, 0.5, -1.0, 1.2, 0.3];
        (zs, vec![teacher(&zt1, &[2, 0, 3]), teacher(&zt2, &[0, 3])])
    }

    fn value(
        kind: LossKind,
        zs: &[[f64; V]],
        kept: &[Vec<(usize, f64)>],
        tau: f64,
        device: &Device,
    ) -> f64 {
        let flat: Vec<f32> = zs.iter().flatten().map(|&v| v as f32).collect();
        let logits = Tensor::<2>::from_data(TensorData::new(flat, [zs.len(), V]), device);
        distill_loss(kind, logits, &targets(kept, device), tau).into_scalar::<f32>() as f64
    }

    const KINDS: [LossKind; 4] = [
        LossKind::Kl,
        LossKind::CeSoft,
        LossKind::ReverseKl,
        LossKind::Mse,
    ];

    #[test]
    fn losses_match_the_dense_reference_with_and_without_truncation() {
        let device = Device::flex();
        let (zs, truncated) = cases();
        let full = vec![
            teacher(&[1.0, -0.5, 2.5, 0.0, -2.0], &[0, 1, 2, 3, 4]),
            teacher(&[2.0, 0.5, -1.0, 1.2, 0.3], &[0, 1, 2, 3, 4]),
        ];
        for (kept, composite) in [(&truncated, false), (&full, false), (&truncated, true)] {
            for kind in KINDS {
                for tau in [1.0, 2.0, 0.5] {
                    let got = if composite {
                        kernels::composite_only(|| value(kind, &zs, kept, tau, &device))
                    } else {
                        value(kind, &zs, kept, tau, &device)
                    };
                    let want = reference(kind, &zs, kept, tau);
                    assert!(
                        (got - want).abs() < 1e-5 * want.abs().max(1.0),
                        "{kind:?} τ={tau} (composite: {composite}): {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn full_support_kl_is_zero_for_identical_distributions() {
        let device = Device::flex();
        let z = [0.3, -1.2, 2.0, 0.1, -0.5];
        let kept = vec![teacher(&z, &[0, 1, 2, 3, 4])];
        assert!(value(LossKind::Kl, &[z], &kept, 1.0, &device).abs() < 1e-6);
        assert!(value(LossKind::Mse, &[z], &kept, 1.0, &device).abs() < 1e-10);
    }

    #[test]
    fn renormalising_the_student_over_the_kept_ids_would_be_caught() {
        // The known bug: a student renormalised over the teacher's ids. With truncation the
        // reference (full-vocabulary student) and the buggy value differ, so the test above
        // fails if the implementation changes semantics.
        let (zs, kept) = cases();
        let buggy: f64 = zs
            .iter()
            .zip(&kept)
            .map(|(z, kept)| {
                let sub: Vec<f64> = kept.iter().map(|(i, _)| z[*i]).collect();
                let m = sub.iter().copied().fold(f64::MIN, f64::max);
                let n = m + sub.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                let tn = kept.iter().map(|(_, lp)| lp.exp()).sum::<f64>().ln();
                kept.iter()
                    .zip(&sub)
                    .map(|((_, lp), s)| (lp - tn).exp() * ((lp - tn) - (s - n)))
                    .sum::<f64>()
            })
            .sum::<f64>()
            / 2.0;
        let right = reference(LossKind::Kl, &zs, &kept, 1.0);
        assert!((buggy - right).abs() > 0.05, "{buggy} vs {right}");
    }

    #[test]
    fn gradients_match_finite_differences() {
        let device = Device::flex().autodiff();
        let (zs, kept) = cases();
        for (kind, composite) in KINDS.into_iter().flat_map(|k| [(k, false), (k, true)]) {
            let flat: Vec<f32> = zs.iter().flatten().map(|&v| v as f32).collect();
            let logits =
                Tensor::<2>::from_data(TensorData::new(flat, [2, V]), &device).require_grad();
            let loss = || distill_loss(kind, logits.clone(), &targets(&kept, &device), 2.0);
            let loss = if composite {
                kernels::composite_only(loss)
            } else {
                loss()
            };
            let grads = loss.backward();
            let grad: Vec<f32> = logits
                .grad(&grads)
                .unwrap()
                .into_data()
                .try_to_vec()
                .unwrap();
            for row in 0..2 {
                for col in 0..V {
                    let h = 1e-5;
                    let (mut up, mut down) = (zs.clone(), zs.clone());
                    up[row][col] += h;
                    down[row][col] -= h;
                    let numeric = (reference(kind, &up, &kept, 2.0)
                        - reference(kind, &down, &kept, 2.0))
                        / (2.0 * h);
                    let analytic = grad[row * V + col] as f64;
                    assert!(
                        (numeric - analytic).abs() < 1e-4,
                        "{kind:?} (composite: {composite}) [{row},{col}]: {analytic} vs {numeric}"
                    );
                }
            }
        }
    }
}
