//! The model's answer, in one provider-neutral shape: its text, the tool
//! calls it asks for, what it cost in tokens and why it stopped. The same
//! type is the body of the planner's answer to `POST /complete`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call the model asked for. `arguments` is the JSON object it sent, or
/// the raw text when that was not a JSON object (the caller answers it with
/// a tool error rather than guessing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id of the call, which its result must name.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
}

/// Tokens one call cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read: prompt, conversation and tools.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why the model stopped generating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer (or hit a stop sequence).
    Stop,
    /// It ran into the token cap: the answer may be cut short.
    Length,
    /// It stopped to have tools called.
    ToolCalls,
    /// The provider withheld or the model refused the answer.
    ContentFilter,
    /// A reason this crate does not name, as the provider spelt it.
    Other(String),
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatAnswer {
    /// What it said; `None` when it sent no text at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The tool calls it asks for, in its order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Token counts; zero where the provider gave none.
    #[serde(default)]
    pub usage: Usage,
    /// Why it stopped, where the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
}

impl ChatAnswer {
    /// What it said, or nothing.
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }
}
