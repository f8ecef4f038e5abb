//! Tool calling in each provider's native format: OpenAI-compatible Chat
//! Completions (`tools` / `tool_calls` / `role: tool`) and Anthropic
//! Messages (`tools` / `tool_use` / `tool_result`). A conversation is kept
//! in one provider-neutral shape ([`ChatRequest`]) and written out per
//! provider; answers are read back into [`ChatReply`]. The planner sends the
//! bytes; the agent's loop lives elsewhere.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::llm::{HttpCall, LlmError, Provider, Settings};

/// A tool the model may call: its name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// One call the model asked for. `arguments` is the JSON object it sent, or
/// the raw text when that was not a JSON object (the loop answers it with a
/// tool error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// One message of the conversation after the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User { content: String },
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, fed back to the model.
    Tool { tool_call_id: String, content: String, #[serde(default)] is_error: bool },
}

/// A whole completion request in the provider-neutral shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
}

/// The model's answer: text, the tool calls it asks for, and token counts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatReply {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Builds the provider's request for `chat`.
pub fn request(settings: &Settings, api_key: &str, chat: &ChatRequest) -> HttpCall {
    match settings.provider {
        Provider::OpenAi => openai_request(settings, api_key, chat),
        Provider::Anthropic => anthropic_request(settings, api_key, chat),
    }
}

fn openai_request(settings: &Settings, api_key: &str, chat: &ChatRequest) -> HttpCall {
    let mut messages = vec![json!({"role": "system", "content": chat.system})];
    for message in &chat.messages {
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls } if tool_calls.is_empty() => json!({"role": "assistant", "content": content}),
            Message::Assistant { content, tool_calls } => json!({
                "role": "assistant",
                "content": if content.is_empty() { Value::Null } else { json!(content) },
                "tool_calls": tool_calls.iter().map(|c| json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.name, "arguments": arguments_text(&c.arguments)},
                })).collect::<Vec<_>>(),
            }),
            Message::Tool { tool_call_id, content, .. } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": settings.model,
        "messages": messages,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
    });
    if !chat.tools.is_empty() {
        body["tools"] = chat
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    crate::llm::call_to(Provider::OpenAi, api_key, &body)
}

fn anthropic_request(settings: &Settings, api_key: &str, chat: &ChatRequest) -> HttpCall {
    let mut messages: Vec<Value> = Vec::new();
    for message in &chat.messages {
        match message {
            Message::User { content } => messages.push(json!({"role": "user", "content": content})),
            Message::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for call in tool_calls {
                    let input = if call.arguments.is_object() { call.arguments.clone() } else { json!({}) };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                messages.push(json!({"role": "assistant", "content": blocks}));
            }
            Message::Tool { tool_call_id, content, is_error } => {
                let result = json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content, "is_error": is_error});
                // Results of one turn's calls go back together, in one user message.
                match messages.last_mut() {
                    Some(last) if last["role"] == "user" && last["content"].is_array() => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(result);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [result]})),
                }
            }
        }
    }
    let mut body = json!({
        "model": settings.model,
        "system": chat.system,
        "messages": messages,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
    });
    if !chat.tools.is_empty() {
        body["tools"] = chat.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters})).collect();
    }
    crate::llm::call_to(Provider::Anthropic, api_key, &body)
}

/// Arguments as OpenAI carries them: a JSON text (raw text stays as it came).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Parses a provider's HTTP answer.
pub fn response(provider: Provider, status: u16, body: &[u8]) -> Result<ChatReply, LlmError> {
    let parsed = crate::llm::answer_json(status, body)?;
    let tokens = |v: &Value| v.as_u64().unwrap_or(0);
    match provider {
        Provider::OpenAi => {
            let message = &parsed["choices"][0]["message"];
            if !message.is_object() {
                return Err(LlmError::Malformed("no choices[0].message".into()));
            }
            let tool_calls = message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, call)| {
                    let raw = call["function"]["arguments"].as_str().unwrap_or("");
                    let arguments = match serde_json::from_str::<Value>(raw) {
                        Ok(value) if value.is_object() => value,
                        _ => Value::String(raw.to_owned()),
                    };
                    ToolCall {
                        id: call["id"].as_str().map_or_else(|| format!("call_{i}"), str::to_owned),
                        name: call["function"]["name"].as_str().unwrap_or("").to_owned(),
                        arguments,
                    }
                })
                .collect();
            Ok(ChatReply {
                content: message["content"].as_str().unwrap_or("").to_owned(),
                tool_calls,
                input_tokens: tokens(&parsed["usage"]["prompt_tokens"]),
                output_tokens: tokens(&parsed["usage"]["completion_tokens"]),
            })
        }
        Provider::Anthropic => {
            let blocks = parsed["content"].as_array().ok_or_else(|| LlmError::Malformed("no content array".into()))?;
            let content = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect();
            let tool_calls = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .enumerate()
                .map(|(i, b)| ToolCall {
                    id: b["id"].as_str().map_or_else(|| format!("toolu_{i}"), str::to_owned),
                    name: b["name"].as_str().unwrap_or("").to_owned(),
                    arguments: b["input"].clone(),
                })
                .collect();
            Ok(ChatReply {
                content,
                tool_calls,
                input_tokens: tokens(&parsed["usage"]["input_tokens"]),
                output_tokens: tokens(&parsed["usage"]["output_tokens"]),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(provider: Provider) -> Settings {
        Settings { provider, model: "m".into(), temperature: 0.0, max_tokens: 100 }
    }

    fn conversation() -> ChatRequest {
        ChatRequest {
            system: "sys".into(),
            messages: vec![
                Message::User { content: "write hello.txt".into() },
                Message::Assistant {
                    content: "writing".into(),
                    tool_calls: vec![
                        ToolCall { id: "c1".into(), name: "write_file".into(), arguments: json!({"filePath": "hello.txt", "content": "hi"}) },
                        ToolCall { id: "c2".into(), name: "list_files".into(), arguments: json!({}) },
                    ],
                },
                Message::Tool { tool_call_id: "c1".into(), content: "wrote 2 bytes".into(), is_error: false },
                Message::Tool { tool_call_id: "c2".into(), content: "hello.txt".into(), is_error: false },
            ],
            tools: vec![ToolSpec { name: "list_files".into(), description: "d".into(), parameters: json!({"type": "object"}) }],
        }
    }

    fn body(provider: Provider) -> Value {
        serde_json::from_slice(&request(&settings(provider), "k", &conversation()).body).expect("json")
    }

    #[test]
    fn openai_carries_tool_calls_as_functions_and_results_as_tool_messages() {
        let body = body(Provider::OpenAi);
        assert_eq!(body["temperature"], json!(0.0));
        assert_eq!(body["tools"][0]["function"]["name"], "list_files");
        let call = &body["messages"][2]["tool_calls"][0];
        assert_eq!((&call["id"], &call["type"], &call["function"]["name"]), (&json!("c1"), &json!("function"), &json!("write_file")));
        let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().expect("text")).expect("json text");
        assert_eq!(arguments["filePath"], "hello.txt");
        assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "wrote 2 bytes"}));
    }

    #[test]
    fn anthropic_carries_tool_use_blocks_and_groups_results_in_one_user_message() {
        let body = body(Provider::Anthropic);
        assert_eq!((&body["system"], &body["tools"][0]["input_schema"]), (&json!("sys"), &json!({"type": "object"})));
        let blocks = &body["messages"][1]["content"];
        assert_eq!((&blocks[0]["type"], &blocks[1]["type"], &blocks[1]["input"]["content"]), (&json!("text"), &json!("tool_use"), &json!("hi")));
        let results = body["messages"][2]["content"].as_array().expect("blocks");
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(3), "both results in one user turn");
        assert_eq!((results.len(), &results[1]["tool_use_id"]), (2, &json!("c2")));
    }

    #[test]
    fn answers_parse_into_text_and_tool_calls() {
        let openai = br#"{"choices":[{"message":{"content":null,"tool_calls":[
            {"id":"a","type":"function","function":{"name":"read_file","arguments":"{\"filePath\":\"x\"}"}},
            {"id":"b","type":"function","function":{"name":"run_python","arguments":"not json"}}]}}],
            "usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
        let reply = response(Provider::OpenAi, 200, openai).expect("reply");
        assert_eq!((reply.content.as_str(), reply.tool_calls.len(), reply.input_tokens), ("", 2, 5));
        assert_eq!(reply.tool_calls[0].arguments, json!({"filePath": "x"}));
        assert_eq!(reply.tool_calls[1].arguments, json!("not json"), "malformed arguments are kept for the loop to refuse");
        let anthropic = br#"{"content":[{"type":"text","text":"done"},{"type":"tool_use","id":"t","name":"list_files","input":{}}],
            "usage":{"input_tokens":9,"output_tokens":1}}"#;
        let reply = response(Provider::Anthropic, 200, anthropic).expect("reply");
        assert_eq!((reply.content.as_str(), reply.tool_calls[0].name.as_str(), reply.output_tokens), ("done", "list_files", 1));
        assert!(matches!(response(Provider::OpenAi, 500, br#"{"error":{"message":"down"}}"#), Err(LlmError::Status { status: 500, .. })));
        assert!(matches!(response(Provider::Anthropic, 200, b"{}"), Err(LlmError::Malformed(_))));
    }
}
