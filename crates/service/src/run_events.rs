//! A run streamed as server-sent events (`POST /v1/sessions/{id}/run` with
//! `Accept: text/event-stream`): `stdout` and `stderr` (`{"text"}`) as the
//! code writes, `result` (a `CellResult`) as it shows something, then
//! `report` (the `RunReport`, the same as the JSON answer) or `error` (the
//! error envelope). Text pieces that are already waiting are sent together,
//! up to 4 KiB an event; nothing waits to be batched (`live_run`).

use std::convert::Infallible;

use anypath_interpreter::RunRequest;
use anypath_wire::{ErrorEnvelope, LiveEvent};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;

use crate::interpreter_service::{Caller, InterpreterService, ServiceError};
use crate::live_run::{LiveRun, Window};

/// Whether the client asked for the streamed answer.
pub(crate) fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|kind| kind.trim().starts_with("text/event-stream")))
}

/// Runs `request` and answers with its events; a run that fails before
/// its first event, within the early window, is the error instead.
pub(crate) async fn stream_run(service: InterpreterService, caller: Caller, session_id: String, request: RunRequest) -> Result<Response, ServiceError> {
    let run = LiveRun::start(service, caller.clone(), session_id, request);
    let run = run.unless_failed_early(Window::UntilFirstEvent).await?;
    // The body is sent after the handler has returned: its error event
    // names the request by the id the caller was resolved with.
    Ok(Sse::new(events(run, caller.request_id)).keep_alive(KeepAlive::default()).into_response())
}

/// The run's live events, then its `report` or `error`.
fn events(run: LiveRun, request_id: String) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some((run, request_id)), |state| async move {
        let (mut run, request_id) = state?;
        if let Some(event) = run.next_event().await {
            return Some((Ok(live_event(event)), Some((run, request_id))));
        }
        // Every sender is gone: the run has ended.
        let last = match run.outcome().await {
            Ok(report) => Event::default().event("report").json_data(&report).unwrap_or_else(|_| Event::default().event("report")),
            Err(error) => error_event(&error, &request_id),
        };
        Some((Ok(last), None))
    })
}

/// The text a `stdout` or `stderr` event carries.
#[derive(serde::Serialize)]
struct Text<'a> {
    text: &'a str,
}

fn live_event(event: LiveEvent) -> Event {
    let built = match &event {
        LiveEvent::Stdout(text) => Event::default().event("stdout").json_data(Text { text }),
        LiveEvent::Stderr(text) => Event::default().event("stderr").json_data(Text { text }),
        LiveEvent::Result(result) => Event::default().event("result").json_data(result),
    };
    built.unwrap_or_else(|_| Event::default().event("error"))
}

/// The `error` event: the envelope a JSON caller would have been answered,
/// and the status it would have had.
#[derive(serde::Serialize)]
struct StreamedError {
    status: u16,
    #[serde(flatten)]
    envelope: ErrorEnvelope,
}

fn error_event(error: &ServiceError, request_id: &str) -> Event {
    let body = StreamedError { status: error.status().as_u16(), envelope: ErrorEnvelope::new(error.code(), error.to_string(), request_id) };
    Event::default().event("error").json_data(body).unwrap_or_else(|_| Event::default().event("error"))
}
