//! A [`ChatRequest`] as a Chat Completions body.

use serde::Serialize;
use serde_json::Value;

use crate::chat::{ChatRequest, Message, ResponseFormat, ToolChoice};
use crate::provider::{Sampling, Settings};

#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    sampling: Sampling<'a>,
    messages: Vec<Said<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Choice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Format<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Said<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` beside tool calls when the model said nothing, as OpenAI writes it.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<Call<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionSpec<'a>,
}

#[derive(Serialize)]
struct FunctionSpec<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Choice<'a> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: Named<'a>,
    },
}

#[derive(Serialize)]
struct Named<'a> {
    name: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Format<'a> {
    JsonObject,
    JsonSchema { json_schema: Schema<'a> },
}

#[derive(Serialize)]
struct Schema<'a> {
    name: &'a str,
    schema: &'a Value,
    strict: bool,
}

/// The body asking `settings.model` for `chat`.
pub(super) fn body<'a>(settings: &'a Settings, chat: &'a ChatRequest) -> impl Serialize + 'a {
    let mut messages = vec![Said::System { content: &chat.system }];
    messages.extend(chat.messages.iter().map(said));
    Body {
        sampling: settings.sampling(chat),
        messages,
        tools: chat
            .tools
            .iter()
            .map(|t| Tool { kind: "function", function: FunctionSpec { name: &t.name, description: &t.description, parameters: &t.parameters } })
            .collect(),
        tool_choice: chat.tool_choice.as_ref().map(|choice| match choice {
            ToolChoice::Auto => Choice::Mode("auto"),
            ToolChoice::None => Choice::Mode("none"),
            ToolChoice::Required => Choice::Mode("required"),
            ToolChoice::Tool { name } => Choice::Function { kind: "function", function: Named { name } },
        }),
        response_format: chat.response_format.as_ref().map(|format| match format {
            ResponseFormat::JsonObject => Format::JsonObject,
            ResponseFormat::JsonSchema { name, schema, strict } => Format::JsonSchema { json_schema: Schema { name, schema, strict: *strict } },
        }),
    }
}

fn said(message: &Message) -> Said<'_> {
    match message {
        Message::User { content } => Said::User { content },
        Message::Assistant { content, tool_calls } if tool_calls.is_empty() => Said::Assistant { content: Some(content), tool_calls: vec![] },
        Message::Assistant { content, tool_calls } => Said::Assistant {
            content: Some(content.as_str()).filter(|c| !c.is_empty()),
            tool_calls: tool_calls
                .iter()
                .map(|c| Call { id: &c.id, kind: "function", function: Function { name: &c.name, arguments: arguments_text(&c.arguments) } })
                .collect(),
        },
        Message::Tool { tool_call_id, content, .. } => Said::Tool { tool_call_id, content },
    }
}

/// Arguments as OpenAI carries them: a JSON text (raw text stays as it came).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}
