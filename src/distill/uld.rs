//! The Universal Logit Distillation loss (Boizard et al. 2024) for one aligned position of two
//! models with different vocabularies: the Wasserstein-1 distance between their next-token
//! distributions with token identities forgotten, which for two distributions on a line of
//! ranks is the L1 distance between their probability vectors sorted in decreasing order,
//! each truncated to its top k and padded with zeros to a common length. It needs no mapping
//! between vocabularies, only that both distributions are over "the next piece of text" (the
//! byte alignment of [`super::align`] makes sure of that).
//!
//! This is the dense reference (one position, f64, on the host), with its gradient through
//! the student's softmax; a fused kernel for training will be checked against it.

/// ULD between the student's distribution softmax(`student_logits` / τ) and the teacher's
/// probabilities `teacher_probs` (already tempered and truncated, summing to at most 1), each
/// restricted to its `k` largest entries (0: all); returns the loss and ∂loss/∂student_logits.
pub fn uld(student_logits: &[f64], teacher_probs: &[f64], k: usize, tau: f64) -> (f64, Vec<f64>) {
    let p = softmax(student_logits, tau);
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
    let mut t: Vec<f64> = teacher_probs.to_vec();
    t.sort_by(|a, b| b.total_cmp(a));
    let ks = if k == 0 { p.len() } else { k.min(p.len()) };
    let kt = if k == 0 { t.len() } else { k.min(t.len()) };
    let n = ks.max(kt);
    // g[v]: ∂loss/∂p[v] (the sign of the rank's difference for the student's top tokens)
    let mut g = vec![0.0; p.len()];
    let mut loss = 0.0;
    for r in 0..n {
        let ps = if r < ks { p[order[r]] } else { 0.0 };
        let pt = if r < kt { t[r] } else { 0.0 };
        loss += (ps - pt).abs();
        if r < ks {
            g[order[r]] = if ps > pt {
                1.0
            } else if ps < pt {
                -1.0
            } else {
                0.0
            };
        }
    }
    // through softmax(z/τ): ∂p_v/∂z_u = p_v (δ_vu − p_u) / τ
    let mean: f64 = p.iter().zip(&g).map(|(pv, gv)| pv * gv).sum();
    let grad = p
        .iter()
        .zip(&g)
        .map(|(pv, gv)| pv * (gv - mean) / tau)
        .collect();
    (loss, grad)
}

fn softmax(z: &[f64], tau: f64) -> Vec<f64> {
    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = z.iter().map(|v| ((v - max) / tau).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token identities do not matter: a permuted teacher gives the same loss; equal sorted
    /// vectors give 0; a hand-computed case.
    #[test]
    fn uld_forgets_identities_and_matches_a_hand_computed_case() {
        let z = [2.0f64.ln(), 1.0f64.ln(), 1.0f64.ln()]; // p = (0.5, 0.25, 0.25)
        let (same, _) = uld(&z, &[0.25, 0.5, 0.25], 0, 1.0);
        assert!(same.abs() < 1e-12);
        // sorted student (0.5, 0.25, 0.25) against teacher (0.7, 0.3): |0.5−0.7| + |0.25−0.3|
        // + |0.25−0| = 0.5
        let (loss, _) = uld(&z, &[0.3, 0.7], 0, 1.0);
        assert!((loss - 0.5).abs() < 1e-12, "{loss}");
        // vocabularies of different sizes are the point
        let (loss, _) = uld(&z, &[0.5, 0.25, 0.125, 0.125, 0.0], 0, 1.0);
        assert!((loss - 0.25).abs() < 1e-12, "{loss}");
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        let z = [0.3, -1.2, 0.8, 0.05, -0.4, 1.1];
        let t = [0.45, 0.2, 0.15, 0.1];
        for (k, tau) in [(0, 1.0), (3, 1.0), (4, 2.0)] {
            let (_, g) = uld(&z, &t, k, tau);
            for i in 0..z.len() {
                let h = 1e-6;
                let mut up = z;
                up[i] += h;
                let mut down = z;
                down[i] -= h;
                let fd = (uld(&up, &t, k, tau).0 - uld(&down, &t, k, tau).0) / (2.0 * h);
                assert!(
                    (fd - g[i]).abs() < 1e-5,
                    "k {k} τ {tau} logit {i}: {fd} vs {}",
                    g[i]
                );
            }
        }
    }
}
