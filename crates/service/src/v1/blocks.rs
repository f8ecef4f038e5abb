//! The REST blocks over HTTP: `POST /v1/exec` runs one block,
//! `GET /v1/admission` says whether one would be admitted now. Both are
//! fair across tenants (`admission`) and guarded by the service's token
//! (or, under `anypath up`, by any credential the other routes take).

use std::sync::Arc;

use anypath_sandbox::ExecRequest;
use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::envelope::{ApiError, declared_over, refused_after_draining};
use crate::request_id::RequestId;
use crate::state::AppState;

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 32 << 20;

/// `/v1/exec` and `/v1/admission`.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/exec", post(exec)).route("/v1/admission", get(admission_probe))
}

/// The refusal of a caller without the credential blocks take.
fn unauthorized() -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong bearer token")
}

async fn exec(State(state): State<Arc<AppState>>, request_id: RequestId, request: Request) -> Result<Response, ApiError> {
    if !state.may_execute(request.headers()) {
        return Err(unauthorized());
    }
    let tenant = state.exec_tenant(request.headers());
    if let Some(declared) = declared_over(request.headers(), MAX_BODY_BYTES) {
        return Err(refused_after_draining(declared, MAX_BODY_BYTES, request.into_body()).await);
    }
    // A body without a declared length is refused where it passes the limit.
    let body = to_bytes(request.into_body(), MAX_BODY_BYTES).await.map_err(|_| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", format!("request body exceeds {MAX_BODY_BYTES} bytes"))
    })?;
    let exec_request: ExecRequest = serde_json::from_slice(&body).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", e.to_string()))?;
    drop(body);

    let permit = state.admit(&tenant).await.map_err(|refused| {
        tracing::info!(request_id = %request_id, tenant, outcome = "refused", "exec");
        ApiError::from(refused)
    })?;
    let report = state.sandbox.execute(exec_request).await;
    drop(permit);
    let failed = report.outcome.as_ref().err().map(|failure| &failure.error);
    state.account(&tenant, failed);
    state.metrics.record_run(crate::metrics::Kind::Block, failed, false, report.metrics.duration_us);
    // One line per execution: never the code, context or data.
    tracing::info!(
        request_id = %request_id,
        tenant,
        outcome = report.outcome_name(),
        duration_us = report.metrics.duration_us,
        fuel = report.metrics.fuel_consumed,
        peak_memory_bytes = report.metrics.peak_memory_bytes,
        warm = report.metrics.warm,
        "exec"
    );
    let bytes = serde_json::to_vec(&report).map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// Whether an execution for the caller's tenant would be admitted now: 204,
/// or the refusal `/v1/exec` would give (429 or 503, with `Retry-After`).
/// The gateway asks before it plans, so a tenant past its share is turned
/// away before any planning or loading is spent on its request.
async fn admission_probe(State(state): State<Arc<AppState>>, request_id: RequestId, headers: HeaderMap) -> Result<StatusCode, ApiError> {
    if !state.may_execute(&headers) {
        return Err(unauthorized());
    }
    let tenant = state.exec_tenant(&headers);
    state.admission.probe(&tenant).map_err(|refused| {
        tracing::info!(request_id = %request_id, tenant, outcome = "refused", "admission probe");
        ApiError::from(refused)
    })?;
    Ok(StatusCode::NO_CONTENT)
}
