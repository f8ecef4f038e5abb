//! A failed service call as its `/v1` answer: the JSON error envelope with
//! the call's status and stable code, an admission refusal or a shared
//! session store that did not answer asking for a retry in a second
//! (`Retry-After`), as the REST blocks' refusals do.

use axum::response::{IntoResponse, Response};

use crate::admission::Refused;
use crate::envelope::ApiError;
use crate::interpreter_service::ServiceError;

impl From<&ServiceError> for ApiError {
    fn from(error: &ServiceError) -> Self {
        let answer = ApiError::new(error.status(), error.code(), error.to_string());
        // 429 and 503 pass: a slot frees as soon as any execution ends, and
        // a shared session store that did not answer is tried again.
        let passes = matches!(error, ServiceError::Refused(_) | ServiceError::Interpreter(anypath_interpreter::InterpreterError::SharedStore(_)));
        if passes { answer.retry_after_a_second() } else { answer }
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        Self::from(&error)
    }
}

/// A refused admission: 429 for a tenant past its share, 503 when the
/// service is full or stopping.
impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        Self::from(ServiceError::Refused(refused))
    }
}

/// The envelope, naming the request being answered on this task.
impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use axum::http::header::RETRY_AFTER;

    use super::*;
    use crate::request_id::{REQUEST_ID, RequestId};

    async fn body(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 10).await.expect("a body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[tokio::test]
    async fn a_refusal_is_the_envelope_asking_for_a_retry() {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(REQUEST_ID, axum::http::HeaderValue::from_static("req-9"));
        let response = ApiError::from(Refused::TenantBusy { running: 2, queued: 2 }).respond(&RequestId::from_headers(&headers));
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
        assert_eq!(response.headers()[REQUEST_ID], "req-9");
        let body = body(response).await;
        assert_eq!((&body["error"]["code"], &body["error"]["request_id"]), (&serde_json::json!("tenant_busy"), &serde_json::json!("req-9")));

        let response = ServiceError::Refused(Refused::Closed).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "1");
    }

    #[tokio::test]
    async fn an_error_outside_any_request_names_a_new_id_in_its_body_and_header() {
        let response = ServiceError::Unauthorized.into_response();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert!(!response.headers().contains_key(RETRY_AFTER));
        let header = response.headers()[REQUEST_ID].to_str().expect("text").to_owned();
        let body = body(response).await;
        assert_eq!(body["error"]["code"], "unauthorized");
        assert_eq!(body["error"]["request_id"], header.as_str());
    }
}
