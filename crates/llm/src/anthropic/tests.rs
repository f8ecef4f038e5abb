//! Request bodies as the Messages API defines them, and answers as
//! Anthropic writes them.

use serde_json::{Value, json};

use super::Anthropic;
use crate::adapter::Adapter;
use crate::answer::{ChatAnswer, FinishReason, ToolCall, Usage};
use crate::chat::{ChatRequest, Message, ResponseFormat, ToolChoice};
use crate::error::LlmError;
use crate::openai::tests::conversation;
use crate::provider::{Provider, Settings};
use crate::chat::OutputSchema;
use crate::structured::OutputMode;

fn settings() -> Settings {
    Settings { provider: Provider::Anthropic, model: "m".into(), temperature: 0.0, max_tokens: 100 }
}

fn body(chat: &ChatRequest) -> Value {
    let call = Anthropic.request(&settings(), "k", chat).expect("request");
    serde_json::from_slice(&call.body).expect("json")
}

fn answer(fixture: &str) -> Result<ChatAnswer, LlmError> {
    Anthropic.answer(200, fixture.as_bytes())
}

#[test]
fn the_system_prompt_goes_apart_with_the_key_and_version_headers() {
    let chat = ChatRequest::new("sys", vec![Message::user("u"), Message::assistant("a")]);
    let call = Anthropic.request(&settings(), "k", &chat).expect("request");
    let sent: Value = serde_json::from_slice(&call.body).expect("json");
    assert_eq!((call.path, &sent["system"]), ("/v1/messages", &json!("sys")));
    assert_eq!(sent["messages"], json!([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]));
    assert_eq!((&sent["temperature"], &sent["max_tokens"]), (&json!(0.0), &json!(100)));
    assert!(call.headers.contains(&("x-api-key", "k".into())));
    assert!(call.headers.contains(&("anthropic-version", "2023-06-01".into())));
    assert!(sent.get("tools").is_none() && sent.get("tool_choice").is_none());
}

#[test]
fn tool_calls_go_as_tool_use_blocks_and_results_in_one_user_message() {
    let sent = body(&conversation());
    assert_eq!(sent["tools"][0], json!({"name": "list_files", "description": "d", "input_schema": {"type": "object"}}));
    let blocks = &sent["messages"][1]["content"];
    assert_eq!(blocks[0], json!({"type": "text", "text": "writing"}));
    assert_eq!(blocks[1], json!({"type": "tool_use", "id": "c1", "name": "write_file", "input": {"filePath": "hello.txt", "content": "hi"}}));
    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(3), "both results in one user turn");
    assert_eq!(sent["messages"][2]["content"][1], json!({"type": "tool_result", "tool_use_id": "c2", "content": "hello.txt", "is_error": false}));
}

#[test]
fn malformed_arguments_go_back_as_an_empty_input() {
    let call = ToolCall { id: "c".into(), name: "write_file".into(), arguments: json!("{broken") };
    let chat = ChatRequest::new("s", vec![Message::user("u"), Message::Assistant { content: String::new(), tool_calls: vec![call] }]);
    assert_eq!(body(&chat)["messages"][1]["content"], json!([{"type": "tool_use", "id": "c", "name": "write_file", "input": {}}]));
}

#[test]
fn a_schema_is_a_forced_tool_call_and_there_is_no_response_format() {
    let schema = OutputSchema { name: "rest_plan".into(), description: "Submit the plan for the request.".into(), schema: json!({"type": "object"}) };
    let mut chat = ChatRequest::new("s", vec![Message::user("u")]);
    OutputMode::Schema.apply(Provider::Anthropic, &mut chat, &schema);
    let sent = body(&chat);
    assert_eq!(sent["tools"], json!([{"name": "rest_plan", "description": "Submit the plan for the request.", "input_schema": {"type": "object"}}]));
    assert_eq!(sent["tool_choice"], json!({"type": "tool", "name": "rest_plan"}));
    chat.tool_choice = Some(ToolChoice::Required);
    assert_eq!(body(&chat)["tool_choice"], json!({"type": "any"}));
    chat.response_format = Some(ResponseFormat::JsonObject);
    assert_eq!(
        Anthropic.request(&settings(), "k", &chat),
        Err(LlmError::Unsupported { provider: "Anthropic", setting: "response_format" })
    );
}

#[test]
fn text_blocks_join_with_their_token_counts() {
    let read = answer(include_str!("../../fixtures/anthropic_text.json")).expect("answer");
    assert_eq!(read.text(), "Wrote hello.txt; the tests pass.");
    assert_eq!((read.usage, &read.finish_reason), (Usage { input_tokens: 2095, output_tokens: 503 }, &Some(FinishReason::Stop)));
    assert_eq!(Anthropic.structured_text(&read).expect("text"), "Wrote hello.txt; the tests pass.");
}

#[test]
fn tool_use_blocks_are_tool_calls() {
    let read = answer(include_str!("../../fixtures/anthropic_tool_use.json")).expect("answer");
    assert_eq!((read.text(), &read.finish_reason), ("I'll read the file first.", &Some(FinishReason::ToolCalls)));
    assert_eq!(read.tool_calls[0], ToolCall { id: "toolu_01A09q90qw90lq917835lq9".into(), name: "read_file".into(), arguments: json!({"filePath": "hello.txt"}) });
    assert_eq!(read.tool_calls[1].name, "list_files");
}

#[test]
fn a_forced_tool_call_answers_with_its_input() {
    let read = answer(include_str!("../../fixtures/anthropic_forced_tool.json")).expect("answer");
    let text = Anthropic.structured_text(&read).expect("text");
    let plan: Value = serde_json::from_str(&text).expect("json");
    assert_eq!((&plan["action"], &plan["resource"]), (&json!("list"), &json!("members")));
    assert_eq!(read.usage, Usage { input_tokens: 1472, output_tokens: 88 });
}

#[test]
fn an_answer_with_neither_text_nor_a_call_has_no_structured_text() {
    let empty = answer(r#"{"content":[{"type":"text","text":""}],"usage":{}}"#).expect("answer");
    assert_eq!(Anthropic.structured_text(&empty), Err(LlmError::Malformed("no text content".into())));
    assert!(matches!(answer("{}"), Err(LlmError::Malformed(_))));
    assert!(matches!(answer(r#"{"content":"text"}"#), Err(LlmError::Malformed(_))));
}

#[test]
fn refused_settings_are_told_from_other_errors() {
    let schema = Anthropic.answer(400, include_str!("../../fixtures/anthropic_error_schema.json").as_bytes()).expect_err("an error");
    assert!(schema.refuses_setting(), "{schema}");
    let overloaded = Anthropic.answer(529, include_str!("../../fixtures/anthropic_error_overloaded.json").as_bytes()).expect_err("an error");
    assert_eq!(overloaded, LlmError::Status { status: 529, message: "Overloaded".into() });
    assert!(!overloaded.refuses_setting());
}
