//! Runs that outlive their caller: how a client asks for one (the fields of
//! the run body beside [`crate::RunRequest`]'s) and what it is told of it.

use serde::{Deserialize, Serialize};

use crate::{ErrorBody, RunReport};

/// How a run is carried out, beside what it runs: the same body as
/// `POST /v1/sessions/{id}/run`, read a second time for these fields.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunControl {
    /// Answer at once (202) with the run's id; the run goes on, its state
    /// and report at `GET /v1/sessions/{id}/runs/{run_id}`.
    #[serde(default)]
    pub background: bool,
    /// Where the report is sent when the run ends (`POST`, signed), on a
    /// host the operator allows (`--callback-allow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// A foreground run whose client goes away is stopped, instead of
    /// going on to its end with its report kept under its id.
    #[serde(default)]
    pub cancel_on_disconnect: bool,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for its session, or running.
    Running,
    /// It ended with a report (the code's own exception is in the report).
    Done,
    /// It was stopped (`DELETE`, its client left with
    /// `cancel_on_disconnect`, or the service stopped before it ended).
    Interrupted,
    /// The service could not run it: the error says why.
    Failed,
    /// The process running it ended without a graceful stop (a kill, a
    /// crash): its outcome is unknown.
    Lost,
}

impl RunState {
    /// Whether the run has ended, one way or another.
    pub fn is_final(self) -> bool {
        self != Self::Running
    }
}

/// What `GET /v1/sessions/{id}/runs/{run_id}` answers (and a background
/// run's 202, and the callback's body).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunStatus {
    pub run_id: String,
    pub session_id: String,
    pub state: RunState,
    /// When it was asked for (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339), once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Events kept so far (the SSE stream's ids are 1 to this).
    pub events: u64,
    /// Its report, once done: the same a foreground run answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<RunReport>,
    /// Why it failed, was interrupted or lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}
