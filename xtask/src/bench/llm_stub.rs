//! A stand-in for an OpenAI-compatible model server, for the benchmark's
//! cached-plan row: it answers every `POST /v1/chat/completions` with one
//! fixed, valid plan for [`PLANNED_PATH`], a path the rules do not plan. The
//! first request on that path plans through it and fills the plan cache;
//! the calls are counted, so the benchmark can show that the load itself
//! never reached the model.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use axum::Json;
use axum::extract::State;
use axum::routing::post;
use serde::Serialize;

/// The request the stub's plan answers: the member with the highest age.
pub const PLANNED_PATH: &str = "/members/oldest";

/// The plan's Python block: a sorted page of one, read through the store
/// API the prompt teaches (no literal from the path, so it is cacheable).
const OLDEST: &str = "page = store.list(limit=1, sort='-age')\n\
REPLY = {'status': 200, 'body': page['items'][0]} if page['items'] else \
{'status': 404, 'body': {'error': {'code': 'not_found', 'message': 'no members'}}}";

/// The model the app is told it talks to (part of the plan cache's key).
const MODEL: &str = "bench-stub";

/// The running stub; it stops when dropped.
pub struct LlmStub {
    /// `host:port`.
    address: String,
    calls: Arc<AtomicUsize>,
    _runtime: tokio::runtime::Runtime,
}

impl LlmStub {
    /// Starts on a free loopback port, on a runtime of its own.
    pub fn start() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .context("starting the model stub's runtime")?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding the model stub")?;
        let address = listener.local_addr()?.to_string();
        let calls = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().route("/v1/chat/completions", post(complete)).with_state(calls.clone());
        runtime.spawn(async move { axum::serve(listener, app).await });
        Ok(Self { address, calls, _runtime: runtime })
    }

    /// Completions answered so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The `SPIN_VARIABLE_*` settings that point the app's planner here, in
    /// `auto` mode: the rules plan CRUD, the stub the rest.
    pub fn app_env(&self) -> Vec<(String, String)> {
        [
            ("SPIN_VARIABLE_PLANNER_MODE", "auto"),
            ("SPIN_VARIABLE_LLM_PROVIDER", "openai"),
            ("SPIN_VARIABLE_LLM_SCHEME", "http"),
            ("SPIN_VARIABLE_LLM_HOST", self.address.as_str()),
            ("SPIN_VARIABLE_LLM_MODEL", MODEL),
            ("SPIN_VARIABLE_LLM_API_KEY", "bench-key"),
        ]
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
    }
}

/// A plan as a model writes it (the shape `prompt::SYSTEM` asks for).
#[derive(Serialize)]
struct PlanText {
    action: &'static str,
    resource: &'static str,
    also_loads: [&'static str; 0],
    id: Option<u64>,
    code: CodeText,
}

#[derive(Serialize)]
struct CodeText {
    language: &'static str,
    block: String,
}

/// A Chat Completions answer with one message.
#[derive(Serialize)]
struct Completion {
    choices: [Choice; 1],
    usage: Usage,
}

#[derive(Serialize)]
struct Choice {
    index: u32,
    message: Message,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct Message {
    role: &'static str,
    content: String,
}

#[derive(Serialize)]
struct Usage {
    prompt_tokens: usize,
    completion_tokens: usize,
}

/// Every call gets the same plan, whatever it asks (the prompt, the output
/// schema): the body is read only so the connection can be reused.
async fn complete(State(calls): State<Arc<AtomicUsize>>, body: axum::body::Bytes) -> Json<Completion> {
    calls.fetch_add(1, Ordering::SeqCst);
    let plan = PlanText {
        action: "custom",
        resource: "members",
        also_loads: [],
        id: None,
        code: CodeText { language: "python", block: format!("```python\n{OLDEST}\n```") },
    };
    // A struct of strings always serialises.
    let content = serde_json::to_string(&plan).unwrap_or_default();
    let usage = Usage { prompt_tokens: body.len() / 4, completion_tokens: content.len() / 4 };
    Json(Completion { choices: [Choice { index: 0, message: Message { role: "assistant", content }, finish_reason: "stop" }], usage })
}
