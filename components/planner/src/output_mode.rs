//! Which structured-output mode to ask the LLM for, and remembering the one
//! a server accepted. `llm_structured_output` fixes it; `auto` (the default)
//! starts from the strongest, steps down when the server refuses, and keeps
//! the mode that worked in the store, keyed by provider URL and model, so
//! later requests (each a fresh component instance) start there.

use anypath_rest::llm::{OutputMode, Settings, memo_key};
use http_client::call;
use serde_json::{Value, json};

use crate::config::Config;

const STORE_MEMO_GET: &str = "http://store.spin.internal/planner-memo/get";
const STORE_MEMO_PUT: &str = "http://store.spin.internal/planner-memo/put";

/// The configured mode, else the remembered one, else the strongest.
pub fn starting(config: &Config, settings: &Settings, request_id: &str) -> OutputMode {
    if let Some(mode) = config.output_mode {
        return mode;
    }
    let remembered = || -> Option<OutputMode> {
        let body = serde_json::to_vec(&json!({"key": memo_key(&config.base_url, &settings.model)})).ok()?;
        let answer = call(STORE_MEMO_GET, Some(&body), &[("x-request-id", request_id)], config.call_timeout).ok()?;
        let found: Value = serde_json::from_slice(&answer.body).ok().filter(|_| answer.status == 200)?;
        OutputMode::from_name(found["value"]["output_mode"].as_str()?)
    };
    remembered().unwrap_or(OutputMode::Schema)
}

/// Keeps `mode` for later requests; a failure to keep it only costs a refusal later.
pub fn remember(config: &Config, settings: &Settings, mode: OutputMode, request_id: &str) {
    let entry = json!({"key": memo_key(&config.base_url, &settings.model), "value": {"output_mode": mode.name()}});
    if let Ok(body) = serde_json::to_vec(&entry) {
        let _ = call(STORE_MEMO_PUT, Some(&body), &[("x-request-id", request_id)], config.call_timeout);
    }
}
