//! The code interpreter over HTTP, on the sandbox service: one endpoint per
//! core call, JSON with the service's error envelope and request ids, the
//! tenant taken from the caller's API key.
//!
//! | method and path | call |
//! | --- | --- |
//! | `POST /v1/sessions` `{session_id, ttl_seconds?}` | open a session |
//! | `GET /v1/sessions/{id}` / `DELETE /v1/sessions/{id}` | describe / close it |
//! | `POST /v1/sessions/{id}/files` `{filename, content_base64, overwrite?}` | upload (base64) |
//! | `PUT /v1/sessions/{id}/files/{path}?overwrite=true` | upload (raw bytes) |
//! | `GET /v1/sessions/{id}/files` | list |
//! | `GET` / `DELETE /v1/sessions/{id}/files/{path}` | download / delete |
//! | `POST /v1/sessions/{id}/run` `{code, env?, limits?}` | run Python |

use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::{Interpreter, InterpreterError, RunRequest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use crate::serve::{AppState, error, request_id, set_request_id};

/// The interpreter's routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/sessions", post(open_session))
        .route("/v1/sessions/{session_id}", get(describe_session).delete(close_session))
        .route("/v1/sessions/{session_id}/files", get(list_files).post(upload_base64))
        .route("/v1/sessions/{session_id}/files/{*path}", get(download).put(upload_raw).delete(delete_file))
        .route("/v1/sessions/{session_id}/run", post(run))
}

/// The caller's tenant and request id, or the answer refusing the call.
struct Caller {
    tenant: String,
    request_id: String,
    interpreter: Arc<Interpreter>,
}

/// Every handler starts from the caller: the extractor answers 404 without an
/// interpreter and 401 without a valid key or token, before any body is read.
impl axum::extract::FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &Arc<AppState>) -> Result<Self, Response> {
        let request_id = request_id(&parts.headers);
        let Some(interpreter) = state.interpreter.clone() else {
            return Err(error(StatusCode::NOT_FOUND, "not_found", "this service runs no code interpreter", &request_id));
        };
        match state.tenant(&parts.headers) {
            Some(tenant) => Ok(Caller { tenant, request_id, interpreter }),
            None => Err(error(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong API key or bearer token", &request_id)),
        }
    }
}

impl Caller {
    fn fail(&self, e: &InterpreterError) -> Response {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        error(status, e.code(), &e.to_string(), &self.request_id)
    }

    fn json(&self, status: StatusCode, body: impl serde::Serialize) -> Response {
        let mut response = (status, axum::Json(body)).into_response();
        set_request_id(&mut response, &self.request_id);
        response
    }

    fn bad_json(&self, e: impl std::fmt::Display) -> Response {
        error(StatusCode::BAD_REQUEST, "invalid_json", &e.to_string(), &self.request_id)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenSession {
    session_id: String,
    ttl_seconds: Option<u64>,
}

async fn open_session(c: Caller, body: Bytes) -> Response {
    let open: OpenSession = match serde_json::from_slice(&body) {
        Ok(o) => o,
        Err(e) => return c.bad_json(e),
    };
    match c.interpreter.open_session(&c.tenant, &open.session_id, open.ttl_seconds.map(Duration::from_secs)) {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

async fn describe_session(c: Caller, Path(session_id): Path<String>) -> Response {
    match c.interpreter.session_info(&c.tenant, &session_id) {
        Ok(info) => c.json(StatusCode::OK, info),
        Err(e) => c.fail(&e),
    }
}

async fn close_session(c: Caller, Path(session_id): Path<String>) -> Response {
    match c.interpreter.close_session(&c.tenant, &session_id).await {
        Ok(()) => c.json(StatusCode::OK, json!({"status": "closed"})),
        Err(e) => c.fail(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Upload {
    filename: String,
    content_base64: String,
    #[serde(default)]
    overwrite: bool,
}

async fn upload_base64(c: Caller, Path(session_id): Path<String>, body: Bytes) -> Response {
    let upload: Upload = match serde_json::from_slice(&body) {
        Ok(u) => u,
        Err(e) => return c.bad_json(e),
    };
    let bytes = match base64::engine::general_purpose::STANDARD.decode(upload.content_base64.trim()) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_base64", &format!("content_base64: {e}"), &c.request_id),
    };
    match c.interpreter.upload_file(&c.tenant, &session_id, &upload.filename, &bytes, upload.overwrite) {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

#[derive(Deserialize)]
struct Overwrite {
    #[serde(default)]
    overwrite: bool,
}

async fn upload_raw(
    c: Caller,
    Path((session_id, path)): Path<(String, String)>,
    Query(query): Query<Overwrite>,
    body: Bytes,
) -> Response {
    match c.interpreter.upload_file(&c.tenant, &session_id, &path, &body, query.overwrite) {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

async fn list_files(c: Caller, Path(session_id): Path<String>) -> Response {
    match c.interpreter.list_files(&c.tenant, &session_id) {
        Ok(files) => c.json(StatusCode::OK, json!({"files": files})),
        Err(e) => c.fail(&e),
    }
}

async fn download(c: Caller, Path((session_id, path)): Path<(String, String)>) -> Response {
    match c.interpreter.read_file(&c.tenant, &session_id, &path) {
        Ok((_, bytes)) => {
            let mut response = ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
            set_request_id(&mut response, &c.request_id);
            response
        }
        Err(e) => c.fail(&e),
    }
}

async fn delete_file(c: Caller, Path((session_id, path)): Path<(String, String)>) -> Response {
    match c.interpreter.delete_file(&c.tenant, &session_id, &path) {
        Ok(()) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            set_request_id(&mut response, &c.request_id);
            response
        }
        Err(e) => c.fail(&e),
    }
}

async fn run(State(state): State<Arc<AppState>>, c: Caller, Path(session_id): Path<String>, body: Bytes) -> Response {
    let request: RunRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return c.bad_json(e),
    };
    // Runs share the executor's admission: the same slots bound both faces.
    let Ok(_permit) = state.running.acquire().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is stopping", &c.request_id);
    };
    match c.interpreter.run_python(&c.tenant, &session_id, request).await {
        Ok(report) => c.json(StatusCode::OK, report),
        Err(e) => c.fail(&e),
    }
}
