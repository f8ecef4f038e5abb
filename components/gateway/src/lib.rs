//! The gateway component: the only public route (`/...`).
//!
//! It authenticates, binds the request to a tenant, builds the request
//! context, asks the planner for a plan, loads the plan's collections from
//! the store, runs the block on the sandbox host, commits the journal with a
//! version check (re-running on a conflict), and maps `REPLY` to the HTTP
//! response. It also answers `/healthz` and `/readyz`.

mod calls;
mod config;
mod docs;
mod failure;
mod planning;
mod running;
mod timing;

use std::time::Instant;

use anypath_rest::context::RawRequest;
use anypath_rest::{ErrorEnvelope, RequestContext, RestError, names};
use serde_json::{Value, json};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;

use calls::PLANNER_STATUS;
use config::Config;
use failure::Failure;
use http_client::call;
use planning::{Usage, plan_and_run};
use timing::Timings;

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
    let mut usage = Usage::default();
    let mut source = String::new();
    let outcome = route(&request, &config, &request_id, &mut usage, &mut source);
    // One JSON line per request; never headers, bodies or data.
    eprintln!(
        "{}",
        json!({"request_id": request_id, "method": method, "path": path, "status": outcome.status,
               "detail": outcome.detail, "plan": source, "llm_calls": usage.llm_calls, "repairs": usage.repairs,
               "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
               "duration_ms": started.elapsed().as_secs_f64() * 1e3})
    );
    Ok(outcome.response)
}

fn route(request: &Request, config: &Config, request_id: &str, usage: &mut Usage, source: &mut String) -> Outcome {
    let documentation = if *request.method() == Method::Get { docs::page(request.path()) } else { None };
    if let Some((content_type, body)) = documentation {
        let response = Response::builder().status(200).header("content-type", content_type).body(body).build();
        return Outcome { response, status: 200, detail: "docs" };
    }
    match request.path() {
        "/healthz" => health(config, request_id),
        "/readyz" => ready(config, request_id),
        _ => match serve(request, config, request_id, usage, source) {
            Ok(outcome) => outcome,
            Err(failure) => error_outcome(failure, request_id),
        },
    }
}

fn error_outcome(failure: Failure, request_id: &str) -> Outcome {
    let envelope = ErrorEnvelope::new(&failure.code, failure.message, request_id);
    let mut outcome = respond(failure.status, &serde_json::to_value(envelope).unwrap_or(Value::Null), request_id, failure.detail);
    if failure.status == 405 {
        outcome.response.set_header("allow", ALLOW);
    }
    outcome
}

fn serve(request: &Request, config: &Config, request_id: &str, usage: &mut Usage, source: &mut String) -> Result<Outcome, Failure> {
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
    let ctx = RequestContext::build(&raw, &tenant).map_err(Failure::rest)?;
    let mut timings = Timings::default();
    let served = plan_and_run(&ctx, &tenant, config, request_id, &mut timings, usage)?;
    source.clone_from(&served.source);
    let mut outcome = reply(&served.report["reply"], *request.method() == Method::Head, request_id);
    outcome.response.set_header("x-anypath-plan", &served.source);
    outcome.response.set_header("server-timing", timings.header());
    Ok(outcome)
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

/// Liveness, with the planner's mode (`rules`, `llm`, `auto`) and why.
fn health(config: &Config, request_id: &str) -> Outcome {
    let planner = match call(PLANNER_STATUS, None, &[("x-request-id", request_id)], config.call_timeout) {
        Ok(answer) if answer.status == 200 => serde_json::from_slice(&answer.body).unwrap_or(Value::Null),
        Ok(answer) => json!({"error": format!("the planner answered {}", answer.status)}),
        Err(e) => json!({"error": e.to_string()}),
    };
    let mode = planner["planner_mode"].clone();
    respond(200, &json!({"status": "ok", "planner_mode": mode, "planner": planner}), request_id, "health")
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
