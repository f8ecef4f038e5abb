//! Request bodies as the Chat Completions API defines them, and answers as
//! OpenAI and llama.cpp write them.

use serde_json::{Value, json};

use super::OpenAiCompatible;
use crate::adapter::Adapter;
use crate::answer::{ChatAnswer, FinishReason, ToolCall, Usage};
use crate::chat::{ChatRequest, Message, ResponseFormat, ToolChoice, ToolSpec};
use crate::error::LlmError;
use crate::provider::{Provider, Settings};
use crate::chat::OutputSchema;
use crate::structured::OutputMode;

fn settings() -> Settings {
    Settings { provider: Provider::OpenAi, model: "m".into(), temperature: 0.0, max_tokens: 100 }
}

fn body(chat: &ChatRequest) -> Value {
    let call = OpenAiCompatible.request(&settings(), "k", chat).expect("request");
    serde_json::from_slice(&call.body).expect("json")
}

fn answer(fixture: &str) -> Result<ChatAnswer, LlmError> {
    OpenAiCompatible.answer(200, fixture.as_bytes())
}

/// A tool-calling conversation: a user task, a turn with two calls, their results.
pub(crate) fn conversation() -> ChatRequest {
    let calls = vec![
        ToolCall { id: "c1".into(), name: "write_file".into(), arguments: json!({"filePath": "hello.txt", "content": "hi"}) },
        ToolCall { id: "c2".into(), name: "list_files".into(), arguments: json!({}) },
    ];
    ChatRequest::new(
        "sys",
        vec![
            Message::user("write hello.txt"),
            Message::Assistant { content: "writing".into(), tool_calls: calls },
            Message::Tool { tool_call_id: "c1".into(), content: "wrote 2 bytes".into(), is_error: false },
            Message::Tool { tool_call_id: "c2".into(), content: "hello.txt".into(), is_error: false },
        ],
    )
    .with_tools(vec![ToolSpec { name: "list_files".into(), description: "d".into(), parameters: json!({"type": "object"}) }])
}

#[test]
fn the_system_prompt_goes_first_and_the_key_as_a_bearer() {
    let chat = ChatRequest::new("sys", vec![Message::user("u"), Message::assistant("a")]);
    let call = OpenAiCompatible.request(&settings(), "k", &chat).expect("request");
    let body: Value = serde_json::from_slice(&call.body).expect("json");
    assert_eq!(call.path, "/v1/chat/completions");
    assert_eq!(body["messages"], json!([{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]));
    assert_eq!((&body["model"], &body["temperature"], &body["max_tokens"]), (&json!("m"), &json!(0.0), &json!(100)));
    assert!(call.headers.contains(&("authorization", "Bearer k".into())));
    assert!(call.headers.contains(&("content-type", "application/json".into())));
    for absent in ["tools", "tool_choice", "response_format"] {
        assert!(body.get(absent).is_none(), "{absent} is only sent when asked for");
    }
    let keyless = OpenAiCompatible.request(&settings(), "", &chat).expect("request");
    assert!(!keyless.headers.iter().any(|(n, _)| *n == "authorization"), "a local server needs no key");
}

#[test]
fn a_request_may_set_its_own_limits_and_tool_choice() {
    let mut chat = ChatRequest::new("s", vec![]);
    (chat.max_tokens, chat.temperature, chat.tool_choice) = (Some(7), Some(0.5), Some(ToolChoice::Required));
    let sent = body(&chat);
    assert_eq!((&sent["max_tokens"], &sent["temperature"], &sent["tool_choice"]), (&json!(7), &json!(0.5), &json!("required")));
    chat.tool_choice = Some(ToolChoice::Tool { name: "list_files".into() });
    assert_eq!(body(&chat)["tool_choice"], json!({"type": "function", "function": {"name": "list_files"}}));
}

#[test]
fn tool_calls_go_as_functions_and_results_as_tool_messages() {
    let sent = body(&conversation());
    assert_eq!(sent["tools"][0], json!({"type": "function", "function": {"name": "list_files", "description": "d", "parameters": {"type": "object"}}}));
    let call = &sent["messages"][2]["tool_calls"][0];
    assert_eq!((&call["id"], &call["type"], &call["function"]["name"]), (&json!("c1"), &json!("function"), &json!("write_file")));
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().expect("text")).expect("json text");
    assert_eq!(arguments["filePath"], "hello.txt");
    assert_eq!(sent["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "wrote 2 bytes"}));
    let mut silent = conversation();
    if let Message::Assistant { content, .. } = &mut silent.messages[1] {
        content.clear();
    }
    assert_eq!(body(&silent)["messages"][2]["content"], Value::Null, "no text beside calls is null, as OpenAI writes it");
}

#[test]
fn a_schema_is_a_response_format() {
    let schema = OutputSchema { name: "rest_plan".into(), description: "Submit the plan.".into(), schema: json!({"type": "object"}) };
    let mut chat = ChatRequest::new("s", vec![Message::user("u")]);
    OutputMode::Schema.apply(Provider::OpenAi, &mut chat, &schema);
    let sent = body(&chat);
    assert_eq!(sent["response_format"], json!({"type": "json_schema", "json_schema": {"name": "rest_plan", "schema": {"type": "object"}, "strict": false}}));
    assert!(sent.get("tools").is_none(), "the schema is not a tool here");
    chat.response_format = Some(ResponseFormat::JsonObject);
    assert_eq!(body(&chat)["response_format"], json!({"type": "json_object"}));
}

#[test]
fn an_openai_answer_reads_as_text_with_its_token_counts() {
    let read = answer(include_str!("../../fixtures/openai_text.json")).expect("answer");
    assert_eq!(read.usage, Usage { input_tokens: 1130, output_tokens: 61 });
    assert_eq!(read.finish_reason, Some(FinishReason::Stop));
    assert_eq!(OpenAiCompatible.structured_text(&read).expect("text"), r#"{"action": "list", "resource": "members"}"#);
}

#[test]
fn openai_tool_calls_read_with_their_arguments() {
    let read = answer(include_str!("../../fixtures/openai_tool_calls.json")).expect("answer");
    assert_eq!((read.content.as_deref(), read.finish_reason.as_ref()), (None, Some(&FinishReason::ToolCalls)));
    assert_eq!(read.tool_calls[0].id, "call_Qd6T0yZr0b3P6Vv4lEzFqk1R");
    assert_eq!(read.tool_calls[0].arguments, json!({"filePath": "hello.txt", "content": "Hello"}));
    assert_eq!((read.tool_calls[1].name.as_str(), &read.tool_calls[1].arguments), ("list_files", &json!({})));
}

#[test]
fn malformed_arguments_are_kept_as_the_text_the_model_wrote() {
    let sent = br#"{"choices":[{"message":{"content":null,"tool_calls":[
        {"type":"function","function":{"name":"run_python","arguments":"not json"}},
        {"id":"b","type":"function","function":{"name":"write_file","arguments":"[1]"}}]}}],
        "usage":{"prompt_tokens":5,"completion_tokens":3}}"#;
    let read = OpenAiCompatible.answer(200, sent).expect("answer");
    assert_eq!(read.tool_calls[0], ToolCall { id: "call_0".into(), name: "run_python".into(), arguments: json!("not json") }, "an id is made up when none came");
    assert_eq!(read.tool_calls[1].arguments, json!("[1]"), "only an object is arguments");
    assert_eq!(read.text(), "");
}

#[test]
fn llama_cpp_answers_read_like_openai_ones() {
    let schema = answer(include_str!("../../fixtures/llamacpp_schema.json")).expect("answer");
    assert_eq!(OpenAiCompatible.structured_text(&schema).expect("text"), r#"{"a": 1}"#);
    assert_eq!(schema.usage, Usage { input_tokens: 26, output_tokens: 11 });
    let calls = answer(include_str!("../../fixtures/llamacpp_tool_calls.json")).expect("answer");
    assert_eq!(calls.tool_calls, [ToolCall { id: "uMxo3KJ9YTUQtmXyDQAvWXP1AtuHGLUH".into(), name: "read_file".into(), arguments: json!({"filePath": "hello.txt"}) }]);
    // A small model that writes its call as text has made no call: its text is the answer.
    let as_text = answer(include_str!("../../fixtures/llamacpp_tool_call_as_text.json")).expect("answer");
    assert!(as_text.tool_calls.is_empty() && as_text.text().contains("read_file"), "{as_text:?}");
}

#[test]
fn a_model_refusal_has_no_structured_text() {
    let read = answer(include_str!("../../fixtures/openai_model_refusal.json")).expect("answer");
    assert_eq!((read.text(), read.tool_calls.len()), ("", 0));
    assert_eq!(OpenAiCompatible.structured_text(&read), Err(LlmError::Malformed("no choices[0].message.content".into())));
}

#[test]
fn refused_settings_are_told_from_other_errors() {
    let refusal = |status, fixture: &str| OpenAiCompatible.answer(status, fixture.as_bytes()).expect_err("an error");
    let schema = refusal(400, include_str!("../../fixtures/openai_error_json_schema.json"));
    assert!(schema.refuses_setting(), "{schema}");
    assert!(schema.to_string().starts_with("the provider answered 400: Invalid parameter: 'response_format'"), "{schema}");
    assert!(refusal(400, include_str!("../../fixtures/llamacpp_error_response_format.json")).refuses_setting());
    assert!(refusal(400, include_str!("../../fixtures/llamacpp_error_schema.json")).refuses_setting());
    let key = refusal(401, include_str!("../../fixtures/openai_error_key.json"));
    assert!(!key.refuses_setting());
    assert!(matches!(&key, LlmError::Status { status: 401, message } if message.starts_with("Incorrect API key")), "{key}");
}

#[test]
fn answers_without_a_message_are_malformed() {
    for body in [&b"{}"[..], b"[]", b"<html>", br#"{"choices":[{"message":null}]}"#, br#"{"choices":"x"}"#] {
        assert!(matches!(OpenAiCompatible.answer(200, body), Err(LlmError::Malformed(_))), "{}", String::from_utf8_lossy(body));
    }
    // Counts a server leaves out, or writes oddly, are zero rather than a failure.
    let odd = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":null,"completion_tokens":2.5}}"#;
    assert_eq!(OpenAiCompatible.answer(200, odd).expect("answer").usage, Usage::default());
}
