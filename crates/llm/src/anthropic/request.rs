//! A [`ChatRequest`] as a Messages body.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::chat::{ChatRequest, Message, ToolChoice};
use crate::provider::{Sampling, Settings};

#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    sampling: Sampling<'a>,
    system: &'a str,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
}

#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Content<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(&'a str),
    Blocks(Vec<Block<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text { text: &'a str },
    ToolUse { id: &'a str, name: &'a str, input: Cow<'a, Value> },
    ToolResult { tool_use_id: &'a str, content: &'a str, is_error: bool },
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Choice<'a> {
    Auto,
    None,
    Any,
    Tool { name: &'a str },
}

/// The body asking `settings.model` for `chat`.
pub(super) fn body<'a>(settings: &'a Settings, chat: &'a ChatRequest) -> impl Serialize + 'a {
    Body {
        sampling: settings.sampling(chat),
        system: &chat.system,
        messages: turns(&chat.messages),
        tools: chat.tools.iter().map(|t| Tool { name: &t.name, description: &t.description, input_schema: &t.parameters }).collect(),
        tool_choice: chat.tool_choice.as_ref().map(|choice| match choice {
            ToolChoice::Auto => Choice::Auto,
            ToolChoice::None => Choice::None,
            ToolChoice::Required => Choice::Any,
            ToolChoice::Tool { name } => Choice::Tool { name },
        }),
    }
}

fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for message in messages {
        match message {
            Message::User { content } => turns.push(Turn { role: "user", content: Content::Text(content) }),
            Message::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                turns.push(Turn { role: "assistant", content: Content::Text(content) });
            }
            Message::Assistant { content, tool_calls } => {
                let text = (!content.is_empty()).then_some(Block::Text { text: content });
                let calls = tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    // The API takes only an object; malformed arguments were already answered with an error.
                    input: if call.arguments.is_object() { Cow::Borrowed(&call.arguments) } else { Cow::Owned(Value::Object(Map::new())) },
                });
                turns.push(Turn { role: "assistant", content: Content::Blocks(text.into_iter().chain(calls).collect()) });
            }
            Message::Tool { tool_call_id, content, is_error } => {
                let result = Block::ToolResult { tool_use_id: tool_call_id, content, is_error: *is_error };
                // Results of one turn's calls go back together, in one user message.
                match turns.last_mut() {
                    Some(Turn { role: "user", content: Content::Blocks(blocks) }) => blocks.push(result),
                    _ => turns.push(Turn { role: "user", content: Content::Blocks(vec![result]) }),
                }
            }
        }
    }
    turns
}
