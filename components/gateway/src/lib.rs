//! The gateway component: the only public route (`/...`).
//!
//! It authenticates, binds the request to a tenant, builds the request
//! context, asks the planner for a plan, loads the plan's collections from
//! the store, runs the block on the sandbox host, commits the journal with a
//! version check (re-running on a conflict), and maps `REPLY` to the HTTP
//! response. It also answers `/healthz` and `/readyz`.

mod config;
mod outbound;
mod timing;

use std::time::Instant;

use anypath_rest::context::RawRequest;
use anypath_rest::plan::LoadSpec;
use anypath_rest::{ErrorEnvelope, Plan, RequestContext, RestError, names};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;

use config::Config;
use outbound::{CallError, call};
use timing::Timings;

const PLANNER: &str = "http://planner.spin.internal/plan";
const STORE_LOAD: &str = "http://store.spin.internal/load";
const STORE_COMMIT: &str = "http://store.spin.internal/commit";
/// Re-runs after a version conflict before giving up. Every round lets at
/// least one contender commit, so this bounds how many may race on one
/// collection before anyone sees a 409.
const MAX_CONFLICT_RETRIES: usize = 64;
const ALLOW: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
const DEFAULT_TENANT: &str = "default";

/// A finished response plus what the log line needs.
struct Outcome {
    response: Response,
    status: u16,
    detail: &'static str,
}

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let started = Instant::now();
    let request_id = request_id(&request);
    let config = Config::load();
    let method = request.method().to_string();
    let path = request.path().to_owned();
    let outcome = route(&request, &config, &request_id);
    // One JSON line per request; never headers, bodies or data.
    eprintln!(
        "{}",
        json!({"request_id": request_id, "method": method, "path": path, "status": outcome.status,
               "detail": outcome.detail, "duration_ms": started.elapsed().as_secs_f64() * 1e3})
    );
    Ok(outcome.response)
}

fn route(request: &Request, config: &Config, request_id: &str) -> Outcome {
    match request.path() {
        "/healthz" => respond(200, &json!({"status": "ok", "planner_mode": "rules"}), request_id, "health"),
        "/readyz" => ready(config, request_id),
        _ => match serve(request, config, request_id) {
            Ok(outcome) => outcome,
            Err(failure) => failure.into_outcome(request_id),
        },
    }
}

/// An error answer: status, code and message.
struct Failure {
    status: u16,
    code: String,
    message: String,
    detail: &'static str,
}

impl Failure {
    fn new(status: u16, code: impl Into<String>, message: impl Into<String>, detail: &'static str) -> Self {
        Self { status, code: code.into(), message: message.into(), detail }
    }

    fn rest(error: RestError) -> Self {
        Self::new(error.status(), error.code(), error.to_string(), "rejected")
    }

    fn into_outcome(self, request_id: &str) -> Outcome {
        let envelope = ErrorEnvelope::new(&self.code, self.message, request_id);
        let mut outcome = respond(self.status, &serde_json::to_value(envelope).unwrap_or(Value::Null), request_id, self.detail);
        if self.status == 405 {
            outcome.response.set_header("allow", ALLOW);
        }
        outcome
    }
}

fn serve(request: &Request, config: &Config, request_id: &str) -> Result<Outcome, Failure> {
    authorise(request, config)?;
    let tenant = tenant(request, config)?;
    if *request.method() == Method::Options {
        let mut response = Response::builder().status(204).header("allow", ALLOW).build();
        response.set_header("x-request-id", request_id);
        return Ok(Outcome { response, status: 204, detail: "options" });
    }
    if request.body().len() > config.max_body_bytes {
        return Err(Failure::rest(RestError::BodyTooLarge { limit: config.max_body_bytes }));
    }
    let headers: Vec<(String, String)> = request
        .headers()
        .filter_map(|(name, value)| value.as_str().map(|v| (name.to_owned(), v.to_owned())))
        .collect();
    let client_ip = request.header("spin-client-addr").and_then(|v| v.as_str()).unwrap_or("").rsplit_once(':').map(|(ip, _)| ip.to_owned()).unwrap_or_default();
    let raw = RawRequest {
        method: &request.method().to_string(),
        path: request.path(),
        query: request.query(),
        headers: &headers,
        body: request.body(),
        client_ip: &client_ip,
    };
    let ctx = RequestContext::build(&raw, &tenant).map_err(Failure::rest)?;
    let mut timings = Timings::default();
    let plan = timings.time("plan", || plan(&ctx, config, request_id))?;
    let head = *request.method() == Method::Head;
    let mut specs = plan.load_specs(ctx.body_json.as_ref());
    for attempt in 0..=MAX_CONFLICT_RETRIES {
        if attempt > 0 {
            back_off(attempt);
        }
        let collections = timings.time("load", || load(&tenant, &specs, config, request_id))?;
        let report = match timings.time("exec", || execute(&plan, &ctx, &collections, config, request_id)) {
            Err(Exec::NeedsData) if specs.iter().any(|s| s.ids.is_some()) => {
                // The block reached past a partial load: run it again on whole collections.
                specs = specs.into_iter().map(|s| LoadSpec { ids: None, ..s }).collect();
                continue;
            }
            Err(Exec::NeedsData) => {
                return Err(Failure::new(500, "sandbox_needs_data", "the block asked for data that was loaded whole", "internal"));
            }
            Err(Exec::Failed(failure)) => return Err(failure),
            Ok(report) => report,
        };
        let mutations = report["mutations"].as_array().cloned().unwrap_or_default();
        if !mutations.is_empty() && !timings.time("commit", || commit(&tenant, &collections, &report, mutations, config, request_id))? {
            continue;
        }
        let mut outcome = reply(&report["reply"], head, request_id);
        outcome.response.set_header("server-timing", timings.header());
        return Ok(outcome);
    }
    Err(Failure::new(409, "conflict", "the data kept changing while this request ran; try again", "conflict"))
}

/// Sleeps a random 0..2*attempt ms (at most 20 ms) so conflicting writers spread out.
fn back_off(attempt: usize) {
    let ceiling_ms = (2 * attempt as u64).min(20);
    let jitter_ns = wasi::random::random::get_random_u64() % (ceiling_ms * 1_000_000 + 1);
    wasi::clocks::monotonic_clock::subscribe_duration(jitter_ns).block();
}

fn authorise(request: &Request, config: &Config) -> Result<(), Failure> {
    if config.auth_token.is_empty() {
        return Ok(());
    }
    let presented = request.header("authorization").and_then(|v| v.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(token) if constant_time_eq(token.as_bytes(), config.auth_token.as_bytes()) => Ok(()),
        _ => Err(Failure::rest(RestError::Unauthorized("missing or wrong bearer token".into()))),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn tenant(request: &Request, config: &Config) -> Result<String, Failure> {
    if let Some(key) = request.header("x-api-key").and_then(|v| v.as_str()) {
        return config
            .api_keys
            .iter()
            .find(|(k, _)| constant_time_eq(k.as_bytes(), key.as_bytes()))
            .map(|(_, tenant)| tenant.clone())
            .ok_or_else(|| Failure::rest(RestError::Unauthorized("unknown API key".into())));
    }
    let session = request.header("x-session-id").and_then(|v| v.as_str()).unwrap_or(DEFAULT_TENANT);
    names::tenant(session).map(str::to_owned).map_err(Failure::rest)
}

fn internal(url: &str, body: &Value, config: &Config, request_id: &str) -> Result<outbound::Answer, CallError> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    call(url, Some(&bytes), &[("x-request-id", request_id)], config.call_timeout)
}

fn unavailable(what: &str, error: CallError) -> Failure {
    match error {
        CallError::Timeout => Failure::new(504, format!("{what}_timeout"), format!("the {what} did not answer in time"), "timeout"),
        other => Failure::new(503, format!("{what}_unavailable"), format!("the {what} is unavailable: {other}"), "unavailable"),
    }
}

/// Passes a component's own error envelope through, with this request's id.
fn passed_on(answer: &outbound::Answer, what: &str) -> Failure {
    let parsed: Option<ErrorEnvelope> = serde_json::from_slice(&answer.body).ok();
    match parsed {
        Some(e) => Failure::new(answer.status, e.error.code, e.error.message, "rejected"),
        None => Failure::new(502, format!("{what}_failed"), format!("the {what} answered {}", answer.status), "upstream"),
    }
}

fn plan(ctx: &RequestContext, config: &Config, request_id: &str) -> Result<Plan, Failure> {
    let body = serde_json::to_value(ctx).map_err(|e| Failure::new(500, "internal", e.to_string(), "internal"))?;
    let answer = internal(PLANNER, &body, config, request_id).map_err(|e| unavailable("planner", e))?;
    if answer.status != 200 {
        return Err(passed_on(&answer, "planner"));
    }
    serde_json::from_slice(&answer.body).map_err(|e| Failure::new(502, "planner_failed", format!("invalid plan: {e}"), "upstream"))
}

fn load(tenant: &str, specs: &[LoadSpec], config: &Config, request_id: &str) -> Result<Vec<Value>, Failure> {
    let body = json!({"tenant": tenant, "collections": specs});
    let answer = internal(STORE_LOAD, &body, config, request_id).map_err(|e| unavailable("store", e))?;
    if answer.status != 200 {
        return Err(passed_on(&answer, "store"));
    }
    let loaded: Value = serde_json::from_slice(&answer.body).map_err(|e| Failure::new(502, "store_failed", e.to_string(), "upstream"))?;
    Ok(loaded["collections"].as_array().cloned().unwrap_or_default())
}

/// Why an execution gave no report to commit.
enum Exec {
    /// The block touched data outside a partial load.
    NeedsData,
    Failed(Failure),
}

impl From<Failure> for Exec {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

/// What the sandbox accepts of a loaded collection (the tags stay here).
fn sandbox_view(loaded: &Value) -> Value {
    json!({
        "name": loaded["name"],
        "version": loaded["version"],
        "documents": loaded["documents"],
        "complete": loaded["complete"],
        "absent_ids": loaded["absent_ids"],
        "reserved_id": loaded["reserved_id"],
    })
}

fn execute(plan: &Plan, ctx: &RequestContext, collections: &[Value], config: &Config, request_id: &str) -> Result<Value, Exec> {
    if config.sandbox_url.is_empty() {
        return Err(Failure::new(503, "sandbox_unavailable", "no sandbox_host is configured", "unavailable").into());
    }
    let views: Vec<Value> = collections.iter().map(sandbox_view).collect();
    let body = json!({"code": plan.code.source(), "ctx": ctx, "collections": views});
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let bearer = format!("Bearer {}", config.sandbox_token);
    let mut headers = vec![("x-request-id", request_id)];
    if !config.sandbox_token.is_empty() {
        headers.push(("authorization", bearer.as_str()));
    }
    let url = format!("{}/v1/exec", config.sandbox_url);
    let answer = call(&url, Some(&bytes), &headers, config.call_timeout).map_err(|e| unavailable("sandbox", e))?;
    if answer.status != 200 {
        return Err(passed_on(&answer, "sandbox").into());
    }
    let report: Value = serde_json::from_slice(&answer.body).map_err(|e| Failure::new(502, "sandbox_failed", e.to_string(), "upstream"))?;
    if report["ok"] == json!(true) {
        return Ok(report);
    }
    let kind = report["error"]["kind"].as_str().unwrap_or("internal").to_owned();
    if kind == "needs_data" {
        return Err(Exec::NeedsData);
    }
    let status = if matches!(kind.as_str(), "timeout" | "fuel_exhausted") { 504 } else { 500 };
    let message = report["error"]["message"].as_str().map(str::to_owned).unwrap_or_else(|| format!("the block failed: {kind}"));
    Err(Failure::new(status, format!("sandbox_{kind}"), message, "sandbox_failed").into())
}

/// Commits the journal with what the block read; `Ok(false)` means a conflict (re-run).
fn commit(tenant: &str, loaded: &[Value], report: &Value, mutations: Vec<Value>, config: &Config, request_id: &str) -> Result<bool, Failure> {
    let reads = report["reads"].as_array().map(Vec::as_slice).unwrap_or_default();
    let changes: Vec<Value> = loaded
        .iter()
        .filter_map(|c| {
            let name = c["name"].as_str()?;
            let own: Vec<Value> = mutations.iter().filter(|m| m["collection"] == name).cloned().collect();
            let read = reads.iter().find(|r| r["collection"] == name);
            if own.is_empty() && read.is_none() {
                return None;
            }
            // Each id the block looked up, with the tag it had when loaded (null: absent).
            let seen: serde_json::Map<String, Value> = read
                .and_then(|r| r["ids"].as_array())
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|id| (id.to_owned(), c["tags"][id].clone()))
                .collect();
            let scanned = read.is_some_and(|r| r["scanned"] == json!(true));
            Some(json!({"name": name, "expected_version": c["version"], "scanned": scanned, "reads": seen, "mutations": own}))
        })
        .collect();
    let answer = internal(STORE_COMMIT, &json!({"tenant": tenant, "changes": changes}), config, request_id)
        .map_err(|e| unavailable("store", e))?;
    match answer.status {
        200 => Ok(true),
        409 => Ok(false),
        _ => Err(passed_on(&answer, "store")),
    }
}

/// Maps REPLY to the response: JSON body, the block's headers, none for HEAD or 204.
fn reply(reply: &Value, head: bool, request_id: &str) -> Outcome {
    let status = reply["status"].as_u64().and_then(|s| u16::try_from(s).ok()).unwrap_or(500);
    let mut builder = Response::builder();
    builder.status(status);
    for pair in reply["headers"].as_array().into_iter().flatten() {
        if let (Some(name), Some(value)) = (pair[0].as_str(), pair[1].as_str()) {
            if !matches!(name.to_ascii_lowercase().as_str(), "content-length" | "transfer-encoding" | "connection" | "x-request-id") {
                builder.header(name, value);
            }
        }
    }
    builder.header("x-request-id", request_id);
    let mut body = reply["body"].clone();
    // Error bodies written by a block get the request id, like the gateway's own.
    if status >= 400 {
        if let Some(error) = body.get_mut("error").and_then(Value::as_object_mut) {
            error.entry("request_id").or_insert_with(|| Value::String(request_id.to_owned()));
        }
    }
    let body = &body;
    let response = if status == 204 || status == 304 || body.is_null() {
        builder.build()
    } else {
        builder.header("content-type", "application/json");
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        if head {
            builder.header("content-length", bytes.len().to_string());
            builder.build()
        } else {
            builder.body(bytes).build()
        }
    };
    Outcome { response, status, detail: "ok" }
}

fn respond(status: u16, body: &Value, request_id: &str, detail: &'static str) -> Outcome {
    let response = Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("x-request-id", request_id)
        .body(serde_json::to_vec(body).unwrap_or_default())
        .build();
    Outcome { response, status, detail }
}

fn ready(config: &Config, request_id: &str) -> Outcome {
    let url = format!("{}/healthz", config.sandbox_url);
    match call(&url, None, &[("x-request-id", request_id)], config.call_timeout) {
        Ok(answer) if answer.status == 200 => respond(200, &json!({"status": "ready"}), request_id, "ready"),
        Ok(answer) => respond(503, &json!({"status": "not_ready", "sandbox_status": answer.status}), request_id, "not_ready"),
        Err(e) => respond(503, &json!({"status": "not_ready", "sandbox": e.to_string()}), request_id, "not_ready"),
    }
}

/// The caller's `x-request-id` when usable, otherwise 128 random bits.
fn request_id(request: &Request) -> String {
    let given = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("");
    if !given.is_empty() && given.len() <= 64 && given.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return given.to_owned();
    }
    let (a, b) = (wasi::random::random::get_random_u64(), wasi::random::random::get_random_u64());
    format!("{a:016x}{b:016x}")
}
