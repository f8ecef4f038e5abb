//! envd's `filesystem.Filesystem` Connect service, in Connect's JSON form:
//! `Stat`, `ListDir`, `MakeDir`, `Remove`, `Move`, the unary watch calls
//! (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`) and the streamed
//! `WatchDir`. Paths are E2B's (`/home/user/...`), mapped onto the session
//! directory. A watch compares the tree with what it last saw: the session
//! directory changes only through this service and the session's own runs.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anypath_interpreter::{Entry, EntryKind, files};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::call::SandboxCall;
use super::error::{ConnectError, E2bError};
use super::{E2b, paths};
use crate::interpreter_service::Caller;

/// How often a streamed watch looks at the tree.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How often a streamed watch says it is still there.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(15);

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PathRequest {
    path: String,
    depth: Option<u32>,
    recursive: bool,
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

/// A unary watch: what it saw last time it was asked.
pub(crate) struct Watcher {
    sandbox_id: String,
    tenant: String,
    /// The watched directory, relative to the session's.
    root: String,
    recursive: bool,
    seen: Tree,
}

/// Each entry under a watched directory, by its path relative to it.
type Tree = BTreeMap<String, (EntryKind, u64, SystemTime)>;

/// The unary watches of every sandbox, by id.
#[derive(Default)]
pub(crate) struct Watchers {
    watchers: Mutex<HashMap<String, Watcher>>,
}

impl Watchers {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watcher>> {
        self.watchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the watches of a sandbox that is gone.
    pub(crate) fn forget_sandbox(&self, sandbox_id: &str) {
        self.table().retain(|_, w| w.sandbox_id != sandbox_id);
    }
}

/// An entry as envd's `EntryInfo` in Connect's JSON.
fn entry_json(entry: &Entry) -> Value {
    let (kind, mode_kind, letter) = match entry.kind {
        EntryKind::File => ("FILE_TYPE_FILE", 0o100000, '-'),
        EntryKind::Directory => ("FILE_TYPE_DIRECTORY", 0o040000, 'd'),
    };
    json!({
        "name": entry.name,
        "type": kind,
        "path": paths::to_client(&entry.path),
        "size": entry.size.to_string(),
        "mode": mode_kind | entry.mode,
        "permissions": permissions(letter, entry.mode),
        "owner": "user",
        "group": "user",
        "modifiedTime": super::control::rfc3339(entry.modified),
    })
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

fn parse<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ConnectError> {
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
    body: Bytes,
) -> Result<Response, ConnectError> {
    if method == "WatchDir" {
        return watch_stream(e2b, caller, sandbox.id.clone(), &body);
    }
    let value = unary(&e2b, &caller, &sandbox.id, &method, &body).await?;
    Ok((StatusCode::OK, axum::Json(value)).into_response())
}

async fn unary(e2b: &E2b, caller: &Caller, session: &str, method: &str, body: &[u8]) -> Result<Value, ConnectError> {
    let session = session.to_owned();
    let service = &e2b.service;
    fn on_path(path: &str) -> impl Fn(crate::interpreter_service::ServiceError) -> ConnectError + '_ {
        move |e| ConnectError::from(E2bError::from(e).for_path(path))
    }
    match method {
        "Stat" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path)?;
            let entry = service.call(caller, files::StatPath { session_id: session, path: relative }).await.map_err(on_path(&request.path))?;
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "ListDir" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path)?;
            let depth = request.depth.unwrap_or(1).max(1);
            let entries = service.call(caller, files::ListDir { session_id: session, path: relative, depth }).await.map_err(on_path(&request.path))?;
            Ok(json!({ "entries": entries.iter().map(entry_json).collect::<Vec<_>>() }))
        }
        "MakeDir" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path)?;
            let made = service.call(caller, files::MakeDir { session_id: session.clone(), path: relative.clone() }).await.map_err(on_path(&request.path))?;
            if !made {
                return Err(ConnectError::new("already_exists", format!("directory '{}' already exists", request.path)));
            }
            let entry = service.call(caller, files::StatPath { session_id: session, path: relative }).await.map_err(on_path(&request.path))?;
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "Remove" => {
            let request: PathRequest = parse(body)?;
            let relative = paths::to_session(&request.path)?;
            service.call(caller, files::RemovePath { session_id: session, path: relative }).await.map_err(on_path(&request.path))?;
            Ok(json!({}))
        }
        "Move" => {
            let request: MoveRequest = parse(body)?;
            let (from, to) = (paths::to_session(&request.source)?, paths::to_session(&request.destination)?);
            let entry = service.call(caller, files::MovePath { session_id: session, from, to }).await.map_err(on_path(&request.source))?;
            Ok(json!({ "entry": entry_json(&entry) }))
        }
        "CreateWatcher" => {
            let request: PathRequest = parse(body)?;
            let root = paths::to_session(&request.path)?;
            let seen = snapshot(e2b, caller, &session, &root, request.recursive).await.map_err(on_path(&request.path))?;
            let id = uuid::Uuid::new_v4().simple().to_string();
            let watcher = Watcher { sandbox_id: session, tenant: caller.tenant.clone(), root, recursive: request.recursive, seen };
            e2b.watchers.table().insert(id.clone(), watcher);
            Ok(json!({ "watcherId": id }))
        }
        "GetWatcherEvents" => {
            let request: WatcherRequest = parse(body)?;
            let (root, recursive, seen) = {
                let table = e2b.watchers.table();
                let watcher = table
                    .get(&request.watcher_id)
                    .filter(|w| w.sandbox_id == session && w.tenant == caller.tenant)
                    .ok_or_else(|| ConnectError::new("not_found", format!("watcher {} not found", request.watcher_id)))?;
                (watcher.root.clone(), watcher.recursive, watcher.seen.clone())
            };
            let now = snapshot(e2b, caller, &session, &root, recursive).await.map_err(on_path(&root))?;
            let events = changes(&seen, &now);
            if let Some(watcher) = e2b.watchers.table().get_mut(&request.watcher_id) {
                watcher.seen = now;
            }
            Ok(json!({ "events": events }))
        }
        "RemoveWatcher" => {
            let request: WatcherRequest = parse(body)?;
            let mut table = e2b.watchers.table();
            let owned = table.get(&request.watcher_id).is_some_and(|w| w.sandbox_id == session && w.tenant == caller.tenant);
            if owned {
                table.remove(&request.watcher_id);
            }
            Ok(json!({}))
        }
        other => Err(ConnectError::new("unimplemented", format!("filesystem.Filesystem/{other} is not a method this sandbox serves"))),
    }
}

/// The tree under `root`, one level or all of it.
async fn snapshot(e2b: &E2b, caller: &Caller, session: &str, root: &str, recursive: bool) -> Result<Tree, crate::interpreter_service::ServiceError> {
    let depth = if recursive { u32::MAX } else { 1 };
    let entries = e2b.service.call(caller, files::ListDir { session_id: session.to_owned(), path: root.to_owned(), depth }).await?;
    let prefix = if root.is_empty() { String::new() } else { format!("{root}/") };
    Ok(entries
        .into_iter()
        .map(|e| (e.path.strip_prefix(&prefix).unwrap_or(&e.path).to_owned(), (e.kind, e.size, e.modified)))
        .collect())
}

/// The events that turn `before` into `after`, as envd's `FilesystemEvent`s.
fn changes(before: &Tree, after: &Tree) -> Vec<Value> {
    let event = |name: &str, kind: &str| json!({ "name": name, "type": kind });
    let mut events = Vec::new();
    for (name, now) in after {
        match before.get(name) {
            None => events.push(event(name, "EVENT_TYPE_CREATE")),
            Some(was) if was != now && now.0 == EntryKind::File => events.push(event(name, "EVENT_TYPE_WRITE")),
            _ => {}
        }
    }
    for name in before.keys().filter(|name| !after.contains_key(*name)) {
        events.push(event(name, "EVENT_TYPE_REMOVE"));
    }
    events
}

/// One Connect stream envelope: a flag byte, the length, the message.
fn envelope(flag: u8, message: &Value) -> Bytes {
    let data = serde_json::to_vec(message).unwrap_or_default();
    let mut framed = Vec::with_capacity(5 + data.len());
    framed.push(flag);
    framed.extend_from_slice(&(data.len() as u32).to_be_bytes());
    framed.extend_from_slice(&data);
    Bytes::from(framed)
}

/// The message of an enveloped request (or a plain JSON one).
fn unenvelope(body: &[u8]) -> &[u8] {
    match body {
        [_, a, b, c, d, rest @ ..] if u32::from_be_bytes([*a, *b, *c, *d]) as usize == rest.len() => rest,
        _ => body,
    }
}

/// `WatchDir`: a `start` message, then the events as they are seen, with
/// a keepalive now and then, until the client goes or the sandbox ends.
fn watch_stream(e2b: Arc<E2b>, caller: Caller, session: String, body: &[u8]) -> Result<Response, ConnectError> {
    let request: PathRequest = parse(unenvelope(body))?;
    let root = paths::to_session(&request.path)?;
    struct Watch {
        e2b: Arc<E2b>,
        caller: Caller,
        session: String,
        root: String,
        recursive: bool,
        seen: Option<Tree>,
        pending: std::collections::VecDeque<Value>,
        quiet_since: tokio::time::Instant,
        done: bool,
    }
    let watch = Watch {
        e2b,
        caller,
        session,
        root,
        recursive: request.recursive,
        seen: None,
        pending: Default::default(),
        quiet_since: tokio::time::Instant::now(),
        done: false,
    };
    let stream = futures_util::stream::unfold(watch, |mut w| async move {
        if w.done {
            return None;
        }
        loop {
            if let Some(event) = w.pending.pop_front() {
                return Some((Ok::<_, Infallible>(envelope(0, &json!({ "filesystem": event }))), w));
            }
            let Some(seen) = &w.seen else {
                match snapshot(&w.e2b, &w.caller, &w.session, &w.root, w.recursive).await {
                    Ok(tree) => {
                        w.seen = Some(tree);
                        return Some((Ok(envelope(0, &json!({ "start": {} }))), w));
                    }
                    Err(e) => {
                        w.done = true;
                        let error = ConnectError::from(E2bError::from(e));
                        return Some((Ok(envelope(2, &json!({ "error": error.body() }))), w));
                    }
                }
            };
            tokio::time::sleep(WATCH_EVERY).await;
            match snapshot(&w.e2b, &w.caller, &w.session, &w.root, w.recursive).await {
                Ok(now) => {
                    w.pending.extend(changes(seen, &now));
                    w.seen = Some(now);
                }
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

/// `POST /process.Process/{method}`: there is no shell in a Python-only
/// sandbox, so every call is Connect's `unimplemented`, at once.
pub(crate) async fn process(headers: HeaderMap, Path(method): Path<String>) -> Result<Response, ConnectError> {
    let message = format!(
        "process.Process/{method} is not available: this sandbox runs Python only (no shell, no commands); run code with run_code instead"
    );
    let error = ConnectError::new("unimplemented", message);
    let streamed = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/connect+"));
    if streamed {
        // A streaming call's error is its end-of-stream message, with 200.
        let mut response = Response::new(Body::from(envelope(2, &json!({ "error": error.body() }))));
        response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/connect+json"));
        return Ok(response);
    }
    Err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_what_was_made_written_and_removed() {
        let at = SystemTime::UNIX_EPOCH;
        let later = at + Duration::from_secs(1);
        let before: Tree = [("a".to_owned(), (EntryKind::File, 1, at)), ("gone".to_owned(), (EntryKind::File, 1, at))].into();
        let after: Tree = [("a".to_owned(), (EntryKind::File, 2, later)), ("new".to_owned(), (EntryKind::Directory, 0, later))].into();
        let events = changes(&before, &after);
        let kinds: Vec<(&str, &str)> = events.iter().filter_map(|e| Some((e.get("name")?.as_str()?, e.get("type")?.as_str()?))).collect();
        assert_eq!(kinds, [("a", "EVENT_TYPE_WRITE"), ("new", "EVENT_TYPE_CREATE"), ("gone", "EVENT_TYPE_REMOVE")]);
    }

    #[test]
    fn envelopes_round_trip() {
        let framed = envelope(0, &json!({ "path": "/home/user" }));
        assert_eq!(framed[0], 0);
        assert_eq!(unenvelope(&framed), br#"{"path":"/home/user"}"#);
        assert_eq!(unenvelope(br#"{"path":"x"}"#), br#"{"path":"x"}"#, "a plain body is read as it is");
        assert_eq!(permissions('d', 0o755), "drwxr-xr-x");
    }
}
