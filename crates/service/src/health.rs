//! The routes that describe the service rather than use it: `/healthz`
//! (limits and load), `/readyz` (whether it can serve), `/metrics`
//! (Prometheus) and `/openapi.json` (every route).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::envelope::ApiError;
use crate::state::AppState;

/// The service's OpenAPI document: every route, its auth and error envelope.
const OPENAPI: &str = include_str!("openapi/sandbox.json");

/// `/healthz`, `/readyz`, `/metrics` and `/openapi.json`.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let (running, queued, tenants) = state.admission.snapshot();
    let mut body = json!({
        "status": "ok",
        "limits": state.sandbox.limits(),
        "running": running,
        "queued": queued,
        "admission": bounds(&state.admission),
        "tenants": tenants,
        "runtimes": runtimes(&state),
        "sessions": sessions(&state),
    });
    if let Some(app) = &state.app_requests {
        let (running, queued, tenants) = app.snapshot();
        body["app_requests"] = json!({ "running": running, "queued": queued, "admission": bounds(app), "tenants": tenants });
    }
    axum::Json(body).into_response()
}

/// The bounds an admission keeps, as `/healthz` reports them.
fn bounds(admission: &crate::admission::Admission) -> serde_json::Value {
    let config = admission.config();
    json!({
        "max_running": config.max_running,
        "tenant_running": config.tenant_running,
        "contended_running": config.contended_running,
        "linger_ms": config.linger.as_millis(),
        "max_queued": config.max_queued,
        "tenant_queued": config.tenant_queued,
    })
}

/// The Prometheus text exposition, behind the same credentials as the
/// service's other calls.
async fn metrics(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    if state.tenant(&headers).is_none() {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "metrics need the service's token or an API key"));
    }
    let text = state
        .metrics
        .encode()
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the metrics could not be written"))?;
    Ok(([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response())
}

/// Readiness: 200 when the runtimes are compiled and loaded (the REST
/// runtime answered its start, the session runtimes are there), the data
/// directory takes a file and the artifact index and blob store work; 503
/// with the failing check otherwise.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    // The block runner is compiled and loaded before the service listens.
    let rest = anypath_wire::ReadinessCheck::of("rest_runtime", Ok(()), Some("python".to_owned()));
    let interpreter = state.interpreter.clone();
    let checks = tokio::task::spawn_blocking(move || {
        let mut checks = vec![rest];
        if let Some(interpreter) = interpreter {
            checks.extend(interpreter.readiness());
        }
        checks
    })
    .await
    .unwrap_or_else(|e| vec![anypath_wire::ReadinessCheck::of("checks", Err(format!("the checks did not finish: {e}")), None)]);
    let readiness = anypath_wire::Readiness::of(checks);
    let status = if readiness.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(readiness)).into_response()
}

/// The sessions held now against the memory budget: how many are live and
/// what their instances hold of their own together (the pages they wrote,
/// which the budget counts), how many wait in saved images, how many are
/// open; `null` without the code interpreter.
fn sessions(state: &AppState) -> serde_json::Value {
    let Some(interpreter) = &state.interpreter else {
        return serde_json::Value::Null;
    };
    let stats = interpreter.stats();
    json!({
        "live": stats.sessions_live,
        "live_bytes": stats.sessions_live_bytes,
        "memory_budget_bytes": interpreter.memory_budget(),
        "hibernated": stats.sessions_hibernated,
        "open": stats.sessions_open,
    })
}

/// What each runtime is: the REST runtime, and those sessions may ask for
/// (with their origin and limits), the default one marked.
fn runtimes(state: &AppState) -> serde_json::Value {
    let Some(interpreter) = &state.interpreter else {
        return json!([state.sandbox.describe()]);
    };
    let described = interpreter.sandboxes().iter().map(|sandbox| {
        let mut about = sandbox.describe();
        about["default_for_sessions"] = json!(sandbox.runtime() == interpreter.default_runtime());
        about
    });
    serde_json::Value::Array(described.collect())
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}
