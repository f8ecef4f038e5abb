//! The request, in one provider-neutral shape: the system prompt, the
//! conversation after it, the tools the model may call, and what holds its
//! answer (a tool it must call, a response format). The same type is the
//! body of the planner's `POST /complete`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::ToolCall;

/// A tool the model may call: its name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON Schema of its arguments object.
    pub parameters: Value,
}

/// One message of the conversation after the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user (or the caller speaking for it) says.
    User {
        /// The text.
        content: String,
    },
    /// What the model said earlier, and the tools it called.
    Assistant {
        /// The text; empty when the model only called tools.
        #[serde(default)]
        content: String,
        /// The calls it made, answered by the [`Message::Tool`]s that follow.
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, fed back to the model.
    Tool {
        /// The [`ToolCall::id`] it answers.
        tool_call_id: String,
        /// What the tool observed.
        content: String,
        /// The call failed; the content says why.
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User { content: content.into() }
    }

    /// An earlier answer of the model, without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// The message's text.
    pub fn text(&self) -> &str {
        match self {
            Self::User { content } | Self::Assistant { content, .. } | Self::Tool { content, .. } => content,
        }
    }
}

/// Which tool, if any, the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (what providers do when this is left out).
    Auto,
    /// No tool call.
    None,
    /// Some tool call, whichever the model picks.
    Required,
    /// A call of this tool: how a provider without a schema-bound response
    /// format is held to a schema (the tool's input is the answer).
    Tool {
        /// The [`ToolSpec::name`].
        name: String,
    },
}

/// The form the answer's text must take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Some JSON object.
    JsonObject,
    /// A JSON value of this schema.
    JsonSchema {
        /// The schema's name.
        name: String,
        /// The JSON Schema.
        schema: Value,
        /// Whether the server must refuse a schema it cannot enforce fully.
        strict: bool,
    },
}

/// The schema an answer is held to ([`OutputMode`](crate::OutputMode)
/// says how a request asks for it).
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    /// Its name (the forced tool's name where a tool carries it).
    pub name: String,
    /// What the answer is for, where a tool carries it.
    pub description: String,
    /// The JSON Schema.
    pub schema: Value,
}

/// A whole completion request in the provider-neutral shape. Model, and
/// the temperature and token cap unless given here, come from the caller's
/// [`Settings`](crate::Settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation after it, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Whether, and which, tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// The form the answer's text must take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Most tokens to generate, instead of the settings' cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, instead of the settings' one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

impl ChatRequest {
    /// `messages` after `system`, with no tools and nothing holding the answer.
    pub fn new(system: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            system: system.into(),
            messages,
            tools: Vec::new(),
            tool_choice: None,
            response_format: None,
            max_tokens: None,
            temperature: None,
        }
    }

    /// The same request offering `tools`.
    pub fn with_tools(self, tools: Vec<ToolSpec>) -> Self {
        Self { tools, ..self }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The body an older caller of `/complete` sends (no tool choice,
    /// format or limits) still reads; what is unset is not written.
    #[test]
    fn the_optional_parts_are_optional_on_the_wire() {
        let body = json!({"system": "s", "messages": [{"role": "user", "content": "u"}], "tools": []});
        let chat: ChatRequest = serde_json::from_value(body.clone()).expect("chat");
        assert_eq!(chat, ChatRequest::new("s", vec![Message::user("u")]));
        assert_eq!(serde_json::to_value(&chat).expect("json"), body);
    }

    #[test]
    fn messages_carry_their_role_and_calls() {
        let call = ToolCall { id: "c".into(), name: "list_files".into(), arguments: json!({}) };
        let said = Message::Assistant { content: String::new(), tool_calls: vec![call] };
        let wire = serde_json::to_value(&said).expect("json");
        assert_eq!(wire["role"], "assistant");
        assert_eq!(serde_json::from_value::<Message>(wire).expect("message"), said);
        let result: Message = serde_json::from_value(json!({"role": "tool", "tool_call_id": "c", "content": "a.txt"})).expect("tool");
        assert_eq!((result.text(), matches!(result, Message::Tool { is_error: false, .. })), ("a.txt", true));
    }

    #[test]
    fn choices_and_formats_are_tagged() {
        let forced = ToolChoice::Tool { name: "rest_plan".into() };
        assert_eq!(serde_json::to_value(&forced).expect("json"), json!({"type": "tool", "name": "rest_plan"}));
        assert_eq!(serde_json::to_value(ResponseFormat::JsonObject).expect("json"), json!({"type": "json_object"}));
    }
}
