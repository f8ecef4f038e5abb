//! A run streamed as server-sent events (`POST /v1/sessions/{id}/run` with
//! `Accept: text/event-stream`): `stdout` and `stderr` (`{"text"}`) as the
//! code writes, `result` (a `CellResult`) as it shows something, then
//! `report` (the `RunReport`, the same as the JSON answer) or `error` (the
//! error envelope). Text pieces that are already waiting are sent together,
//! up to 4 KiB an event; nothing waits to be batched.

use std::convert::Infallible;
use std::time::Duration;

use anypath_interpreter::{RunReport, RunRequest, runs};
use anypath_wire::{ErrorEnvelope, LiveEvent};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::interpreter_service::{Caller, InterpreterService, ServiceError};

/// How long a run may take to fail before the answer commits to a stream:
/// a refusal or a bad request within it is a plain error with its status.
const EARLY_FAILURE_WINDOW: Duration = Duration::from_millis(200);
/// Text events merge waiting pieces up to this size.
const MERGED_TEXT_BYTES: usize = 4 << 10;

/// Whether the client asked for the streamed answer.
pub(crate) fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|kind| kind.trim().starts_with("text/event-stream")))
}

/// Runs `request` and answers with its events; `fail` makes the error
/// answer (status and envelope) of a run that fails before streaming.
pub(crate) async fn stream_run(
    service: InterpreterService,
    caller: Caller,
    session_id: String,
    request: RunRequest,
    fail: fn(&ServiceError, &str) -> Response,
) -> Response {
    let (sink, events) = tokio::sync::mpsc::unbounded_channel();
    let run_caller = caller.clone();
    let mut run = tokio::spawn(async move { service.call(&run_caller, runs::RunCode { session_id, request, live: Some(sink) }).await });
    let mut live = LiveEvents::new(events);
    let finished = tokio::select! {
        event = live.events.recv() => match event {
            Some(event) => {
                live.held = Some(event);
                None
            }
            // The run let go of its sink without a word: it has ended.
            None => Some((&mut run).await),
        },
        finished = &mut run => Some(finished),
        () = tokio::time::sleep(EARLY_FAILURE_WINDOW) => None,
    };
    let request_id = caller.request_id.clone();
    match finished {
        None => sse(Events { live, run: Some(run), report: None, caller, fail }, &request_id),
        // Succeeded at once: its events are waiting, the report comes last.
        Some(Ok(Ok(report))) => sse(Events { live, run: None, report: Some(Ok(report)), caller, fail }, &request_id),
        Some(Ok(Err(error))) => fail(&error, &request_id),
        Some(Err(join)) => fail(&ServiceError::Internal(format!("the run stopped: {join}")), &request_id),
    }
}

fn sse(events: Events, request_id: &str) -> Response {
    let mut response = Sse::new(events.into_stream()).keep_alive(KeepAlive::default()).into_response();
    crate::serve::set_request_id(&mut response, request_id);
    response
}

/// A run's live events as they are sent on: text pieces already waiting
/// behind one another merged, up to [`MERGED_TEXT_BYTES`]. Both transports
/// read them through this (SSE here, MCP progress in `mcp::tools`).
pub(crate) struct LiveEvents {
    events: UnboundedReceiver<LiveEvent>,
    /// An event taken ahead (it did not merge into the one before it).
    held: Option<LiveEvent>,
}

impl LiveEvents {
    pub(crate) fn new(events: UnboundedReceiver<LiveEvent>) -> Self {
        Self { events, held: None }
    }

    /// The next event; None once the run has ended and all were read.
    pub(crate) async fn next(&mut self) -> Option<LiveEvent> {
        let first = match self.held.take() {
            Some(event) => event,
            None => self.events.recv().await?,
        };
        Some(self.merged(first))
    }

    /// `first` with the text pieces of the same stream already waiting
    /// behind it.
    fn merged(&mut self, first: LiveEvent) -> LiveEvent {
        let (mut text, stdout) = match first {
            LiveEvent::Stdout(text) => (text, true),
            LiveEvent::Stderr(text) => (text, false),
            result @ LiveEvent::Result(_) => return result,
        };
        while text.len() < MERGED_TEXT_BYTES {
            match self.events.try_recv() {
                Ok(LiveEvent::Stdout(more)) if stdout => text.push_str(&more),
                Ok(LiveEvent::Stderr(more)) if !stdout => text.push_str(&more),
                Ok(other) => {
                    self.held = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        if stdout { LiveEvent::Stdout(text) } else { LiveEvent::Stderr(text) }
    }
}

/// The stream's state: events not sent yet, then the run's outcome.
struct Events {
    live: LiveEvents,
    run: Option<JoinHandle<Result<RunReport, ServiceError>>>,
    report: Option<Result<RunReport, ServiceError>>,
    caller: Caller,
    fail: fn(&ServiceError, &str) -> Response,
}

impl Events {
    fn into_stream(self) -> impl Stream<Item = Result<Event, Infallible>> {
        futures_util::stream::unfold(Some(self), |state| async move {
            let mut state = state?;
            if let Some(event) = state.live.next().await {
                return Some((Ok(live_event(event)), Some(state)));
            }
            // Every sender is gone: the run has ended.
            let outcome = match (state.report.take(), state.run.take()) {
                (Some(report), _) => report,
                (None, Some(run)) => run.await.unwrap_or_else(|join| Err(ServiceError::Internal(format!("the run stopped: {join}")))),
                (None, None) => return None,
            };
            let last = match outcome {
                Ok(report) => Event::default().event("report").json_data(&report).unwrap_or_else(|_| Event::default().event("report")),
                Err(error) => error_event(&error, (state.fail)(&error, &state.caller.request_id).status().as_u16(), &state.caller.request_id),
            };
            Some((Ok(last), None))
        })
    }
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

fn error_event(error: &ServiceError, status: u16, request_id: &str) -> Event {
    let body = StreamedError { status, envelope: ErrorEnvelope::new(error.code(), error.to_string(), request_id) };
    Event::default().event("error").json_data(body).unwrap_or_else(|_| Event::default().event("error"))
}
