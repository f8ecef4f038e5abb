//! Execution limits: built-in defaults, an operator's policy file, and
//! per-request overrides that may only lower them.

use std::path::Path;
use std::time::Duration;

pub use anypath_wire::LimitOverrides;
use serde::{Deserialize, Serialize};

use anypath_wire::Runtime;

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
    #[error("invalid policy: {runtime}'s {name} must be greater than zero")]
    Zero { runtime: Runtime, name: &'static str },
    #[error("invalid policy: [limits] is the older spelling of [runtime.python]; give one of them")]
    Both,
    #[error("invalid limit {0:?}: write RUNTIME.KEY=VALUE, as python-data.memory_bytes=1073741824")]
    Flag(String),
}

/// An operator's ceilings for every runtime: the built-in defaults, replaced
/// key by key by a policy file and then by `--limit` flags. A run may only
/// lower them (`Limits::narrowed_by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// `python`: REST blocks and standard-library sessions.
    pub python: Limits,
    /// `python-data`: sessions with numpy, pandas and matplotlib.
    #[serde(rename = "python-data")]
    pub python_data: Limits,
    /// `javascript`: QuickJS sessions.
    pub javascript: Limits,
}

impl Default for Policy {
    fn default() -> Self {
        Self { python: Limits::default(), python_data: Limits::python_data(), javascript: Limits::default() }
    }
}

/// The policy file: `[runtime.python]`, `[runtime.python-data]` and
/// `[runtime.javascript]`, each key
/// optional; `[limits]` is the older spelling of `[runtime.python]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    limits: Option<LimitOverrides>,
    #[serde(default)]
    runtime: RuntimeTables,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeTables {
    python: Option<LimitOverrides>,
    #[serde(rename = "python-data")]
    python_data: Option<LimitOverrides>,
    javascript: Option<LimitOverrides>,
}

impl Policy {
    /// The policy of an optional file, then the `RUNTIME.KEY=VALUE` flags
    /// over it; unknown runtimes and keys are refused, as are zero ceilings.
    pub fn load(path: Option<&Path>, flags: &[String]) -> Result<Self, PolicyError> {
        let (text, name) = match path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read { path: path.display().to_string(), source })?;
                (text, path.display().to_string())
            }
            None => (String::new(), String::from("<none>")),
        };
        let mut table: toml::Table = toml::from_str(&text).map_err(|source| PolicyError::Parse { path: name.clone(), source })?;
        for flag in flags {
            set_flag(&mut table, flag)?;
        }
        Self::from_table(table).map_err(|e| match e {
            PolicyError::Parse { source, .. } => PolicyError::Parse { path: name, source },
            other => other,
        })
    }

    /// The policy a TOML document describes.
    pub fn from_toml(text: &str) -> Result<Self, PolicyError> {
        let table: toml::Table = toml::from_str(text).map_err(|source| PolicyError::Parse { path: String::from("<inline>"), source })?;
        Self::from_table(table)
    }

    fn from_table(table: toml::Table) -> Result<Self, PolicyError> {
        let file: PolicyFile = toml::Value::Table(table).try_into().map_err(|source| PolicyError::Parse { path: String::from("<inline>"), source })?;
        let python = match (file.limits, file.runtime.python) {
            (Some(_), Some(_)) => return Err(PolicyError::Both),
            (a, b) => a.or(b).unwrap_or_default(),
        };
        let defaults = Self::default();
        Ok(Self {
            python: defaults.python.replaced_by(&python).validated(Runtime::Python)?,
            python_data: defaults.python_data.replaced_by(&file.runtime.python_data.unwrap_or_default()).validated(Runtime::PythonData)?,
            javascript: defaults.javascript.replaced_by(&file.runtime.javascript.unwrap_or_default()).validated(Runtime::Javascript)?,
        })
    }

    /// The ceilings of `runtime`.
    pub fn limits(&self, runtime: Runtime) -> Limits {
        match runtime {
            Runtime::Python => self.python,
            Runtime::PythonData => self.python_data,
            Runtime::Javascript => self.javascript,
        }
    }
}

/// Writes `runtime.key=value` into the policy's table as
/// `[runtime.<runtime>] key = value`, for the table's own checks to judge.
fn set_flag(table: &mut toml::Table, flag: &str) -> Result<(), PolicyError> {
    let bad = || PolicyError::Flag(flag.to_owned());
    let (path, value) = flag.split_once('=').ok_or_else(bad)?;
    let (runtime, key) = path.trim().split_once('.').ok_or_else(bad)?;
    let value: i64 = value.trim().replace('_', "").parse().map_err(|_| bad())?;
    let runtimes = table.entry("runtime").or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let runtimes = runtimes.as_table_mut().ok_or_else(bad)?;
    let limits = runtimes.entry(runtime.to_owned()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
    limits.as_table_mut().ok_or_else(bad)?.insert(key.to_owned(), toml::Value::Integer(value));
    Ok(())
}

impl Limits {
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

    fn validated(self, runtime: Runtime) -> Result<Self, PolicyError> {
        let zero = [
            ("fuel", self.fuel == 0),
            ("memory_bytes", self.memory_bytes == 0),
            ("timeout_ms", self.timeout_ms == 0),
            ("max_code_bytes", self.max_code_bytes == 0),
            ("max_input_bytes", self.max_input_bytes == 0),
            ("result_bytes", self.result_bytes == 0),
        ];
        match zero.iter().find(|(_, is_zero)| *is_zero) {
            Some((name, _)) => Err(PolicyError::Zero { runtime, name }),
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
        let policy = Policy::from_toml("[limits]\nfuel = 1000\ntimeout_ms = 50\n").unwrap();
        assert_eq!((policy.python.fuel, policy.python.timeout_ms), (1000, 50));
        assert_eq!(policy.python.memory_bytes, Limits::default().memory_bytes);
        assert_eq!(policy.python_data, Limits::python_data(), "[limits] is python's alone");
        let policy = Policy::from_toml("[runtime.python-data]\nmemory_bytes = 1073741824\nstdout_bytes = 100\n").unwrap();
        assert_eq!((policy.python_data.memory_bytes, policy.python_data.stdout_bytes), (1 << 30, 100));
        assert_eq!(policy.python_data.timeout_ms, Limits::python_data().timeout_ms);
        assert_eq!(policy.python, Limits::default());
    }

    #[test]
    fn flags_override_the_file_and_are_checked_like_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, "[runtime.python-data]\nmemory_bytes = 1073741824\ntimeout_ms = 9000\n").unwrap();
        let policy = Policy::load(Some(&path), &["python-data.memory_bytes=268435456".into(), "python.fuel=5_000".into()]).unwrap();
        assert_eq!((policy.python_data.memory_bytes, policy.python_data.timeout_ms), (256 << 20, 9000));
        assert_eq!(policy.python.fuel, 5000);
        for bad in ["python-data.memory=1", "ruby.fuel=1", "python-data.fuel", "fuel=1", "python.fuel=-1", "python.fuel=0"] {
            assert!(Policy::load(None, &[bad.to_owned()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_example_policy_parses_to_the_defaults() {
        let policy = Policy::from_toml(include_str!("../policy.example.toml")).unwrap();
        assert_eq!(policy, Policy::default());
    }

    #[test]
    fn policy_file_rejects_unknown_keys_and_zero_limits() {
        for unknown in ["[limits]\nfuell = 1\n", "[runtime.ruby]\nfuel = 1\n", "[runtime.python-data]\nfuell = 1\n", "[limitz]\n"] {
            assert!(matches!(Policy::from_toml(unknown), Err(PolicyError::Parse { .. })), "{unknown}");
        }
        assert!(matches!(
            Policy::from_toml("[runtime.python-data]\ntimeout_ms = 0\n"),
            Err(PolicyError::Zero { runtime: Runtime::PythonData, name: "timeout_ms" })
        ));
        assert!(matches!(Policy::from_toml("[limits]\nfuel = 1\n[runtime.python]\nfuel = 2\n"), Err(PolicyError::Both)));
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
