//! One chat request to an LLM and one answer from it, whichever provider
//! serves it. A caller describes the conversation once ([`ChatRequest`]);
//! the [`Adapter`] of its provider's wire format (OpenAI-compatible Chat
//! Completions: OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp, LM Studio;
//! or Anthropic Messages) writes it as that provider's HTTP request and
//! reads the provider's answer back into a [`ChatAnswer`] or an
//! [`LlmError`]. Nothing here sends bytes: the caller does, so the crate
//! builds for the wasm32-wasip2 planner as well as natively.
//!
//! A plan is one use of this path, not a second one: [`structured`] holds
//! a request to a JSON Schema the strongest way a provider allows (a
//! `response_format`, or a forced tool call), steps down when a server
//! refuses that, and names where what worked is remembered.

pub mod adapter;
pub mod anthropic;
pub mod answer;
pub mod chat;
pub mod error;
mod lenient;
pub mod openai;
pub mod provider;
pub mod structured;

pub use adapter::{Adapter, HttpCall};
pub use answer::{ChatAnswer, FinishReason, ToolCall, Usage};
pub use chat::{ChatRequest, Message, OutputSchema, ResponseFormat, ToolChoice, ToolSpec};
pub use error::LlmError;
pub use provider::{Provider, Settings, UnknownProvider};
pub use structured::OutputMode;

impl Provider {
    /// The adapter that writes requests and reads answers in this format.
    pub fn adapter(self) -> &'static dyn Adapter {
        match self {
            Self::OpenAi => &openai::OpenAiCompatible,
            Self::Anthropic => &anthropic::Anthropic,
        }
    }
}
