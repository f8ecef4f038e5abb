//! OpenAI-compatible Chat Completions (`POST /v1/chat/completions`): OpenAI,
//! Azure OpenAI, Ollama, vLLM, llama.cpp, LM Studio. The system prompt is the
//! first message, tools are `function`s, tool results are `role: tool`
//! messages, and a schema is held by `response_format`.

mod answer;
mod request;
#[cfg(test)]
pub(crate) mod tests;

use crate::adapter::{Adapter, HttpCall};
use crate::answer::ChatAnswer;
use crate::chat::{ChatRequest, OutputSchema, ResponseFormat};
use crate::error::LlmError;
use crate::provider::Settings;

/// The OpenAI-compatible adapter.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiCompatible;

impl Adapter for OpenAiCompatible {
    fn name(&self) -> &'static str {
        "OpenAI-compatible"
    }

    fn request(&self, settings: &Settings, api_key: &str, chat: &ChatRequest) -> Result<HttpCall, LlmError> {
        // A local server may need no key; a bearer header without one is refused by some.
        let headers = if api_key.is_empty() { vec![] } else { vec![("authorization", format!("Bearer {api_key}"))] };
        HttpCall::json("/v1/chat/completions", headers, &request::body(settings, chat))
    }

    fn answer(&self, status: u16, body: &[u8]) -> Result<ChatAnswer, LlmError> {
        answer::read(status, body)
    }

    fn require_schema(&self, chat: &mut ChatRequest, schema: &OutputSchema) {
        // Not strict: a server that cannot enforce every keyword still constrains what it can.
        chat.response_format = Some(ResponseFormat::JsonSchema { name: schema.name.clone(), schema: schema.schema.clone(), strict: false });
    }

    fn has_json_mode(&self) -> bool {
        true
    }

    fn structured_text(&self, answer: &ChatAnswer) -> Result<String, LlmError> {
        answer.content.clone().ok_or_else(|| LlmError::Malformed("no choices[0].message.content".into()))
    }
}
