//! The answers of the transports that speak another API's error shape
//! (E2B's, Jupyter's): JSON or 204 on success, the transport's own error
//! otherwise, each naming its request. For handlers that still name their
//! request themselves: an error that implements `IntoResponse` names the
//! request being answered on its own ([`crate::request_id`]).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::request_id::set_request_id;

/// An error that answers a request in its API's own shape.
pub(crate) trait ErrorAnswer: IntoResponse {
    /// This error as the answer to request `request_id`.
    fn into_response_for(self, request_id: &str) -> Response;
}

/// Answers `result` as JSON with `status`, or its error; either names the request.
pub(crate) fn reply<T: serde::Serialize, E: ErrorAnswer>(request_id: &str, status: StatusCode, result: Result<T, E>) -> Response {
    match result {
        Ok(value) => {
            let mut response = (status, axum::Json(value)).into_response();
            set_request_id(&mut response, request_id);
            response
        }
        Err(e) => e.into_response_for(request_id),
    }
}

/// 204, or the error.
pub(crate) fn no_content<E: ErrorAnswer>(request_id: &str, result: Result<(), E>) -> Response {
    match result {
        Ok(()) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            set_request_id(&mut response, request_id);
            response
        }
        Err(e) => e.into_response_for(request_id),
    }
}
