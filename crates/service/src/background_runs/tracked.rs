//! One run as the registry tracks it: its events as they come, its outcome
//! once it ends, and a signal its followers wait on.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anypath_interpreter::RunReport;
use anypath_wire::{ErrorBody, LiveEvent, RunState, RunStatus};
use serde::{Deserialize, Serialize};
use tokio::task::AbortHandle;

use crate::caller::Caller;
use crate::service_error::ServiceError;

/// Bytes of live events a run keeps for its followers, at most; past them
/// the events are not kept (the report still holds the output, within the
/// run's own caps).
const MAX_EVENT_BYTES: usize = 8 << 20;

/// A tracked run.
pub(crate) struct Tracked {
    tenant: String,
    session_id: String,
    run_id: String,
    /// The request that asked for it, named by its error.
    request_id: String,
    background: bool,
    started_at: String,
    progress: Mutex<Progress>,
    /// Bumped at each event and at the end: what followers wait on.
    changed: tokio::sync::watch::Sender<u64>,
    abort: Mutex<Option<AbortHandle>>,
    interrupt_asked: AtomicBool,
    /// Ended and, for a background run, written: nothing of it is left to do.
    settled: AtomicBool,
}

#[derive(Default)]
struct Progress {
    state: Option<RunState>,
    ended_at: Option<String>,
    events: Vec<LiveEvent>,
    event_bytes: usize,
    /// Events not kept past [`MAX_EVENT_BYTES`].
    dropped: u64,
    report: Option<RunReport>,
    /// The error and the status a JSON caller would have been answered.
    error: Option<(u16, ErrorBody)>,
}

/// What a follower reads: the events after the one it has, and, once the
/// run has ended and every event was read, its last word.
pub(crate) enum Followed {
    /// Events with their ids (1-based).
    Events(Vec<(u64, LiveEvent)>),
    /// The run's end, with the id of its last event: the report, or the
    /// error with its status.
    End(u64, Result<RunReport, (u16, ErrorBody)>),
    /// Nothing new yet.
    Nothing,
}

/// A background run as it is written to disk.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredRun {
    pub tenant: String,
    pub request_id: String,
    pub status: RunStatus,
    #[serde(default)]
    pub events: Vec<LiveEvent>,
    /// The status of `status.error`, as an error answer would have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_status: Option<u16>,
}

impl Tracked {
    pub fn new(caller: &Caller, session_id: String, run_id: String, background: bool) -> Self {
        Self {
            tenant: caller.tenant.clone(),
            session_id,
            run_id,
            request_id: caller.request_id.clone(),
            background,
            started_at: now(),
            progress: Mutex::new(Progress { state: Some(RunState::Running), ..Progress::default() }),
            changed: tokio::sync::watch::Sender::new(0),
            abort: Mutex::new(None),
            interrupt_asked: AtomicBool::new(false),
            settled: AtomicBool::new(false),
        }
    }

    /// A run read back from its record: it does not change any more.
    pub fn from_stored(stored: StoredRun) -> Self {
        let StoredRun { tenant, request_id, status, events, error_status } = stored;
        let event_bytes = events.iter().map(event_size).sum();
        let error = status.error.clone().map(|e| (error_status.unwrap_or(500), e));
        Self {
            tenant,
            session_id: status.session_id,
            run_id: status.run_id,
            request_id,
            background: true,
            started_at: status.started_at,
            progress: Mutex::new(Progress {
                state: Some(status.state),
                ended_at: status.ended_at,
                dropped: status.events.saturating_sub(events.len() as u64),
                events,
                event_bytes,
                report: status.report,
                error,
            }),
            changed: tokio::sync::watch::Sender::new(0),
            abort: Mutex::new(None),
            interrupt_asked: AtomicBool::new(false),
            settled: AtomicBool::new(true),
        }
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn background(&self) -> bool {
        self.background
    }

    pub fn state(&self) -> RunState {
        self.progress().state.unwrap_or(RunState::Running)
    }

    /// What stops the run's task before it reached its session.
    pub fn set_abort(&self, handle: Option<AbortHandle>) {
        *self.abort.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = handle;
    }

    pub fn abort(&self) {
        if let Some(handle) = self.abort.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            handle.abort();
        }
    }

    /// Whether it ended and its record (if it keeps one) is written.
    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    pub fn mark_settled(&self) {
        self.settled.store(true, Ordering::Release);
    }

    pub fn mark_interrupt_asked(&self) {
        self.interrupt_asked.store(true, Ordering::Relaxed);
    }

    /// Keeps one live event and tells the followers.
    pub fn push_event(&self, event: LiveEvent) {
        {
            let mut progress = self.progress();
            let size = event_size(&event);
            if progress.event_bytes + size > MAX_EVENT_BYTES {
                progress.dropped += 1;
                return;
            }
            progress.event_bytes += size;
            progress.events.push(event);
        }
        self.changed.send_modify(|v| *v += 1);
    }

    /// Keeps the run's outcome and tells the followers.
    pub fn finish(&self, outcome: &Result<RunReport, ServiceError>) {
        let interrupted = self.interrupt_asked.load(Ordering::Relaxed);
        {
            let mut progress = self.progress();
            let (state, report, error) = match outcome {
                Ok(report) if interrupted => (RunState::Interrupted, Some(report.clone()), None),
                Ok(report) => (RunState::Done, Some(report.clone()), None),
                Err(_) if interrupted => {
                    let error = ErrorBody { code: "interrupted".into(), message: "the run was stopped before it started".into(), request_id: self.request_id.clone() };
                    (RunState::Interrupted, None, Some((409, error)))
                }
                Err(e) => {
                    let error = ErrorBody { code: e.code().into(), message: e.to_string(), request_id: self.request_id.clone() };
                    (RunState::Failed, None, Some((e.status().as_u16(), error)))
                }
            };
            progress.state = Some(state);
            progress.ended_at = Some(now());
            progress.report = report;
            progress.error = error;
        }
        self.changed.send_modify(|v| *v += 1);
    }

    /// What a follower that has events up to `after` reads next.
    pub fn follow(&self, after: u64) -> Followed {
        let progress = self.progress();
        let kept = progress.events.len() as u64;
        if after < kept {
            let events = progress.events.iter().enumerate().skip(after as usize).map(|(i, e)| (i as u64 + 1, e.clone())).collect();
            return Followed::Events(events);
        }
        let last = kept + 1;
        match (progress.state, &progress.report, &progress.error) {
            (Some(RunState::Running) | None, _, _) => Followed::Nothing,
            (_, Some(report), _) => Followed::End(last, Ok(report.clone())),
            (_, None, Some(error)) => Followed::End(last, Err(error.clone())),
            (_, None, None) => Followed::End(last, Err((500, ErrorBody { code: "internal".into(), message: "the run ended without an outcome".into(), request_id: self.request_id.clone() }))),
        }
    }

    /// A receiver told of every change, for a follower to wait on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Its status now.
    pub fn status(&self) -> RunStatus {
        let progress = self.progress();
        RunStatus {
            run_id: self.run_id.clone(),
            session_id: self.session_id.clone(),
            state: progress.state.unwrap_or(RunState::Running),
            started_at: self.started_at.clone(),
            ended_at: progress.ended_at.clone(),
            events: progress.events.len() as u64 + progress.dropped,
            report: progress.report.clone(),
            error: progress.error.as_ref().map(|(_, e)| e.clone()),
        }
    }

    /// The run as it is written to disk.
    pub fn stored(&self) -> StoredRun {
        let status = self.status();
        let progress = self.progress();
        StoredRun {
            tenant: self.tenant.clone(),
            request_id: self.request_id.clone(),
            status,
            events: progress.events.clone(),
            error_status: progress.error.as_ref().map(|(s, _)| *s),
        }
    }
}

fn event_size(event: &LiveEvent) -> usize {
    match event {
        LiveEvent::Stdout(text) | LiveEvent::Stderr(text) => text.len(),
        // A result's size, roughly: its data is what weighs.
        LiveEvent::Result(result) => serde_json::to_vec(result).map_or(0, |v| v.len()),
    }
}

/// Now, in RFC 3339.
fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
