//! A Chat Completions answer as a [`ChatAnswer`].

use serde::Deserialize;
use serde_json::Value;

use crate::answer::{ChatAnswer, FinishReason, ToolCall, Usage};
use crate::error::{LlmError, check_status};
use crate::lenient;

#[derive(Deserialize)]
struct Answer {
    #[serde(default, deserialize_with = "lenient::list")]
    choices: Option<Vec<Choice>>,
    #[serde(default, deserialize_with = "lenient::object")]
    usage: Option<Counts>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default, deserialize_with = "lenient::object")]
    message: Option<Said>,
    #[serde(default, deserialize_with = "lenient::string")]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Said {
    #[serde(default, deserialize_with = "lenient::string")]
    content: Option<String>,
    #[serde(default, deserialize_with = "lenient::list")]
    tool_calls: Option<Vec<Call>>,
}

#[derive(Deserialize)]
struct Call {
    #[serde(default, deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(default)]
    function: Function,
}

#[derive(Deserialize, Default)]
struct Function {
    #[serde(default, deserialize_with = "lenient::string")]
    name: Option<String>,
    #[serde(default, deserialize_with = "lenient::string")]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Counts {
    #[serde(default, deserialize_with = "lenient::count")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "lenient::count")]
    completion_tokens: u64,
}

/// The first choice's message, its tool calls and the token counts.
pub(super) fn read(status: u16, body: &[u8]) -> Result<ChatAnswer, LlmError> {
    check_status(status, body)?;
    let answer: Answer = serde_json::from_slice(body).map_err(|e| LlmError::Malformed(format!("not a JSON object: {e}")))?;
    let usage = answer.usage.map(|u| Usage { input_tokens: u.prompt_tokens, output_tokens: u.completion_tokens }).unwrap_or_default();
    let Some(Choice { message: Some(message), finish_reason }) = answer.choices.and_then(|choices| choices.into_iter().next()) else {
        return Err(LlmError::Malformed("no choices[0].message".into()));
    };
    let tool_calls = message.tool_calls.unwrap_or_default().into_iter().enumerate().map(|(i, call)| tool_call(i, call)).collect();
    Ok(ChatAnswer { content: message.content, tool_calls, usage, finish_reason: finish_reason.map(finish) })
}

/// The `i`th call; arguments that are not a JSON object stay the text the
/// model wrote, for the caller to refuse with a reason.
fn tool_call(i: usize, call: Call) -> ToolCall {
    let raw = call.function.arguments.unwrap_or_default();
    let arguments = match serde_json::from_str::<Value>(&raw) {
        Ok(value) if value.is_object() => value,
        _ => Value::String(raw),
    };
    ToolCall { id: call.id.unwrap_or_else(|| format!("call_{i}")), name: call.function.name.unwrap_or_default(), arguments }
}

fn finish(reason: String) -> FinishReason {
    match reason.as_str() {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other(reason),
    }
}
