//! Gateway settings from Spin variables.

use std::time::Duration;

use anypath_rest::cors::CorsPolicy;
use anypath_rest::settings::{SettingError, Settings};
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
    /// Which web pages on other origins may call (`cors_allowed_origins`).
    pub cors: CorsPolicy,
    pub max_body_bytes: usize,
    pub call_timeout: Duration,
    /// For the planner call, which may wait on the LLM.
    pub plan_timeout: Duration,
    /// Limits to lower for every execution (`exec_fuel`, `exec_timeout_ms`).
    pub exec_limits: LimitOverrides,
    /// `delete_reply = "record"`: a DELETE answers 200 with the deleted
    /// record, as under `Prefer: return=representation`, instead of 204.
    pub delete_returns_record: bool,
    /// `planner_mode` as set (empty, `rules`, `llm` or `auto`): which
    /// requests the rules plan without asking the planner.
    pub planner_mode: String,
    /// `rules_direct`: a request the rules plan runs in the store by the
    /// data operations themselves; `false` runs the rules' Python blocks in
    /// the sandbox instead (the same answers, slower; for comparison).
    pub rules_direct: bool,
    /// Variables whose values cannot be used.
    pub errors: Vec<SettingError>,
}

impl Config {
    /// Reads the variables; empty ones take their defaults, and a value that
    /// cannot be used is kept in [`Config::errors`] (the gateway then refuses
    /// to serve rather than run on a setting nobody asked for).
    pub fn load() -> Self {
        let mut settings = Settings::new(|name: &str| variables::get(name).ok());
        let config = Self {
            auth_token: settings.text("auth_token"),
            api_keys: settings.api_keys("api_keys"),
            sandbox_pool: SandboxPool::parse(&settings.text("sandbox_hosts")),
            sandbox_token: settings.text("sandbox_token"),
            cors: settings.cors(),
            max_body_bytes: settings.number("max_body_bytes", 1 << 20),
            call_timeout: settings.millis("call_timeout_ms", 10_000),
            plan_timeout: settings.millis("planner_timeout_ms", 120_000),
            exec_limits: LimitOverrides {
                fuel: settings.optional_number("exec_fuel"),
                timeout_ms: settings.optional_number("exec_timeout_ms"),
                ..LimitOverrides::default()
            },
            delete_returns_record: match settings.text("delete_reply").trim() {
                "" | "no-content" => false,
                "record" => true,
                other => {
                    settings.reject("delete_reply", other, "is neither no-content nor record");
                    false
                }
            },
            planner_mode: settings.text("planner_mode").trim().to_owned(),
            rules_direct: settings.flag("rules_direct", true),
            errors: Vec::new(),
        };
        Self { errors: settings.errors(), ..config }
    }
}
