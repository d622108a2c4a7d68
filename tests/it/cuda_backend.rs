//! The cuda backend on a machine without (all of) its run-time: `backend = "cuda"` fails the
//! run, `pdsweep bench --backend cuda` fails, with one message naming what is missing and
//! where it was looked for, and never a panic; `pdsweep devices` and `pdsweep plan` still work.
//!
//! The CUDA headers are always made missing here (`CUDA_PATH` points at a folder that does not
//! exist), so these tests check the message on every machine, a GPU machine included; where
//! the NVIDIA driver or NVRTC is absent too (CI, this development machine), the message must
//! name them as well.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{stderr, stdout};

const SWEEP: &str = r#"
name = "tinycuda"
backend = "cuda"
[corpus]
val_tokens = "4K"
[model]
context = 16
[teachers]
sizes = ["12K"]
tokens = ["4K"]
[students]
sizes = ["12K"]
tokens = ["2K"]
[train]
batch_tokens = "256"
evals = 1
"#;

/// Runs the binary in `dir` with `CUDA_PATH` set to a folder that does not exist.
fn without_headers(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pdsweep"))
        .args(args)
        .current_dir(dir)
        .env("CUDA_PATH", dir.join("no-cuda-here"))
        .output()
        .expect("the pdsweep binary runs")
}

/// What the probe finds on this machine with the real environment (the driver and NVRTC do
/// not depend on `CUDA_PATH`).
fn driver_and_nvrtc_present() -> (bool, bool) {
    match pdsweep::train::cuda::probe() {
        Ok(_) => (true, true),
        Err(e) => (
            !e.problems.iter().any(|p| {
                matches!(
                    p,
                    pdsweep::train::cuda::CudaProblem::DriverNotFound { .. }
                        | pdsweep::train::cuda::CudaProblem::DriverFailed { .. }
                )
            }),
            !e.problems
                .iter()
                .any(|p| matches!(p, pdsweep::train::cuda::CudaProblem::NvrtcNotFound { .. })),
        ),
    }
}

/// The message's checks: one message, no panic, the missing headers and `CUDA_PATH` named, and
/// the driver and NVRTC named exactly when they are missing here.
fn check_message(what: &str, out: &Output, dir: &Path) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{what}: exit code\n{err}");
    assert!(!err.contains("panicked"), "{what}: a panic\n{err}");
    assert_eq!(
        err.matches("backend `cuda` cannot run on this machine")
            .count(),
        1,
        "{what}: one message\n{err}"
    );
    let cuda_path = format!("CUDA_PATH={} (absent)", dir.join("no-cuda-here").display());
    for needle in [
        "the CUDA headers are missing",
        "cuda_fp16.h",
        &cuda_path,
        "\n\nhint: ",
    ] {
        assert!(err.contains(needle), "{what}: no {needle:?} in\n{err}");
    }
    let (driver, nvrtc) = driver_and_nvrtc_present();
    assert_eq!(
        err.contains("the NVIDIA driver is missing") || err.contains("cannot be used"),
        !driver,
        "{what}: the driver is named exactly when missing\n{err}"
    );
    if !driver && err.contains("the NVIDIA driver is missing") {
        assert!(
            err.contains("libcuda.so.1") && err.contains("LD_LIBRARY_PATH"),
            "{what}: the driver's library and the search path are named\n{err}"
        );
    }
    assert_eq!(
        err.contains("NVRTC is missing"),
        !nvrtc,
        "{what}: NVRTC is named exactly when missing\n{err}"
    );
    if !nvrtc {
        assert!(
            err.contains("libnvrtc.so."),
            "{what}: NVRTC's library\n{err}"
        );
    }
}

#[test]
fn cuda_without_its_runtime_fails_the_run_with_one_message_and_no_panic() {
    if !cfg!(feature = "cuda") {
        eprintln!("skipped: this build has no `cuda` feature (train_engine checks that message)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tinycuda.toml"), SWEEP).unwrap();

    // Planning a cuda sweep needs no device (its time estimate falls back to a default).
    let plan = without_headers(tmp.path(), &["plan", "tinycuda.toml"]);
    assert!(plan.status.success(), "plan: {}", stderr(&plan));

    for jobs in ["1", "2"] {
        let out = without_headers(tmp.path(), &["run", "tinycuda.toml", "--jobs", jobs]);
        check_message(&format!("run --jobs {jobs}"), &out, tmp.path());
    }
    let bench = without_headers(
        tmp.path(),
        &[
            "bench",
            "--backend",
            "cuda",
            "--d-model",
            "24",
            "--n-layers",
            "1",
            "--n-heads",
            "2",
            "--d-ff",
            "48",
            "--vocab",
            "64",
            "--context",
            "16",
            "--steps",
            "1",
        ],
    );
    check_message("bench --backend cuda", &bench, tmp.path());

    // No run started: the failure is the machine's, not the runs'.
    let status = without_headers(tmp.path(), &["status", "tinycuda.toml", "--format", "json"]);
    assert!(status.status.success(), "status: {}", stderr(&status));
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&status)).expect("status --format json");
    let runs = v["runs"].as_array().expect("runs");
    assert!(!runs.is_empty(), "{v}");
    assert!(
        runs.iter().all(|r| r["state"] == "planned"),
        "no run started, none failed: {v}"
    );
}

#[test]
fn cuda_devices_lists_what_is_missing_beside_the_wgpu_adapters() {
    let tmp = tempfile::tempdir().unwrap();
    let out = without_headers(tmp.path(), &["devices"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(
        text.contains("wgpu devices (backend = \"wgpu\"):"),
        "{text}"
    );
    assert!(
        text.contains("cuda devices (backend = \"cuda\"):"),
        "{text}"
    );
    let expected = if cfg!(feature = "cuda") {
        "CUDA headers not found"
    } else {
        "built without the `cuda` feature"
    };
    assert!(
        text.lines()
            .any(|l| l.starts_with("  none: ") && l.contains(expected)),
        "{text}"
    );

    let json = without_headers(tmp.path(), &["devices", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("devices --json");
    assert_eq!(v["cuda"]["devices"], serde_json::json!([]));
    assert!(
        v["cuda"]["unavailable"]
            .as_str()
            .is_some_and(|m| m.starts_with("backend `cuda` cannot run on this machine")),
        "{v}"
    );
    assert!(v["wgpu"].is_array(), "{v}");
}
