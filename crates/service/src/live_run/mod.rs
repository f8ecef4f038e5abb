//! One run with its output live, for every transport that streams one
//! (server-sent events, E2B's NDJSON, Jupyter's iopub, MCP progress): the
//! run on a task of its own with a live sink (the facade starts it:
//! `InterpreterService::start_live`), an early failure told apart from a run
//! under way ([`ended_early`], the one early-failure window), its live events
//! with the text pieces already waiting merged ([`merged`]), then its
//! outcome. Each transport only frames what it is given; output that goes
//! out a line at a time is cut by [`lines`].

mod lines;
mod merged;

use std::future::Future;
use std::time::Duration;

use anypath_interpreter::RunReport;
use anypath_sandbox::LiveSink;
use anypath_wire::LiveEvent;
use tokio::task::JoinHandle;

pub(crate) use self::lines::{Lined, Lines};
pub(crate) use self::merged::LiveEvents;
use crate::service_error::ServiceError;

/// How long a run may take to fail before an answer commits to a stream: a
/// refusal or a bad request within it is a plain error with its status.
const EARLY_FAILURE_WINDOW: Duration = Duration::from_millis(200);

/// How long [`ended_early`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// The whole window, unless the run ends first.
    Whole,
    /// Until the run's first live event too: a run that shows output was
    /// admitted, and its output goes out at once.
    UntilFirstEvent,
    /// A moment only ([`BRIEF_WINDOW`]): long enough for a refusal or a bad
    /// request, which come at once, not for a run that waits its turn (a
    /// background run, answered as soon as it is on its way).
    Brief,
}

/// How long [`Window::Brief`] waits.
const BRIEF_WINDOW: Duration = Duration::from_millis(25);

impl Window {
    /// How long the window lasts at most.
    fn length(self) -> Duration {
        if self == Window::Brief { BRIEF_WINDOW } else { EARLY_FAILURE_WINDOW }
    }
}

/// Waits out the early-failure window of a run just started: its end
/// (`ended`) when it comes within the window, else None once the window is
/// over or, with [`Window::UntilFirstEvent`], once the run shows a first
/// sign of life (`shown` answers true; false when the run went quiet for
/// good, so its end is near and waited for). Every transport that streams a
/// run asks this one question before it commits to a stream.
pub(crate) async fn ended_early<T>(window: Window, ended: impl Future<Output = T>, shown: impl Future<Output = bool>) -> Option<T> {
    tokio::pin!(ended);
    let alive = tokio::select! {
        alive = shown, if window == Window::UntilFirstEvent => alive,
        end = &mut ended => return Some(end),
        () = tokio::time::sleep(window.length()) => return None,
    };
    if alive { None } else { Some(ended.await) }
}

/// A run going on (or just ended) with its live events.
pub(crate) struct LiveRun {
    events: LiveEvents,
    outcome: Outcome,
}

/// Where the run's outcome is.
enum Outcome {
    /// On the run's task.
    Running(JoinHandle<Result<RunReport, ServiceError>>),
    /// Already known: the run ended within the early window (boxed: a
    /// report is large, a task handle small).
    Ended(Box<Result<RunReport, ServiceError>>),
    /// Handed out.
    Taken,
}

impl LiveRun {
    /// `run` on a task of its own, handed the sink of its live events when
    /// `live` (without, the run has no events: its report alone holds its
    /// output). It goes on when the client that asked goes away.
    pub fn spawn<F>(live: bool, run: impl FnOnce(Option<LiveSink>) -> F) -> Self
    where
        F: Future<Output = Result<RunReport, ServiceError>> + Send + 'static,
    {
        let (sink, events) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(run(live.then_some(sink)));
        Self { events: LiveEvents::new(events), outcome: Outcome::Running(task) }
    }

    /// The run, unless it failed within [`EARLY_FAILURE_WINDOW`] (refused,
    /// busy, a bad request): then its error, for a plain error answer. A run
    /// that succeeded within the window keeps its events and report.
    pub async fn unless_failed_early(mut self, window: Window) -> Result<Self, ServiceError> {
        let Outcome::Running(task) = &mut self.outcome else { return Ok(self) };
        let events = &mut self.events;
        let first = async {
            // None: the run let go of its sink without a word, it has ended.
            events.take_first().await.is_some()
        };
        let finished = ended_early(window, &mut *task, first).await;
        match finished {
            None => Ok(self),
            Some(joined) => {
                let report = joined.unwrap_or_else(|join| Err(stopped(join)))?;
                self.outcome = Outcome::Ended(Box::new(Ok(report)));
                Ok(self)
            }
        }
    }

    /// The run's next live event, its text merged with the pieces of the
    /// same stream already waiting; None once the run has ended and every
    /// event was read.
    pub async fn next_event(&mut self) -> Option<LiveEvent> {
        self.events.next().await
    }

    /// How the run ended, once its events are read: its report or its
    /// error. Asked again, the outcome is lost.
    pub async fn outcome(&mut self) -> Result<RunReport, ServiceError> {
        if let Outcome::Running(task) = &mut self.outcome {
            // Kept until the task is joined: a caller may stop waiting and ask again.
            let ended = task.await.unwrap_or_else(|join| Err(stopped(join)));
            self.outcome = Outcome::Ended(Box::new(ended));
        }
        match std::mem::replace(&mut self.outcome, Outcome::Taken) {
            Outcome::Ended(outcome) => *outcome,
            _ => Err(ServiceError::Internal("the run's outcome was lost".into())),
        }
    }

    /// What cancels the run's task (a run still waiting for its session or
    /// a slot leaves without running), while it is under way.
    pub fn abort_handle(&self) -> Option<tokio::task::AbortHandle> {
        match &self.outcome {
            Outcome::Running(task) => Some(task.abort_handle()),
            _ => None,
        }
    }
}

/// The error of a run whose task did not finish (it panicked or was cancelled).
fn stopped(join: tokio::task::JoinError) -> ServiceError {
    ServiceError::Internal(format!("the run stopped: {join}"))
}
