//! The code interpreter over HTTP, on the sandbox service: one endpoint per
//! core call, JSON with the service's error envelope and request ids, the
//! tenant taken from the caller's API key. Each handler is an adapter over
//! [`InterpreterService`]: extract the inputs, call, map the answer.
//!
//! | method and path | call |
//! | --- | --- |
//! | `POST /v1/sessions` `{session_id, ttl_seconds?, runtime?}` | open a session |
//! | `GET /v1/sessions/{id}` / `DELETE /v1/sessions/{id}` | describe / close it |
//! | `POST /v1/sessions/{id}/files` `{filename, content_base64, overwrite?, runtime?}` | upload (base64) |
//! | `PUT /v1/sessions/{id}/files/{path}?overwrite=true&runtime=` | upload (raw bytes) |
//! | `GET /v1/sessions/{id}/files` | list |
//! | `GET` / `DELETE /v1/sessions/{id}/files/{path}` | download / delete |
//! | `POST /v1/sessions/{id}/files/from-artifact` `{artifact_id, filename?, overwrite?, runtime?}` | an earlier artifact back into the session |
//! | `POST /v1/sessions/{id}/run` `{code, env?, limits?, runtime?, figure_formats?, run_id?, background?, callback_url?, cancel_on_disconnect?}` | run Python (`Accept: text/event-stream`: as it happens; every run tracked by its id, [`super::runs`]) |
//!
//! `runtime` (`python` or `python-data`) applies when the call creates the
//! session; a session keeps the runtime it was created with.
//! | `GET /v1/sessions/{id}/artifacts` | the session's artifacts |
//! | `GET /v1/sessions/{id}/artifacts/{path}` | a file's bytes as base64, up to the read cap |
//! | `GET /v1/artifacts/{artifact_id}` | one artifact's metadata |
//! | `GET /v1/datasets`, `PUT` / `DELETE /v1/datasets/{name}`, `POST /v1/sessions/{id}/datasets` `{name}` | datasets at /data ([`super::datasets`]) |
//! | `GET /v1/artifacts/{artifact_id}/content?expires&signature` | signed download, no header needed |
//! | `GET /files/{session_id}/{filename}?tenant&expires&signature` | the same, by name |

use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::{Artifact, InterpreterError, LinkQuery, LoadArtifactRequest, RunRequest, artifacts, files, sessions, snapshots};
use anypath_wire::{OpenSessionRequest, UploadRequest};
use anypath_sandbox::Runtime;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::envelope::{refuse_oversized_body, upload_body_limit};
use crate::interpreter_service::{Content, InterpreterService, OpenSession, ServiceError, SignedTarget, Upload};
use crate::request_id::RequestId;
use super::call::Call;
use crate::state::AppState;

/// The interpreter's routes. The two that take a file accept a body as
/// large as the upload quota allows (as base64 in its envelope); every other
/// route keeps the framework's default limit.
pub(crate) fn routes(state: &AppState) -> Router<Arc<AppState>> {
    let upload_limit = state.interpreter.as_ref().map_or(0, |i| upload_body_limit(i.max_upload_bytes()));
    let files = Router::new()
        .route("/v1/sessions/{session_id}/files", get(list_files).post(upload_base64))
        // A file named `from-artifact` keeps its download, upload and delete.
        .route(
            "/v1/sessions/{session_id}/files/from-artifact",
            post(load_artifact).get(download_from_artifact_file).put(upload_from_artifact_file).delete(delete_from_artifact_file),
        )
        .route("/v1/sessions/{session_id}/files/{*path}", get(download).put(upload_raw).delete(delete_file))
        .layer(DefaultBodyLimit::max(upload_limit))
        .layer(axum::middleware::from_fn_with_state(upload_limit, refuse_oversized_body));
    Router::new()
        .route("/v1/sessions", post(open_session))
        .route("/v1/sessions/{session_id}", get(describe_session).delete(close_session))
        .merge(files)
        .route("/v1/sessions/{session_id}/run", post(run))
        .route("/v1/sessions/{session_id}/fork", post(fork_session))
        .route("/v1/sessions/{session_id}/artifacts", get(list_artifacts))
        .route("/v1/sessions/{session_id}/artifacts/{*path}", get(read_artifact))
        .route("/v1/artifacts/{artifact_id}", get(describe_artifact))
        .merge(signed_download_routes())
}

/// The two signed-download routes: the only ones that need no key, so the
/// stdio MCP server can serve them alone on loopback.
pub(crate) fn signed_download_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/artifacts/{artifact_id}/content", get(download_signed))
        .route("/files/{session_id}/{*filename}", get(download_signed_file))
}

/// A handler's answer: JSON (or bytes) on success, the error envelope
/// otherwise (a refused run is 429 or 503 with `Retry-After`).
type Answer<T> = Result<T, ServiceError>;

/// A JSON body of type `T`.
fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, ServiceError> {
    serde_json::from_slice(body).map_err(ServiceError::InvalidJson)
}

async fn open_session(c: Call, body: Bytes) -> Answer<impl IntoResponse> {
    let open = parse::<OpenSessionRequest>(&body)?;
    let ttl = open.ttl_seconds.map(Duration::from_secs);
    if let Some(snapshot) = open.from_snapshot {
        let start = snapshots::StartFromSnapshot { session_id: open.session_id, snapshot, ttl, runtime: open.runtime };
        return Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, start).await?)));
    }
    let open = OpenSession { session_id: open.session_id, ttl, runtime: open.runtime };
    Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, open).await?)))
}

async fn describe_session(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, sessions::DescribeSession { session_id }).await?))
}

async fn close_session(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, sessions::CloseSession { session_id }).await?))
}

/// One child (`session_id`), answered with its description; or `count`
/// children in one call, answered with all of theirs.
async fn fork_session(c: Call, Path(session_id): Path<String>, body: Bytes) -> Answer<Response> {
    let fork = parse::<anypath_wire::ForkRequest>(&body)?;
    let created = match (fork.session_id, fork.count) {
        (Some(new_session_id), None) => Json(c.service.call(&c.caller, sessions::ForkSession { session_id, new_session_id }).await?).into_response(),
        (prefix, Some(count)) => {
            let new_session_ids = sessions::child_names(prefix.as_deref(), count)?;
            let sessions = c.service.call(&c.caller, sessions::ForkSessions { session_id, new_session_ids }).await?;
            Json(anypath_wire::ForkedSessions { sessions }).into_response()
        }
        (None, None) => return Err(ServiceError::Body { status: 400, message: "a fork needs the new session's \"session_id\", or a \"count\" of children".into() }),
    };
    Ok((StatusCode::CREATED, created).into_response())
}

async fn upload_base64(c: Call, Path(session_id): Path<String>, body: Bytes) -> Answer<impl IntoResponse> {
    let UploadRequest { filename, content_base64, overwrite, runtime } = parse(&body)?;
    let upload = Upload { session_id, filename, content: Content::Base64(content_base64), overwrite, runtime };
    Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, upload).await?)))
}

#[derive(Deserialize)]
struct UploadQuery {
    #[serde(default)]
    overwrite: bool,
    runtime: Option<Runtime>,
}

async fn upload_raw(
    c: Call,
    Path((session_id, filename)): Path<(String, String)>,
    query: Result<Query<UploadQuery>, QueryRejection>,
    body: Bytes,
) -> Answer<impl IntoResponse> {
    let Query(UploadQuery { overwrite, runtime }) = query.map_err(|_| ServiceError::InvalidQuery)?;
    let upload = Upload { session_id, filename, content: Content::Raw(body), overwrite, runtime };
    Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, upload).await?)))
}

async fn list_files(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, files::ListFiles { session_id }).await?))
}

async fn load_artifact(c: Call, Path(session_id): Path<String>, body: Bytes) -> Answer<impl IntoResponse> {
    let request = parse::<LoadArtifactRequest>(&body)?;
    Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, artifacts::LoadArtifact { session_id, request }).await?)))
}

/// The file routes for a file that happens to be named `from-artifact`.
const FROM_ARTIFACT: &str = "from-artifact";

async fn download_from_artifact_file(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    download(c, Path((session_id, FROM_ARTIFACT.to_owned()))).await
}

async fn upload_from_artifact_file(
    c: Call,
    Path(session_id): Path<String>,
    query: Result<Query<UploadQuery>, QueryRejection>,
    body: Bytes,
) -> Answer<impl IntoResponse> {
    upload_raw(c, Path((session_id, FROM_ARTIFACT.to_owned())), query, body).await
}

async fn delete_from_artifact_file(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    delete_file(c, Path((session_id, FROM_ARTIFACT.to_owned()))).await
}

async fn download(c: Call, Path((session_id, path)): Path<(String, String)>) -> Answer<impl IntoResponse> {
    let bytes = c.service.call(&c.caller, files::ReadFile { session_id, path }).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes))
}

async fn delete_file(c: Call, Path((session_id, path)): Path<(String, String)>) -> Answer<impl IntoResponse> {
    c.service.call(&c.caller, files::DeleteFile { session_id, path }).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn run(c: Call, headers: HeaderMap, Path(session_id): Path<String>, body: Bytes) -> Answer<Response> {
    let request = parse::<RunRequest>(&body)?;
    let control = parse::<anypath_wire::RunControl>(&body)?;
    super::runs::run(c, &headers, session_id, request, control).await
}

async fn list_artifacts(c: Call, Path(session_id): Path<String>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, artifacts::ListArtifacts { session_id }).await?))
}

async fn read_artifact(c: Call, Path((session_id, path)): Path<(String, String)>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, artifacts::ReadArtifact { session_id, path }).await?))
}

async fn describe_artifact(c: Call, Path(artifact_id): Path<String>) -> Answer<impl IntoResponse> {
    Ok(Json(c.service.call(&c.caller, artifacts::GetArtifact { artifact_id }).await?))
}

async fn download_signed(
    State(state): State<Arc<AppState>>,
    request_id: RequestId,
    Path(artifact_id): Path<String>,
    query: Result<Query<LinkQuery>, QueryRejection>,
) -> Answer<Response> {
    signed_download(&state, &request_id, SignedTarget::Artifact(artifact_id), query).await
}

async fn download_signed_file(
    State(state): State<Arc<AppState>>,
    request_id: RequestId,
    Path((session_id, filename)): Path<(String, String)>,
    query: Result<Query<LinkQuery>, QueryRejection>,
) -> Answer<Response> {
    signed_download(&state, &request_id, SignedTarget::File { session_id, filename }, query).await
}

/// Serves an artifact's bytes to whoever holds a valid link: no header, no
/// key. Served as an attachment in a sandboxed origin, so an HTML artifact
/// never runs script against this service.
async fn signed_download(
    state: &Arc<AppState>,
    request_id: &RequestId,
    target: SignedTarget,
    query: Result<Query<LinkQuery>, QueryRejection>,
) -> Answer<Response> {
    let service = InterpreterService::of(state)?;
    // Anything unparsable in the link's query is the same 403 as a wrong signature.
    let Query(query) = query.map_err(|_| ServiceError::from(InterpreterError::Forbidden))?;
    let (artifact, file) = service.open_signed(request_id.as_str(), target, query).await?;
    Ok(attachment(&artifact, file))
}

/// The artifact's bytes, streamed from its open file, with the headers of
/// a download.
fn attachment(artifact: &Artifact, file: std::fs::File) -> Response {
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
    response
}
