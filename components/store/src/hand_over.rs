//! A public request the rules do not serve here, handed to the gateway
//! (the planner, the sandbox, health, docs, and every refusal) by service
//! chaining, and its answer passed back as it came.

use std::time::Duration;

use front::checks::{self, CLIENT_ADDR_HEADER};
use front::reply;
use http_client::{CallError, Method};
use spin_sdk::http::{Request, Response};

const GATEWAY: &str = "http://gateway.spin.internal";

/// How long the gateway may take. Its own deadlines (the planner's, each
/// call's, the sandbox's limits) end a request well before; this only
/// keeps a gateway that hangs from holding the request for ever.
const GATEWAY_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Headers that describe one connection, not the request or answer.
const HOP_BY_HOP: &[&str] = &["connection", "keep-alive", "transfer-encoding", "te", "upgrade", "host", "proxy-connection"];

/// Hands `request` to the gateway and answers what it answers; a gateway
/// that cannot be reached is a 503 (504 when it did not answer in time).
pub fn to_gateway(request: &Request) -> Response {
    let mut url = format!("{GATEWAY}{}", request.path());
    if !request.query().is_empty() {
        url.push('?');
        url.push_str(request.query());
    }
    let client_addr = checks::client_addr(request);
    let mut headers: Vec<(&str, &str)> = request
        .headers()
        .filter(|(name, _)| passed_on(name) && !name.starts_with("spin-") && !name.eq_ignore_ascii_case(CLIENT_ADDR_HEADER))
        .filter_map(|(name, value)| value.as_str().map(|value| (name, value)))
        .filter(|(name, _)| !name.eq_ignore_ascii_case("content-length"))
        .collect();
    headers.push((CLIENT_ADDR_HEADER, &client_addr));
    let has_body = !request.body().is_empty() || request.header("content-length").is_some();
    let body = has_body.then(|| request.body());
    match http_client::pass_on(method(request), &url, body, &headers, GATEWAY_TIMEOUT) {
        Ok(answer) => {
            let mut builder = Response::builder();
            builder.status(answer.status);
            let head = *request.method() == spin_sdk::http::Method::Head;
            for (name, value) in &answer.headers {
                // The body is whole here: the host counts it again (a HEAD keeps the length it would have).
                let length = name.eq_ignore_ascii_case("content-length");
                if passed_on(name) && (head || !length) {
                    builder.header(name.as_str(), String::from_utf8_lossy(value).as_ref());
                }
            }
            builder.body(answer.body).build()
        }
        Err(error) => {
            let request_id = checks::request_id(request);
            let (status, code, message) = match error {
                CallError::Timeout => (504, "gateway_timeout", "the gateway did not answer in time".to_owned()),
                other => (503, "gateway_unavailable", format!("the gateway is unavailable: {other}")),
            };
            reply::error(status, code, message, &request_id, "unavailable").response
        }
    }
}

fn passed_on(name: &str) -> bool {
    !HOP_BY_HOP.iter().any(|hop| name.eq_ignore_ascii_case(hop))
}

fn method(request: &Request) -> Method {
    use spin_sdk::http::Method as In;
    match request.method() {
        In::Get => Method::Get,
        In::Head => Method::Head,
        In::Post => Method::Post,
        In::Put => Method::Put,
        In::Delete => Method::Delete,
        In::Connect => Method::Connect,
        In::Options => Method::Options,
        In::Trace => Method::Trace,
        In::Patch => Method::Patch,
        In::Other(other) => Method::Other(other.clone()),
    }
}
