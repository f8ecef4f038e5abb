//! Why a store request failed, and the one place a failure becomes the
//! store's HTTP answer: its status, the JSON error envelope and, for an
//! outage worth waiting out, `Retry-After`.

use anypath_rest::journal::JournalError;
use anypath_rest::{ErrorEnvelope, RestError};
use spin_sdk::http::Response;
use spin_sdk::wit::wasi::keyvalue::store;

use crate::codec::json_response;

/// Why a request to the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A failure with its own status and code (400, 404, 409, ...).
    #[error(transparent)]
    Rest(#[from] RestError),
    /// The data store cannot be reached now (503, worth a retry).
    #[error("{0}")]
    Unavailable(String),
    /// The data store failed or holds what it should not (500).
    #[error("{0}")]
    Backend(String),
}

impl From<store::Error> for StoreError {
    fn from(e: store::Error) -> Self {
        Self::Backend(format!("key-value: {e:?}"))
    }
}

impl From<JournalError> for StoreError {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::Conflict { .. } => Self::Rest(RestError::Conflict(e.to_string())),
            JournalError::Inconsistent { .. } => Self::Rest(RestError::BadRequest(e.to_string())),
        }
    }
}

impl StoreError {
    /// The answer this failure gets, its envelope naming `request_id`.
    pub fn into_response(self, request_id: &str) -> Response {
        let (status, envelope) = match &self {
            Self::Rest(e) => (e.status(), e.envelope(request_id)),
            Self::Unavailable(message) => (503, ErrorEnvelope::new("store_unavailable", message.as_str(), request_id)),
            Self::Backend(message) => (500, ErrorEnvelope::new("store_failed", message.as_str(), request_id)),
        };
        // An envelope is strings only, which always encode.
        let mut response = json_response(status, serde_json::to_vec(&envelope).unwrap_or_default());
        if matches!(self, Self::Unavailable(_)) {
            response.set_header("retry-after", "1");
        }
        response
    }
}
