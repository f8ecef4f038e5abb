//! Errors as Jupyter's clients read them: tornado's `{"message", "reason"}`
//! with the status, and the request id in its header: the one being
//! answered on this task ([`crate::request_id`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::interpreter_service::ServiceError;
use crate::request_id::RequestId;

/// A Jupyter error answer.
#[derive(Debug)]
pub(crate) struct JupyterError {
    pub status: StatusCode,
    pub message: String,
}

#[derive(serde::Serialize)]
struct Body<'a> {
    message: &'a str,
    reason: Option<&'a str>,
}

impl JupyterError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn no_kernel(id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, format!("Kernel does not exist: {id}"))
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "present the token as 'Authorization: token T', 'Authorization: Bearer T' or '?token=T'")
    }
}

/// The answer to the request being handled on this task.
impl IntoResponse for JupyterError {
    fn into_response(self) -> Response {
        let body = Body { message: &self.message, reason: self.status.canonical_reason() };
        let mut response = (self.status, axum::Json(body)).into_response();
        RequestId::current().stamp(&mut response);
        response
    }
}

impl From<ServiceError> for JupyterError {
    fn from(error: ServiceError) -> Self {
        Self::new(error.status(), error.to_string())
    }
}

/// The fleet's records could not be read or written (a 503).
impl From<anypath_interpreter::InterpreterError> for JupyterError {
    fn from(error: anypath_interpreter::InterpreterError) -> Self {
        Self::from(ServiceError::Interpreter(error))
    }
}
