//! Snapshots over HTTP on the sandbox service (`anypath_interpreter::snapshots`):
//!
//! | method and path | call |
//! | --- | --- |
//! | `POST /v1/sessions/{id}/snapshots` `{name?}` | keep the session's state and files as a snapshot (201) |
//! | `GET /v1/snapshots?session_id=&name=` | the tenant's snapshots, newest first |
//! | `GET /v1/snapshots/{id or name}` | one snapshot |
//! | `DELETE /v1/snapshots/{id or name}` | remove it (204; 404 when there is none) |
//!
//! A new session starts from a snapshot with `POST /v1/sessions`
//! `{"session_id": ..., "from_snapshot": ...}`.

use std::sync::Arc;

use anypath_interpreter::snapshots;
use anypath_wire::{SnapshotList, SnapshotRequest};
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::interpreter_service::ServiceError;
use crate::state::AppState;
use super::call::Call;

/// The snapshot routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/sessions/{session_id}/snapshots", post(create))
        .route("/v1/snapshots", get(list))
        .route("/v1/snapshots/{snapshot}", get(describe).delete(remove))
}

async fn create(c: Call, Path(session_id): Path<String>, body: Bytes) -> Result<impl IntoResponse, ServiceError> {
    // An empty body asks for an unnamed snapshot.
    let request: SnapshotRequest = if body.iter().all(u8::is_ascii_whitespace) { SnapshotRequest::default() } else { serde_json::from_slice(&body).map_err(ServiceError::InvalidJson)? };
    let created = c.service.call(&c.caller, snapshots::CreateSnapshot { session_id, name: request.name }).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    session_id: Option<String>,
    name: Option<String>,
}

async fn list(c: Call, query: Result<Query<ListQuery>, QueryRejection>) -> Result<impl IntoResponse, ServiceError> {
    let Query(ListQuery { session_id, name }) = query.map_err(|_| ServiceError::InvalidQuery)?;
    let snapshots = c.service.call(&c.caller, snapshots::ListSnapshots { session_id, name }).await?;
    Ok(Json(SnapshotList { snapshots }))
}

async fn describe(c: Call, Path(snapshot): Path<String>) -> Result<impl IntoResponse, ServiceError> {
    Ok(Json(c.service.call(&c.caller, snapshots::DescribeSnapshot { snapshot }).await?))
}

async fn remove(c: Call, Path(snapshot): Path<String>) -> Result<impl IntoResponse, ServiceError> {
    let name = snapshot.clone();
    if c.service.call(&c.caller, snapshots::DeleteSnapshot { snapshot }).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ServiceError::Interpreter(anypath_interpreter::InterpreterError::NoSuchSnapshot(name)))
    }
}
