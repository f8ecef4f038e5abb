//! Datasets over HTTP on the sandbox service (`anypath_interpreter::datasets`):
//!
//! | method and path | call |
//! | --- | --- |
//! | `GET /v1/datasets` | the datasets the tenant sees mounted or has staged |
//! | `PUT /v1/datasets/{name}` | stage a dataset: a raw body is one file, `/data/<name>`; a `multipart/form-data` body is a directory, `/data/<name>/<part's filename>` |
//! | `DELETE /v1/datasets/{name}` | forget a staged dataset |
//! | `POST /v1/sessions/{id}/datasets` `{name}` | show a staged dataset in a session at `/data/<name>` |
//!
//! A body is streamed to the blob store's staging area as it arrives,
//! never held in memory, and refused (413) past the tenant's dataset quota.

use std::path::PathBuf;
use std::sync::Arc;

use anypath_interpreter::ReceivedFile;
use anypath_wire::AttachDatasetRequest;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::interpreter_api::Call;
use crate::interpreter_service::{InterpreterService, ServiceError};
use crate::serve::{AppState, set_request_id};

/// The dataset routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets", get(list))
        // The body is counted against the dataset quota as it streams in,
        // so the framework's 2 MB default must not cut a form short.
        .route("/v1/datasets/{name}", put(stage).layer(DefaultBodyLimit::disable()).delete(remove))
        .route("/v1/sessions/{session_id}/datasets", post(attach))
}

async fn list(c: Call) -> Response {
    c.answer(StatusCode::OK, c.service.list_datasets(&c.caller).await)
}

async fn stage(c: Call, Path(name): Path<String>, request: Request) -> Response {
    // A bad name is refused before a byte of the body is kept.
    if let Err(e) = anypath_interpreter::names::dataset(&name) {
        return c.fail(&ServiceError::Interpreter(e.into()));
    }
    let limit = c.service.dataset_quota_bytes();
    let received = if is_multipart(request.headers()) {
        receive_form(&c.service, request, limit).await
    } else {
        receive_file(&c.service, request.into_body().into_data_stream(), limit).await.map(|path| vec![ReceivedFile { filename: None, path }])
    };
    let staged = match received {
        Ok(files) => c.service.stage_dataset(&c.caller, name, files).await,
        Err(e) => Err(e),
    };
    c.answer(StatusCode::CREATED, staged)
}

async fn remove(c: Call, Path(name): Path<String>) -> Response {
    match c.service.remove_dataset(&c.caller, name).await {
        Ok(()) => {
            let mut response = StatusCode::NO_CONTENT.into_response();
            set_request_id(&mut response, &c.caller.request_id);
            response
        }
        Err(e) => c.fail(&e),
    }
}

async fn attach(c: Call, Path(session_id): Path<String>, body: Bytes) -> Response {
    let attached = match serde_json::from_slice::<AttachDatasetRequest>(&body) {
        Ok(request) => c.service.attach_dataset(&c.caller, session_id, request.name).await,
        Err(e) => Err(ServiceError::InvalidJson(e)),
    };
    c.answer(StatusCode::CREATED, attached)
}

fn is_multipart(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Each part of a form as one file of the dataset, named by its filename
/// (or, without one, its field name).
async fn receive_form(service: &InterpreterService, request: Request, limit: u64) -> Result<Vec<ReceivedFile>, ServiceError> {
    let bad_form = |e: &dyn std::fmt::Display| ServiceError::Body { status: 400, message: format!("the multipart body cannot be read: {e}") };
    let mut form = Multipart::from_request(request, &()).await.map_err(|e| bad_form(&e))?;
    let mut files: Vec<ReceivedFile> = Vec::new();
    let mut budget = limit;
    let outcome = async {
        while let Some(field) = form.next_field().await.map_err(|e| bad_form(&e))? {
            let filename = field.file_name().or(field.name()).map(str::to_owned);
            let Some(filename) = filename.filter(|f| !f.is_empty()) else {
                return Err(ServiceError::Body { status: 400, message: "every part needs a filename (or a field name)".into() });
            };
            let stream = futures_util::stream::unfold(field, |mut field| async move {
                match field.chunk().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), field)),
                    Ok(None) => None,
                    Err(e) => Some((Err(axum::Error::new(e)), field)),
                }
            });
            let path = receive_file(service, Box::pin(stream), budget).await?;
            let size = tokio::fs::metadata(&path).await.map(|m| m.len()).unwrap_or(budget);
            budget = budget.saturating_sub(size);
            files.push(ReceivedFile { filename: Some(filename), path });
        }
        Ok(())
    }
    .await;
    match outcome {
        Ok(()) if files.is_empty() => Err(ServiceError::Body { status: 400, message: "the form holds no file".into() }),
        Ok(()) => Ok(files),
        Err(e) => {
            for file in &files {
                let _ = tokio::fs::remove_file(&file.path).await;
            }
            Err(e)
        }
    }
}

/// Streams `body` into a fresh file of the staging area, at most `limit`
/// bytes; on any failure the file is removed.
async fn receive_file(
    service: &InterpreterService,
    mut body: impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
    limit: u64,
) -> Result<PathBuf, ServiceError> {
    let path = service.dataset_staging_path().await?;
    let written = async {
        let io = |e: std::io::Error| ServiceError::Internal(format!("receiving the dataset: {e}"));
        let mut file = tokio::fs::OpenOptions::new().write(true).create_new(true).open(&path).await.map_err(io)?;
        let mut total: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ServiceError::Body { status: 400, message: format!("the body was cut off: {e}") })?;
            total = total.saturating_add(chunk.len() as u64);
            if total > limit {
                return Err(ServiceError::Body { status: 413, message: format!("the dataset is over the tenant's dataset quota of {limit} bytes") });
            }
            file.write_all(&chunk).await.map_err(io)?;
        }
        file.flush().await.map_err(io)?;
        Ok(())
    }
    .await;
    match written {
        Ok(()) => Ok(path),
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            Err(e)
        }
    }
}
