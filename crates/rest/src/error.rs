//! Errors with an HTTP status, and the JSON envelope they are sent in.

use serde::Serialize;

/// A request that cannot be served, with the status it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestError {
    #[error("{0}")]
    BadRequest(String),
    #[error("body exceeds {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
}

impl RestError {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::Unauthorized(_) => 401,
            Self::NotFound(_) => 404,
            Self::MethodNotAllowed(_) => 405,
            Self::Conflict(_) => 409,
            Self::BodyTooLarge { .. } => 413,
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::Unauthorized(_) => "unauthorized",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::Conflict(_) => "conflict",
            Self::BodyTooLarge { .. } => "body_too_large",
        }
    }
}

/// `{"error": {"code", "message", "request_id"}}`
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The inside of an [`ErrorEnvelope`].
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    pub request_id: String,
}

impl ErrorEnvelope {
    /// An envelope for any code and message.
    pub fn new(code: &str, message: impl Into<String>, request_id: &str) -> Self {
        Self { error: ErrorBody { code: code.to_owned(), message: message.into(), request_id: request_id.to_owned() } }
    }

    /// The envelope for a [`RestError`].
    pub fn from_error(error: &RestError, request_id: &str) -> Self {
        Self::new(error.code(), error.to_string(), request_id)
    }
}
