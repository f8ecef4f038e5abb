//! Planner settings from Spin variables, and which planner mode they select.

use std::time::Duration;

use anypath_llm::{OutputMode, Provider, Settings};
use anypath_rest::settings::{SettingError, Settings as Variables};
use spin_sdk::variables;

/// How plans are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Seed 000's routing rules only; no LLM.
    Rules,
    /// Every request goes to the LLM.
    Llm,
    /// Rules for conventional CRUD shapes, the LLM for everything else.
    Auto,
}

impl Mode {
    /// The name shown in `/healthz`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rules => "rules",
            Self::Llm => "llm",
            Self::Auto => "auto",
        }
    }
}

/// Everything the planner reads from variables.
pub struct Config {
    pub mode: Mode,
    /// Why `mode` was chosen, for `/healthz`.
    pub mode_reason: &'static str,
    /// `scheme://host[:port]` of the provider; empty when none is configured.
    pub base_url: String,
    pub host: String,
    pub api_key: String,
    pub settings: Result<Settings, String>,
    /// `llm_structured_output`: a fixed mode, or `None` for auto (strongest
    /// the server accepts, remembered).
    pub output_mode: Option<OutputMode>,
    pub timeout: Duration,
    pub call_timeout: Duration,
    /// Variables whose values cannot be used: no plan is made on them.
    pub errors: Vec<SettingError>,
}

/// Loopback and private-network hosts run their own model (Ollama, vLLM, ...).
fn is_local(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    name == "localhost" || name == "::1" || name.starts_with("127.") || name.starts_with("10.") || name.starts_with("192.168.")
}

impl Config {
    /// Reads the variables. An unset mode is `auto` when an API key or a
    /// local base URL is configured, `rules` otherwise; a value that cannot
    /// be used is kept in [`Config::errors`].
    pub fn load() -> Self {
        let mut vars = Variables::new(|name: &str| variables::get(name).ok());
        let var = |vars: &Variables<_>, name: &str| vars.text(name).trim().to_owned();
        let host = var(&vars, "llm_host");
        let scheme = match var(&vars, "llm_scheme").as_str() {
            "" | "https" => "https",
            "http" => "http",
            other => {
                vars.reject("llm_scheme", other, "is neither https nor http");
                "https"
            }
        };
        let api_key = var(&vars, "llm_api_key");
        let can_reach_llm = !host.is_empty() && (!api_key.is_empty() || is_local(&host));
        let (mode, mode_reason) = match var(&vars, "planner_mode").as_str() {
            "rules" => (Mode::Rules, "planner_mode"),
            "llm" => (Mode::Llm, "planner_mode"),
            "auto" => (Mode::Auto, "planner_mode"),
            "" if can_reach_llm => (Mode::Auto, "an LLM host with an API key or on a local address is configured"),
            "" => (Mode::Rules, "no LLM is configured"),
            other => {
                vars.reject("planner_mode", other, "is not rules, llm or auto");
                (Mode::Rules, "planner_mode is not usable")
            }
        };
        let provider_name = var(&vars, "llm_provider");
        let temperature = vars.number("llm_temperature", 0.0);
        let max_tokens = vars.number("llm_max_tokens", 1500);
        let model = var(&vars, "llm_model");
        let settings = provider_name
            .parse::<Provider>()
            .or_else(|e| if provider_name.is_empty() { Ok(Provider::OpenAi) } else { Err(e) })
            .map_err(|e| e.to_string())
            .and_then(|provider| {
                if model.is_empty() && mode != Mode::Rules {
                    return Err("llm_model is not set".to_owned());
                }
                Ok(Settings { provider, model, temperature, max_tokens })
            });
        if let Err(reason) = &settings {
            if !provider_name.is_empty() && provider_name.parse::<Provider>().is_err() {
                vars.reject("llm_provider", &provider_name, reason);
            }
        }
        let structured = var(&vars, "llm_structured_output");
        let output_mode = OutputMode::from_name(&structured);
        if output_mode.is_none() && !matches!(structured.as_str(), "" | "auto") {
            vars.reject("llm_structured_output", &structured, "is not auto, json_schema, json_object or none");
        }
        let timeout = vars.millis("llm_timeout_ms", 60_000);
        let call_timeout = vars.millis("call_timeout_ms", 10_000);
        Self {
            mode,
            mode_reason,
            base_url: if host.is_empty() { String::new() } else { format!("{scheme}://{host}") },
            host,
            api_key,
            settings,
            output_mode,
            timeout,
            call_timeout,
            errors: vars.errors(),
        }
    }

    /// The model name, or empty.
    pub fn model(&self) -> &str {
        self.settings.as_ref().map(|s| s.model.as_str()).unwrap_or("")
    }
}
