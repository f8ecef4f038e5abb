//! Planner settings from Spin variables, and which planner mode they select.

use std::time::Duration;

use anypath_llm::{OutputMode, Provider, Settings};
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
}

fn var(name: &str) -> String {
    variables::get(name).unwrap_or_default().trim().to_owned()
}

/// Loopback and private-network hosts run their own model (Ollama, vLLM, ...).
fn is_local(host: &str) -> bool {
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    name == "localhost" || name == "::1" || name.starts_with("127.") || name.starts_with("10.") || name.starts_with("192.168.")
}

impl Config {
    /// Reads the variables. An unset or unknown mode is `auto` when an API
    /// key or a local base URL is configured, `rules` otherwise.
    pub fn load() -> Self {
        let host = var("llm_host");
        let scheme = match var("llm_scheme").as_str() {
            "" => "https".to_owned(),
            s => s.to_owned(),
        };
        let api_key = var("llm_api_key");
        let can_reach_llm = !host.is_empty() && (!api_key.is_empty() || is_local(&host));
        let (mode, mode_reason) = match var("planner_mode").as_str() {
            "rules" => (Mode::Rules, "planner_mode"),
            "llm" => (Mode::Llm, "planner_mode"),
            "auto" => (Mode::Auto, "planner_mode"),
            _ if can_reach_llm => (Mode::Auto, "an LLM host with an API key or on a local address is configured"),
            _ => (Mode::Rules, "no LLM is configured"),
        };
        let settings = var("llm_provider")
            .parse::<Provider>()
            .or_else(|e| if var("llm_provider").is_empty() { Ok(Provider::OpenAi) } else { Err(e) })
            .map_err(|e| e.to_string())
            .and_then(|provider| {
                let model = var("llm_model");
                if model.is_empty() && mode != Mode::Rules {
                    return Err("llm_model is not set".to_owned());
                }
                Ok(Settings {
                    provider,
                    model,
                    temperature: var("llm_temperature").parse().unwrap_or(0.0),
                    max_tokens: var("llm_max_tokens").parse().unwrap_or(1500),
                })
            });
        Self {
            mode,
            mode_reason,
            base_url: if host.is_empty() { String::new() } else { format!("{scheme}://{host}") },
            host,
            api_key,
            settings,
            output_mode: OutputMode::from_name(&var("llm_structured_output")),
            timeout: Duration::from_millis(var("llm_timeout_ms").parse().unwrap_or(60_000)),
            call_timeout: Duration::from_millis(var("call_timeout_ms").parse().unwrap_or(10_000)),
        }
    }

    /// The model name, or empty.
    pub fn model(&self) -> &str {
        self.settings.as_ref().map(|s| s.model.as_str()).unwrap_or("")
    }
}
