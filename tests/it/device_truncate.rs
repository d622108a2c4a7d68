//! The device truncation of teacher logits (what a logit pass and an online student run on a
//! GPU) against the host truncation, over a grid of top-k and top-p with the edge cases (k =
//! all, k = 1, k past one device pass, p = 1, a vanishing p), on peaked, flat and tied logits:
//! on the CPU backend always, and on wgpu where a Vulkan device exists (Mesa's lavapipe in CI,
//! required there by `PDSWEEP_REQUIRE_WGPU=1`).
//!
//! Regression: with top_k = "all" and top_p = 0.95, wgpu returned id u32::MAX for every entry
//! past the first (burn's GPU top-k is wrong for k ≥ 64 at large vocabularies and for k = the
//! vocabulary; the device path now takes tokens in passes of 32).

use burn::tensor::{Device, Tensor, TensorData};
use pdsweep::distill::device_truncate::{DEVICE_WIDTH, PASS_K, download, truncate_on_device};
use pdsweep::distill::{Kept, truncate};
use pdsweep::spec::TopK;

/// Rows of logits: peaked (a trained teacher), flat (an untrained one: nuclei of most of the
/// vocabulary) and tied (8 distinct values: ties inside and at the edge of every cut).
fn logits(rows: usize, vocab: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..rows * vocab)
        .map(|i| {
            let u = next();
            match (i / vocab) % 3 {
                0 => (u.powi(6) * 30.0) as f32,         // peaked
                1 => (u * 0.5) as f32,                  // flat
                _ => ((u * 8.0).floor() as f32) * 0.75, // tied
            }
        })
        .collect()
}

/// The (top_p, top_k) grid: the edges and the common settings.
fn grid() -> Vec<(f64, TopK)> {
    vec![
        (1.0, TopK::Keep(1)),
        (1.0, TopK::Keep(8)),
        (1.0, TopK::Keep(PASS_K as u64)),
        (1.0, TopK::Keep(PASS_K as u64 + 1)),
        (1.0, TopK::Keep(100)),
        (1.0, TopK::All),
        (0.95, TopK::Keep(1)),
        (0.95, TopK::Keep(64)),
        (0.95, TopK::All),
        (0.5, TopK::All),
        (0.9999, TopK::Keep(300)),
        (1e-9, TopK::All),
        (1e-15, TopK::Keep(5)),
    ]
}

/// Checks the device's support of one row against the host's: the same ids and
/// log-probabilities (to 1e-5), except that where the host's nucleus closes within 1e-5 of
/// `top_p` (f32 against f64 accumulation) one token more or fewer is allowed, and, unless
/// `exact_ties`, tokens of equal logits may come in another order (flex's top-k does not give
/// the lower id first; the GPU backends' does, as the host).
fn same_support(got: &Kept, z: &[f32], p: f64, k: TopK, exact_ties: bool, what: &str) {
    let want = truncate(z, p, k);
    assert!(
        got.ids.iter().all(|&id| (id as usize) < z.len()),
        "{what}: ids past the vocabulary: {:?}",
        got.ids
    );
    let n = got.ids.len().min(want.ids.len());
    if got.ids.len() != want.ids.len() {
        let mass: f64 = want.log_probs[..n].iter().map(|&l| (l as f64).exp()).sum();
        assert!(
            got.ids.len().abs_diff(want.ids.len()) == 1 && (mass - p).abs() < 1e-5,
            "{what}: kept {} tokens, the host {} (mass {mass} at the shorter, p {p})",
            got.ids.len(),
            want.ids.len()
        );
    }
    if exact_ties {
        assert_eq!(got.ids[..n], want.ids[..n], "{what}");
    } else {
        let value = |ids: &[u32]| ids.iter().map(|&i| z[i as usize]).collect::<Vec<f32>>();
        assert_eq!(
            value(&got.ids[..n]),
            value(&want.ids[..n]),
            "{what}: logits"
        );
        let mut distinct = got.ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            got.ids.len(),
            "{what}: repeated ids {:?}",
            got.ids
        );
    }
    for (a, b) in got.log_probs.iter().zip(&want.log_probs) {
        assert!((a - b).abs() < 1e-5, "{what}: log-prob {a} vs {b}");
    }
}

/// Every grid point on `device` for vocabularies below, at and above the device width.
fn matches_the_host_on(device: &Device, name: &str, exact_ties: bool) {
    for (rows, vocab) in [(9, 97), (6, DEVICE_WIDTH), (6, 3000)] {
        let z = logits(rows, vocab, vocab as u64);
        for (p, k) in grid() {
            let t = Tensor::<2>::from_data(TensorData::new(z.clone(), [rows, vocab]), device);
            let got = download(truncate_on_device(t, p, k));
            assert_eq!(got.len(), rows, "{name}: p={p} k={k}");
            for (row, kept) in got.iter().enumerate() {
                let what = format!("{name}: vocab {vocab} p={p} k={k} row {row}");
                let z = &z[row * vocab..(row + 1) * vocab];
                same_support(kept, z, p, k, exact_ties, &what);
            }
        }
    }
}

#[test]
fn device_truncation_on_the_cpu_backend_equals_the_host_truncation() {
    matches_the_host_on(&Device::flex(), "cpu", false);
}

#[test]
fn device_truncation_on_wgpu_equals_the_host_truncation() {
    if let Some(gpu) = crate::common::wgpu_or_skip("device_truncation_on_wgpu") {
        matches_the_host_on(&gpu, "wgpu", true);
    }
}

/// Within the device width every row stays on the device (no logits downloaded); a support
/// wider than it (top-k "all" on flat logits) goes through the host for those rows only.
#[test]
fn only_rows_wider_than_the_device_width_go_through_the_host() {
    let device = Device::flex();
    let (rows, vocab) = (6, 3000);
    let z = logits(rows, vocab, 5);
    let t = || Tensor::<2>::from_data(TensorData::new(z.clone(), [rows, vocab]), &device);
    assert!(truncate_on_device(t(), 1.0, TopK::Keep(DEVICE_WIDTH as u64)).on_device());
    assert!(truncate_on_device(t(), 0.95, TopK::Keep(64)).on_device());
    let wide = truncate_on_device(t(), 0.95, TopK::All);
    let rows_wide: Vec<usize> = wide.wide_rows.iter().map(|(r, _)| *r).collect();
    let host_sizes: Vec<usize> = (0..rows)
        .map(|r| {
            truncate(&z[r * vocab..(r + 1) * vocab], 0.95, TopK::All)
                .ids
                .len()
        })
        .collect();
    let want: Vec<usize> = (0..rows)
        .filter(|&r| host_sizes[r] > DEVICE_WIDTH)
        .collect();
    assert_eq!(rows_wide, want, "nucleus sizes on the host: {host_sizes:?}");
    // the flat rows (1 and 4) need most of the vocabulary; the peaked ones (0 and 3) do not
    assert!(want.contains(&1) && !want.contains(&0), "{host_sizes:?}");
}
