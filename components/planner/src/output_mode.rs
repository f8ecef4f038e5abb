//! Asking for an answer held to a schema in the strongest structured-output
//! mode the LLM server accepts. `llm_structured_output` fixes the mode;
//! `auto` (the default) starts from the strongest, steps down when the
//! server refuses, and keeps the mode that worked in the store, keyed by
//! provider URL and model, so later requests (each a fresh component
//! instance) start there.

use anypath_llm::structured::memo_key;
use anypath_llm::{ChatRequest, OutputMode, OutputSchema, Settings};
use anypath_rest::PlanUsage;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::llm_call::{self, AskError};
use crate::{Failure, memo};

/// What is remembered, in the memo key.
const REMEMBERED: &str = "output_mode";

/// What the planner keeps about a server: the mode it accepted.
#[derive(Serialize, Deserialize)]
struct Memo {
    output_mode: String,
}

/// The answer to `chat` held to `schema`, as text: from the configured or
/// remembered mode, stepping down on a refusal, remembering the mode that
/// worked. Every call is counted in `usage`, refused ones too.
pub fn ask(config: &Config, settings: &Settings, chat: &ChatRequest, schema: &OutputSchema, request_id: &str, usage: &mut PlanUsage) -> Result<String, Failure> {
    let first = starting(config, settings, request_id);
    let mut mode = first;
    loop {
        usage.llm_calls += 1;
        let mut asked = chat.clone();
        mode.apply(settings.provider, &mut asked, schema);
        match llm_call::ask(config, settings, &asked, request_id) {
            Ok(answer) => {
                usage.tokens += answer.usage;
                let text = settings.provider.adapter().structured_text(&answer)?;
                if mode != first {
                    remember(config, settings, mode, request_id);
                }
                return Ok(text);
            }
            // Free text asks for nothing a server could refuse.
            Err(AskError::Provider(error)) if mode != OutputMode::Free && error.refuses_setting() => match mode.fallback(settings.provider) {
                Some(weaker) if config.output_mode.is_none() => mode = weaker,
                _ => return Err(error.into()),
            },
            Err(other) => return Err(other.into()),
        }
    }
}

/// The configured mode, else the remembered one, else the strongest.
fn starting(config: &Config, settings: &Settings, request_id: &str) -> OutputMode {
    if let Some(mode) = config.output_mode {
        return mode;
    }
    let key = memo_key(REMEMBERED, &config.base_url, &settings.model);
    let remembered: Option<Memo> = memo::recall(config, &key, request_id);
    remembered.and_then(|m| OutputMode::from_name(&m.output_mode)).unwrap_or(OutputMode::Schema)
}

/// Keeps `mode` for later requests; a failure to keep it only costs a refusal later.
fn remember(config: &Config, settings: &Settings, mode: OutputMode, request_id: &str) {
    let key = memo_key(REMEMBERED, &config.base_url, &settings.model);
    memo::keep(config, &key, &Memo { output_mode: mode.name().to_owned() }, request_id);
}
