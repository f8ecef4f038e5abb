//! A scripted fake LLM provider over real HTTP, speaking OpenAI Chat
//! Completions (`/v1/chat/completions`) and Anthropic Messages
//! (`/v1/messages`). Each call takes the next scripted reply; an `Oracle`
//! reply answers with the seed rules' plan for the request in the prompt,
//! like a model that always gets CRUD right, and declines every other
//! request with a plan that answers 404. Every call is recorded.
//!
//! The planner's probe of whether the server honours `tool_choice:
//! required` (a request offering only [`PROBE_TOOL`]) does not take a
//! scripted reply: asking for a required call, it is answered as
//! [`FakeLlm::answering_probes`] says (by default with a call, as a server
//! that honours the setting); without the setting, with text. Probes are
//! recorded apart, in [`FakeLlm::probes`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use anypath_rest::context::RawRequest;
use anypath_rest::{RequestContext, rules};
use axum::Json;
use axum::http::HeaderMap;
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// This text, as the model's message.
    Text(String),
    /// The rules' plan for the request, as clean JSON; where no rule fits,
    /// a custom plan answering 404 (a model that finds no such action).
    Oracle,
    /// An HTTP error with this status and message, as a server refusing a parameter.
    Refuse(u16, String),
    /// For requests on this resource (first path segment), a plan whose code
    /// never ends; for any other request, the `Oracle`'s plan.
    EndlessFor(String),
    /// For requests on this resource (first path segment), a plan running
    /// this Python block; for any other request, the `Oracle`'s plan.
    BlockFor(String, String),
    /// Native tool calls: each a tool name and its arguments as the raw JSON
    /// text the model wrote (malformed text is sent as it is).
    Tools(Vec<(String, String)>),
}

/// A tool call reply: `tool(name, arguments)` pairs.
pub fn tools(calls: &[(&str, Value)]) -> Reply {
    Reply::Tools(calls.iter().map(|(name, arguments)| ((*name).to_owned(), arguments.to_string())).collect())
}

/// What the fake says: text, or tool calls.
enum Said {
    Text(String),
    Tools(Vec<(String, String)>),
}

/// One recorded call: which API, and the request body.
#[derive(Clone, Debug)]
pub struct Call {
    pub api: &'static str,
    pub body: Value,
    /// Whether the request declared its length (small local model servers
    /// cannot read a chunked request body).
    pub content_length: bool,
}

impl Call {
    /// Every message text of the call, the system prompt included.
    pub fn text(&self) -> String {
        self.body.to_string()
    }
}

/// The tool the planner's probe asks for (`components/planner/src/completion.rs`).
pub const PROBE_TOOL: &str = "tool_choice_probe";

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Used when the queue is empty.
    fallback: Option<Reply>,
    calls: Vec<Call>,
    /// The answer to a probe; `None` answers with a call of the probe tool.
    probe: Option<Reply>,
    probes: Vec<Call>,
}

/// The running fake; stops with the test process.
pub struct FakeLlm {
    /// `host:port`.
    pub address: String,
    script: Arc<Mutex<Script>>,
}

impl FakeLlm {
    /// Starts on a free loopback port with `replies` queued.
    pub fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Mutex::new(Script { replies: replies.into(), ..Script::default() }));
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(script.clone());
        Self { address: super::serve_in_background(app), script }
    }

    /// Answers every call beyond the queue with `reply`.
    pub fn otherwise(self, reply: Reply) -> Self {
        self.script.lock().expect("script").fallback = Some(reply);
        self
    }

    /// Answers the planner's probes that ask for a required call with
    /// `reply` (a server that does not honour the setting answers with text
    /// or refuses it).
    pub fn answering_probes(self, reply: Reply) -> Self {
        self.script.lock().expect("script").probe = Some(reply);
        self
    }

    /// Every probe so far.
    pub fn probes(&self) -> Vec<Call> {
        self.script.lock().expect("script").probes.clone()
    }

    /// Queues more replies.
    pub fn push(&self, replies: Vec<Reply>) {
        self.script.lock().expect("script").replies.extend(replies);
    }

    /// Every call so far but the probes.
    pub fn calls(&self) -> Vec<Call> {
        self.script.lock().expect("script").calls.clone()
    }

    /// The `SPIN_VARIABLE_*` settings that point the planner here.
    pub fn env(&self, provider: &str, mode: &str) -> Vec<(String, String)> {
        [
            ("SPIN_VARIABLE_LLM_PROVIDER", provider),
            ("SPIN_VARIABLE_LLM_SCHEME", "http"),
            ("SPIN_VARIABLE_LLM_HOST", self.address.as_str()),
            ("SPIN_VARIABLE_LLM_MODEL", "fake-model"),
            ("SPIN_VARIABLE_LLM_API_KEY", "test-key"),
            ("SPIN_VARIABLE_PLANNER_MODE", mode),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

fn answer(script: &Arc<Mutex<Script>>, api: &'static str, headers: &HeaderMap, body: Value) -> Result<Said, (u16, String)> {
    let reply = next_reply(script, api, headers, &body);
    match reply {
        Reply::Tools(calls) => Ok(Said::Tools(calls)),
        other => text_of(other, &body).map(Said::Text),
    }
}

fn next_reply(script: &Arc<Mutex<Script>>, api: &'static str, headers: &HeaderMap, body: &Value) -> Reply {
    let mut script = script.lock().expect("script");
    let content_length = headers.contains_key(axum::http::header::CONTENT_LENGTH);
    let call = Call { api, body: body.clone(), content_length };
    if is_probe(body) {
        script.probes.push(call);
        if body["tool_choice"].is_null() {
            return Reply::Text("Tool calls work.".into());
        }
        return script.probe.clone().unwrap_or_else(|| tools(&[(PROBE_TOOL, json!({}))]));
    }
    script.calls.push(call);
    script.replies.pop_front().or_else(|| script.fallback.clone()).unwrap_or(Reply::Text("I have no plan.".into()))
}

/// Whether the request offers only the probe's tool (in OpenAI's shape or Anthropic's).
fn is_probe(body: &Value) -> bool {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or_default();
    matches!(tools, [tool] if tool["function"]["name"] == PROBE_TOOL || tool["name"] == PROBE_TOOL)
}

fn text_of(reply: Reply, body: &Value) -> Result<String, (u16, String)> {
    match reply {
        Reply::Text(text) => Ok(text),
        Reply::Oracle => Ok(oracle(body)),
        Reply::Refuse(status, message) => Err((status, message)),
        Reply::EndlessFor(resource) if request_context(body)["segments"][0] == resource.as_str() => Ok(endless(&resource)),
        Reply::EndlessFor(_) => Ok(oracle(body)),
        Reply::BlockFor(resource, code) if request_context(body)["segments"][0] == resource.as_str() => Ok(custom_plan(&resource, &code)),
        Reply::BlockFor(..) => Ok(oracle(body)),
        Reply::Tools(_) => Ok(String::new()),
    }
}

/// The request context in the last request message.
fn request_context(body: &Value) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let user = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .rfind(|text| text.starts_with("Request context:"))
        .unwrap_or("");
    let start = user.find('{').unwrap_or(0);
    let mut stream = serde_json::Deserializer::from_str(&user[start..]).into_iter::<Value>();
    stream.next().and_then(Result::ok).unwrap_or(Value::Null)
}

/// A custom plan whose code loops until a limit stops it.
fn endless(resource: &str) -> String {
    custom_plan(resource, "n = 0\nwhile True:\n    n += 1\nREPLY = {'status': 200, 'body': {'n': n}}")
}

/// The rules' plan for the request context in the last request message
/// (worked examples come before it, repairs after it).
fn oracle(body: &Value) -> String {
    let request = request_context(body);
    let query: Vec<String> = request["query"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(k, vs)| vs.as_array().cloned().unwrap_or_default().into_iter().map(move |v| format!("{k}={}", v.as_str().unwrap_or(""))))
        .collect();
    let body = if request["body_json"].is_null() { String::new() } else { request["body_json"].to_string() };
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let query = query.join("&");
    let raw = RawRequest {
        method: request["method"].as_str().unwrap_or("GET"),
        path: request["path"].as_str().unwrap_or("/"),
        query: &query,
        headers: &headers,
        body: body.as_bytes(),
        client_ip: "",
    };
    match RequestContext::build(&raw, "oracle").map_err(|e| e.to_string()).and_then(|ctx| rules::plan(&ctx).map_err(|e| e.to_string())) {
        Ok(plan) => serde_json::to_string(&plan).expect("plan serialises"),
        Err(_) => decline(request["segments"][0].as_str().unwrap_or("none")),
    }
}

/// A custom plan that answers 404 with the error envelope.
fn decline(resource: &str) -> String {
    custom_plan(resource, "REPLY = {'status': 404, 'body': {'error': {'code': 'not_found', 'message': 'no action ' + ctx['method'] + ' ' + ctx['path']}}}")
}

/// A custom plan on `resource` running `code`, as a model would write it.
fn custom_plan(resource: &str, code: &str) -> String {
    json!({
        "action": "custom", "resource": resource, "also_loads": [], "id": null, "criteria": {}, "payload": null,
        "response_hints": {}, "code": {"language": "python", "block": format!("```python\n{code}\n```")},
    })
    .to_string()
}

fn tokens(body: &Value) -> u64 {
    body.to_string().len() as u64 / 4
}

type Answer = (axum::http::StatusCode, Json<Value>);

fn refused(status: u16, message: String) -> Answer {
    let status = axum::http::StatusCode::from_u16(status).expect("a scripted status");
    (status, Json(json!({"error": {"message": message, "type": "invalid_request_error"}})))
}

async fn openai(State(script): State<Arc<Mutex<Script>>>, headers: HeaderMap, Json(body): Json<Value>) -> Answer {
    let input = tokens(&body);
    let text = match answer(&script, "openai", &headers, body) {
        Ok(Said::Text(text)) => text,
        Ok(Said::Tools(calls)) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": arguments}}))
                .collect();
            return (axum::http::StatusCode::OK, Json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": input, "completion_tokens": 10},
            })));
        }
        Err((status, message)) => return refused(status, message),
    };
    (axum::http::StatusCode::OK, Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": text.len() / 4},
    })))
}

/// Anthropic Messages; a forced tool call is answered as a `tool_use` block
/// whose input is the scripted JSON object, as the real API does.
async fn anthropic(State(script): State<Arc<Mutex<Script>>>, headers: HeaderMap, Json(body): Json<Value>) -> Answer {
    let input = tokens(&body);
    let forced_tool = body["tool_choice"]["name"].as_str().map(str::to_owned);
    let text = match answer(&script, "anthropic", &headers, body) {
        Ok(Said::Text(text)) => text,
        Ok(Said::Tools(calls)) => {
            // Anthropic carries only objects as tool input; malformed text becomes a string input.
            let blocks: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    let input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.clone()));
                    json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": input})
                })
                .collect();
            return (axum::http::StatusCode::OK, Json(json!({
                "type": "message", "content": blocks, "stop_reason": "tool_use",
                "usage": {"input_tokens": input, "output_tokens": 10},
            })));
        }
        Err((status, message)) => return refused(status, message),
    };
    let block = match (forced_tool, serde_json::from_str::<Value>(&text)) {
        (Some(name), Ok(object @ Value::Object(_))) => json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": object}),
        _ => json!({"type": "text", "text": text}),
    };
    (axum::http::StatusCode::OK, Json(json!({
        "type": "message",
        "content": [block],
        "usage": {"input_tokens": input, "output_tokens": text.len() / 4},
    })))
}
