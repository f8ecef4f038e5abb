//! The code interpreter over HTTP, on the sandbox service: one endpoint per
//! core call, JSON with the service's error envelope and request ids, the
//! tenant taken from the caller's API key.
//!
//! | method and path | call |
//! | --- | --- |
//! | `POST /v1/sessions` `{session_id, ttl_seconds?, runtime?}` | open a session |
//! | `GET /v1/sessions/{id}` / `DELETE /v1/sessions/{id}` | describe / close it |
//! | `POST /v1/sessions/{id}/files` `{filename, content_base64, overwrite?, runtime?}` | upload (base64) |
//! | `PUT /v1/sessions/{id}/files/{path}?overwrite=true&runtime=` | upload (raw bytes) |
//! | `GET /v1/sessions/{id}/files` | list |
//! | `GET` / `DELETE /v1/sessions/{id}/files/{path}` | download / delete |
//! | `POST /v1/sessions/{id}/run` `{code, env?, limits?, runtime?}` | run Python |
//!
//! `runtime` (`python` or `python-data`) applies when the call creates the
//! session; a session keeps the runtime it was created with.
//! | `GET /v1/sessions/{id}/artifacts` | the session's artifacts |
//! | `GET /v1/sessions/{id}/artifacts/{path}` | a file's bytes as base64, up to the read cap |
//! | `GET /v1/artifacts/{artifact_id}` | one artifact's metadata |
//! | `GET /v1/artifacts/{artifact_id}/content?expires&signature` | signed download, no header needed |
//! | `GET /files/{session_id}/{filename}?tenant&expires&signature` | the same, by name |

use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::{Artifact, Interpreter, InterpreterError, LinkQuery, RunRequest};
use anypath_sandbox::Runtime;
use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use crate::envelope::upload_body_limit;
use crate::serve::{AppState, error, request_id, set_request_id};

/// The interpreter's routes. The two that take a file accept a body as
/// large as the upload quota allows (as base64 in its envelope); every other
/// route keeps the framework's default limit.
pub fn routes(state: &AppState) -> Router<Arc<AppState>> {
    let upload_limit = DefaultBodyLimit::max(state.interpreter.as_ref().map_or(0, |i| upload_body_limit(i.max_upload_bytes())));
    let files = Router::new()
        .route("/v1/sessions/{session_id}/files", get(list_files).post(upload_base64))
        .route("/v1/sessions/{session_id}/files/{*path}", get(download).put(upload_raw).delete(delete_file))
        .layer(upload_limit);
    Router::new()
        .route("/v1/sessions", post(open_session))
        .route("/v1/sessions/{session_id}", get(describe_session).delete(close_session))
        .merge(files)
        .route("/v1/sessions/{session_id}/run", post(run))
        .route("/v1/sessions/{session_id}/artifacts", get(list_artifacts))
        .route("/v1/sessions/{session_id}/artifacts/{*path}", get(read_artifact))
        .route("/v1/artifacts/{artifact_id}", get(describe_artifact))
        .merge(signed_download_routes())
}

/// The two signed-download routes: the only ones that need no key, so the
/// stdio MCP server can serve them alone on loopback.
pub fn signed_download_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/artifacts/{artifact_id}/content", get(download_signed))
        .route("/files/{session_id}/{*filename}", get(download_signed_file))
}

/// The caller's tenant and request id, or the answer refusing the call.
struct Caller {
    tenant: String,
    request_id: String,
    interpreter: Arc<Interpreter>,
    /// Base of the absolute links this call returns.
    base_url: String,
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
        let base_url = state.base_url(&interpreter, &parts.headers);
        match state.tenant(&parts.headers) {
            Some(tenant) => Ok(Caller { tenant, request_id, interpreter, base_url }),
            None => Err(error(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong API key or bearer token", &request_id)),
        }
    }
}

impl Caller {
    /// Runs interpreter work that touches files on the blocking pool, off
    /// the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Interpreter, &str) -> Result<T, InterpreterError> + Send + 'static,
    ) -> Result<T, InterpreterError> {
        let (interpreter, tenant) = (self.interpreter.clone(), self.tenant.clone());
        tokio::task::spawn_blocking(move || work(&interpreter, &tenant))
            .await
            .unwrap_or_else(|e| Err(InterpreterError::Io { what: "file work", source: std::io::Error::other(e.to_string()) }))
    }

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
    runtime: Option<Runtime>,
}

async fn open_session(c: Caller, body: Bytes) -> Response {
    let open: OpenSession = match serde_json::from_slice(&body) {
        Ok(o) => o,
        Err(e) => return c.bad_json(e),
    };
    let ttl = open.ttl_seconds.map(Duration::from_secs);
    match c.blocking(move |i, tenant| i.open_session(tenant, &open.session_id, ttl, open.runtime)).await {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

async fn describe_session(c: Caller, Path(session_id): Path<String>) -> Response {
    match c.blocking(move |i, tenant| i.session_info(tenant, &session_id)).await {
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
    runtime: Option<Runtime>,
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
    let Upload { filename, overwrite, runtime, .. } = upload;
    match c.blocking(move |i, tenant| i.upload_file(tenant, &session_id, &filename, &bytes, overwrite, runtime)).await {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

#[derive(Deserialize)]
struct UploadQuery {
    #[serde(default)]
    overwrite: bool,
    runtime: Option<Runtime>,
}

async fn upload_raw(
    c: Caller,
    Path((session_id, path)): Path<(String, String)>,
    query: Result<Query<UploadQuery>, QueryRejection>,
    body: Bytes,
) -> Response {
    let Ok(Query(query)) = query else {
        return error(StatusCode::BAD_REQUEST, "invalid_query", "overwrite must be true or false; runtime python or python-data", &c.request_id);
    };
    match c.blocking(move |i, tenant| i.upload_file(tenant, &session_id, &path, &body, query.overwrite, query.runtime)).await {
        Ok(info) => c.json(StatusCode::CREATED, info),
        Err(e) => c.fail(&e),
    }
}

async fn list_files(c: Caller, Path(session_id): Path<String>) -> Response {
    match c.blocking(move |i, tenant| i.list_files(tenant, &session_id)).await {
        Ok(files) => c.json(StatusCode::OK, json!({"files": files})),
        Err(e) => c.fail(&e),
    }
}

async fn download(c: Caller, Path((session_id, path)): Path<(String, String)>) -> Response {
    match c.blocking(move |i, tenant| i.read_file(tenant, &session_id, &path)).await {
        Ok((_, bytes)) => {
            let mut response = ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
            set_request_id(&mut response, &c.request_id);
            response
        }
        Err(e) => c.fail(&e),
    }
}

async fn delete_file(c: Caller, Path((session_id, path)): Path<(String, String)>) -> Response {
    match c.blocking(move |i, tenant| i.delete_file(tenant, &session_id, &path)).await {
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
    // Runs share the executor's fair admission: the same slots bound both faces.
    let permit = match state.admit(&c.tenant, &c.request_id).await {
        Ok(permit) => permit,
        Err(refused) => return refused,
    };
    let ran = c.interpreter.run_python(&c.tenant, &session_id, request, &c.base_url).await;
    drop(permit);
    match ran {
        Ok(report) => {
            state.account(&c.tenant, report.cell.error.as_ref());
            c.json(StatusCode::OK, report)
        }
        Err(e) => c.fail(&e),
    }
}

async fn list_artifacts(c: Caller, Path(session_id): Path<String>) -> Response {
    let base_url = c.base_url.clone();
    match c.blocking(move |i, tenant| i.session_artifacts(tenant, &session_id, &base_url)).await {
        Ok(artifacts) => c.json(StatusCode::OK, json!({"artifacts": artifacts})),
        Err(e) => c.fail(&e),
    }
}

async fn read_artifact(c: Caller, Path((session_id, path)): Path<(String, String)>) -> Response {
    let base_url = c.base_url.clone();
    match c.blocking(move |i, tenant| i.read_artifact(tenant, &session_id, &path, &base_url)).await {
        Ok(content) => c.json(StatusCode::OK, content),
        Err(e) => c.fail(&e),
    }
}

async fn describe_artifact(c: Caller, Path(artifact_id): Path<String>) -> Response {
    let base_url = c.base_url.clone();
    match c.blocking(move |i, tenant| i.artifact(tenant, &artifact_id, &base_url)).await {
        Ok(artifact) => c.json(StatusCode::OK, artifact),
        Err(e) => c.fail(&e),
    }
}

/// The query of a signed link; anything unparsable is the same 403 as a wrong signature.
fn link_query(query: Result<Query<LinkQuery>, QueryRejection>) -> Result<LinkQuery, InterpreterError> {
    query.map(|Query(q)| q).map_err(|_| InterpreterError::Forbidden)
}

async fn download_signed(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    Path(artifact_id): Path<String>,
    query: Result<Query<LinkQuery>, QueryRejection>,
) -> Response {
    signed_download(&state, &headers, |i| i.artifacts().open_signed(&artifact_id, &link_query(query)?)).await
}

async fn download_signed_file(
    State(state): State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
    Path((session_id, filename)): Path<(String, String)>,
    query: Result<Query<LinkQuery>, QueryRejection>,
) -> Response {
    signed_download(&state, &headers, |i| i.artifacts().open_signed_file(&session_id, &filename, &link_query(query)?)).await
}

/// Serves an artifact's bytes to whoever holds a valid link: no header, no
/// key. Served as an attachment in a sandboxed origin, so an HTML artifact
/// never runs script against this service.
async fn signed_download(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    open: impl FnOnce(&Interpreter) -> Result<(Artifact, std::fs::File), InterpreterError>,
) -> Response {
    let request_id = request_id(headers);
    let Some(interpreter) = state.interpreter.clone() else {
        return error(StatusCode::NOT_FOUND, "not_found", "this service runs no code interpreter", &request_id);
    };
    let (artifact, file) = match open(&interpreter) {
        Ok(opened) => opened,
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error(status, e.code(), &e.to_string(), &request_id);
        }
    };
    let body = axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file)));
    let leaf = artifact.filename.rsplit('/').next().unwrap_or("artifact");
    let ascii: String = leaf.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' { c } else { '_' }).collect();
    let disposition = format!("attachment; filename=\"{ascii}\"");
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, artifact.mime_type.as_str()),
        (header::CONTENT_LENGTH, &artifact.size_bytes.to_string()),
        (header::CONTENT_DISPOSITION, &disposition),
        (header::ETAG, &format!("\"{}\"", artifact.sha256)),
        (header::CONTENT_SECURITY_POLICY, "sandbox"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "private, max-age=3600"),
    ] {
        if let Ok(value) = axum::http::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    }
    set_request_id(&mut response, &request_id);
    response
}
