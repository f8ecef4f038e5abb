//! Errors as E2B's clients read them: `{"code": <status>, "message": ...}`
//! with that status for the control plane, envd's file routes and the code
//! interpreter; Connect's `{"code": "not_found", "message": ...}` for the
//! Connect services. Every answer carries the request id: the one being
//! answered on this task ([`crate::request_id`]).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::interpreter_service::ServiceError;
use crate::request_id::RequestId;

/// An E2B error answer.
#[derive(Debug)]
pub(crate) struct E2bError {
    pub status: StatusCode,
    pub message: String,
}

#[derive(serde::Serialize)]
struct Body<'a> {
    code: u16,
    message: &'a str,
}

impl E2bError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// What E2B's proxy answers for a sandbox that is paused, killed or
    /// past its timeout (the SDK's `is_running()` reads 502 as not running).
    pub fn not_running(sandbox_id: &str) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, format!("The sandbox {sandbox_id} is not running (paused, killed or past its timeout)"))
    }
}

/// The answer to the request being handled on this task.
impl IntoResponse for E2bError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&Body { code: self.status.as_u16(), message: &self.message }).unwrap_or_default();
        let mut response = (self.status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        // E2B's JavaScript SDK reports a 4xx by its status line alone: the
        // message goes there too (HTTP/1 allows any visible reason phrase).
        if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(reason_phrase(self.status, &self.message)) {
            response.extensions_mut().insert(reason);
        }
        RequestId::current().stamp(&mut response);
        response
    }
}

/// `Bad Request: <message>` in visible ASCII, at most 200 bytes.
fn reason_phrase(status: StatusCode, message: &str) -> String {
    let canonical = status.canonical_reason().unwrap_or("Error");
    let text: String = format!("{canonical}: {message}").chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).take(200).collect();
    text
}

impl From<ServiceError> for E2bError {
    fn from(error: ServiceError) -> Self {
        Self::new(error.status(), error.to_string())
    }
}

/// The fleet's records could not be read or written (a 503).
impl From<anypath_interpreter::InterpreterError> for E2bError {
    fn from(error: anypath_interpreter::InterpreterError) -> Self {
        Self::from(ServiceError::Interpreter(error))
    }
}

/// A Connect error: its code names the kind, the HTTP status follows
/// Connect's table.
#[derive(Debug)]
pub(crate) struct ConnectError {
    pub code: &'static str,
    pub message: String,
}

#[derive(serde::Serialize)]
struct ConnectBody<'a> {
    code: &'a str,
    message: &'a str,
}

impl ConnectError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// The HTTP status of a unary error answer, per the Connect protocol.
    pub fn status(&self) -> StatusCode {
        match self.code {
            "invalid_argument" | "failed_precondition" | "out_of_range" => StatusCode::BAD_REQUEST,
            "unauthenticated" => StatusCode::UNAUTHORIZED,
            "permission_denied" => StatusCode::FORBIDDEN,
            "not_found" => StatusCode::NOT_FOUND,
            "already_exists" | "aborted" => StatusCode::CONFLICT,
            "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
            "unimplemented" => StatusCode::NOT_IMPLEMENTED,
            "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            "deadline_exceeded" => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON body, as unary answers and end-of-stream messages carry it.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "code": self.code, "message": self.message })
    }
}

/// A unary call's error answer, to the request being handled on this task.
impl IntoResponse for ConnectError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&ConnectBody { code: self.code, message: &self.message }).unwrap_or_default();
        let mut response = (self.status(), [(header::CONTENT_TYPE, "application/json")], body).into_response();
        RequestId::current().stamp(&mut response);
        response
    }
}

impl From<E2bError> for ConnectError {
    fn from(error: E2bError) -> Self {
        let code = match error.status.as_u16() {
            400 | 413 => "invalid_argument",
            401 => "unauthenticated",
            403 => "permission_denied",
            404 => "not_found",
            409 => "already_exists",
            429 | 507 => "resource_exhausted",
            501 => "unimplemented",
            502 | 503 => "unavailable",
            _ => "internal",
        };
        Self::new(code, error.message)
    }
}

impl From<ServiceError> for ConnectError {
    fn from(error: ServiceError) -> Self {
        E2bError::from(error).into()
    }
}

/// A header value, when it is one.
pub(crate) fn header_value(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(value).ok()
}
