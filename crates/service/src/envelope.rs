//! Every refusal the sandbox service gives is the JSON error envelope with
//! the request id, the framework's own included: a body over its limit, a
//! path or query that does not parse, a method a route does not take.
//!
//! Handlers answer with an error that is the envelope ([`ApiError`], or a
//! service error converted to one); the request id layer
//! ([`crate::request_id`]) gives each request its id before any handler
//! runs, so every envelope of one request names the same id; the layer here
//! rewrites whatever error answer left without one.

use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::json;

use crate::request_id::RequestId;

/// Room in a request body beyond the base64 of the largest upload: the JSON
/// envelope (or JSON-RPC envelope), the file name and the session id.
const ENVELOPE_BYTES: usize = 64 << 10;
/// The floor of an upload route's body limit (rmcp's own default).
const MIN_UPLOAD_BODY_BYTES: usize = 4 << 20;
/// The most of a framework's plain-text refusal kept as the message.
const MESSAGE_BYTES: usize = 4 << 10;
/// The largest declared body read and discarded before an over-limit upload
/// is refused; a larger one is refused at once and its connection closed.
const DRAIN_MAX_BYTES: u64 = 256 << 20;
/// How long an over-limit upload is read and discarded before the refusal.
const DRAIN_TIME: Duration = Duration::from_secs(30);

/// The body limit of a route that takes a file: the largest permitted
/// upload as base64, in its envelope.
pub(crate) fn upload_body_limit(max_upload_bytes: u64) -> usize {
    let upload = usize::try_from(max_upload_bytes).unwrap_or(usize::MAX);
    upload.div_ceil(3).saturating_mul(4).saturating_add(ENVELOPE_BYTES).max(MIN_UPLOAD_BODY_BYTES)
}

/// Refuses an upload route's request whose declared length is over `limit`
/// with the 413 envelope, after reading and discarding its body
/// ([`refused_after_draining`]).
pub(crate) async fn refuse_oversized_body(State(limit): State<usize>, id: RequestId, request: Request, next: Next) -> Response {
    match declared_over(request.headers(), limit) {
        Some(declared) => refused_after_draining(declared, limit, request.into_body()).await.respond(&id),
        None => next.run(request).await,
    }
}

/// The length a request declares, when it is over `limit`.
pub(crate) fn declared_over(headers: &header::HeaderMap, limit: usize) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > limit as u64)
}

/// The 413 for a body that declared `declared` bytes, given after reading
/// and discarding the body (up to [`DRAIN_MAX_BYTES`] within
/// [`DRAIN_TIME`]): a client still sending when the server answered and
/// closed would see a broken pipe or a reset instead of the refusal.
pub(crate) async fn refused_after_draining(declared: u64, limit: usize, body: Body) -> ApiError {
    if declared <= DRAIN_MAX_BYTES {
        let _ = tokio::time::timeout(DRAIN_TIME, discard(body)).await;
    }
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("the body declares {declared} bytes; this route takes at most {limit}"))
}

/// Reads a body to its end, keeping nothing.
async fn discard(mut body: Body) {
    while let Some(Ok(_)) = body.frame().await {}
}

/// Makes any error answer without a JSON body the envelope, keeping its
/// status and headers (`Allow`, `Retry-After`, ...).
pub(crate) async fn every_error_an_envelope(id: RequestId, request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match to_bytes(body, MESSAGE_BYTES).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_owned(),
        _ => status.canonical_reason().unwrap_or("request refused").to_owned(),
    };
    let mut enveloped = envelope(status, code(status), &text, &id);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            enveloped.headers_mut().entry(name).or_insert_with(|| value.clone());
        }
    }
    enveloped
}

/// A refusal answered as the envelope: `{"error": {"code", "message",
/// "request_id"}}` with its status, the request named in `x-request-id`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// The refusal passes: `Retry-After: 1` asks for another try.
    retry_soon: bool,
}

impl ApiError {
    /// The envelope with `status`, its stable `code` and a message for people.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_soon: false }
    }

    /// Asks for a retry in a second (`Retry-After: 1`): an admission slot
    /// frees as soon as any execution ends.
    pub fn retry_after_a_second(mut self) -> Self {
        self.retry_soon = true;
        self
    }

    /// This error as the answer to request `request_id`.
    pub fn respond(self, request_id: &RequestId) -> Response {
        let mut response = envelope(self.status, self.code, &self.message, request_id);
        if self.retry_soon {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// The answer to the request being handled on this task.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.respond(&RequestId::current())
    }
}

/// The fallback of the `/v1` router: no route has this path.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// The envelope's body and status; its id in the `x-request-id` header too,
/// so an answer made outside the request id layer names its request as well.
fn envelope(status: StatusCode, code: &str, message: &str, request_id: &RequestId) -> Response {
    let body = json!({ "error": { "code": code, "message": message, "request_id": request_id.as_str() } });
    let mut response = (status, axum::Json(body)).into_response();
    request_id.stamp(&mut response);
    response.extensions_mut().insert(crate::refusal_audit::RefusalCode(code.to_owned()));
    response
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.ends_with("+json"))
}

/// The envelope's code for a refusal the framework made.
fn code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        s if s.is_server_error() => "internal",
        _ => "request_refused",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upload_limit_carries_the_largest_upload_as_base64() {
        let limit = upload_body_limit(100 << 20);
        assert!(limit >= (100 << 20) * 4 / 3 + ENVELOPE_BYTES);
        assert!(limit < (100 << 20) * 4 / 3 + 2 * ENVELOPE_BYTES);
        assert_eq!(upload_body_limit(1), MIN_UPLOAD_BODY_BYTES);
    }
}
