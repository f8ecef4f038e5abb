//! `POST /complete`: one completion for the agent, which may not reach the
//! LLM itself. The body is an `anypath_llm::ChatRequest` and the answer a
//! `ChatAnswer`, the same types the agent writes and reads; the configured
//! provider's adapter carries them in its native format.
//!
//! The agent asks for a tool call every turn (`tool_choice: required`). Not
//! every server honours that: one refuses the setting, another (llama.cpp
//! with a chat template it has no tool-call grammar for) takes it, writes
//! the call as text and then pads to the token cap, which costs a small
//! model on two cores minutes. So before the first required turn the
//! planner probes the server with a request of its own, a few words asking
//! for a call of [`PROBE_TOOL`] capped at [`PROBE_MAX_TOKENS`], and
//! remembers by server URL and model whether a call came back. A server
//! that does not honour it is asked without the setting from then on, and
//! the agent reads calls written as text; one that stops honouring it
//! later is remembered so at its first answer without a call.

use anypath_llm::structured::memo_key;
use anypath_llm::{ChatAnswer, ChatRequest, Message, Settings, ToolChoice, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::Config;
use crate::llm_call::{self, AskError};
use crate::{Failure, memo};

/// What is remembered, in the memo key.
const REMEMBERED: &str = "tool_choice";

/// The tool the probe asks for; it takes no arguments, so its call is a
/// handful of tokens.
pub const PROBE_TOOL: &str = "tool_choice_probe";

/// The probe's answer cap: room for a call without arguments, not for
/// padding.
const PROBE_MAX_TOKENS: u32 = 64;

/// What the planner keeps about a server's tool calling.
#[derive(Serialize, Deserialize)]
struct ToolChoiceMemo {
    /// Whether the server takes `tool_choice: required`.
    required: bool,
}

/// Asks the configured LLM for one completion of `chat`, leaving out a
/// required tool call where the server does not honour it.
pub fn complete(config: &Config, chat: &ChatRequest, request_id: &str) -> Result<ChatAnswer, Failure> {
    let settings = llm_call::settings(config)?;
    if chat.tool_choice != Some(ToolChoice::Required) {
        return Ok(llm_call::ask(config, settings, chat, request_id)?);
    }
    let key = memo_key(REMEMBERED, &config.base_url, &settings.model);
    let honoured = match memo::recall::<ToolChoiceMemo>(config, &key, request_id) {
        Some(memo) => memo.required,
        None => {
            let required = probe(config, settings, request_id)?;
            memo::keep(config, &key, &ToolChoiceMemo { required }, request_id);
            required
        }
    };
    let unconstrained = || ChatRequest { tool_choice: None, ..chat.clone() };
    if !honoured {
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

/// Whether the server honours `tool_choice: required`: asked for a call of
/// [`PROBE_TOOL`], it answers with a call (yes) or with text (no). A
/// refusal is taken as a refusal of the setting only when the same probe
/// without it is answered: a server that refuses tools altogether, or some
/// other part of the request, fails the caller and nothing is remembered.
fn probe(config: &Config, settings: &Settings, request_id: &str) -> Result<bool, Failure> {
    let tool = ToolSpec {
        name: PROBE_TOOL.into(),
        description: "Says that tool calls work. Takes no arguments.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    };
    let chat = ChatRequest {
        tool_choice: Some(ToolChoice::Required),
        max_tokens: Some(PROBE_MAX_TOKENS),
        ..ChatRequest::new("You answer with a tool call.", vec![Message::user(format!("Call {PROBE_TOOL}."))]).with_tools(vec![tool])
    };
    match llm_call::ask(config, settings, &chat, request_id) {
        Ok(answer) => Ok(!answer.tool_calls.is_empty()),
        Err(AskError::Provider(error)) if error.refuses_setting() => {
            llm_call::ask(config, settings, &ChatRequest { tool_choice: None, ..chat }, request_id)?;
            Ok(false)
        }
        Err(other) => Err(other.into()),
    }
}
