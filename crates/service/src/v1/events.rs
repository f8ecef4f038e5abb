//! A run streamed as server-sent events (`POST /v1/sessions/{id}/run` with
//! `Accept: text/event-stream`): `stdout` and `stderr` (`{"text"}`) as the
//! code writes, `result` (a `CellResult`) as it shows something, then
//! `report` (the `RunReport`, the same as the JSON answer) or `error` (the
//! error envelope). Text pieces that are already waiting are sent together,
//! up to 4 KiB an event; nothing waits to be batched (`live_run`). Every
//! event carries its id, so a client re-attaches after the last it saw
//! (`super::runs`); this module shapes the events.

use anypath_wire::{ErrorEnvelope, LiveEvent};
use axum::response::sse::Event;

/// Whether the client asked for the streamed answer.
pub(crate) fn wants_events(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.split(',').any(|kind| kind.trim().starts_with("text/event-stream")))
}

/// The text a `stdout` or `stderr` event carries.
#[derive(serde::Serialize)]
struct Text<'a> {
    text: &'a str,
}

pub(crate) fn live_event(event: LiveEvent) -> Event {
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

/// The `error` event of an error kept with its status (a tracked run's).
pub(crate) fn stored_error_event(status: u16, error: anypath_wire::ErrorBody) -> Event {
    let body = StreamedError { status, envelope: ErrorEnvelope { error } };
    Event::default().event("error").json_data(body).unwrap_or_else(|_| Event::default().event("error"))
}
