//! Gateway settings from Spin variables.

use std::time::Duration;

use anypath_rest::settings::{SettingError, Settings};
use anypath_rest::{PoolError, SandboxPool};
use anypath_wire::LimitOverrides;
use front::FrontSettings;
use spin_sdk::variables;

/// Everything the gateway reads from `spin.toml` variables.
pub struct Config {
    /// What every public request is served under (the store reads the same).
    pub front: FrontSettings,
    /// The sandbox hosts (`anypath sandbox serve`), from `sandbox_hosts`, or
    /// why that list cannot be used (every block then fails with 503).
    pub sandbox_pool: Result<SandboxPool, PoolError>,
    /// Shared secret of the sandbox hosts, if they require one.
    pub sandbox_token: String,
    pub call_timeout: Duration,
    /// For the planner call, which may wait on the LLM.
    pub plan_timeout: Duration,
    /// Limits to lower for every execution (`exec_fuel`, `exec_timeout_ms`).
    pub exec_limits: LimitOverrides,
    /// Variables whose values cannot be used.
    pub errors: Vec<SettingError>,
}

impl Config {
    /// Reads the variables; empty ones take their defaults, and a value that
    /// cannot be used is kept in [`Config::errors`] (the gateway then refuses
    /// to serve rather than run on a setting nobody asked for).
    pub fn load() -> Self {
        let mut settings = Settings::new(|name: &str| variables::get(name).ok());
        let front = FrontSettings::read(&mut settings);
        let config = Self {
            front,
            call_timeout: settings.millis("call_timeout_ms", 10_000),
            sandbox_pool: SandboxPool::parse(&settings.text("sandbox_hosts")),
            sandbox_token: settings.text("sandbox_token"),
            plan_timeout: settings.millis("planner_timeout_ms", 120_000),
            exec_limits: LimitOverrides {
                fuel: settings.optional_number("exec_fuel"),
                timeout_ms: settings.optional_number("exec_timeout_ms"),
                ..LimitOverrides::default()
            },
            errors: Vec::new(),
        };
        Self { errors: settings.errors(), ..config }
    }
}
