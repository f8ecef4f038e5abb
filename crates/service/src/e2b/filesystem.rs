//! envd's `filesystem.Filesystem` Connect service, in Connect's JSON form:
//! `Stat`, `ListDir`, `MakeDir`, `Remove`, `Move`, the unary watch calls
//! (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`) and the streamed
//! `WatchDir` ([`super::watch`]). Paths are E2B's (`/home/user/...`, any
//! absolute path of the sandbox's tree), resolved for the user the call
//! names in its `Authorization` header, as envd resolves them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::{Entry, EntryKind, files};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::call::SandboxCall;
use super::error::{ConnectError, E2bError};
use super::watch::{Change, Watch, tree_of};
use super::{E2b, paths};
use crate::interpreter_service::Caller;
use crate::request_id::RequestId;

/// How often a streamed watch looks at the tree.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How often a streamed watch says it is still there.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);
/// How often a watch lists the tree again when a change was told while it listed.
const LIST_TRIES: usize = 3;

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PathRequest {
    path: String,
    depth: Option<u32>,
    recursive: bool,
    include_entry: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MoveRequest {
    source: String,
    destination: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WatcherRequest {
    #[serde(alias = "watcher_id")]
    watcher_id: String,
}

/// An entry as envd's `EntryInfo` in Connect's JSON: `mode` holds the
/// permission bits (as envd gives them), `metadata` the file's pairs.
pub(crate) fn entry_json(entry: &Entry) -> Value {
    let (kind, letter) = match entry.kind {
        EntryKind::File => ("FILE_TYPE_FILE", '-'),
        EntryKind::Directory => ("FILE_TYPE_DIRECTORY", 'd'),
    };
    // Nobody but root owns what is in root's home.
    let owner = if entry.path == "root" || entry.path.starts_with("root/") { "root" } else { "user" };
    let mut value = json!({
        "name": entry.name,
        "type": kind,
        "path": paths::to_client(&entry.path),
        "size": entry.size.to_string(),
        "mode": entry.mode,
        "permissions": permissions(letter, entry.mode),
        "owner": owner,
        "group": owner,
        "modifiedTime": super::control::rfc3339(entry.modified),
    });
    if !entry.metadata.is_empty() {
        value["metadata"] = json!(entry.metadata);
    }
    if let Some(target) = &entry.symlink_target {
        value["symlinkTarget"] = json!(target);
        value["permissions"] = json!(permissions('l', 0o777));
    }
    value
}

/// `ls -l`'s permission string.
fn permissions(kind: char, mode: u32) -> String {
    let mut text = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 0o7;
        text.push(if bits & 4 != 0 { 'r' } else { '-' });
        text.push(if bits & 2 != 0 { 'w' } else { '-' });
        text.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    text
}

/// The user a Connect call acts as: `Authorization: Basic base64(user:)`,
/// as E2B's SDKs send it; `None` for the sandbox's default user.
pub(super) fn user_of(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let user = text.split(':').next().unwrap_or("");
    (!user.is_empty()).then(|| user.to_owned())
}

/// A unary call's JSON message; an empty body is the message's defaults.
pub(super) fn parse<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ConnectError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| ConnectError::new("invalid_argument", format!("the request is not this call's JSON message: {e}")))
}

/// `POST /filesystem.Filesystem/{method}`.
pub(crate) async fn call(
    State(e2b): State<Arc<E2b>>,
    SandboxCall { sandbox, caller, .. }: SandboxCall<ConnectError>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ConnectError> {
    let user = user_of(&headers);
    if method == "WatchDir" {
        return Ok(watch_stream(e2b, caller, sandbox.id.clone(), user.as_deref(), &body).await.unwrap_or_else(|error| stream_error(&error)));
    }
    let value = unary(&e2b, &caller, &sandbox.id, user.as_deref(), &method, &body).await?;
    Ok((StatusCode::OK, axum::Json(value)).into_response())
}

async fn unary(e2b: &E2b, caller: &Caller, session: &str, user: Option<&str>, method: &str, body: &[u8]) -> Result<Value, ConnectError> {
    let session = session.to_owned();
    let service = &e2b.service;
    fn on_path(path: &str) -> impl Fn(crate::interpreter_service::ServiceError) -> ConnectError + '_ {
        move |e| ConnectError::from(E2bError::from(e).for_path(path))
    }
    match method {
        "Stat" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path, user)?;
            let entry = service.call(caller, files::StatPath { session_id: session, path: relative }).await.map_err(on_path(&request.path))?;
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "ListDir" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path, user)?;
            let depth = request.depth.unwrap_or(1).max(1);
            let entries = service.call(caller, files::ListDir { session_id: session, path: relative, depth }).await.map_err(on_path(&request.path))?;
            Ok(json!({ "entries": entries.iter().map(entry_json).collect::<Vec<_>>() }))
        }
        "MakeDir" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path, user)?;
            let made = service.call(caller, files::MakeDir { session_id: session.clone(), path: relative.clone() }).await.map_err(on_path(&request.path))?;
            if !made {
                return Err(ConnectError::new("already_exists", format!("directory '{}' already exists", request.path)));
            }
            let entry = service.call(caller, files::StatPath { session_id: session.clone(), path: relative }).await.map_err(on_path(&request.path))?;
            e2b.watchers.publish(&session, Change::MadeDir(&entry));
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "Remove" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path, user)?;
            match service.call(caller, files::RemovePath { session_id: session.clone(), path: relative.clone() }).await {
                Ok(()) => e2b.watchers.publish(&session, Change::Removed(&relative)),
                // Removing what is not there leaves it not there: envd answers as for a removal.
                Err(error) if error.status() == StatusCode::NOT_FOUND && !matches!(error, crate::interpreter_service::ServiceError::Interpreter(anypath_interpreter::InterpreterError::NoSuchSession(_))) => {}
                Err(error) => return Err(on_path(&request.path)(error)),
            }
            Ok(json!({}))
        }
        "Move" => {
            let request: MoveRequest = parse(body)?;
            let (from, to) = (paths::to_session(&request.source, user)?, paths::to_session(&request.destination, user)?);
            let entry = service.call(caller, files::MovePath { session_id: session.clone(), from: from.clone(), to }).await.map_err(on_path(&request.source))?;
            e2b.watchers.publish(&session, Change::Moved { from: &from, to: &entry });
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "CreateWatcher" => {
            let request: PathRequest = parse(body)?;
            let root = paths::to_session(&request.path, user)?;
            let watch = new_watch(e2b, caller, &session, root, &request).await.map_err(|e| e.for_path(&request.path))?;
            let (id, _) = e2b.watchers.add(watch);
            Ok(json!({ "watcherId": id }))
        }
        "GetWatcherEvents" => {
            let request: WatcherRequest = parse(body)?;
            let watch = e2b
                .watchers
                .get(&request.watcher_id, &session, &caller.tenant)
                .ok_or_else(|| ConnectError::new("not_found", format!("watcher {} not found", request.watcher_id)))?;
            let events = look(e2b, caller, &watch).await.map_err(|e| ConnectError::from(E2bError::from(e)))?;
            Ok(json!({ "events": events }))
        }
        "RemoveWatcher" => {
            let request: WatcherRequest = parse(body)?;
            e2b.watchers.remove(&request.watcher_id, &session, &caller.tenant);
            Ok(json!({}))
        }
        other => Err(ConnectError::new("unimplemented", format!("filesystem.Filesystem/{other} is not a method this sandbox serves"))),
    }
}

/// A watch of the directory `root`, with what is there now; refused when
/// `root` is not a directory.
async fn new_watch(e2b: &E2b, caller: &Caller, session: &str, root: String, request: &PathRequest) -> Result<Watch, E2bError> {
    let stat = e2b.service.call(caller, files::StatPath { session_id: session.to_owned(), path: root.clone() }).await?;
    if stat.kind != EntryKind::Directory {
        return Err(E2bError::bad_request(format!("path {} is not a directory", request.path)));
    }
    let seen = tree_of(&root, list(e2b, caller, session, &root, request.recursive).await?);
    Ok(Watch::new(session, &caller.tenant, root, request.recursive, request.include_entry, seen))
}

/// The entries under `root`, one level or all of them.
async fn list(e2b: &E2b, caller: &Caller, session: &str, root: &str, recursive: bool) -> Result<Vec<Entry>, crate::interpreter_service::ServiceError> {
    let depth = if recursive { u32::MAX } else { 1 };
    e2b.service.call(caller, files::ListDir { session_id: session.to_owned(), path: root.to_owned(), depth }).await
}

/// The watch's events since it last looked: what it was told, and what
/// listing the tree again finds the code changed.
async fn look(e2b: &E2b, caller: &Caller, watch: &Watch) -> Result<Vec<Value>, crate::interpreter_service::ServiceError> {
    for _ in 0..LIST_TRIES {
        let told = watch.told();
        let entries = list(e2b, caller, &watch.sandbox_id, &watch.root, watch.recursive).await?;
        if let Some(found) = watch.poll(told, tree_of(&watch.root, entries)) {
            return Ok(found);
        }
    }
    // Told of changes all along: the events wait for the next look.
    Ok(Vec::new())
}

/// One Connect stream envelope: a flag byte, the length, the message.
pub(super) fn envelope(flag: u8, message: &Value) -> Bytes {
    let data = serde_json::to_vec(message).unwrap_or_default();
    let mut framed = Vec::with_capacity(5 + data.len());
    framed.push(flag);
    framed.extend_from_slice(&(data.len() as u32).to_be_bytes());
    framed.extend_from_slice(&data);
    Bytes::from(framed)
}

/// The message of an enveloped request (or a plain JSON one).
pub(super) fn unenvelope(body: &[u8]) -> &[u8] {
    match body {
        [_, a, b, c, d, rest @ ..] if u32::from_be_bytes([*a, *b, *c, *d]) as usize == rest.len() => rest,
        _ => body,
    }
}

/// `WatchDir`: a `start` message, then the events as they are seen, with
/// a keepalive now and then, until the client goes or the sandbox ends.
async fn watch_stream(e2b: Arc<E2b>, caller: Caller, session: String, user: Option<&str>, body: &[u8]) -> Result<Response, ConnectError> {
    let request: PathRequest = parse(unenvelope(body))?;
    let root = paths::to_session(&request.path, user)?;
    let watch = new_watch(&e2b, &caller, &session, root, &request).await.map_err(|e| ConnectError::from(e.for_path(&request.path)))?;
    let (id, watch) = e2b.watchers.add(watch);
    /// The stream's state; its watch ends with it.
    struct Streamed {
        e2b: Arc<E2b>,
        caller: Caller,
        id: String,
        watch: Arc<Watch>,
        started: bool,
        pending: std::collections::VecDeque<Value>,
        quiet_since: tokio::time::Instant,
        done: bool,
    }
    impl Drop for Streamed {
        fn drop(&mut self) {
            self.e2b.watchers.drop_stream(&self.id);
        }
    }
    let streamed = Streamed { e2b, caller, id, watch, started: false, pending: Default::default(), quiet_since: tokio::time::Instant::now(), done: false };
    let stream = futures_util::stream::unfold(streamed, |mut w| async move {
        if w.done {
            return None;
        }
        if !w.started {
            w.started = true;
            return Some((Ok::<_, Infallible>(envelope(0, &json!({ "start": {} }))), w));
        }
        loop {
            if let Some(event) = w.pending.pop_front() {
                return Some((Ok(envelope(0, &json!({ "filesystem": event }))), w));
            }
            tokio::time::sleep(WATCH_EVERY).await;
            match look(&w.e2b, &w.caller, &w.watch).await {
                Ok(events) => w.pending.extend(events),
                // The directory or the sandbox is gone: the stream ends.
                Err(_) => {
                    w.done = true;
                    return Some((Ok(envelope(2, &json!({}))), w));
                }
            }
            if w.pending.is_empty() && w.quiet_since.elapsed() >= KEEPALIVE_EVERY {
                w.quiet_since = tokio::time::Instant::now();
                return Some((Ok(envelope(0, &json!({ "keepalive": {} }))), w));
            }
            if !w.pending.is_empty() {
                w.quiet_since = tokio::time::Instant::now();
            }
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/connect+json"));
    Ok(response)
}

/// A streaming call's error, as Connect sends one before any message: a
/// 200 answer holding only the end-of-stream message with the error
/// (Connect's clients take a non-200 stream for a transport failure).
pub(super) fn stream_error(error: &ConnectError) -> Response {
    let mut response = Response::new(Body::from(envelope(2, &json!({ "error": error.body() }))));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/connect+json"));
    RequestId::current().stamp(&mut response);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip() {
        let framed = envelope(0, &json!({ "path": "/home/user" }));
        assert_eq!(framed[0], 0);
        assert_eq!(unenvelope(&framed), br#"{"path":"/home/user"}"#);
        assert_eq!(unenvelope(br#"{"path":"x"}"#), br#"{"path":"x"}"#, "a plain body is read as it is");
        assert_eq!(permissions('d', 0o755), "drwxr-xr-x");
    }

    #[test]
    fn entries_carry_permission_bits_and_the_user_is_read_from_basic_auth() {
        let entry = Entry {
            name: "a.txt".into(),
            path: "home/user/a.txt".into(),
            kind: EntryKind::File,
            size: 4,
            mode: 0o644,
            modified: std::time::SystemTime::UNIX_EPOCH,
            metadata: [("author".to_owned(), "mish".to_owned())].into(),
            symlink_target: None,
        };
        let json = entry_json(&entry);
        assert_eq!((json["mode"].as_u64(), json["permissions"].as_str()), (Some(0o644), Some("-rw-r--r--")));
        assert_eq!(json["metadata"], json!({ "author": "mish" }));
        assert_eq!(json["path"], "/home/user/a.txt");
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, header::HeaderValue::from_static("Basic cm9vdDo="));
        assert_eq!(user_of(&headers).as_deref(), Some("root"));
        assert_eq!(user_of(&HeaderMap::new()), None);
    }
}
