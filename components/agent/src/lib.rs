//! The agent component: `POST /run`. A client posts a task in plain words;
//! a model, reached only through the planner's private `/complete`, calls
//! file and test tools in one sandbox session of the caller's tenant (the
//! sandbox host's code-interpreter API) until it answers. The loop, the
//! tools and the request rules are `anypath-agent`'s; this component binds
//! them to Spin: auth and tenant as the gateway does (`anypath_rest::caller`),
//! outbound calls, variables, the log line.

mod sandbox;

use std::time::{Duration, Instant};

use anypath_agent::{AgentError, Model, ModelError, RunRequest, Step};
use anypath_llm::{ChatAnswer, ChatRequest};
use anypath_rest::settings::{SettingError, Settings};
use anypath_rest::{ErrorEnvelope, PoolError, SandboxPool, caller};
use http_client::{CallError, call};
use serde_json::{Value, json};
use spin_sdk::http::{IncomingRequest, Method, Request, Response, ResponseOutparam};
use spin_sdk::http_component;
use spin_sdk::variables;

use sandbox::SandboxSession;

/// The planner's completion endpoint, by service chaining.
const PLANNER_COMPLETE: &str = "http://planner.spin.internal/complete";

/// Settings from Spin variables.
struct Config {
    auth_token: String,
    api_keys: Vec<(String, String)>,
    /// The sandbox hosts (`sandbox_hosts`), or why the list cannot be used.
    sandbox_pool: Result<SandboxPool, PoolError>,
    sandbox_token: String,
    call_timeout: Duration,
    /// A run's own deadline, model and tool calls included.
    run_timeout: Duration,
    /// Model turns a run may take at most.
    max_iterations: u32,
    /// Where completions are asked: the planner, unless a test manifest
    /// points it elsewhere to prove the allowlist refuses that.
    completion_url: String,
    /// Variables whose values cannot be used: the agent then runs nothing.
    errors: Vec<SettingError>,
}

impl Config {
    fn load() -> Self {
        let mut settings = Settings::new(|name: &str| variables::get(name).ok());
        let completion_url = settings.text("completion_url");
        let config = Self {
            auth_token: settings.text("auth_token"),
            api_keys: settings.api_keys("api_keys"),
            sandbox_pool: SandboxPool::parse(&settings.text("sandbox_hosts")),
            sandbox_token: settings.text("sandbox_token"),
            call_timeout: settings.millis("call_timeout_ms", 10_000),
            run_timeout: settings.millis("agent_timeout_ms", 120_000),
            max_iterations: settings.number("agent_max_iterations", 6u32).clamp(1, 50),
            completion_url: Some(completion_url).filter(|u| !u.trim().is_empty()).unwrap_or_else(|| PLANNER_COMPLETE.to_owned()),
            errors: Vec::new(),
        };
        Self { errors: settings.errors(), ..config }
    }
}

/// What the log line says of a run.
#[derive(Default)]
struct Tally {
    turns: u32,
    tool_calls: u32,
    recovered_calls: u32,
    input_tokens: u64,
    output_tokens: u64,
}

#[http_component]
async fn handle(incoming: IncomingRequest, out: ResponseOutparam) {
    front::respond::serve(incoming, out, answer).await;
}

fn answer(request: Request) -> Response {
    let started = Instant::now();
    let request_id = front::checks::request_id(&request);
    let config = Config::load();
    let mut tally = Tally::default();
    let (status, body) = match serve(&request, &config, &request_id, started, &mut tally) {
        Ok(body) => (200, body),
        Err((status, code, message)) => (status, serde_json::to_value(ErrorEnvelope::new(code, message, &request_id)).unwrap_or(Value::Null)),
    };
    // One line per run: no prompt, file contents or output.
    eprintln!(
        "{}",
        json!({"request_id": request_id, "path": "/run", "status": status, "turns": tally.turns, "tool_calls": tally.tool_calls,
               "recovered_calls": tally.recovered_calls,
               "input_tokens": tally.input_tokens, "output_tokens": tally.output_tokens,
               "config_errors": config.errors, "duration_ms": started.elapsed().as_secs_f64() * 1e3})
    );
    let mut builder = Response::builder();
    builder.status(status).header("content-type", "application/json").header("x-request-id", &request_id);
    if status == 405 {
        builder.header("allow", "POST");
    }
    builder.body(serde_json::to_vec(&body).unwrap_or_default()).build()
}

type Refusal = (u16, &'static str, String);

fn serve(request: &Request, config: &Config, request_id: &str, started: Instant, tally: &mut Tally) -> Result<Value, Refusal> {
    let rest = |e: anypath_rest::RestError| (e.status(), e.code(), e.to_string());
    let header = |name| request.header(name).and_then(|v| v.as_str());
    if !config.errors.is_empty() {
        let listed: Vec<String> = config.errors.iter().map(ToString::to_string).collect();
        return Err((500, "misconfigured", format!("the app is misconfigured: {}", listed.join("; "))));
    }
    caller::authorise(&config.auth_token, header("authorization")).map_err(rest)?;
    let tenant = caller::tenant(&config.api_keys, header("x-api-key"), header("x-session-id")).map_err(rest)?;
    if *request.method() != Method::Post {
        return Err((405, "method_not_allowed", format!("{} /run is not allowed; use POST", request.method())));
    }
    let run = RunRequest::parse(request.body()).map_err(|e| (400, e.code(), e.to_string()))?;
    let fresh = run.session_id.is_none();
    let session_id = run.session_id.clone().unwrap_or_else(|| format!("run-{}", random_id()));
    let mut session = SandboxSession::open(config, &tenant, &session_id, run.runtime, request_id).map_err(sandbox::OpenError::refusal)?;
    // A fresh session loses nothing by moving; a named one may have had files and state.
    let notice = if fresh { None } else { session.moved_notice(&session_id) };
    let input = match &notice {
        // The model is told too, so it does not count on earlier files.
        Some(notice) => format!("{}\n\n(Note: {notice}; files and variables from earlier runs are not here.)", run.input),
        None => run.input.clone(),
    };
    let deadline = started + config.run_timeout;
    let mut model = PlannerModel { url: &config.completion_url, request_id, deadline };
    let ran = anypath_agent::run(&input, run.iterations(config.max_iterations), &mut model, &mut session, &|| Instant::now() >= deadline);
    if fresh {
        session.close();
    }
    let outcome = ran.map_err(|e| {
        let (status, code) = e.status_and_code();
        if let AgentError::Deadline { turns } = e {
            tally.turns = turns;
        }
        (status, code, e.to_string())
    })?;
    tally.turns = outcome.turns;
    tally.tool_calls = outcome.tool_calls;
    tally.recovered_calls = outcome.recovered_calls;
    tally.input_tokens = outcome.input_tokens;
    tally.output_tokens = outcome.output_tokens;
    let mut body = json!({"output": outcome.output, "session_id": session_id, "turns": outcome.turns,
                          "tool_calls": outcome.tool_calls, "recovered_calls": outcome.recovered_calls});
    let mut steps = outcome.steps;
    if let Some(notice) = notice {
        // First among the steps, as what opening the session observed.
        let input = json!({"session_id": session_id, "host": session.host});
        steps.insert(0, Step::plain("open_session", input, notice.clone()));
        body["notice"] = json!(notice);
    }
    if run.include_steps {
        body["steps"] = serde_json::to_value(&steps).unwrap_or(Value::Null);
    }
    Ok(body)
}

/// The model, through the planner: the only component allowed to reach the LLM.
struct PlannerModel<'a> {
    url: &'a str,
    request_id: &'a str,
    deadline: Instant,
}

impl Model for PlannerModel<'_> {
    fn complete(&mut self, chat: &ChatRequest) -> Result<ChatAnswer, ModelError> {
        let body = serde_json::to_vec(chat).map_err(|e| ModelError::Failed(e.to_string()))?;
        let left = self.deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let answer = call(self.url, Some(&body), &[("x-request-id", self.request_id)], left).map_err(|e| match e {
            CallError::Timeout => ModelError::Timeout("the model did not answer before the run's deadline".into()),
            other => ModelError::Failed(format!("the planner is unreachable: {other}")),
        })?;
        if answer.status != 200 {
            let refusal = serde_json::from_slice::<ErrorEnvelope>(&answer.body).ok().map(|envelope| envelope.error);
            let message = refusal.as_ref().map_or("no reason given", |e| e.message.as_str()).to_owned();
            return Err(match (answer.status, refusal.as_ref().map(|e| e.code.as_str())) {
                (504, _) => ModelError::Timeout(message),
                (503, Some("planner_unconfigured")) => ModelError::Unconfigured(format!(
                    "no LLM is configured ({message}): set the variables llm_host, llm_model and, for a hosted provider, llm_api_key"
                )),
                _ => ModelError::Failed(message),
            });
        }
        serde_json::from_slice(&answer.body).map_err(|e| ModelError::Failed(format!("the planner's answer is malformed: {e}")))
    }
}

/// 128 random bits, as hex.
pub(crate) fn random_id() -> String {
    let (a, b) = (wasi::random::random::get_random_u64(), wasi::random::random::get_random_u64());
    format!("{a:016x}{b:016x}")
}

impl Config {
    /// Headers of every sandbox call: the trusted caller's token and the tenant it acts for.
    fn sandbox_headers<'a>(&'a self, tenant: &'a str, request_id: &'a str, bearer: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut headers = vec![("x-anypath-tenant", tenant), ("x-request-id", request_id)];
        if !self.sandbox_token.is_empty() {
            headers.push(("authorization", bearer));
        }
        headers
    }
}
