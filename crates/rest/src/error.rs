//! Errors with an HTTP status, and the JSON envelope they are sent in.

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

pub use anypath_wire::{ErrorBody, ErrorEnvelope};

impl RestError {
    /// The error envelope answering this error.
    pub fn envelope(&self, request_id: &str) -> ErrorEnvelope {
        ErrorEnvelope::new(self.code(), self.to_string(), request_id)
    }
}
