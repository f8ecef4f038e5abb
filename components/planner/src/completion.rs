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
//! from then on, and the agent reads calls written as text. Until it knows,
//! the required turn's answer is capped at [`PROBE_MAX_TOKENS`]: padding to
//! the configured cap costs a small model on two cores minutes, long enough
//! for the call to time out before anything is learnt.

use anypath_llm::structured::memo_key;
use anypath_llm::{ChatAnswer, ChatRequest, ToolChoice};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::llm_call::{self, AskError};
use crate::{Failure, memo};

/// What is remembered, in the memo key.
const REMEMBERED: &str = "tool_choice";

/// The answer cap of a required turn while it is not known whether the
/// server honours the setting: room for a first turn's call, not for minutes of padding.
const PROBE_MAX_TOKENS: u32 = 512;

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
    if remembered.as_ref().is_some_and(|m| !m.required) {
        return Ok(llm_call::ask(config, settings, &unconstrained(), request_id)?);
    }
    let not_honoured = || memo::keep(config, &key, &ToolChoiceMemo { required: false }, request_id);
    let cap = chat.max_tokens.unwrap_or(settings.max_tokens);
    let asked = match remembered {
        Some(_) => chat.clone(),
        None => ChatRequest { max_tokens: Some(cap.min(PROBE_MAX_TOKENS)), ..chat.clone() },
    };
    match llm_call::ask(config, settings, &asked, request_id) {
        Err(AskError::Provider(error)) if error.refuses_setting() => {
            let answer = llm_call::ask(config, settings, &unconstrained(), request_id)?;
            not_honoured();
            Ok(answer)
        }
        Ok(answer) if answer.tool_calls.is_empty() => {
            not_honoured();
            Ok(answer)
        }
        Ok(answer) => {
            if remembered.is_none() {
                memo::keep(config, &key, &ToolChoiceMemo { required: true }, request_id);
            }
            Ok(answer)
        }
        answered => Ok(answered?),
    }
}
