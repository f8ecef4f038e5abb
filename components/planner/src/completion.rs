//! `POST /complete`: one completion for the agent, which may not reach the
//! LLM itself. The body is an `anypath_llm::ChatRequest` and the answer a
//! `ChatAnswer`, the same types the agent writes and reads; the configured
//! provider's adapter carries them in its native format.
//!
//! The agent asks for a tool call every turn (`tool_choice: required`). A
//! server that refuses that setting is asked again without it; one that
//! takes it but answers without a tool call anyway (llama.cpp with a chat
//! template it has no tool-call grammar for writes the call as text, then
//! pads to the token cap) is taken at its word this once. Either way the
//! planner remembers, by server URL and model, to leave the setting out
//! from then on, and the agent reads calls written as text.

use anypath_llm::structured::memo_key;
use anypath_llm::{ChatAnswer, ChatRequest, ToolChoice};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::llm_call::{self, AskError};
use crate::{Failure, memo};

/// What is remembered, in the memo key.
const REMEMBERED: &str = "tool_choice";

/// What the planner keeps about a server's tool calling.
#[derive(Serialize, Deserialize)]
struct ToolChoiceMemo {
    /// Whether the server takes `tool_choice: required`.
    required: bool,
}

/// Asks the configured LLM for one completion of `chat`, stepping down from
/// a required tool call when the server refuses it.
pub fn complete(config: &Config, chat: &ChatRequest, request_id: &str) -> Result<ChatAnswer, Failure> {
    let settings = llm_call::settings(config)?;
    if chat.tool_choice != Some(ToolChoice::Required) {
        return Ok(llm_call::ask(config, settings, chat, request_id)?);
    }
    let key = memo_key(REMEMBERED, &config.base_url, &settings.model);
    let remembered: Option<ToolChoiceMemo> = memo::recall(config, &key, request_id);
    let unconstrained = || ChatRequest { tool_choice: None, ..chat.clone() };
    if remembered.is_some_and(|m| !m.required) {
        return Ok(llm_call::ask(config, settings, &unconstrained(), request_id)?);
    }
    let not_honoured = || memo::keep(config, &key, &ToolChoiceMemo { required: false }, request_id);
    match llm_call::ask(config, settings, chat, request_id) {
        Err(AskError::Provider(error)) if error.refuses_setting() => {
            let answer = llm_call::ask(config, settings, &unconstrained(), request_id)?;
            not_honoured();
            Ok(answer)
        }
        Ok(answer) if answer.tool_calls.is_empty() => {
            not_honoured();
            Ok(answer)
        }
        answered => Ok(answered?),
    }
}
