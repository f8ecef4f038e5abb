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
//! never held in memory, and refused (413) once it would take the tenant's
//! datasets past their quota. What was received is removed on every
//! failure, a client that goes away included.

use std::path::PathBuf;
use std::sync::Arc;

use anypath_interpreter::{ReceivedFile, datasets};
use anypath_wire::AttachDatasetRequest;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

use super::call::Call;
use crate::interpreter_service::{InterpreterService, ServiceError};
use crate::state::AppState;

/// The dataset routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/datasets", get(list))
        // The body is counted against the dataset quota as it streams in,
        // so the framework's 2 MB default must not cut a form short.
        .route("/v1/datasets/{name}", put(stage).layer(DefaultBodyLimit::disable()).delete(remove))
        .route("/v1/sessions/{session_id}/datasets", post(attach))
}

async fn list(c: Call) -> Result<impl IntoResponse, ServiceError> {
    Ok(Json(c.service.call(&c.caller, datasets::ListDatasets).await?))
}

async fn stage(c: Call, Path(name): Path<String>, request: Request) -> Result<impl IntoResponse, ServiceError> {
    // A bad name is refused before a byte of the body is kept.
    anypath_interpreter::names::dataset(&name).map_err(|e| ServiceError::Interpreter(e.into()))?;
    let limit = c.service.dataset_room(&c.caller, name.clone()).await?;
    let received = if is_multipart(request.headers()) {
        receive_form(&c.service, request, limit).await
    } else {
        receive_file(&c.service, request.into_body().into_data_stream(), limit).await.map(|file| vec![file.into_received(None)])
    };
    let staged = c.service.stage_dataset(&c.caller, name, received).await?;
    Ok((StatusCode::CREATED, Json(staged)))
}

async fn remove(c: Call, Path(name): Path<String>) -> Result<impl IntoResponse, ServiceError> {
    c.service.call(&c.caller, datasets::RemoveDataset { name }).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn attach(c: Call, Path(session_id): Path<String>, body: Bytes) -> Result<impl IntoResponse, ServiceError> {
    let request = serde_json::from_slice::<AttachDatasetRequest>(&body).map_err(ServiceError::InvalidJson)?;
    Ok((StatusCode::CREATED, Json(c.service.call(&c.caller, datasets::AttachDataset { session_id, name: request.name }).await?)))
}

fn is_multipart(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Each part of a form as one file of the dataset, named by its filename
/// (or, without one, its field name).
async fn receive_form(service: &InterpreterService, request: Request, limit: u64) -> Result<Vec<ReceivedFile>, ServiceError> {
    let bad_form = |e: &dyn std::fmt::Display| ServiceError::Body { status: 400, message: format!("the multipart body cannot be read: {e}") };
    let mut form = Multipart::from_request(request, &()).await.map_err(|e| bad_form(&e))?;
    let mut files: Vec<(String, Staged)> = Vec::new();
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
            let file = receive_file(service, Box::pin(stream), budget).await?;
            budget = budget.saturating_sub(file.size);
            files.push((filename, file));
        }
        Ok(())
    }
    .await;
    // Removed before the error is answered, so a client that reads the
    // refusal finds nothing of its body left.
    if let Err(e) = outcome {
        for (_, file) in files {
            file.discard().await;
        }
        return Err(e);
    }
    if files.is_empty() {
        return Err(ServiceError::Body { status: 400, message: "the form holds no file".into() });
    }
    Ok(files.into_iter().map(|(filename, file)| file.into_received(Some(filename))).collect())
}

/// A received file in the staging area, removed when dropped unless it was
/// handed on: a failed or abandoned request leaves nothing behind.
struct Staged {
    path: Option<PathBuf>,
    size: u64,
}

impl Staged {
    /// Hands the file on: from now on the interpreter removes it.
    fn into_received(mut self, filename: Option<String>) -> ReceivedFile {
        let path = self.path.take().unwrap_or_default();
        ReceivedFile { filename, path }
    }

    /// Removes the file now, off the async workers, and waits for it: the
    /// drop guard's removal is for requests that are abandoned midway.
    async fn discard(mut self) {
        if let Some(path) = self.path.take() {
            let removed = tokio::task::spawn_blocking(move || std::fs::remove_file(path)).await;
            if let Ok(Err(e)) = removed {
                tracing::warn!("removing a refused dataset body: {e}");
            }
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // Off the async workers; a drop outside a runtime removes it here.
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || std::fs::remove_file(path))),
                Err(_) => drop(std::fs::remove_file(path)),
            }
        }
    }
}

/// Streams `body` into a fresh file of the staging area (owner-only, as
/// blobs are), at most `limit` bytes: the tenant's room left.
async fn receive_file(
    service: &InterpreterService,
    mut body: impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
    limit: u64,
) -> Result<Staged, ServiceError> {
    let path = service.dataset_staging_path().await?;
    let io = |e: std::io::Error| ServiceError::Internal(format!("receiving the dataset: {e}"));
    let mut file = tokio::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).await.map_err(io)?;
    let mut staged = Staged { path: Some(path), size: 0 };
    let outcome = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ServiceError::Body { status: 400, message: format!("the body was cut off: {e}") })?;
            staged.size = staged.size.saturating_add(chunk.len() as u64);
            if staged.size > limit {
                let message = format!("the dataset would take the tenant's datasets past their quota: {limit} bytes are left");
                return Err(ServiceError::Body { status: 413, message });
            }
            file.write_all(&chunk).await.map_err(io)?;
        }
        file.flush().await.map_err(io)
    }
    .await;
    match outcome {
        Ok(()) => Ok(staged),
        Err(e) => {
            drop(file);
            staged.discard().await;
            Err(e)
        }
    }
}
