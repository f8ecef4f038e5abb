//! Anthropic Messages (`POST /v1/messages`). The system prompt travels
//! apart from the messages, tool calls are `tool_use` blocks and their
//! results `tool_result` blocks of a user turn, and a schema is held by a
//! forced call of a tool whose input schema it is: the API has no response
//! format, and the tool's input is the answer.

mod answer;
mod request;
#[cfg(test)]
mod tests;

use crate::adapter::{Adapter, HttpCall};
use crate::answer::ChatAnswer;
use crate::chat::{ChatRequest, OutputSchema, ToolChoice, ToolSpec};
use crate::error::LlmError;
use crate::provider::Settings;

/// The API version every request names.
const API_VERSION: &str = "2023-06-01";

/// The Anthropic adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anthropic;

impl Adapter for Anthropic {
    fn name(&self) -> &'static str {
        "Anthropic"
    }

    fn request(&self, settings: &Settings, api_key: &str, chat: &ChatRequest) -> Result<HttpCall, LlmError> {
        if chat.response_format.is_some() {
            // Silently dropping it would hand the caller free text it did not ask for.
            return Err(LlmError::Unsupported { provider: self.name(), setting: "response_format" });
        }
        let headers = vec![("x-api-key", api_key.to_owned()), ("anthropic-version", API_VERSION.to_owned())];
        HttpCall::json("/v1/messages", headers, &request::body(settings, chat))
    }

    fn answer(&self, status: u16, body: &[u8]) -> Result<ChatAnswer, LlmError> {
        answer::read(status, body)
    }

    fn require_schema(&self, chat: &mut ChatRequest, schema: &OutputSchema) {
        chat.tools.push(ToolSpec { name: schema.name.clone(), description: schema.description.clone(), parameters: schema.schema.clone() });
        chat.tool_choice = Some(ToolChoice::Tool { name: schema.name.clone() });
    }

    fn has_json_mode(&self) -> bool {
        false
    }

    fn structured_text(&self, answer: &ChatAnswer) -> Result<String, LlmError> {
        // A forced tool call carries the answer as its input object.
        if let Some(call) = answer.tool_calls.first() {
            return Ok(call.arguments.to_string());
        }
        match answer.text() {
            "" => Err(LlmError::Malformed("no text content".into())),
            text => Ok(text.to_owned()),
        }
    }
}
