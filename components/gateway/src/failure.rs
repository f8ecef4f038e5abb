//! Error answers of the gateway, in the one JSON envelope.

use anypath_rest::settings::SettingError;
use anypath_rest::{ErrorEnvelope, RestError};
use http_client::{Answer, CallError};

/// An error answer: status, code and message.
pub struct Failure {
    pub status: u16,
    pub code: String,
    pub message: String,
    /// A short word for the log line.
    pub detail: &'static str,
    /// The `Allow` header of a 405.
    pub allow: Option<String>,
    /// The `Retry-After` header of a refusal passed on (429, 503).
    pub retry_after: Option<String>,
}

impl Failure {
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>, detail: &'static str) -> Self {
        Self { status, code: code.into(), message: message.into(), detail, allow: None, retry_after: None }
    }

    /// A 405 for `method`, listing the methods that `path` accepts.
    pub fn method_not_allowed(method: &str, path: &str, allowed: &[&str]) -> Self {
        let mut failure = Self::rest(RestError::MethodNotAllowed(format!("{method} is not supported on {path}")));
        failure.allow = Some(anypath_rest::surface::allow_header(allowed));
        failure
    }

    pub fn rest(error: RestError) -> Self {
        Self::new(error.status(), error.code(), error.to_string(), "rejected")
    }

    /// A call to `what` (planner, store, sandbox) that produced no answer.
    pub fn unavailable(what: &str, error: CallError) -> Self {
        match error {
            CallError::Timeout => Self::new(504, format!("{what}_timeout"), format!("the {what} did not answer in time"), "timeout"),
            other => Self::new(503, format!("{what}_unavailable"), format!("the {what} is unavailable: {other}"), "unavailable"),
        }
    }

    /// Passes a component's own error envelope through (the request id is ours).
    pub fn passed_on(answer: &Answer, what: &str) -> Self {
        match serde_json::from_slice::<ErrorEnvelope>(&answer.body) {
            Ok(e) => Self {
                retry_after: answer.retry_after.clone().filter(|_| matches!(answer.status, 429 | 503)),
                ..Self::new(answer.status, e.error.code, e.error.message, "rejected")
            },
            Err(_) => Self::new(502, format!("{what}_failed"), format!("the {what} answered {}", answer.status), "upstream"),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "internal", message, "internal")
    }

    /// The app's variables hold values that cannot be used: nothing is
    /// served on a setting nobody asked for.
    pub fn misconfigured(errors: &[SettingError]) -> Self {
        let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Self::new(500, "misconfigured", format!("the app is misconfigured: {}", listed.join("; ")), "misconfigured")
    }
}
