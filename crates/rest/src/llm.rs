//! The two LLM wire formats the planner speaks: OpenAI-compatible Chat
//! Completions (OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp, LM Studio) and
//! Anthropic Messages. Only request building and response parsing live here;
//! the planner component sends the bytes.

use serde_json::{Value, json};

use crate::plan_schema::{SCHEMA_NAME, plan_json_schema};

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
}

/// An unknown provider name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown llm_provider {0:?} (expected openai or anthropic)")]
pub struct UnknownProvider(pub String);

impl std::str::FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" | "openai-compatible" | "ollama" | "azure" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(UnknownProvider(other.to_owned())),
        }
    }
}

/// Settings of one completion call.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub provider: Provider,
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
}

/// How the answer is held to the plan's shape, strongest first. A server
/// that refuses one is asked again with the next, and the planner remembers
/// what worked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// OpenAI-compatible: `response_format` with the plan's JSON Schema;
    /// Anthropic: a forced tool call whose input schema is the plan's.
    Schema,
    /// OpenAI-compatible `response_format: {"type": "json_object"}`.
    JsonObject,
    /// Nothing but the prompt.
    Free,
}

impl OutputMode {
    /// Every mode, strongest first.
    pub const ALL: [Self; 3] = [Self::Schema, Self::JsonObject, Self::Free];

    /// The name used in settings and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Schema => "json_schema",
            Self::JsonObject => "json_object",
            Self::Free => "none",
        }
    }

    /// The mode called `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// The weaker mode to try when a server refuses this one (Anthropic has no JSON mode).
    pub fn fallback(self, provider: Provider) -> Option<Self> {
        match (self, provider) {
            (Self::Schema, Provider::OpenAi) => Some(Self::JsonObject),
            (Self::Schema, Provider::Anthropic) | (Self::JsonObject, _) => Some(Self::Free),
            (Self::Free, _) => None,
        }
    }
}

/// Where what a server accepts is remembered: 64 hex digits of its URL and model.
pub fn memo_key(base_url: &str, model: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for part in ["output_mode", base_url, model] {
        hash.update(part.as_bytes());
        hash.update([0u8]);
    }
    hex::encode(hash.finalize())
}

/// One turn of the conversation after the system prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: &'static str,
    pub content: String,
}

/// An HTTP request to make: path (after the base URL), headers, JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub path: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a provider answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    #[error("the provider answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the provider's answer is not what its API defines: {0}")]
    Malformed(String),
}

impl LlmError {
    /// Whether this looks like a server refusing the structured-output
    /// parameters (rather than the key, the model or its load): then the
    /// request is worth sending again with a weaker [`OutputMode`].
    pub fn refuses_output_mode(&self) -> bool {
        let Self::Status { status, message } = self else { return false };
        let message = message.to_ascii_lowercase();
        let names_it = ["response_format", "json_schema", "json_object", "schema", "grammar", "tool"]
            .iter()
            .any(|word| message.contains(word));
        match status {
            400 | 415 | 422 | 501 => names_it || message.contains("not supported") || message.contains("unsupported"),
            500 => names_it,
            _ => false,
        }
    }
}

/// Builds the request for `system` plus `turns`, asking for `mode`.
pub fn request(settings: &Settings, api_key: &str, system: &str, turns: &[Turn], mode: OutputMode) -> HttpCall {
    let messages: Vec<Value> = turns.iter().map(|t| json!({"role": t.role, "content": t.content})).collect();
    match settings.provider {
        Provider::OpenAi => {
            let mut all = vec![json!({"role": "system", "content": system})];
            all.extend(messages);
            let mut body = json!({
                "model": settings.model,
                "messages": all,
                "temperature": settings.temperature,
                "max_tokens": settings.max_tokens,
            });
            match mode {
                OutputMode::Schema => {
                    body["response_format"] = json!({
                        "type": "json_schema",
                        "json_schema": {"name": SCHEMA_NAME, "schema": plan_json_schema(), "strict": false},
                    });
                }
                OutputMode::JsonObject => body["response_format"] = json!({"type": "json_object"}),
                OutputMode::Free => {}
            }
            call_to(Provider::OpenAi, api_key, &body)
        }
        Provider::Anthropic => {
            let mut body = json!({
                "model": settings.model,
                "system": system,
                "messages": messages,
                "temperature": settings.temperature,
                "max_tokens": settings.max_tokens,
            });
            if mode == OutputMode::Schema {
                body["tools"] = json!([{
                    "name": SCHEMA_NAME,
                    "description": "Submit the plan for the request.",
                    "input_schema": plan_json_schema(),
                }]);
                body["tool_choice"] = json!({"type": "tool", "name": SCHEMA_NAME});
            }
            call_to(Provider::Anthropic, api_key, &body)
        }
    }
}

/// A provider's answer as JSON, or its refusal with the provider's message
/// (or the start of its body); shared by plans and tool calling.
pub(crate) fn answer_json(status: u16, body: &[u8]) -> Result<Value, LlmError> {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if !(200..300).contains(&status) {
        let message = parsed["error"]["message"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
        return Err(LlmError::Status { status, message });
    }
    Ok(parsed)
}

/// The HTTP call carrying `body` to the provider's endpoint, with its
/// headers (a bearer key for OpenAI-compatible servers, which a local one
/// may not need; Anthropic's key and API version); shared by plans and tool calling.
pub(crate) fn call_to(provider: Provider, api_key: &str, body: &Value) -> HttpCall {
    let mut headers = vec![("content-type", "application/json".to_owned())];
    let path = match provider {
        Provider::OpenAi => {
            if !api_key.is_empty() {
                headers.push(("authorization", format!("Bearer {api_key}")));
            }
            "/v1/chat/completions"
        }
        Provider::Anthropic => {
            headers.push(("x-api-key", api_key.to_owned()));
            headers.push(("anthropic-version", "2023-06-01".to_owned()));
            "/v1/messages"
        }
    };
    HttpCall { path, headers, body: body.to_string().into_bytes() }
}

/// Parses a provider's HTTP answer into the text and token counts.
pub fn response(provider: Provider, status: u16, body: &[u8]) -> Result<Completion, LlmError> {
    let parsed = answer_json(status, body)?;
    let tokens = |v: &Value| v.as_u64().unwrap_or(0);
    match provider {
        Provider::OpenAi => {
            let text = parsed["choices"][0]["message"]["content"]
                .as_str()
                .ok_or_else(|| LlmError::Malformed("no choices[0].message.content".into()))?;
            Ok(Completion {
                text: text.to_owned(),
                input_tokens: tokens(&parsed["usage"]["prompt_tokens"]),
                output_tokens: tokens(&parsed["usage"]["completion_tokens"]),
            })
        }
        Provider::Anthropic => {
            let blocks = parsed["content"].as_array().ok_or_else(|| LlmError::Malformed("no content array".into()))?;
            // A forced tool call carries the plan as its input object.
            let tool_input = blocks.iter().find(|b| b["type"] == "tool_use").map(|b| b["input"].to_string());
            let text: String = match tool_input {
                Some(input) => input,
                None => blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect(),
            };
            if text.is_empty() {
                return Err(LlmError::Malformed("no text content".into()));
            }
            Ok(Completion {
                text,
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

    #[test]
    fn openai_puts_the_system_prompt_first_and_uses_a_bearer_key() {
        let call = request(&settings(Provider::OpenAi), "k", "sys", &[Turn { role: "user", content: "u".into() }], OutputMode::Free);
        let body: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!(call.path, "/v1/chat/completions");
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "sys"}));
        assert_eq!(body["messages"][1], json!({"role": "user", "content": "u"}));
        assert!(call.headers.contains(&("authorization", "Bearer k".into())));
        let keyless = request(&settings(Provider::OpenAi), "", "sys", &[], OutputMode::Free);
        assert!(!keyless.headers.iter().any(|(n, _)| *n == "authorization"), "a local server needs no key");
    }

    #[test]
    fn anthropic_sends_system_apart_with_its_headers() {
        let call = request(&settings(Provider::Anthropic), "k", "sys", &[Turn { role: "user", content: "u".into() }], OutputMode::Free);
        let body: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!((call.path, &body["system"]), ("/v1/messages", &json!("sys")));
        assert!(call.headers.contains(&("x-api-key", "k".into())));
        assert!(call.headers.iter().any(|(n, _)| *n == "anthropic-version"));
    }

    #[test]
    fn answers_parse_with_token_counts_and_errors_keep_the_message() {
        let openai = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#;
        assert_eq!(response(Provider::OpenAi, 200, openai).unwrap(), Completion { text: "hi".into(), input_tokens: 7, output_tokens: 2 });
        let anthropic = br#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"usage":{"input_tokens":3,"output_tokens":1}}"#;
        assert_eq!(response(Provider::Anthropic, 200, anthropic).unwrap().text, "ab");
        let refused = br#"{"error":{"message":"bad key"}}"#;
        assert_eq!(
            response(Provider::OpenAi, 401, refused),
            Err(LlmError::Status { status: 401, message: "bad key".into() })
        );
        assert!(matches!(response(Provider::Anthropic, 200, b"{}"), Err(LlmError::Malformed(_))));
    }

    #[test]
    fn structured_output_follows_the_mode() {
        let body = |provider, mode| -> Value {
            serde_json::from_slice(&request(&settings(provider), "k", "s", &[], mode).body).unwrap()
        };
        let schema = body(Provider::OpenAi, OutputMode::Schema);
        assert_eq!(schema["response_format"]["type"], "json_schema");
        assert_eq!(schema["response_format"]["json_schema"]["schema"], plan_json_schema());
        assert_eq!(body(Provider::OpenAi, OutputMode::JsonObject)["response_format"], json!({"type": "json_object"}));
        assert!(body(Provider::OpenAi, OutputMode::Free).get("response_format").is_none());
        let tool = body(Provider::Anthropic, OutputMode::Schema);
        assert_eq!(tool["tool_choice"], json!({"type": "tool", "name": SCHEMA_NAME}));
        assert_eq!(tool["tools"][0]["input_schema"], plan_json_schema());
        assert!(body(Provider::Anthropic, OutputMode::Free).get("tools").is_none());
    }

    #[test]
    fn fallbacks_step_down_to_free_text() {
        assert_eq!(OutputMode::Schema.fallback(Provider::OpenAi), Some(OutputMode::JsonObject));
        assert_eq!(OutputMode::JsonObject.fallback(Provider::OpenAi), Some(OutputMode::Free));
        assert_eq!(OutputMode::Schema.fallback(Provider::Anthropic), Some(OutputMode::Free));
        assert_eq!(OutputMode::Free.fallback(Provider::OpenAi), None);
        for mode in OutputMode::ALL {
            assert_eq!(OutputMode::from_name(mode.name()), Some(mode));
        }
    }

    #[test]
    fn only_a_refused_format_is_a_reason_to_fall_back() {
        let refused = |status: u16, message: &str| LlmError::Status { status, message: message.into() }.refuses_output_mode();
        assert!(refused(400, "'response_format' of type 'json_schema' is not supported with this model"));
        assert!(refused(500, "JSON schema conversion failed"));
        assert!(refused(422, "unsupported parameter"));
        assert!(!refused(401, "invalid api key: response_format"));
        assert!(!refused(400, "maximum context length exceeded"));
        assert!(!refused(500, "model is loading"));
        assert!(!LlmError::Malformed("x".into()).refuses_output_mode());
    }

    #[test]
    fn a_forced_tool_call_answers_with_its_input() {
        let answer = br#"{"content":[{"type":"tool_use","name":"rest_plan","input":{"action":"get"}}],"usage":{}}"#;
        let text = response(Provider::Anthropic, 200, answer).unwrap().text;
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"action": "get"}));
    }
}
