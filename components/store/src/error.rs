//! Why a store request failed, and the one place a failure becomes the
//! store's HTTP answer: its status, the JSON error envelope and, for an
//! outage worth waiting out, `Retry-After`.

use anypath_rest::conflict_retry::GaveUp;
use anypath_rest::journal::JournalError;
use anypath_rest::{ErrorEnvelope, RestError};
use spin_sdk::http::Response;
use spin_sdk::wit::wasi::keyvalue::store;

use crate::answer::json_response;

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

    fn answer(error: StoreError) -> (u16, Option<String>, Option<String>, Value) {
        let response = error.into_response("req-1");
        let header = |name: &str| response.header(name).and_then(|v| v.as_str()).map(str::to_owned);
        let body = serde_json::from_slice(response.body()).expect("a JSON body");
        (*response.status(), header("content-type"), header("retry-after"), body)
    }

    #[test]
    fn each_failure_answers_with_its_status_and_envelope() {
        let json_type = Some("application/json".to_owned());
        let envelope = |code: &str, message: &str| json!({"error": {"code": code, "message": message, "request_id": "req-1"}});
        assert_eq!(
            answer(RestError::NotFound("no store endpoint /x".into()).into()),
            (404, json_type.clone(), None, envelope("not_found", "no store endpoint /x"))
        );
        assert_eq!(
            answer(StoreError::Unavailable("redis GET: down".into())),
            (503, json_type.clone(), Some("1".to_owned()), envelope("store_unavailable", "redis GET: down")),
            "an outage says when to try again"
        );
        assert_eq!(answer(StoreError::Backend("stored index is corrupt".into())), (500, json_type, None, envelope("store_failed", "stored index is corrupt")));
    }

    #[test]
    fn the_retry_loops_giving_up_is_a_conflict_or_a_fault() {
        let (status, _, _, body) = answer(GaveUp::KeptChanging.into());
        assert_eq!((status, &body["error"]["message"]), (409, &json!("the data kept changing while this request ran; try again")));
        let (status, _, _, body) = answer(GaveUp::LoadedWhole("id 2 in 'm' was not loaded".into()).into());
        assert_eq!(
            (status, &body["error"]["message"]),
            (500, &json!("the request asked for data that was loaded whole: id 2 in 'm' was not loaded"))
        );
    }
}
