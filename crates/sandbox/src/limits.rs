//! Execution limits: built-in defaults, an operator's policy file, and
//! per-request overrides that may only lower them.

use std::path::Path;
use std::time::Duration;

pub use anypath_wire::LimitOverrides;
use serde::{Deserialize, Serialize};

/// Every bound one execution runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// WebAssembly fuel (roughly instructions) a block may burn; the default
    /// is about 1.5 s of CPU on a current x86-64 core.
    pub fuel: u64,
    /// Largest linear memory the instance may grow to, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock budget for one execution, in milliseconds.
    pub timeout_ms: u64,
    /// Largest accepted block of source code, in bytes.
    pub max_code_bytes: u64,
    /// Largest accepted input (context plus collections), in bytes.
    pub max_input_bytes: u64,
    /// Captured stdout kept, in bytes; the rest is dropped and flagged.
    pub stdout_bytes: u32,
    /// Captured stderr kept, in bytes; the rest is dropped and flagged.
    pub stderr_bytes: u32,
    /// Largest reply body plus mutation journal, in bytes.
    pub result_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 10_000_000_000,
            memory_bytes: 128 << 20,
            timeout_ms: 5_000,
            max_code_bytes: 64 << 10,
            max_input_bytes: 16 << 20,
            stdout_bytes: 1 << 20,
            stderr_bytes: 512 << 10,
            result_bytes: 4 << 20,
        }
    }
}

impl Limits {
    /// The data runtime's defaults: a first chart (import pandas and
    /// matplotlib, read a CSV, group, plot, save) takes about 1e10 fuel and
    /// seconds, heavier analyses several times that, so 5e10 fuel, 512 MiB
    /// and 60 s; everything else as the default runtime.
    pub fn python_data() -> Self {
        Self { fuel: 50_000_000_000, memory_bytes: 512 << 20, timeout_ms: 60_000, ..Self::default() }
    }
}

/// Fuel a REST block gets whatever its input: far more than a block over a
/// few documents needs (tens of millions), so only code that loops without
/// end reaches it, after about 150 ms of CPU instead of the whole ceiling.
pub const BLOCK_BASE_FUEL: u64 = 1_000_000_000;
/// Fuel a REST block gets per byte of input (context plus collections).
/// Measured with the rule planner's list (filter, sort, page) over 140,000
/// documents (13 MiB): 6.06 G fuel, 445 per byte; its search, 683 per byte.
pub const BLOCK_FUEL_PER_INPUT_BYTE: u64 = 700;

/// The fuel budget of a REST block over `input_bytes` of input, at most `ceiling`.
pub fn block_fuel(input_bytes: u64, ceiling: u64) -> u64 {
    BLOCK_BASE_FUEL.saturating_add(BLOCK_FUEL_PER_INPUT_BYTE.saturating_mul(input_bytes)).min(ceiling)
}

/// A policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read policy file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("invalid policy file {path}: {source}")]
    Parse { path: String, source: toml::de::Error },
    #[error("invalid policy: {0} must be greater than zero")]
    Zero(&'static str),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    limits: LimitOverrides,
}

impl Limits {
    /// Defaults merged with the `[limits]` table of a policy TOML file.
    pub fn from_policy_file(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_policy_str(&text).map_err(|e| match e {
            PolicyError::Parse { source, .. } => PolicyError::Parse {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })
    }

    /// Defaults merged with a policy TOML document.
    pub fn from_policy_str(text: &str) -> Result<Self, PolicyError> {
        let file: PolicyFile = toml::from_str(text).map_err(|source| PolicyError::Parse {
            path: String::from("<inline>"),
            source,
        })?;
        Self::default().replaced_by(&file.limits).validated()
    }

    /// These limits with every value the overrides set taken as is (operator policy).
    pub fn replaced_by(&self, o: &LimitOverrides) -> Self {
        Self {
            fuel: o.fuel.unwrap_or(self.fuel),
            memory_bytes: o.memory_bytes.unwrap_or(self.memory_bytes),
            timeout_ms: o.timeout_ms.unwrap_or(self.timeout_ms),
            max_code_bytes: o.max_code_bytes.unwrap_or(self.max_code_bytes),
            max_input_bytes: o.max_input_bytes.unwrap_or(self.max_input_bytes),
            stdout_bytes: o.stdout_bytes.unwrap_or(self.stdout_bytes),
            stderr_bytes: o.stderr_bytes.unwrap_or(self.stderr_bytes),
            result_bytes: o.result_bytes.unwrap_or(self.result_bytes),
        }
    }

    /// These limits lowered by a request's overrides; a request can never raise one.
    pub fn narrowed_by(&self, o: &LimitOverrides) -> Self {
        fn min<T: Ord + Copy>(current: T, requested: Option<T>) -> T {
            requested.map_or(current, |r| r.min(current))
        }
        Self {
            fuel: min(self.fuel, o.fuel),
            memory_bytes: min(self.memory_bytes, o.memory_bytes),
            timeout_ms: min(self.timeout_ms, o.timeout_ms),
            max_code_bytes: min(self.max_code_bytes, o.max_code_bytes),
            max_input_bytes: min(self.max_input_bytes, o.max_input_bytes),
            stdout_bytes: min(self.stdout_bytes, o.stdout_bytes),
            stderr_bytes: min(self.stderr_bytes, o.stderr_bytes),
            result_bytes: min(self.result_bytes, o.result_bytes),
        }
    }

    fn validated(self) -> Result<Self, PolicyError> {
        let zero = [
            ("fuel", self.fuel == 0),
            ("memory_bytes", self.memory_bytes == 0),
            ("timeout_ms", self.timeout_ms == 0),
            ("max_code_bytes", self.max_code_bytes == 0),
            ("max_input_bytes", self.max_input_bytes == 0),
            ("result_bytes", self.result_bytes == 0),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((name, _)) => Err(PolicyError::Zero(name)),
            None => Ok(self),
        }
    }

    /// The wall-clock budget as a `Duration`.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_lowers_the_data_runtime_limits_and_never_raises_them() {
        let data = Limits::python_data();
        assert_eq!((data.fuel, data.memory_bytes, data.timeout_ms), (50_000_000_000, 512 << 20, 60_000));
        let raise = LimitOverrides { fuel: Some(u64::MAX), memory_bytes: Some(4 << 30), timeout_ms: Some(3_600_000), ..LimitOverrides::default() };
        assert_eq!(data.narrowed_by(&raise), data);
        let lower = LimitOverrides { fuel: Some(1_000), timeout_ms: Some(10), ..LimitOverrides::default() };
        assert_eq!((data.narrowed_by(&lower).fuel, data.narrowed_by(&lower).timeout_ms), (1_000, 10));
    }

    #[test]
    fn policy_file_replaces_only_what_it_names() {
        let limits = Limits::from_policy_str("[limits]\nfuel = 1000\ntimeout_ms = 50\n").unwrap();
        assert_eq!(limits.fuel, 1000);
        assert_eq!(limits.timeout_ms, 50);
        assert_eq!(limits.memory_bytes, Limits::default().memory_bytes);
    }

    #[test]
    fn the_example_policy_parses_to_the_defaults() {
        let limits = Limits::from_policy_str(include_str!("../policy.example.toml")).unwrap();
        assert_eq!(limits, Limits::default());
    }

    #[test]
    fn policy_file_rejects_unknown_keys_and_zero_limits() {
        assert!(matches!(
            Limits::from_policy_str("[limits]\nfuell = 1\n"),
            Err(PolicyError::Parse { .. })
        ));
        assert!(matches!(
            Limits::from_policy_str("[limits]\ntimeout_ms = 0\n"),
            Err(PolicyError::Zero("timeout_ms"))
        ));
    }

    #[test]
    fn a_request_can_lower_but_never_raise_a_limit() {
        let base = Limits::default();
        let narrowed = base.narrowed_by(&LimitOverrides {
            fuel: Some(10),
            timeout_ms: Some(u64::MAX),
            memory_bytes: Some(base.memory_bytes * 4),
            ..Default::default()
        });
        assert_eq!(narrowed.fuel, 10);
        assert_eq!(narrowed.timeout_ms, base.timeout_ms);
        assert_eq!(narrowed.memory_bytes, base.memory_bytes);
    }
}
