//! envd, E2B's in-sandbox daemon, as far as files go: `/health`, and
//! `/files` to download (`GET`) and upload (`POST`: multipart with one part
//! per file, or one file as `application/octet-stream`, optionally gzip)
//! by path, with the metadata of `X-Metadata-*` headers on every file
//! written. A signed link (`signature` in the query, made by the SDK from
//! the sandbox's access token) stands in for the token, so a browser can
//! follow it.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use anypath_interpreter::files;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::E2bError;
use super::registry::{Sandbox, SandboxState};
use super::{E2b, paths};
use crate::interpreter_service::Caller;
use crate::request_id::RequestId;

/// The query of `/files`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FilesQuery {
    path: Option<String>,
    username: Option<String>,
    signature: Option<String>,
    signature_expiration: Option<u64>,
}

/// What an upload answers for each file written.
#[derive(Debug, Serialize)]
struct WriteInfo {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    path: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    metadata: BTreeMap<String, String>,
}

/// Where an upload's metadata travels: one header per key.
const METADATA_HEADER: &str = "x-metadata-";

/// The operation a signature allows.
#[derive(Clone, Copy)]
enum Operation {
    Read,
    Write,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// `GET /health`: 204 while the named sandbox runs, 502 when it is paused,
/// killed, past its timeout or unknown (what the SDK's `is_running()` reads).
pub(crate) async fn health(State(e2b): State<Arc<E2b>>, headers: HeaderMap) -> Result<StatusCode, E2bError> {
    let Some(id) = super::sandbox_header(&headers) else {
        // No sandbox named: the listener itself is up.
        return Ok(StatusCode::NO_CONTENT);
    };
    match e2b.registry.get(id).await? {
        Some(sandbox) if sandbox.life().state == SandboxState::Running => Ok(StatusCode::NO_CONTENT),
        _ => Err(E2bError::not_running(id)),
    }
}

impl E2b {
    /// The sandbox a `/files` call is for, and its caller: named by the
    /// sandbox header and admitted by its access token, or (a signed link,
    /// which carries no header) found by whose token signs the link.
    async fn files_caller(
        &self,
        headers: &HeaderMap,
        request_id: RequestId,
        query: &FilesQuery,
        path: &str,
        operation: Operation,
    ) -> Result<(Arc<Sandbox>, Caller), E2bError> {
        if let Some(signature) = &query.signature {
            let candidates = match super::sandbox_header(headers) {
                Some(id) => self.registry.get(id).await?.into_iter().collect(),
                None => self.registry.all().await?,
            };
            let user = query.username.as_deref().unwrap_or("");
            let signed = candidates.into_iter().find(|s| {
                s.access_token.as_deref().is_some_and(|token| signature_of(path, operation, user, token, query.signature_expiration) == *signature)
            });
            // envd's words, in envd's order: the signature, then its expiry.
            let sandbox = signed.ok_or_else(|| E2bError::new(StatusCode::UNAUTHORIZED, "invalid signature"))?;
            if query.signature_expiration.is_some_and(|at| at < unix_now()) {
                return Err(E2bError::new(StatusCode::UNAUTHORIZED, "signature is already expired"));
            }
            if sandbox.life().state != SandboxState::Running {
                return Err(E2bError::not_running(&sandbox.id));
            }
            let caller = self.service.tenant_caller(sandbox.tenant.clone(), headers, request_id.into_string());
            return Ok((sandbox, caller));
        }
        self.sandbox_caller(headers, request_id).await
    }
}

/// The v1 signature the SDKs make: `v1_` + unpadded base64 of
/// `sha256(path:operation:user:token[:expiration])`.
fn signature_of(path: &str, operation: Operation, user: &str, token: &str, expiration: Option<u64>) -> String {
    use base64::Engine;
    let raw = match expiration {
        Some(at) => format!("{path}:{}:{user}:{token}:{at}", operation.as_str()),
        None => format!("{path}:{}:{user}:{token}", operation.as_str()),
    };
    format!("v1_{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(Sha256::digest(raw.as_bytes())))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `GET /files?path=`: the file's bytes.
pub(crate) async fn download(
    State(e2b): State<Arc<E2b>>,
    request_id: RequestId,
    headers: HeaderMap,
    query: axum::extract::RawQuery,
) -> Result<impl IntoResponse, E2bError> {
    let query = parse_query(query.0.as_deref())?;
    let path = query.path.clone().ok_or_else(|| E2bError::bad_request("path is required"))?;
    let (sandbox, caller) = e2b.files_caller(&headers, request_id, &query, &path, Operation::Read).await?;
    let relative = paths::to_session(&path, query.username.as_deref())?;
    let entry = e2b.service.call(&caller, files::StatPath { session_id: sandbox.id.clone(), path: relative.clone() }).await.map_err(|e| E2bError::from(e).for_path(&path))?;
    if entry.kind != anypath_interpreter::EntryKind::File {
        return Err(E2bError::bad_request(format!("{path} is a directory, not a file")));
    }
    let bytes = e2b.service.call(&caller, files::ReadFile { session_id: sandbox.id.clone(), path: relative }).await.map_err(|e| E2bError::from(e).for_path(&path))?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes))
}

/// `POST /files`: each file written, made with its directories and given
/// the request's metadata, answered as `[{name, type, path, metadata}]`.
pub(crate) async fn upload(State(e2b): State<Arc<E2b>>, request_id: RequestId, request: Request) -> Result<impl IntoResponse, E2bError> {
    let query = parse_query(request.uri().query())?;
    let signed_path = query.path.clone().unwrap_or_default();
    let (sandbox, caller) = e2b.files_caller(request.headers(), request_id, &query, &signed_path, Operation::Write).await?;
    let metadata = metadata_of(request.headers())?;
    let files = received_files(request, query.path.as_deref()).await?;
    let user = query.username.as_deref();
    // Every path is checked before the first file is written.
    let files = files.into_iter().map(|(path, bytes)| Ok((paths::to_session(&path, user)?, path, bytes))).collect::<Result<Vec<_>, E2bError>>()?;
    let mut written = Vec::new();
    for (relative, path, bytes) in files {
        let write = files::WritePath { session_id: sandbox.id.clone(), path: relative, bytes, metadata: metadata.clone() };
        let entry = e2b.service.call(&caller, write).await.map_err(|e| E2bError::from(e).for_path(&path))?;
        e2b.watchers.publish(&sandbox.id, super::watch::Change::Wrote(&entry));
        written.push(WriteInfo { name: entry.name, kind: "file", path: paths::to_client(&entry.path), metadata: entry.metadata });
    }
    tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, sandbox = %sandbox.id, files = written.len(), "e2b upload");
    Ok(Json(written))
}

/// The metadata of an upload: each `X-Metadata-<key>` header, its key in
/// lower case (as envd keeps it), checked before anything is written.
fn metadata_of(headers: &HeaderMap) -> Result<BTreeMap<String, String>, E2bError> {
    let mut metadata = BTreeMap::new();
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(METADATA_HEADER) else { continue };
        let value = value.to_str().map_err(|_| E2bError::bad_request(format!("the value of metadata key {key:?} must be printable ASCII")))?;
        metadata.insert(key.to_owned(), value.to_owned());
    }
    anypath_interpreter::file_metadata::check(&metadata).map_err(|e| E2bError::bad_request(e.to_string()))?;
    Ok(metadata)
}

fn parse_query(raw: Option<&str>) -> Result<FilesQuery, E2bError> {
    serde_urlencoded_query(raw.unwrap_or(""))
}

/// The query's known keys (unknown ones are ignored).
fn serde_urlencoded_query(raw: &str) -> Result<FilesQuery, E2bError> {
    let mut query = FilesQuery::default();
    for (key, value) in url::form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "path" => query.path = Some(value.into_owned()),
            "username" => query.username = Some(value.into_owned()),
            "signature" => query.signature = Some(value.into_owned()),
            "signature_expiration" => {
                query.signature_expiration = Some(value.parse().map_err(|_| E2bError::bad_request("signature_expiration must be a unix time"))?)
            }
            _ => {}
        }
    }
    Ok(query)
}

/// The files of an upload body with the paths they go to: each multipart
/// part at its filename (or the query's path, when there is one part), or
/// the raw body (gunzipped when sent as gzip) at the query's path.
async fn received_files(request: Request, query_path: Option<&str>) -> Result<Vec<(String, Bytes)>, E2bError> {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    let gzipped = request.headers().get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    if content_type.starts_with("multipart/form-data") {
        let mut form = Multipart::from_request(request, &()).await.map_err(|e| E2bError::bad_request(format!("the multipart body cannot be read: {e}")))?;
        let mut parts = Vec::new();
        while let Some(field) = form.next_field().await.map_err(|e| E2bError::bad_request(format!("the multipart body cannot be read: {e}")))? {
            let name = field.file_name().map(str::to_owned);
            let bytes = field.bytes().await.map_err(|e| E2bError::bad_request(format!("a part of the body cannot be read: {e}")))?;
            parts.push((name, bytes));
        }
        let only = parts.len() == 1;
        return parts
            .into_iter()
            .map(|(name, bytes)| match (only.then_some(query_path).flatten(), name) {
                (Some(path), _) => Ok((path.to_owned(), bytes)),
                (None, Some(name)) => Ok((name, bytes)),
                (None, None) => Err(E2bError::bad_request("a part of the body names no file (its filename is the path)")),
            })
            .collect();
    }
    let path = query_path.ok_or_else(|| E2bError::bad_request("path is required for an octet-stream upload"))?;
    let body = Bytes::from_request(request, &()).await.map_err(|e| E2bError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the body cannot be received: {e}")))?;
    let bytes = if gzipped {
        let limit = super::MAX_BODY_BYTES as u64;
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(&body[..])
            .take(limit + 1)
            .read_to_end(&mut inflated)
            .map_err(|e| E2bError::bad_request(format!("the gzip body does not inflate: {e}")))?;
        if inflated.len() as u64 > limit {
            return Err(E2bError::new(StatusCode::PAYLOAD_TOO_LARGE, "the inflated body is larger than this server takes"));
        }
        Bytes::from(inflated)
    } else {
        body
    };
    Ok(vec![(path.to_owned(), bytes)])
}

impl E2bError {
    /// A not-found error naming the client's path, as E2B words it.
    pub(crate) fn for_path(self, path: &str) -> Self {
        if self.status == StatusCode::NOT_FOUND { Self::not_found(format!("path '{path}' does not exist")) } else { self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signatures E2B's Python SDK computes for these inputs
    /// (`e2b.sandbox.signature.get_signature`, e2b 2.51.0).
    #[test]
    fn signatures_are_the_sdks() {
        let signature = signature_of("/home/user/a.txt", Operation::Read, "", "token", None);
        assert_eq!(signature, "v1_9d+9NQHwSJMj04fFBbl0/qkmU2zFSlzEB4IWXDbnuNE");
        assert_eq!(signature_of("/home/user/a.txt", Operation::Write, "user", "token", None), "v1_QWqov8IR5oFVdlQOWeSjG2LJ9kxNRqoaT1DrkmI2ujE");
        assert_ne!(signature, signature_of("/home/user/a.txt", Operation::Write, "", "token", None), "the operation is signed");
        assert_ne!(signature, signature_of("/home/user/a.txt", Operation::Read, "", "token", Some(1)), "the expiry is signed");
    }
}
