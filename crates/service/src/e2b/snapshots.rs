//! E2B's snapshot calls over the interpreter's snapshots: `POST
//! /sandboxes/{id}/snapshots` keeps a sandbox's files and live state,
//! `GET /snapshots` lists them (by sandbox or name, paged with
//! `x-next-token`), `DELETE /templates/{id}` removes one, and a sandbox
//! created with a snapshot's id or name as its template starts from it
//! ([`super::control`]). A snapshot is a fork kept under an id, so it takes
//! milliseconds where E2B's takes seconds.

use std::sync::Arc;

use anypath_interpreter::snapshots;
use anypath_wire::SnapshotInfo;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::E2b;
use super::call::ControlCall;
use super::error::E2bError;

/// `SandboxSnapshotRequest` of E2B's API.
#[derive(Debug, Default, Deserialize)]
struct SnapshotRequest {
    name: Option<String>,
}

/// `SnapshotInfo` of E2B's API.
#[derive(Debug, Serialize)]
struct SnapshotJson {
    #[serde(rename = "snapshotID")]
    snapshot_id: String,
    names: Vec<String>,
}

impl From<SnapshotInfo> for SnapshotJson {
    fn from(info: SnapshotInfo) -> Self {
        Self { snapshot_id: info.snapshot_id, names: info.names }
    }
}

/// `POST /sandboxes/{id}/snapshots`: the sandbox's default context, its
/// files and state, kept; the sandbox runs on unchanged.
pub(crate) async fn create(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, Path(id): Path<String>, bytes: Bytes) -> Result<impl IntoResponse, E2bError> {
    let sandbox = e2b.owned(&caller, &id).await?;
    let request: SnapshotRequest = super::control::body(&bytes)?;
    let name = request.name.filter(|n| !n.is_empty());
    let created = e2b.service.call(&caller, snapshots::CreateSnapshot { session_id: sandbox.id.clone(), name }).await?;
    tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, sandbox = %sandbox.id, snapshot = %created.snapshot_id, "e2b snapshot created");
    Ok((StatusCode::CREATED, Json(SnapshotJson::from(created))))
}

/// `GET /snapshots`: the caller's snapshots, newest first, of one sandbox
/// (`sandboxID`) or by `name`, `limit` at a time after `nextToken`.
pub(crate) async fn list(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, RawQuery(raw): RawQuery) -> Result<Response, E2bError> {
    let (mut sandbox, mut name, mut limit, mut after) = (None, None, None, None);
    for (key, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "sandboxID" => sandbox = Some(value.into_owned()),
            "name" => name = Some(value.into_owned()),
            "limit" => limit = Some(value.parse::<usize>().map_err(|_| E2bError::bad_request("limit must be a positive number"))?),
            "nextToken" => after = Some(value.into_owned()),
            _ => {}
        }
    }
    let found = e2b.service.call(&caller, snapshots::ListSnapshots { session_id: sandbox, name }).await?;
    let start = match &after {
        // The token is the last id a page held: the next page starts after it.
        Some(token) => found.iter().position(|s| &s.snapshot_id == token).map(|at| at + 1).ok_or_else(|| E2bError::bad_request("nextToken is not one this server gave"))?,
        None => 0,
    };
    let limit = limit.unwrap_or(100).max(1);
    let page: Vec<SnapshotInfo> = found.into_iter().skip(start).collect();
    let more = page.len() > limit;
    let page: Vec<SnapshotJson> = page.into_iter().take(limit).map(SnapshotJson::from).collect();
    let next = more.then(|| page.last().map(|s| s.snapshot_id.clone())).flatten();
    let mut response = Json(page).into_response();
    if let Some(value) = next.as_deref().and_then(super::error::header_value) {
        response.headers_mut().insert("x-next-token", value);
    }
    Ok(response)
}

/// `DELETE /templates/{id}`: a snapshot is removed (204), an unknown one is
/// 404 as E2B answers it (the SDK's `delete_snapshot` then says `false`).
pub(crate) async fn delete(State(e2b): State<Arc<E2b>>, ControlCall(caller): ControlCall, Path(id): Path<String>) -> Result<impl IntoResponse, E2bError> {
    if e2b.service.call(&caller, snapshots::DeleteSnapshot { snapshot: id.clone() }).await? {
        tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, snapshot = %id, "e2b snapshot deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(E2bError::not_found(format!("template '{id}' not found")))
    }
}
