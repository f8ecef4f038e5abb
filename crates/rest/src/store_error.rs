//! Why a request to the store component failed, and what it answers: the
//! status, the JSON error envelope and, for an outage worth waiting out, a
//! `Retry-After`. The component turns this answer into its HTTP response.

use crate::conflict_retry::GaveUp;
use crate::journal::JournalError;
use crate::{ErrorEnvelope, RestError};

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

/// What a failed store request answers.
#[derive(Debug, PartialEq)]
pub struct FailureAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The JSON error envelope, naming the request.
    pub envelope: ErrorEnvelope,
    /// `Retry-After` in seconds, for an outage worth waiting out.
    pub retry_after: Option<&'static str>,
}

impl StoreError {
    /// The answer this failure gets, its envelope naming `request_id`.
    pub fn answer(&self, request_id: &str) -> FailureAnswer {
        let (status, envelope) = match self {
            Self::Rest(e) => (e.status(), e.envelope(request_id)),
            Self::Unavailable(message) => (503, ErrorEnvelope::new("store_unavailable", message.as_str(), request_id)),
            Self::Backend(message) => (500, ErrorEnvelope::new("store_failed", message.as_str(), request_id)),
        };
        let retry_after = matches!(self, Self::Unavailable(_)).then_some("1");
        FailureAnswer { status, envelope, retry_after }
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

impl From<GaveUp> for StoreError {
    fn from(gave_up: GaveUp) -> Self {
        match gave_up {
            GaveUp::KeptChanging => Self::Rest(RestError::Conflict(gave_up.to_string())),
            GaveUp::LoadedWhole(message) => Self::Backend(format!("the request asked for data that was loaded whole: {message}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn answer(error: StoreError) -> (u16, Option<&'static str>, Value) {
        let answer = error.answer("req-1");
        (answer.status, answer.retry_after, serde_json::to_value(&answer.envelope).expect("an envelope is JSON"))
    }

    #[test]
    fn each_failure_answers_with_its_status_and_envelope() {
        let envelope = |code: &str, message: &str| json!({"error": {"code": code, "message": message, "request_id": "req-1"}});
        assert_eq!(answer(RestError::NotFound("no store endpoint /x".into()).into()), (404, None, envelope("not_found", "no store endpoint /x")));
        assert_eq!(
            answer(StoreError::Unavailable("redis GET: down".into())),
            (503, Some("1"), envelope("store_unavailable", "redis GET: down")),
            "an outage says when to try again"
        );
        assert_eq!(answer(StoreError::Backend("stored index is corrupt".into())), (500, None, envelope("store_failed", "stored index is corrupt")));
    }

    #[test]
    fn the_retry_loops_giving_up_is_a_conflict_or_a_fault() {
        let (status, _, body) = answer(GaveUp::KeptChanging.into());
        assert_eq!((status, &body["error"]["message"]), (409, &json!("the data kept changing while this request ran; try again")));
        let (status, _, body) = answer(GaveUp::LoadedWhole("id 2 in 'm' was not loaded".into()).into());
        assert_eq!(
            (status, &body["error"]["message"]),
            (500, &json!("the request asked for data that was loaded whole: id 2 in 'm' was not loaded"))
        );
    }
}
