//! The JSON body of every error answer, from every part.

use serde::{Deserialize, Serialize};

/// `{"error": {"code", "message", "request_id"}}`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The inside of an [`ErrorEnvelope`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct ErrorBody {
    /// Stable, snake_case: what a client branches on.
    pub code: String,
    pub message: String,
    pub request_id: String,
}

impl ErrorEnvelope {
    /// An envelope for any code and message.
    pub fn new(code: &str, message: impl Into<String>, request_id: &str) -> Self {
        Self { error: ErrorBody { code: code.to_owned(), message: message.into(), request_id: request_id.to_owned() } }
    }
}
