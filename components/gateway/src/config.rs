//! Gateway settings from Spin variables.

use std::time::Duration;

use anypath_rest::{PoolError, SandboxPool};
use anypath_wire::LimitOverrides;
use spin_sdk::variables;

/// Everything the gateway reads from `spin.toml` variables.
pub struct Config {
    /// When non-empty, requests need `Authorization: Bearer <token>`.
    pub auth_token: String,
    /// `key:tenant` pairs separated by commas: an `X-API-Key` selects a tenant.
    pub api_keys: Vec<(String, String)>,
    /// The sandbox hosts (`anypath sandbox serve`), from `sandbox_hosts`, or
    /// why that list cannot be used (every block then fails with 503).
    pub sandbox_pool: Result<SandboxPool, PoolError>,
    /// Shared secret of the sandbox hosts, if they require one.
    pub sandbox_token: String,
    pub max_body_bytes: usize,
    pub call_timeout: Duration,
    /// For the planner call, which may wait on the LLM.
    pub plan_timeout: Duration,
    /// Limits to lower for every execution (`exec_fuel`, `exec_timeout_ms`).
    pub exec_limits: LimitOverrides,
}

fn var(name: &str) -> String {
    variables::get(name).unwrap_or_default()
}

impl Config {
    /// Reads the variables; unset optional ones take their defaults.
    pub fn load() -> Self {
        let api_keys = anypath_rest::caller::parse_api_keys(&var("api_keys"));
        Self {
            auth_token: var("auth_token"),
            api_keys,
            sandbox_pool: SandboxPool::parse(&var("sandbox_hosts")),
            sandbox_token: var("sandbox_token"),
            max_body_bytes: var("max_body_bytes").parse().unwrap_or(1 << 20),
            call_timeout: Duration::from_millis(var("call_timeout_ms").parse().unwrap_or(10_000)),
            plan_timeout: Duration::from_millis(var("planner_timeout_ms").parse().unwrap_or(120_000)),
            exec_limits: exec_limits(),
        }
    }
}

fn exec_limits() -> LimitOverrides {
    let number = |variable: &str| var(variable).trim().parse::<u64>().ok();
    LimitOverrides { fuel: number("exec_fuel"), timeout_ms: number("exec_timeout_ms"), ..LimitOverrides::default() }
}
