//! The gateway component: the only public route (`/...`).
//!
//! It authenticates, binds the request to a tenant, builds the request
//! context, asks the planner for a plan, loads the plan's collections from
//! the store, runs the block on a sandbox host of the pool (the next one when
//! a host does not answer), commits the journal with a version check
//! (re-running on a conflict), and maps `REPLY` to the HTTP response. It also
//! answers `/healthz`, `/readyz` and the documentation paths, and decides
//! `OPTIONS` and `405` from the shape of the path and the planner's mode
//! (`anypath_rest::surface`), exactly as `/openapi.json` says.

mod calls;
mod config;
mod docs;
mod failure;
mod planning;
mod running;
mod sandboxes;
mod timing;

use std::time::Instant;

use anypath_rest::context::RawRequest;
use anypath_rest::cors;
use anypath_rest::list_answer;
use anypath_rest::surface::{self, Planning, Shape};
use anypath_rest::{ErrorEnvelope, RequestContext, RestError, caller, names, reply::ReplyError};
use anypath_wire::{ExecReport, PlannerStatus};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;

use calls::PLANNER_STATUS;
use config::Config;
use failure::Failure;
use http_client::call;
use planning::{Usage, plan_and_run};

use timing::Timings;

/// A finished response plus what the log line needs.
struct Outcome {
    response: Response,
    status: u16,
    detail: &'static str,
}

/// What a request committed, for the log line: `[{collection, op, id}]`.
#[derive(Default)]
struct Committed(Vec<Value>);

impl Committed {
    fn from_report(report: &ExecReport) -> Self {
        Self(report.mutations.iter().map(|m| json!({"collection": m.collection, "op": m.op, "id": m.id})).collect())
    }

    /// `members: insert 3, replace 4`, or `nothing`.
    fn describe(&self) -> String {
        if self.0.is_empty() {
            return "nothing".into();
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|m| format!("{}: {} {}", m["collection"].as_str().unwrap_or("?"), m["op"].as_str().unwrap_or("?"), m["id"]))
            .collect();
        parts.join(", ")
    }
}

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let started = Instant::now();
    let request_id = request_id(&request);
    let config = Config::load();
    let method = request.method().to_string();
    let path = request.path().to_owned();
    let mut usage = Usage::default();
    let mut source = String::new();
    let mut committed = Committed::default();
    let origin = request.header("origin").and_then(|v| v.as_str()).map(str::to_owned);
    let mut outcome = if let Some(preflight) = preflight(&request, &config, &request_id) {
        preflight
    } else if surface::RESERVED_PATHS.contains(&path.as_str()) {
        reserved(&request, &config, &request_id)
    } else {
        serve(&request, &config, &request_id, &mut usage, &mut source, &mut committed)
            .unwrap_or_else(|failure| error_outcome(failure, &request_id))
    };
    if outcome.detail != "preflight" {
        // Every answer, errors included: a page must be able to read why it failed.
        for (name, value) in config.cors.response_headers(origin.as_deref()) {
            outcome.response.set_header(name, &value);
        }
    }
    // One JSON line per request; never headers, bodies or data, but which documents it committed.
    log_line(&json!({"request_id": request_id, "method": method, "path": path, "status": outcome.status,
               "detail": outcome.detail, "plan": source, "llm_calls": usage.llm_calls, "repairs": usage.repairs,
               "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "committed": committed.0,
               "config_errors": config.errors, "duration_ms": started.elapsed().as_secs_f64() * 1e3}));
    Ok(outcome.response)
}

/// Writes one JSON log line to stderr in a single write: `eprintln!` writes
/// each formatted piece on its own, and every write is a host call and a
/// system call (a tenth of a request's CPU on the fast path).
pub(crate) fn log_line(line: &Value) {
    let mut bytes = serde_json::to_vec(line).unwrap_or_default();
    bytes.push(b'\n');
    let _ = std::io::Write::write_all(&mut std::io::stderr(), &bytes);
}

/// The gateway's own paths: `GET` and `HEAD` answer, `OPTIONS` lists those, anything else is a 405.
fn reserved(request: &Request, config: &Config, request_id: &str) -> Outcome {
    let methods = surface::allowed(Shape::Reserved, Planning::Rules);
    let mut outcome = match request.method() {
        Method::Get | Method::Head => match request.path() {
            "/healthz" => health(config, request_id),
            "/readyz" => ready(config, request_id),
            path => {
                let (content_type, body) = docs::page(path, || planning(config, request_id));
                let response = Response::builder()
                    .status(200)
                    .header("content-type", content_type)
                    .header("x-request-id", request_id)
                    .body(body)
                    .build();
                Outcome { response, status: 200, detail: "docs" }
            }
        },
        Method::Options => options(methods, request_id),
        other => error_outcome(Failure::method_not_allowed(&other.to_string(), request.path(), methods), request_id),
    };
    if *request.method() == Method::Head {
        let length = outcome.response.body().len();
        outcome.response = without_body(outcome.response, length);
    }
    outcome
}

/// The same response with an empty body, keeping status and headers (for `HEAD`).
fn without_body(response: Response, length: usize) -> Response {
    let mut builder = Response::builder();
    builder.status(*response.status());
    for (name, value) in response.headers() {
        if let Some(value) = value.as_str() {
            builder.header(name, value);
        }
    }
    builder.header("content-length", length.to_string());
    builder.build()
}

fn options(methods: &[&str], request_id: &str) -> Outcome {
    let mut response = Response::builder().status(204).header("allow", surface::allow_header(methods)).build();
    response.set_header("x-request-id", request_id);
    Outcome { response, status: 204, detail: "options" }
}

/// A CORS preflight from an origin that may call: `204` with what the path
/// allows (its `Allow`), asked before any credential, as browsers send
/// none with it. None otherwise: the request is then an ordinary `OPTIONS`.
fn preflight(request: &Request, config: &Config, request_id: &str) -> Option<Outcome> {
    let header = |name| request.header(name).and_then(|v| v.as_str());
    let origin = header("origin");
    if !cors::is_preflight(&request.method().to_string(), origin, header("access-control-request-method")) {
        return None;
    }
    // Checked before the planner is asked what the path allows.
    let origin = origin.filter(|origin| !config.cors.response_headers(Some(origin)).is_empty())?;
    let methods = preflight_methods(request.path(), config, request_id);
    let headers = config.cors.preflight_headers(origin, methods)?;
    let mut outcome = options(methods, request_id);
    for (name, value) in headers {
        outcome.response.set_header(name, &value);
    }
    outcome.detail = "preflight";
    Some(outcome)
}

/// What a path allows, as its `OPTIONS` says: the rules' list, or the
/// model's wider one when the planner has a model.
fn preflight_methods(path: &str, config: &Config, request_id: &str) -> &'static [&'static str] {
    let segments: Vec<String> = path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
    let shape = Shape::of(path, &segments);
    let rules = surface::allowed(shape, Planning::Rules);
    if shape == Shape::Reserved {
        return rules;
    }
    let planned = surface::allowed(shape, planning(config, request_id).0);
    if planned.is_empty() { rules } else { planned }
}

/// Whether a model plans beyond the rules, and whether the agent has an
/// LLM, as the planner says; the rules and no agent when it cannot say (the
/// narrower answer is the safe one).
fn planning(config: &Config, request_id: &str) -> (Planning, bool) {
    match planner_status(config, request_id) {
        Ok(status) => (Planning::from_mode(&status.planner_mode), status.llm_configured),
        Err(_) => (Planning::from_mode("rules"), false),
    }
}

fn error_outcome(failure: Failure, request_id: &str) -> Outcome {
    let envelope = ErrorEnvelope::new(&failure.code, failure.message, request_id);
    let mut outcome = respond(failure.status, &serde_json::to_value(envelope).unwrap_or(Value::Null), request_id, failure.detail);
    if let Some(allow) = failure.allow {
        outcome.response.set_header("allow", &allow);
    }
    if let Some(retry_after) = failure.retry_after {
        outcome.response.set_header("retry-after", &retry_after);
    }
    outcome
}

fn serve(
    request: &Request,
    config: &Config,
    request_id: &str,
    usage: &mut Usage,
    source: &mut String,
    committed: &mut Committed,
) -> Result<Outcome, Failure> {
    if !config.errors.is_empty() {
        return Err(Failure::misconfigured(&config.errors));
    }
    authorise(request, config)?;
    let tenant = tenant(request, config)?;
    if request.body().len() > config.max_body_bytes {
        return Err(Failure::rest(RestError::BodyTooLarge { limit: config.max_body_bytes }));
    }
    let headers: Vec<(String, String)> = request
        .headers()
        .filter_map(|(name, value)| value.as_str().map(|v| (name.to_owned(), v.to_owned())))
        .collect();
    let client_ip = request
        .header("spin-client-addr")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .rsplit_once(':')
        .map(|(ip, _)| ip.to_owned())
        .unwrap_or_default();
    let raw = RawRequest {
        method: &request.method().to_string(),
        path: request.path(),
        query: request.query(),
        headers: &headers,
        body: request.body(),
        client_ip: &client_ip,
    };
    let mut ctx = RequestContext::build(&raw, &tenant).map_err(Failure::rest)?;
    if let Some(outcome) = check_method(&ctx, request.path(), config, request_id)? {
        return Ok(outcome);
    }
    names::body_id(ctx.body_json.as_mut()).map_err(Failure::rest)?;
    // `delete_reply = "record"`: every DELETE answers as if it asked for
    // the deleted record (what react-admin's deleteMany reads).
    if config.delete_returns_record && ctx.method == "DELETE" {
        ctx.headers.entry("prefer".into()).or_insert_with(|| "return=representation".into());
    }
    // A tenant past its share of the sandbox is turned away before planning
    // costs anything; a request the store runs by itself uses no sandbox.
    let in_store = planning::runs_in_store(&ctx, config);
    if !in_store {
        let refused = sandboxes::with_tenant_headers(config, request_id, &tenant, |headers| sandboxes::refused_before_planning(config, request_id, headers));
        if let Some(refused) = refused {
            return Err(refused);
        }
    }
    let mut timings = Timings::default();
    let served = plan_and_run(&ctx, &tenant, in_store, config, request_id, &mut timings, usage)?;
    served.source.as_str().clone_into(source);
    *committed = Committed::from_report(&served.report);
    let shaped;
    let reply_value = match (&ctx.list, ctx.segments.last()) {
        (Some(list), Some(resource)) => {
            shaped = list_answer::shape(&served.report.reply, list, resource, request.path(), request.query());
            &shaped
        }
        _ => &served.report.reply,
    };
    let mut outcome = reply(reply_value, *request.method() == Method::Head, request_id).map_err(|e| {
        // The changes are committed: say so, rather than let the request look failed and unwritten.
        let message = format!("the request's changes were committed ({}), but its reply cannot be sent: {e}", committed.describe());
        Failure::new(500, "reply_failed", message, "committed_reply_failed")
    })?;
    outcome.response.set_header("x-anypath-plan", served.source.as_str());
    for callee in calls::take_callee_timings() {
        timings.add_entries(&callee);
    }
    outcome.response.set_header("server-timing", timings.header());
    Ok(outcome)
}

/// Answers `OPTIONS`, a path no planner serves (404) and a method the path
/// does not accept (405); `None` lets the request go on to be planned. The
/// planner's mode is asked only when the rules alone would refuse.
fn check_method(ctx: &RequestContext, path: &str, config: &Config, request_id: &str) -> Result<Option<Outcome>, Failure> {
    let shape = Shape::of(path, &ctx.segments);
    let Some(collection) = ctx.segments.first() else {
        return Err(Failure::rest(RestError::NotFound("no collection in the path: try /<collection>/".into())));
    };
    names::collection(collection).map_err(Failure::rest)?;
    let method = ctx.method.as_str();
    if method != "OPTIONS" && surface::allowed(shape, Planning::Rules).contains(&method) {
        return Ok(None);
    }
    let methods = surface::allowed(shape, planning(config, request_id).0);
    if methods.is_empty() {
        return Err(Failure::rest(RestError::NotFound(format!("no rule plans {path}; an LLM planner would interpret it"))));
    }
    if method == "OPTIONS" {
        return Ok(Some(options(methods, request_id)));
    }
    if !methods.contains(&method) {
        return Err(Failure::method_not_allowed(method, path, methods));
    }
    Ok(None)
}

fn authorise(request: &Request, config: &Config) -> Result<(), Failure> {
    let presented = request.header("authorization").and_then(|v| v.as_str());
    caller::authorise(&config.auth_token, presented).map_err(Failure::rest)
}

fn tenant(request: &Request, config: &Config) -> Result<String, Failure> {
    let header = |name| request.header(name).and_then(|v| v.as_str());
    caller::tenant(&config.api_keys, header("x-api-key"), header("x-session-id")).map_err(Failure::rest)
}

/// Maps REPLY to the response: JSON body, the block's headers, none for HEAD or 204.
fn reply(reply: &Value, head: bool, request_id: &str) -> Result<Outcome, ReplyError> {
    let checked = anypath_rest::reply::head(reply)?;
    let status = checked.status;
    let mut builder = Response::builder();
    builder.status(status);
    for (name, value) in &checked.headers {
        builder.header(name, value);
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
        if !checked.has_content_type() {
            builder.header("content-type", "application/json");
        }
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        if head {
            builder.header("content-length", bytes.len().to_string());
            builder.build()
        } else {
            builder.body(bytes).build()
        }
    };
    Ok(Outcome { response, status, detail: "ok" })
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

/// The planner's `/status`, or why there is none.
fn planner_status(config: &Config, request_id: &str) -> Result<PlannerStatus, String> {
    match call(PLANNER_STATUS, None, &[("x-request-id", request_id)], config.call_timeout) {
        Ok(answer) if answer.status == 200 => {
            serde_json::from_slice(&answer.body).map_err(|e| format!("the planner's status is malformed: {e}"))
        }
        Ok(answer) => Err(format!("the planner answered {}", answer.status)),
        Err(e) => Err(e.to_string()),
    }
}

/// Liveness, with the planner's mode (`rules`, `llm`, `auto`) and why.
fn health(config: &Config, request_id: &str) -> Outcome {
    let body = match planner_status(config, request_id) {
        Ok(planner) => json!({"status": "ok", "planner_mode": planner.planner_mode, "planner": planner}),
        Err(error) => json!({"status": "ok", "planner_mode": null, "planner": {"error": error}}),
    };
    respond(200, &body, request_id, "health")
}

/// Readiness: 200 while every variable is usable and at least one sandbox
/// host answers its `/healthz`, with each host's state and each unusable
/// variable: `{"status", "ready", "sandbox_hosts": [{"host", "ready", "error"?}], "config_errors": [...]}`.
fn ready(config: &Config, request_id: &str) -> Outcome {
    let (hosts_ready, mut body) = sandboxes::readiness(config, request_id);
    let mut errors = config.errors.clone();
    if let Ok(planner) = planner_status(config, request_id) {
        // Both read some variables (call_timeout_ms): list each problem once.
        for error in planner.config_errors {
            if !errors.contains(&error) {
                errors.push(error);
            }
        }
    }
    let ready = hosts_ready && errors.is_empty();
    body["config_errors"] = json!(errors);
    body["ready"] = json!(ready);
    body["status"] = json!(if ready { "ready" } else { "not_ready" });
    if ready {
        respond(200, &body, request_id, "ready")
    } else {
        respond(503, &body, request_id, "not_ready")
    }
}

/// The caller's `x-request-id` when usable, otherwise 128 random bits.
fn request_id(request: &Request) -> String {
    if let Some(given) = caller::usable_request_id(request.header("x-request-id").and_then(|v| v.as_str())) {
        return given;
    }
    let (a, b) = (wasi::random::random::get_random_u64(), wasi::random::random::get_random_u64());
    format!("{a:016x}{b:016x}")
}
