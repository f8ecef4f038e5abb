//! Commands over `/v1`, tracked by their id as runs are
//! ([`crate::tracked_commands`]): a command goes on to its end when its
//! client goes away, and its output and report are kept under its id.
//!
//! | method and path | what |
//! | --- | --- |
//! | `POST /v1/sessions/{id}/commands` `{command, cwd?, env?, timeout_ms?, stdin?, user?, background?, stdin_open?}` | a command line run by the session's shell (created on first use): its report when it ends (200), its output as it comes (`Accept: text/event-stream`), or with `background` its status at once (202); with `stdin_open`, its stdin (after `stdin`, if given) stays open for writes |
//! | `POST /v1/sessions/{id}/commands/{command_id}/stdin` `{data?, eof?}` | writes `data` to a running command's stdin; `eof` closes it |
//! | `GET /v1/sessions/{id}/commands` | the session's running commands |
//! | `GET /v1/sessions/{id}/commands/{command_id}` | its state (`running`, `done`, `interrupted`, `failed`) and, once ended, its report |
//! | `GET /v1/sessions/{id}/commands/{command_id}/events` | its output as server-sent events (`stdout`, `stderr`: `{"text"}`), each with an `id:`, from the start or after `Last-Event-ID`, then `report` or `error` |
//! | `DELETE /v1/sessions/{id}/commands/{command_id}` | stops it (exit status 130) |

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use anypath_interpreter::OperationKind;
use anypath_sandbox::shell::Stream as OutputStream;
use anypath_wire::{CommandRequest, CommandStatus};
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde_json::Value;

use super::call::Call;
use crate::interpreter_service::{Audit, ServiceError};
use crate::state::AppState;
use crate::tracked_commands::{Ended, StartCommand, TrackedCommand};

/// The header naming a command's id on its answer.
const COMMAND_ID: &str = "x-anypath-command-id";

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/sessions/{session_id}/commands", post(run_command).get(list))
        .route("/v1/sessions/{session_id}/commands/{command_id}", get(describe).delete(stop))
        .route("/v1/sessions/{session_id}/commands/{command_id}/events", get(events))
        .route("/v1/sessions/{session_id}/commands/{command_id}/stdin", post(write_stdin))
}

/// What `POST .../commands/{command_id}/stdin` takes.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StdinWrite {
    /// Text written to the command's stdin.
    #[serde(default)]
    data: String,
    /// Close its stdin after `data` (the command reads end of input).
    #[serde(default)]
    eof: bool,
}

/// How a command is carried out, beside what it runs.
struct Control {
    background: bool,
    stdin_open: bool,
}

/// The body: a [`CommandRequest`], and `background` and `stdin_open`.
fn read_body(body: &[u8]) -> Result<(CommandRequest, Control), ServiceError> {
    let mut value: Value = serde_json::from_slice(body).map_err(ServiceError::InvalidJson)?;
    let mut flag = |name: &str| match value.as_object_mut().and_then(|fields| fields.remove(name)) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(set)) => Ok(set),
        Some(other) => Err(ServiceError::Body { status: 400, message: format!("{name} must be true or false, not {other}") }),
    };
    let control = Control { background: flag("background")?, stdin_open: flag("stdin_open")? };
    let request = serde_json::from_value(value).map_err(ServiceError::InvalidJson)?;
    Ok((request, control))
}

async fn run_command(c: Call, headers: HeaderMap, Path(session_id): Path<String>, body: Bytes) -> Result<Response, ServiceError> {
    let (mut request, control) = read_body(&body)?;
    // Open stdin starts with what `stdin` gave, then takes writes.
    let first_input = if control.stdin_open { request.stdin.take() } else { None };
    let start = StartCommand { session_id: session_id.clone(), request, with_stdin: control.stdin_open, tag: None, config: Value::Null };
    let command = c.service.commands().start(&c.service, c.caller.clone(), start);
    if let (Some(stdin), Some(text)) = (&command.stdin, first_input) {
        stdin.send(text.as_bytes());
    }
    let background = control.background;
    let id = [(header::HeaderName::from_static(COMMAND_ID), command.id.to_string())];
    if background {
        let location = format!("/v1/sessions/{session_id}/commands/{}", command.id);
        return Ok((StatusCode::ACCEPTED, [(header::LOCATION, location)], id, Json(command.status())).into_response());
    }
    if super::events::wants_events(&headers) {
        return Ok((id, Sse::new(follow(command, 0)).keep_alive(KeepAlive::default())).into_response());
    }
    let ended = ended(&command).await;
    match ended.report {
        Ok(report) => Ok((id, Json(report)).into_response()),
        Err(error) => Err(ServiceError::Kept { status: error.status, code: error.code, message: error.message }),
    }
}

/// How `command` ended, once it has.
async fn ended(command: &TrackedCommand) -> Ended {
    loop {
        let changed = command.changed();
        if let Some(end) = command.ended() {
            return end;
        }
        changed.await;
    }
}

/// The command's output events after `after`, each with its id (its
/// index from 1), then `report` or `error` with the next id.
fn follow(command: Arc<TrackedCommand>, after: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = Some((command, after, VecDeque::<Event>::new()));
    futures_util::stream::unfold(state, |state| async move {
        let (command, mut after, mut ready) = state?;
        loop {
            if let Some(event) = ready.pop_front() {
                return Some((Ok(event), Some((command, after, ready))));
            }
            let changed = command.changed();
            let (chunks, end) = command.since(usize::try_from(after).unwrap_or(usize::MAX));
            if !chunks.is_empty() {
                for (stream, bytes) in chunks {
                    after += 1;
                    let name = if stream == OutputStream::Stdout { "stdout" } else { "stderr" };
                    let text = serde_json::json!({ "text": String::from_utf8_lossy(&bytes) });
                    ready.push_back(Event::default().event(name).json_data(text).unwrap_or_else(|_| Event::default().event(name)).id(after.to_string()));
                }
                continue;
            }
            if let Some(end) = end {
                let last = match end.report {
                    Ok(report) => Event::default().event("report").json_data(&report).unwrap_or_else(|_| Event::default().event("report")),
                    Err(error) => super::events::stored_error_event(error.status, error.body()),
                };
                return Some((Ok(last.id((after + 1).to_string())), None));
            }
            changed.await;
        }
    })
}

/// The caller's command `command_id` in `session_id`, or 404.
fn find(c: &Call, session_id: &str, command_id: &str) -> Result<Arc<TrackedCommand>, ServiceError> {
    c.service.commands().named(&c.caller.tenant, session_id, command_id)
}

async fn list(c: Call, Path(session_id): Path<String>) -> Result<Json<Vec<CommandStatus>>, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::ListCommands).session(&session_id);
    let running = c.service.commands().running(&c.caller.tenant, &session_id).iter().map(|command| command.status()).collect();
    audit.finish(Ok(running)).map(Json)
}

async fn describe(c: Call, Path((session_id, command_id)): Path<(String, String)>) -> Result<Json<CommandStatus>, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::DescribeCommand).session(&session_id).subject(&command_id);
    audit.finish(find(&c, &session_id, &command_id).map(|command| command.status())).map(Json)
}

async fn events(c: Call, headers: HeaderMap, Path((session_id, command_id)): Path<(String, String)>) -> Result<Response, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::FollowCommand).session(&session_id).subject(&command_id);
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok())) {
        None => Ok(0),
        Some(Some(after)) => Ok(after),
        Some(None) => Err(ServiceError::Body { status: 400, message: "Last-Event-ID must be the id of an event of this command (a number)".into() }),
    };
    let (command, after) = audit.finish(after.and_then(|after| find(&c, &session_id, &command_id).map(|command| (command, after))))?;
    Ok(Sse::new(follow(command, after)).keep_alive(KeepAlive::default()).into_response())
}

async fn write_stdin(c: Call, Path((session_id, command_id)): Path<(String, String)>, body: Bytes) -> Result<StatusCode, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::CommandStdin).session(&session_id).subject(&command_id);
    let written = serde_json::from_slice::<StdinWrite>(&body).map_err(ServiceError::InvalidJson).and_then(|write| {
        let command = find(&c, &session_id, &command_id)?;
        let stdin = command.stdin.as_ref().filter(|_| command.ended().is_none()).ok_or_else(|| {
            ServiceError::StdinNotOpen(format!("command {command_id} is not running with its stdin open (start it with \"stdin_open\": true)"))
        })?;
        stdin.send(write.data.as_bytes());
        if write.eof {
            stdin.close();
        }
        Ok(())
    });
    audit.finish(written).map(|()| StatusCode::NO_CONTENT)
}

async fn stop(c: Call, Path((session_id, command_id)): Path<(String, String)>) -> Result<Response, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::StopCommand).session(&session_id).subject(&command_id);
    let command = audit.finish(find(&c, &session_id, &command_id))?;
    if command.ended().is_some() {
        // Nothing to stop: its status says how it ended.
        return Ok(Json(command.status()).into_response());
    }
    command.stop();
    Ok((StatusCode::ACCEPTED, Json(command.status())).into_response())
}
