//! A Messages answer as a [`ChatAnswer`].

use serde::Deserialize;
use serde_json::Value;

use crate::answer::{ChatAnswer, FinishReason, ToolCall, Usage};
use crate::error::{LlmError, check_status};
use crate::lenient;

#[derive(Deserialize)]
struct Answer {
    #[serde(default, deserialize_with = "lenient::list")]
    content: Option<Vec<Block>>,
    #[serde(default, deserialize_with = "lenient::string")]
    stop_reason: Option<String>,
    #[serde(default, deserialize_with = "lenient::object")]
    usage: Option<Counts>,
}

/// Any content block; only `text` and `tool_use` are read, others (thinking,
/// server tool results) are passed over.
#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type", default, deserialize_with = "lenient::string")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "lenient::string")]
    text: Option<String>,
    #[serde(default, deserialize_with = "lenient::string")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient::string")]
    name: Option<String>,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize)]
struct Counts {
    #[serde(default, deserialize_with = "lenient::count")]
    input_tokens: u64,
    #[serde(default, deserialize_with = "lenient::count")]
    output_tokens: u64,
}

/// The text blocks joined, the tool calls and the token counts.
pub(super) fn read(status: u16, body: &[u8]) -> Result<ChatAnswer, LlmError> {
    check_status(status, body)?;
    let answer: Answer = serde_json::from_slice(body).map_err(|e| LlmError::Malformed(format!("not a JSON object: {e}")))?;
    let blocks = answer.content.ok_or_else(|| LlmError::Malformed("no content array".into()))?;
    let is = |block: &Block, kind: &str| block.kind.as_deref() == Some(kind);
    let texts: Vec<&str> = blocks.iter().filter(|b| is(b, "text")).filter_map(|b| b.text.as_deref()).collect();
    let content = (!texts.is_empty()).then(|| texts.concat());
    let tool_calls = blocks
        .into_iter()
        .filter(|b| is(b, "tool_use"))
        .enumerate()
        .map(|(i, b)| ToolCall { id: b.id.unwrap_or_else(|| format!("toolu_{i}")), name: b.name.unwrap_or_default(), arguments: b.input })
        .collect();
    let usage = answer.usage.map(|u| Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens }).unwrap_or_default();
    Ok(ChatAnswer { content, tool_calls, usage, finish_reason: answer.stop_reason.map(finish) })
}

fn finish(reason: String) -> FinishReason {
    match reason.as_str() {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other(reason),
    }
}
