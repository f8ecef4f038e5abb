//! `POST /v1/sessions/{id}/commands` `{command, cwd?, env?, timeout_ms?, stdin?, user?}`:
//! a command line run by the session's shell (created on first use), answered
//! when it ends with its exit code and output, as JSON.

use std::sync::Arc;

use anypath_interpreter::commands::{CommandStreams, RunCommand};
use anypath_wire::CommandRequest;
use axum::body::Bytes;
use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};

use super::call::Call;
use crate::interpreter_service::ServiceError;
use crate::state::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/sessions/{session_id}/commands", post(run_command))
}

async fn run_command(c: Call, Path(session_id): Path<String>, body: Bytes) -> Result<Json<anypath_wire::CommandReport>, ServiceError> {
    let request: CommandRequest = serde_json::from_slice(&body).map_err(ServiceError::InvalidJson)?;
    Ok(Json(c.service.call(&c.caller, RunCommand { session_id, request, streams: CommandStreams::default() }).await?))
}
