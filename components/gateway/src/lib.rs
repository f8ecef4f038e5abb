//! The gateway component: private, it answers what the store (the public
//! route) hands it, the request as the client sent it: everything the rules
//! do not serve in the store, and every refusal.
//!
//! It authenticates (with the same checks as the store, `front::checks`),
//! binds the request to a tenant, builds the request context, asks the
//! planner for a plan, loads the plan's collections from the store, runs
//! the block on a sandbox host of the pool (the next one when
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

use anypath_rest::surface::{self, Planning, Shape};
use anypath_rest::{RequestContext, RestError, cors, names};
use anypath_wire::PlannerStatus;
use front::checks;
use front::log::{Committed, RequestLine, Usage};
use front::reply::{self as replies, Outcome};
use serde_json::json;
use spin_sdk::http::{IncomingRequest, Method, Request, Response, ResponseOutparam};
use spin_sdk::http_component;

use calls::PLANNER_STATUS;
use config::Config;
use failure::Failure;
use http_client::call;
use planning::plan_and_run;

use timing::Timings;

#[http_component]
async fn handle(incoming: IncomingRequest, out: ResponseOutparam) {
    front::respond::serve(incoming, out, answer).await;
}

fn answer(request: Request) -> Response {
    let started = Instant::now();
    let request_id = checks::request_id(&request);
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
        for (name, value) in config.front.cors.response_headers(origin.as_deref()) {
            outcome.response.set_header(name, &value);
        }
    }
    RequestLine {
        request_id: &request_id,
        method: &method,
        path: &path,
        status: outcome.status,
        detail: outcome.detail,
        plan: &source,
        usage: &usage,
        committed: &committed,
        config_errors: &config.errors,
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
    }
    .write();
    outcome.response
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
    let origin = origin.filter(|origin| !config.front.cors.response_headers(Some(origin)).is_empty())?;
    let methods = preflight_methods(request.path(), config, request_id);
    let headers = config.front.cors.preflight_headers(origin, methods)?;
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
    let mut outcome = replies::error(failure.status, &failure.code, failure.message, request_id, failure.detail);
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
    let (mut ctx, tenant) = checks::context(request, &config.front).map_err(Failure::rest)?;
    if let Some(outcome) = check_method(&ctx, request.path(), config, request_id)? {
        return Ok(outcome);
    }
    checks::finish(&mut ctx, &config.front).map_err(Failure::rest)?;
    // A tenant past its share of the sandbox is turned away before planning
    // costs anything; a request the store runs by itself uses no sandbox.
    let in_store = checks::runs_in_store(&ctx, &config.front);
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
    let mut outcome = replies::served(&served.report.reply, &ctx, request, committed, request_id);
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
    replies::json(200, &body, request_id, "health")
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
        replies::json(200, &body, request_id, "ready")
    } else {
        replies::json(503, &body, request_id, "not_ready")
    }
}
