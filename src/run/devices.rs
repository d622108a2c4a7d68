//! Which GPUs `pdsweep run --devices` spreads its workers over: the indices given, or every
//! GPU of the sweep's backend (`all`), found the way `pdsweep devices` lists them.

use std::str::FromStr;

use crate::spec::Backend;

/// `--devices`: the backend's default device, GPU indices, or every GPU of the backend.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The backend's default device (no `--devices`).
    #[default]
    Default,
    /// These indices, in this order (`--devices 0,1`).
    Indices(Vec<usize>),
    /// Every GPU `pdsweep devices` lists for the sweep's backend (`--devices all`).
    All,
}

/// A `--devices` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceChoiceError {
    /// Neither indices nor `all`.
    #[error("`--devices {0}`: expected GPU indices such as `0,1`, or `all`")]
    Unreadable(String),
    /// `all` on the CPU backend.
    #[error(
        "`--devices all`: backend `cpu` has no GPUs; drop `--devices`, or set `backend = \"wgpu\"` or `\"cuda\"`"
    )]
    NoGpuBackend,
    /// `all` where the backend finds no device.
    #[error("`--devices all`: this machine has no {backend} device (`pdsweep devices` says why)")]
    NoneFound {
        /// The sweep's backend.
        backend: Backend,
    },
}

impl FromStr for DeviceChoice {
    type Err = DeviceChoiceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "all" {
            return Ok(DeviceChoice::All);
        }
        s.split(',')
            .map(|part| part.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map(DeviceChoice::Indices)
            .map_err(|_| DeviceChoiceError::Unreadable(s.to_string()))
    }
}

impl DeviceChoice {
    /// The device indices for a sweep on `backend` (empty: its default device).
    pub fn indices(&self, backend: Backend) -> Result<Vec<usize>, DeviceChoiceError> {
        match self {
            DeviceChoice::Default => Ok(Vec::new()),
            DeviceChoice::Indices(list) => Ok(list.clone()),
            DeviceChoice::All => {
                let found = match backend {
                    Backend::Cpu => return Err(DeviceChoiceError::NoGpuBackend),
                    Backend::Wgpu => crate::train::wgpu_adapters().len(),
                    Backend::Cuda => crate::train::cuda::probe().map_or(0, |r| r.devices.len()),
                };
                if found == 0 {
                    return Err(DeviceChoiceError::NoneFound { backend });
                }
                Ok((0..found).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_and_all_are_read_and_anything_else_is_refused() {
        assert_eq!("0,1".parse(), Ok(DeviceChoice::Indices(vec![0, 1])));
        assert_eq!(" 2 ".parse(), Ok(DeviceChoice::Indices(vec![2])));
        assert_eq!("all".parse(), Ok(DeviceChoice::All));
        for bad in ["", "a", "0,", "-1", "0;1"] {
            assert!(bad.parse::<DeviceChoice>().is_err(), "{bad:?} was read");
        }
    }

    #[test]
    fn all_on_the_cpu_is_refused_and_indices_pass_through() {
        assert_eq!(
            DeviceChoice::All.indices(Backend::Cpu),
            Err(DeviceChoiceError::NoGpuBackend)
        );
        assert_eq!(
            DeviceChoice::Indices(vec![1, 0]).indices(Backend::Cpu),
            Ok(vec![1, 0])
        );
        assert_eq!(DeviceChoice::Default.indices(Backend::Wgpu), Ok(vec![]));
    }
}
