//! What the cuda backend needs at run time, checked before burn is handed a CUDA device.
//!
//! burn's cuda backend (cubecl-cuda, vendored without its LLVM backend: `vendor/README.md`)
//! compiles its kernels as CUDA C++ with NVRTC. cudarc loads both libraries at run time, so a
//! binary built here starts anywhere; but on a machine without them burn panics on the first
//! tensor (cudarc's "Unable to dynamically load the \"cuda\" shared library", an `unwrap()` on
//! `cuInit`, or cubecl's "CUDA installation not found" when NVRTC is handed the include path).
//! [`probe`] asks first, by the same names and in the same places as they do:
//!
//! - the **NVIDIA driver**: `libcuda.so.1` (and the other names cudarc tries) on the library
//!   search path, then `cuInit` and at least one device;
//! - **NVRTC**: `libnvrtc.so.<major>` (and the other names cudarc tries) on the library search
//!   path;
//! - the **CUDA headers** the generated kernels include (`cuda_fp16.h`, `cuda_bf16.h`), in
//!   `include/` of the CUDA folder cubecl picks: `CUDA_PATH`, else `/usr/local/cuda`, else
//!   `/opt/cuda`, else `/usr` when `/usr/bin/nvcc` exists.
//!
//! Everything missing is named in one [`CudaUnavailable`], with where it was looked for.

use std::path::PathBuf;

/// The headers every generated kernel that computes in f16 or bf16 includes (cubecl-cpp's
/// CUDA dialect), looked for in the CUDA folder's `include/`.
pub(crate) const HEADERS: [&str; 2] = ["cuda_fp16.h", "cuda_bf16.h"];

/// One CUDA device, as the driver describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDevice {
    /// The index `--devices` takes (the driver's ordinal).
    pub index: usize,
    /// The device's name (e.g. `NVIDIA H200`).
    pub name: String,
    /// Compute capability, major and minor (9.0 on Hopper).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub memory_bytes: u64,
}

/// A machine that can run the cuda backend: the driver, NVRTC, the headers and its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaRuntime {
    /// The driver library that loaded (e.g. `libcuda.so.1`).
    pub driver_library: String,
    /// The CUDA version the driver supports, as `cuDriverGetVersion` reports it (13000 = 13.0).
    pub driver_version: i32,
    /// The NVRTC library that loaded (e.g. `libnvrtc.so.13`).
    pub nvrtc_library: String,
    /// NVRTC's version, major and minor.
    pub nvrtc_version: (i32, i32),
    /// The include folder NVRTC is given.
    pub include_dir: PathBuf,
    /// The devices, in driver order (never empty).
    pub devices: Vec<CudaDevice>,
}

/// One requirement of the cuda backend this machine does not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaProblem {
    /// This binary was built without the `cuda` feature.
    NotBuilt,
    /// No driver library could be loaded.
    DriverNotFound {
        /// The name the driver installs (`libcuda.so.1`).
        preferred: String,
        /// Every name tried, in cudarc's order.
        tried: Vec<String>,
        /// Why the preferred name did not load, as `dlopen` says.
        dlopen_error: String,
    },
    /// The driver loaded but refused to start, or has no device.
    DriverFailed {
        /// The driver library that loaded.
        library: String,
        /// What failed (`cuInit: CUDA_ERROR_NO_DEVICE ...`, `no CUDA device`).
        error: String,
    },
    /// No NVRTC library could be loaded.
    NvrtcNotFound {
        /// The name of the CUDA major version this binary's bindings are for (`libnvrtc.so.13`).
        preferred: String,
        /// Every name tried, in cudarc's order.
        tried: Vec<String>,
        /// Why the preferred name did not load, as `dlopen` says.
        dlopen_error: String,
        /// NVRTC libraries that exist in the CUDA folder but off the library search path.
        elsewhere: Vec<PathBuf>,
    },
    /// The CUDA headers are not where NVRTC will be told to look.
    HeadersNotFound {
        /// Where cubecl looks, in its order, and what each had.
        looked: Vec<String>,
    },
}

/// The cuda backend cannot run on this machine: everything missing, and where it was looked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.problems))]
pub struct CudaUnavailable {
    /// What is missing (at least one).
    pub problems: Vec<CudaProblem>,
}

impl CudaUnavailable {
    /// Whether the NVIDIA driver is among what is missing or failing.
    pub fn lacks_driver(&self) -> bool {
        self.problems.iter().any(|p| {
            matches!(
                p,
                CudaProblem::DriverNotFound { .. } | CudaProblem::DriverFailed { .. }
            )
        })
    }

    /// One line per problem, without the hint: what `pdsweep devices` prints.
    pub fn short(&self) -> String {
        self.problems
            .iter()
            .map(|p| match p {
                CudaProblem::NotBuilt => "this pdsweep is built without the `cuda` feature".into(),
                CudaProblem::DriverNotFound { preferred, .. } => {
                    format!("NVIDIA driver not found ({preferred} not on the library search path)")
                }
                CudaProblem::DriverFailed { library, error } => {
                    format!("NVIDIA driver ({library}) unusable: {error}")
                }
                CudaProblem::NvrtcNotFound { preferred, .. } => {
                    format!("NVRTC not found ({preferred} not on the library search path)")
                }
                CudaProblem::HeadersNotFound { .. } => {
                    format!(
                        "CUDA headers not found ({} in CUDA_PATH or /usr/local/cuda)",
                        HEADERS.join(", ")
                    )
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `tried` for a message: the preferred name first, then the other Linux-style names
/// (`libX.so`, `libX.so.N`), then how many others there were (cudarc also tries Windows-style
/// names such as `libcuda64_13.so` and `nvcuda`'s on every system).
fn tried_list(preferred: &str, tried: &[String]) -> String {
    let linux = |t: &&String| {
        let t = t.as_str();
        t.starts_with("lib")
            && t.contains(".so")
            && !t.contains("64")
            && !t.contains("32")
            && !t.starts_with("libnvcuda")
    };
    let mut names: Vec<&str> = vec![preferred];
    names.extend(
        tried
            .iter()
            .filter(linux)
            .map(String::as_str)
            .filter(|t| *t != preferred),
    );
    let others = tried
        .iter()
        .filter(|t| !names.contains(&t.as_str()))
        .count();
    let mut out = names.join(", ");
    if others > 0 {
        out.push_str(&format!(" and {others} other names of cudarc's list"));
    }
    out
}

/// The library search path, for messages: what `dlopen` searches.
fn search_path() -> String {
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(v) if !v.is_empty() => format!("LD_LIBRARY_PATH={v}"),
        _ => "LD_LIBRARY_PATH (unset)".to_string(),
    };
    format!("{ld}, the ld.so cache (/etc/ld.so.cache, `ldconfig -p`) and /lib, /usr/lib")
}

fn render(problems: &[CudaProblem]) -> String {
    let mut what: Vec<&str> = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut hints: Vec<String> = Vec::new();
    for p in problems {
        match p {
            CudaProblem::NotBuilt => {
                what.push("this pdsweep is built without it");
                hints.push("rebuild with `cargo build --release --features cuda`".into());
            }
            CudaProblem::DriverNotFound {
                preferred,
                tried,
                dlopen_error,
            } => {
                what.push("the NVIDIA driver is missing");
                lines.push(format!(
                    "NVIDIA driver: no library loaded; tried {} on the library search path ({}); dlopen said: {dlopen_error}",
                    tried_list(preferred, tried),
                    search_path()
                ));
                hints.push("install the NVIDIA driver (it provides libcuda.so.1); in a container, start it with the GPUs exposed (e.g. `docker run --gpus all`)".into());
            }
            CudaProblem::DriverFailed { library, error } => {
                what.push("the NVIDIA driver cannot be used");
                lines.push(format!("NVIDIA driver: {library} loaded, but {error}"));
                hints.push(
                    "check `nvidia-smi`: the driver must see a GPU and match its kernel module"
                        .into(),
                );
            }
            CudaProblem::NvrtcNotFound {
                preferred,
                tried,
                dlopen_error,
                elsewhere,
            } => {
                what.push("NVRTC is missing");
                let mut line = format!(
                    "NVRTC (the CUDA runtime compiler): no library loaded; tried {} on the library search path ({}); dlopen said: {dlopen_error}",
                    tried_list(preferred, tried),
                    search_path()
                );
                if !elsewhere.is_empty() {
                    let found: Vec<String> =
                        elsewhere.iter().map(|p| p.display().to_string()).collect();
                    line.push_str(&format!(
                        "; found off the search path: {}",
                        found.join(", ")
                    ));
                }
                lines.push(line);
                match elsewhere.first().and_then(|p| p.parent()) {
                    Some(dir) => hints.push(format!(
                        "add NVRTC's folder to the library search path: `export LD_LIBRARY_PATH={}:$LD_LIBRARY_PATH`",
                        dir.display()
                    )),
                    None => hints.push("install the CUDA toolkit's NVRTC (Debian/Ubuntu with NVIDIA's repository: `cuda-nvrtc-13-0`; or the toolkit from developer.nvidia.com) and put its lib folder on LD_LIBRARY_PATH".into()),
                }
            }
            CudaProblem::HeadersNotFound { looked } => {
                what.push("the CUDA headers are missing");
                lines.push(format!(
                    "CUDA headers ({}, which NVRTC compiles every kernel with): looked in {}",
                    HEADERS.join(", "),
                    looked.join("; ")
                ));
                hints.push("install the CUDA toolkit's headers (`cuda-cudart-dev-13-0`, or the whole toolkit) and set `CUDA_PATH` to its folder (the one with include/) when it is not /usr/local/cuda".into());
            }
        }
    }
    let what = match what.len() {
        0 => String::new(),
        1 => what[0].to_string(),
        n => format!("{} and {}", what[..n - 1].join(", "), what[n - 1]),
    };
    let mut out = format!("backend `cuda` cannot run on this machine: {what}");
    for line in &lines {
        out.push_str("\n  - ");
        out.push_str(line);
    }
    out.push_str("\n\nhint: ");
    hints.push(
        "or set `backend = \"wgpu\"` or `\"cpu\"`; `pdsweep devices` shows what is found".into(),
    );
    out.push_str(&hints.join("; "));
    out
}

/// Checks every requirement of the cuda backend, without opening a device; on success, the
/// driver's devices.
pub fn probe() -> Result<CudaRuntime, CudaUnavailable> {
    #[cfg(feature = "cuda")]
    return ffi::probe();
    #[cfg(not(feature = "cuda"))]
    Err(CudaUnavailable {
        problems: vec![CudaProblem::NotBuilt],
    })
}

/// Where cubecl's NVRTC compile looks for the CUDA folder, in its order, each with what it
/// holds; `Ok` with the include folder when the folder it picks has the headers.
///
/// cubecl (`cubecl_cuda::install::cuda_path`) takes the first of: `CUDA_PATH` (whether or not
/// it exists), `/usr/local/cuda`, `/opt/cuda`, `/usr` when `/usr/bin/nvcc` exists; and passes
/// its `include/` to NVRTC. Without any of them it panics when compiling the first kernel.
pub fn headers(cuda_path_env: Option<&str>) -> Result<PathBuf, Vec<String>> {
    let exists = |p: &str| std::path::Path::new(p).exists();
    let (root, mut looked) = match cuda_path_env {
        Some(env) => (Some(PathBuf::from(env)), vec![]),
        None => {
            let mut looked = vec!["CUDA_PATH (unset)".to_string()];
            let root = if exists("/usr/local/cuda") {
                Some(PathBuf::from("/usr/local/cuda"))
            } else if exists("/opt/cuda") {
                looked.push("/usr/local/cuda (absent)".into());
                Some(PathBuf::from("/opt/cuda"))
            } else if exists("/usr/bin/nvcc") {
                looked.push("/usr/local/cuda (absent)".into());
                looked.push("/opt/cuda (absent)".into());
                Some(PathBuf::from("/usr"))
            } else {
                looked.push("/usr/local/cuda (absent)".into());
                looked.push("/opt/cuda (absent)".into());
                looked.push("/usr (used only when /usr/bin/nvcc exists; it does not)".into());
                None
            };
            (root, looked)
        }
    };
    let Some(root) = root else {
        return Err(looked);
    };
    let include = root.join("include");
    let missing: Vec<&str> = HEADERS
        .iter()
        .copied()
        .filter(|h| !include.join(h).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(include);
    }
    let label = match cuda_path_env {
        Some(_) => format!("CUDA_PATH={}", root.display()),
        None => root.display().to_string(),
    };
    looked.push(if !root.exists() {
        format!("{label} (absent)")
    } else if !include.is_dir() {
        format!("{label} (it has no include/)")
    } else {
        format!("{} (no {})", include.display(), missing.join(", "))
    });
    Err(looked)
}

#[cfg(feature = "cuda")]
mod ffi {
    //! The driver and NVRTC calls of the probe (cudarc's, after `dlopen` found the library
    //! cudarc will load).

    use std::ffi::{CStr, CString};
    use std::path::PathBuf;

    use cudarc::driver::sys::CUdevice_attribute;

    use super::{CudaDevice, CudaProblem, CudaRuntime, CudaUnavailable};

    /// The first of `names` that `dlopen` loads, or the error of the first one.
    fn first_loadable(names: &[String]) -> Result<String, String> {
        let mut first_error = None;
        for name in names {
            match dlopen(name) {
                Ok(()) => return Ok(name.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| "no names to try".into()))
    }

    /// Whether `name` loads, as libloading (and so cudarc) loads it.
    fn dlopen(name: &str) -> Result<(), String> {
        let c = CString::new(name).map_err(|_| format!("`{name}` holds a NUL byte"))?;
        // SAFETY: `c` is NUL-terminated and outlives the call; the handle is closed at once.
        // Loading runs the library's initialisers, as cudarc's own loading of it would.
        unsafe {
            let handle = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                let err = libc::dlerror();
                return Err(if err.is_null() {
                    format!("{name}: cannot be loaded")
                } else {
                    CStr::from_ptr(err).to_string_lossy().into_owned()
                });
            }
            libc::dlclose(handle);
        }
        Ok(())
    }

    /// The names cudarc tries for `libs`, most specific last as cudarc orders them, without
    /// repeats.
    fn candidates(libs: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for lib in libs {
            for name in cudarc::get_lib_name_candidates(lib) {
                if !out.contains(&name) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// The preferred name's error: `libcuda.so.1`, `libnvrtc.so.<major>`, else the first's.
    fn preferred_error(names: &[String], preferred: &str) -> String {
        match dlopen(preferred) {
            Err(e) => e,
            Ok(()) => first_loadable(names).err().unwrap_or_default(),
        }
    }

    /// NVRTC libraries in the CUDA folder cubecl picks (or `/usr/local/cuda`), for a hint when
    /// they are off the library search path.
    fn nvrtc_elsewhere() -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = Vec::new();
        if let Some(root) = cubecl_cuda::install::cuda_path() {
            roots.push(root);
        }
        for r in ["/usr/local/cuda", "/opt/cuda"] {
            let r = PathBuf::from(r);
            if !roots.contains(&r) {
                roots.push(r);
            }
        }
        let mut found = Vec::new();
        for root in roots {
            for sub in [
                "lib64",
                "lib",
                "targets/x86_64-linux/lib",
                "targets/sbsa-linux/lib",
            ] {
                let Ok(entries) = std::fs::read_dir(root.join(sub)) else {
                    continue;
                };
                let mut names: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("libnvrtc.so"))
                    })
                    .collect();
                names.sort();
                found.extend(names);
            }
        }
        found
    }

    fn driver_error(call: &str, e: cudarc::driver::DriverError) -> String {
        let name = e
            .error_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| format!("{:?}", e.0));
        let text = e
            .error_string()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if text.is_empty() {
            format!("{call} failed: {name}")
        } else {
            format!("{call} failed: {name} ({text})")
        }
    }

    /// `cuInit`, then every device's name, compute capability and memory.
    fn devices() -> Result<(i32, Vec<CudaDevice>), String> {
        use cudarc::driver::result;
        result::init().map_err(|e| driver_error("cuInit", e))?;
        let mut version = 0;
        // SAFETY: `version` outlives the call, which only writes it.
        unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(|e| driver_error("cuDriverGetVersion", e))?;
        let count = result::device::get_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
        let mut out = Vec::new();
        for i in 0..count.max(0) {
            let dev = result::device::get(i).map_err(|e| driver_error("cuDeviceGet", e))?;
            let name =
                result::device::get_name(dev).unwrap_or_else(|_| "unknown CUDA device".into());
            // SAFETY: `dev` came from `cuDeviceGet` above; these only read its properties.
            let (major, minor, memory) = unsafe {
                (
                    result::device::get_attribute(
                        dev,
                        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    )
                    .unwrap_or(0),
                    result::device::get_attribute(
                        dev,
                        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    )
                    .unwrap_or(0),
                    result::device::total_mem(dev).unwrap_or(0),
                )
            };
            out.push(CudaDevice {
                index: i as usize,
                name,
                compute_capability: (major, minor),
                memory_bytes: memory as u64,
            });
        }
        if out.is_empty() {
            return Err("the driver reports no CUDA device".into());
        }
        Ok((version, out))
    }

    fn nvrtc_version() -> (i32, i32) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both out-parameters outlive the call, which only writes them.
        let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
        if status == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
            (major, minor)
        } else {
            (0, 0)
        }
    }

    pub(super) fn probe() -> Result<CudaRuntime, CudaUnavailable> {
        let mut problems = Vec::new();

        let driver_names = candidates(&["cuda", "nvcuda"]);
        let driver = match first_loadable(&driver_names) {
            Ok(library) => match devices() {
                Ok((version, devices)) => Some((library, version, devices)),
                Err(error) => {
                    problems.push(CudaProblem::DriverFailed { library, error });
                    None
                }
            },
            Err(_) => {
                let preferred = "libcuda.so.1".to_string();
                problems.push(CudaProblem::DriverNotFound {
                    dlopen_error: preferred_error(&driver_names, &preferred),
                    preferred,
                    tried: driver_names,
                });
                None
            }
        };

        let nvrtc_names = candidates(&["nvrtc"]);
        // cudarc's first `libnvrtc.so.N` is N = the CUDA major version of its bindings.
        let preferred = nvrtc_names
            .iter()
            .find(|n| n.starts_with("libnvrtc.so."))
            .cloned()
            .unwrap_or_else(|| "libnvrtc.so".into());
        let nvrtc = match first_loadable(&nvrtc_names) {
            Ok(library) => Some((library, nvrtc_version())),
            Err(_) => {
                problems.push(CudaProblem::NvrtcNotFound {
                    dlopen_error: preferred_error(&nvrtc_names, &preferred),
                    preferred,
                    tried: nvrtc_names,
                    elsewhere: nvrtc_elsewhere(),
                });
                None
            }
        };

        let env = std::env::var("CUDA_PATH").ok();
        let include_dir = match super::headers(env.as_deref()) {
            Ok(dir) => Some(dir),
            Err(looked) => {
                problems.push(CudaProblem::HeadersNotFound { looked });
                None
            }
        };

        match (driver, nvrtc, include_dir) {
            (
                Some((driver_library, driver_version, devices)),
                Some((nvrtc_library, nvrtc_version)),
                Some(include_dir),
            ) if problems.is_empty() => Ok(CudaRuntime {
                driver_library,
                driver_version,
                nvrtc_library,
                nvrtc_version,
                include_dir,
                devices,
            }),
            _ => Err(CudaUnavailable { problems }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_path_without_headers_names_the_headers_and_the_path() {
        let dir = tempfile_dir();
        let looked = headers(Some(dir.to_str().unwrap())).unwrap_err();
        assert_eq!(looked.len(), 1, "{looked:?}");
        assert!(looked[0].starts_with("CUDA_PATH="), "{looked:?}");
        assert!(looked[0].ends_with("(it has no include/)"), "{looked:?}");
        std::fs::create_dir_all(dir.join("include")).unwrap();
        std::fs::write(dir.join("include/cuda_fp16.h"), "").unwrap();
        let looked = headers(Some(dir.to_str().unwrap())).unwrap_err();
        assert!(looked[0].ends_with("(no cuda_bf16.h)"), "{looked:?}");
        std::fs::write(dir.join("include/cuda_bf16.h"), "").unwrap();
        assert_eq!(
            headers(Some(dir.to_str().unwrap())).unwrap(),
            dir.join("include")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_message_names_everything_missing_and_where_it_looked() {
        let e = CudaUnavailable {
            problems: vec![
                CudaProblem::DriverNotFound {
                    preferred: "libcuda.so.1".into(),
                    tried: vec![
                        "libcuda.so".into(),
                        "libcuda64.so".into(),
                        "libcuda.so.1".into(),
                    ],
                    dlopen_error: "libcuda.so.1: cannot open shared object file".into(),
                },
                CudaProblem::NvrtcNotFound {
                    preferred: "libnvrtc.so.13".into(),
                    tried: vec!["libnvrtc.so".into(), "libnvrtc.so.13".into()],
                    dlopen_error: "libnvrtc.so.13: cannot open shared object file".into(),
                    elsewhere: vec![PathBuf::from("/usr/local/cuda/lib64/libnvrtc.so.13")],
                },
                CudaProblem::HeadersNotFound {
                    looked: vec![
                        "CUDA_PATH (unset)".into(),
                        "/usr/local/cuda (absent)".into(),
                    ],
                },
            ],
        };
        let m = e.to_string();
        assert!(m.starts_with("backend `cuda` cannot run on this machine: the NVIDIA driver is missing, NVRTC is missing and the CUDA headers are missing"), "{m}");
        for needle in [
            "tried libcuda.so.1, libcuda.so and 1 other names of cudarc's list",
            "tried libnvrtc.so.13, libnvrtc.so on",
            "libnvrtc.so.13",
            "LD_LIBRARY_PATH",
            "CUDA_PATH (unset)",
            "/usr/local/cuda (absent)",
            "export LD_LIBRARY_PATH=/usr/local/cuda/lib64:",
            "\n\nhint: ",
        ] {
            assert!(m.contains(needle), "no {needle:?} in {m}");
        }
        assert!(e.lacks_driver());
        assert!(
            e.short().contains("NVIDIA driver not found (libcuda.so.1"),
            "{}",
            e.short()
        );
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "pdsweep-cuda-headers-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
