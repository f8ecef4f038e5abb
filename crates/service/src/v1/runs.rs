//! Runs by their id over `/v1`: every `POST /v1/sessions/{id}/run` is
//! tracked ([`crate::background_runs`]), so a run whose client went away
//! goes on to its end and keeps its report.
//!
//! | method and path | what |
//! | --- | --- |
//! | `POST /v1/sessions/{id}/run` `{code, ..., run_id?, background?, callback_url?, cancel_on_disconnect?}` | a run: its report (200), its events (`Accept: text/event-stream`), or with `background` its status at once (202) |
//! | `GET /v1/sessions/{id}/runs/{run_id}` | the run's state (`running`, `done`, `interrupted`, `failed`, `lost`) and, once done, its report |
//! | `GET /v1/sessions/{id}/runs/{run_id}/events` | its events as server-sent events, each with an `id:`, from the start or after `Last-Event-ID`, then `report` or `error` |
//! | `DELETE /v1/sessions/{id}/runs/{run_id}` | interrupts it |

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use anypath_interpreter::{OperationKind, RunRequest};
use anypath_wire::{RunControl, RunStatus};
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::Stream;

use crate::background_runs::{Followed, Started, Tracked};
use crate::interpreter_service::{Audit, Caller, InterpreterService, ServiceError};
use crate::live_run::{Window, ended_early};
use crate::state::AppState;
use super::call::Call;

/// The header naming a run's id on its answer.
const RUN_ID: &str = "x-anypath-run-id";

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/sessions/{session_id}/runs/{run_id}", get(describe).delete(interrupt))
        .route("/v1/sessions/{session_id}/runs/{run_id}/events", get(events))
}

/// `POST /v1/sessions/{id}/run`, whichever way it is answered.
pub(crate) async fn run(c: Call, headers: &HeaderMap, session_id: String, request: RunRequest, control: RunControl) -> Result<Response, ServiceError> {
    let streamed = super::events::wants_events(headers);
    let followed = control.background || streamed;
    let started = c.service.start_tracked(&c.caller, session_id, request, &control, followed).await?;
    let run_id = started.tracked.run_id().to_owned();
    if control.background {
        let status = started.tracked.status();
        let location = format!("/v1/sessions/{}/runs/{}", status.session_id, status.run_id);
        return Ok((StatusCode::ACCEPTED, [(header::LOCATION, location), (header::HeaderName::from_static(RUN_ID), run_id)], axum::Json(status)).into_response());
    }
    if streamed {
        return stream(started).await;
    }
    let guard = CancelOnDisconnect { armed: control.cancel_on_disconnect, service: c.service.clone(), caller: c.caller.clone(), tracked: started.tracked.clone() };
    let outcome = started.outcome.await;
    guard.disarm();
    let report = outcome.unwrap_or_else(|_| Err(ServiceError::Internal("the run's outcome was lost".into())))?;
    Ok(([(header::HeaderName::from_static(RUN_ID), run_id)], axum::Json(report)).into_response())
}

/// Stops a foreground run whose client went away, when it asked for that.
struct CancelOnDisconnect {
    armed: bool,
    service: InterpreterService,
    caller: Caller,
    tracked: Arc<Tracked>,
}

impl CancelOnDisconnect {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDisconnect {
    fn drop(&mut self) {
        if self.armed {
            self.service.stop_tracked(&self.caller, &self.tracked);
        }
    }
}

/// A run answered with its events; one that fails before its first event,
/// within the early window, is a plain error instead.
async fn stream(mut started: Started) -> Result<Response, ServiceError> {
    let tracked = started.tracked.clone();
    let mut changed = tracked.subscribe();
    let shown = async {
        let _ = changed.changed().await;
        // The first change may be the end: a failure without events is still early.
        !(tracked.status().events == 0 && tracked.state() == anypath_wire::RunState::Failed)
    };
    let failed_early = match ended_early(Window::UntilFirstEvent, &mut started.outcome, shown).await {
        Some(Ok(Err(error))) => Some(error),
        Some(Err(_)) => Some(ServiceError::Internal("the run's outcome was lost".into())),
        Some(Ok(Ok(_))) | None => None,
    };
    if let Some(error) = failed_early {
        return Err(error);
    }
    let run_id = tracked.run_id().to_owned();
    let sse = Sse::new(follow(tracked, 0)).keep_alive(KeepAlive::default());
    Ok(([(header::HeaderName::from_static(RUN_ID), run_id)], sse).into_response())
}

/// The run's events after `after`, each with its id, then its end.
fn follow(tracked: Arc<Tracked>, after: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let changed = tracked.subscribe();
    let state = Some((tracked, after, changed, VecDeque::<Event>::new()));
    futures_util::stream::unfold(state, |state| async move {
        let (tracked, mut after, mut changed, mut ready) = state?;
        loop {
            if let Some(event) = ready.pop_front() {
                return Some((Ok(event), Some((tracked, after, changed, ready))));
            }
            // Seen before reading: a change made after this wakes the wait below.
            changed.borrow_and_update();
            match tracked.follow(after) {
                Followed::Events(events) => {
                    for (id, event) in events {
                        after = id;
                        ready.push_back(super::events::live_event(event).id(id.to_string()));
                    }
                }
                Followed::End(id, outcome) => {
                    let last = match outcome {
                        Ok(report) => Event::default().event("report").json_data(&report).unwrap_or_else(|_| Event::default().event("report")),
                        Err((status, error)) => super::events::stored_error_event(status, error),
                    };
                    return Some((Ok(last.id(id.to_string())), None));
                }
                Followed::Nothing => {
                    if changed.changed().await.is_err() {
                        return None;
                    }
                }
            }
        }
    })
}

/// The caller's run `run_id` in `session_id`, or 404.
async fn find(c: &Call, session_id: &str, run_id: &str) -> Result<Arc<Tracked>, ServiceError> {
    c.service.runs().find_in(&c.caller.tenant, session_id, run_id).await
}

async fn describe(c: Call, Path((session_id, run_id)): Path<(String, String)>) -> Result<axum::Json<RunStatus>, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::DescribeRun).session(&session_id).subject(&run_id);
    let found = find(&c, &session_id, &run_id).await.map(|t| t.status());
    audit.finish(found).map(axum::Json)
}

async fn events(c: Call, headers: HeaderMap, Path((session_id, run_id)): Path<(String, String)>) -> Result<Response, ServiceError> {
    let audit = Audit::of(&c.caller, OperationKind::FollowRun).session(&session_id).subject(&run_id);
    let after = match headers.get("last-event-id").map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok())) {
        None => Ok(0),
        Some(Some(after)) => Ok(after),
        Some(None) => Err(ServiceError::Body { status: 400, message: "Last-Event-ID must be the id of an event of this run (a number)".into() }),
    };
    let tracked = audit.finish(match after {
        Ok(after) => find(&c, &session_id, &run_id).await.map(|t| (t, after)),
        Err(e) => Err(e),
    })?;
    let (tracked, after) = tracked;
    Ok(Sse::new(follow(tracked, after)).keep_alive(KeepAlive::default()).into_response())
}

async fn interrupt(c: Call, Path((session_id, run_id)): Path<(String, String)>) -> Result<Response, ServiceError> {
    let tracked = match find(&c, &session_id, &run_id).await {
        Ok(tracked) => tracked,
        Err(e) => return Audit::of(&c.caller, OperationKind::Interrupt).session(&session_id).subject(&run_id).finish(Err(e)),
    };
    if tracked.state().is_final() {
        // Nothing to stop: its status says how it ended.
        let _ = Audit::of(&c.caller, OperationKind::Interrupt).session(&session_id).subject(&run_id).finish(Ok(()));
        return Ok(axum::Json(tracked.status()).into_response());
    }
    c.service.stop_tracked(&c.caller, &tracked);
    Ok((StatusCode::ACCEPTED, axum::Json(tracked.status())).into_response())
}
