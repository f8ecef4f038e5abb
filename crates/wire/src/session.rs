//! The code interpreter's session API (`/v1/sessions/...` on the sandbox
//! service, and the MCP tools over the same service): what a client asks and
//! what it is answered. The host writes these; the agent component and other
//! clients read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{ExecError, LimitOverrides, Metrics, Output, Runtime};

/// `POST /v1/sessions`: a session to open (or find as it is).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenSessionRequest {
    /// The session's name, chosen by the client.
    pub session_id: String,
    /// Idle time after which it is removed (the server's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
    /// The runtime, when the call creates the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// A snapshot (its id or name) the new session starts from: its files
    /// and Python state. The session must not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_snapshot: Option<String>,
}

/// `POST /v1/sessions/{id}/files`: a file to write, as base64.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadRequest {
    /// The file's name in the session directory.
    pub filename: String,
    /// The file's bytes, base64 (standard alphabet).
    pub content_base64: String,
    /// Replace the file when it exists.
    #[serde(default)]
    pub overwrite: bool,
    /// The runtime, when the call creates the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
}

/// `POST /v1/sessions/{id}/files/from-artifact` (MCP `load_artifact`): an
/// earlier artifact of the tenant, back into a session's files.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadArtifactRequest {
    /// The artifact's id, as a run's report or the artifact list gave it.
    pub artifact_id: String,
    /// The file's name in the session (default: the name it had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Replace a file of that name.
    #[serde(default)]
    pub overwrite: bool,
    /// The runtime, when the call creates the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
}

/// `GET /readyz` of the sandbox service: whether it can serve, and each
/// check behind the answer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: String,
    pub ready: bool,
    pub checks: Vec<ReadinessCheck>,
}

/// One readiness check.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReadinessCheck {
    pub name: String,
    pub ok: bool,
    /// What was found (when it passed), or what is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ReadinessCheck {
    /// A check named `name` from its outcome; `found` describes a pass.
    pub fn of(name: &str, outcome: Result<(), String>, found: Option<String>) -> Self {
        match outcome {
            Ok(()) => Self { name: name.to_owned(), ok: true, detail: found },
            Err(problem) => Self { name: name.to_owned(), ok: false, detail: Some(problem) },
        }
    }
}

impl Readiness {
    /// The answer of `checks`: ready when every one passed.
    pub fn of(checks: Vec<ReadinessCheck>) -> Self {
        let ready = checks.iter().all(|c| c.ok);
        Self { status: if ready { "ready" } else { "not_ready" }.to_owned(), ready, checks }
    }
}

/// What a client sees of a session.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionInfo {
    pub session_id: String,
    pub ttl_seconds: u64,
    /// Seconds until the session expires if it stays idle.
    pub expires_in_seconds: u64,
    /// Whether a live instance holds Python state now.
    pub live: bool,
    /// Whether the session's state is parked in a saved image (restored on its next run).
    #[serde(default)]
    pub hibernated: bool,
    /// The Python the session runs.
    pub runtime: Runtime,
    /// Linear memory its live instance holds, in bytes (0 when none is live).
    #[serde(default)]
    pub memory_bytes: u64,
}

/// One file of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileInfo {
    /// As the code sees it: `/mnt/data/<name>`.
    pub path: String,
    /// Relative to the session directory.
    pub filename: String,
    pub size_bytes: u64,
}

/// The files of a session.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileList {
    // Undocumented on purpose: a doc comment here would change the
    // published output schema of `list_files`.
    pub files: Vec<FileInfo>,
    /// The datasets the code reads at `/data/<name>` (read-only; not in `files`).
    #[serde(default)]
    pub datasets: Vec<crate::DatasetInfo>,
}

/// One run asked of a session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunRequest {
    pub code: String,
    /// Environment variables the code sees; the host's never reach it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Lower limits for this run.
    #[serde(default, skip_serializing_if = "LimitOverrides::is_empty")]
    pub limits: LimitOverrides,
    /// The runtime, when this run creates the session (the server's default
    /// otherwise); a session keeps the runtime it was created with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// The forms figures are rendered in (`png`, the default, and `svg`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figure_formats: Vec<FigureFormat>,
    /// Also give results' data as JSON: a DataFrame's columns
    /// (`application/vnd.anypath.columns+json`) and what a figure plots
    /// (`application/vnd.anypath.chart+json`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub result_data: bool,
    /// The run's id (`[A-Za-z0-9_-]{1,64}`), when the client chose one: a
    /// client that lost its connection finds the run by it. A new one otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// A form a matplotlib figure is rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FigureFormat {
    /// `image/png`, base64.
    Png,
    /// `image/svg+xml`, as text.
    Svg,
}

impl FigureFormat {
    /// The name the cell code knows it by.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Svg => "svg",
        }
    }
}

impl RunRequest {
    /// A run of `code` with no environment, the session's limits and runtime.
    pub fn code(code: impl Into<String>) -> Self {
        Self { code: code.into(), ..Self::default() }
    }
}

/// What one run produced.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellReport {
    /// 0 when the code ran to its end.
    pub exit_code: i32,
    #[serde(flatten)]
    pub output: Output,
    /// What the run showed, in order, as a notebook shows it: the last
    /// expression's value, each `display()` call, every figure.
    #[serde(default)]
    pub results: Vec<CellResult>,
    /// The code's own frames, when it raised.
    pub traceback: Option<String>,
    /// Why the run failed: `exception` or a limit (`fuel_exhausted`, ...).
    pub error: Option<ExecError>,
    /// The in-memory state is not what earlier runs left: this run started a
    /// fresh instance after a trap, or trapped and lost it.
    pub state_reset: bool,
    /// A write or file creation was refused by the session's quota during
    /// this run (the code may have seen it as a plain EIO mid-write).
    pub quota_exceeded: bool,
    /// Where the run's in-memory state came from.
    #[serde(default)]
    pub state: StateOrigin,
    /// What the run should know about its state: why it was lost, or what
    /// resuming it from a saved image changed (open files closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_note: Option<String>,
    pub metrics: Metrics,
}

/// One thing a run showed, like a notebook's `execute_result` or
/// `display_data`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellResult {
    /// `image` when the bundle holds a picture, `text` otherwise.
    #[serde(rename = "type")]
    pub kind: ResultKind,
    /// What made it: the last expression, `display()`, or a figure.
    pub origin: ResultOrigin,
    /// The `text/plain` form (`repr`), capped like stdout.
    pub text: String,
    /// MIME type to data: `text/plain` always; `text/html`,
    /// `text/markdown`, `image/svg+xml` as text; `image/png` as base64.
    pub mime: BTreeMap<String, String>,
    /// A form was cut or left out to stay within the run's caps.
    pub truncated: bool,
    /// What the object's `repr` (or a `_repr_*_` method, or rendering the
    /// figure) raised; the result holds what could be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CellResult {
    /// A result from the MIME bundle the cell code made.
    pub fn from_bundle(origin: ResultOrigin, mime: BTreeMap<String, String>, truncated: bool, error: Option<String>) -> Self {
        let kind = if mime.keys().any(|kind| kind.starts_with("image/")) { ResultKind::Image } else { ResultKind::Text };
        let text = mime.get("text/plain").cloned().unwrap_or_default();
        Self { kind, origin, text, mime, truncated, error }
    }
}

/// Whether a result is a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    Text,
    Image,
}

/// What made a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultOrigin {
    /// The value of the cell's last expression (not `None`, no trailing `;`).
    Value,
    /// A `display()` call.
    Display,
    /// A matplotlib figure: `plt.show()`, or left open at the cell's end.
    Figure,
}

/// What a run sends while it goes on (`Accept: text/event-stream`, MCP
/// progress): output as it is written and results as they are shown. The
/// run's report then holds all of it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveEvent {
    /// Text the code wrote to stdout (within its cap).
    Stdout(String),
    /// Text the code wrote to stderr (within its cap).
    Stderr(String),
    /// A result, as the report will list it.
    Result(CellResult),
}

/// Where a run's in-memory state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateOrigin {
    /// A new interpreter: the session's first run, or its state was lost.
    #[default]
    Fresh,
    /// The live instance the previous run left.
    Kept,
    /// The session's saved state image, restored into a new instance.
    Resumed,
}

/// The body of `POST /v1/sessions/{id}/fork`: one child named
/// `session_id` (answered with its [`SessionInfo`]), or `count` children
/// in one call (answered with [`ForkedSessions`]), named `{session_id}-1`
/// to `{session_id}-{count}`, or `fork-{random}-1` and on without a name.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// The new session's id (with `count`: the children's common prefix);
    /// no session may have it yet.
    #[serde(default)]
    pub session_id: Option<String>,
    /// How many children to make, 1 to [`MAX_FORKS_PER_CALL`]: all of them
    /// or none (a child that cannot be made removes those made before it).
    #[serde(default)]
    pub count: Option<u32>,
}

/// The most children one fork call makes.
pub const MAX_FORKS_PER_CALL: u32 = 100;

/// The answer to a fork with `count`: the children, in the order of their names.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForkedSessions {
    pub sessions: Vec<SessionInfo>,
}

/// What a run reports.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunReport {
    pub run_id: String,
    pub session_id: String,
    /// The Python the session runs.
    pub runtime: Runtime,
    #[serde(flatten)]
    pub cell: CellReport,
    /// Files the run created or changed, kept as artifacts (none after a failed run).
    pub artifacts: Vec<Artifact>,
    /// Changed files that could not be kept (tenant quota, storage failure).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifact_errors: Vec<ArtifactFailure>,
}

/// A changed file that was not kept as an artifact, and why.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactFailure {
    pub filename: String,
    pub error: String,
}

/// What a client sees of an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    /// Stable id, the handle of its download link.
    pub id: String,
    /// As the code saw it: `/mnt/data/<filename>`.
    pub path: String,
    /// Relative to the session directory.
    pub filename: String,
    pub size_bytes: u64,
    pub mime_type: String,
    /// Hex SHA-256 of the bytes.
    pub sha256: String,
    pub session_id: String,
    pub created_unix: u64,
    /// When the artifact and its links stop working.
    pub expires_unix: u64,
    /// Signed absolute URL: a plain GET fetches the bytes until `expires_unix`.
    pub download_url: String,
    /// The same bytes under `/files/{session_id}/{filename}`, signed the same way.
    pub file_url: String,
}

/// The artifacts of a session, newest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArtifactList {
    /// Each artifact with its signed links.
    pub artifacts: Vec<Artifact>,
}

/// An artifact's bytes, read inline.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactContent {
    pub path: String,
    pub mime_type: String,
    pub size_bytes: u64,
    pub sha256: String,
    pub content_base64: String,
}

/// A closed session.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Closed {
    /// Always `closed`.
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_report_reads_back_as_written() {
        let report = RunReport {
            run_id: "r1".into(),
            session_id: "s1".into(),
            runtime: Runtime::PythonData,
            cell: CellReport {
                exit_code: 1,
                output: Output { stdout: "out".into(), ..Output::default() },
                results: vec![],
                traceback: Some("Traceback".into()),
                error: Some(ExecError::Exception { type_name: "ValueError".into(), message: "m".into(), traceback: "Traceback".into() }),
                state_reset: false,
                quota_exceeded: true,
                state: StateOrigin::Resumed,
                state_note: None,
                metrics: Metrics::default(),
            },
            artifacts: vec![],
            artifact_errors: vec![],
        };
        let json = serde_json::to_value(&report).expect("serialises");
        // The cell's fields sit at the top level, as clients have always read them.
        assert_eq!((&json["stdout"], &json["exit_code"], &json["runtime"]), (&"out".into(), &1.into(), &"python-data".into()));
        assert_eq!(json["error"]["kind"], "exception");
        assert_eq!(json["state"], "resumed");
        assert!(json.get("artifact_errors").is_none(), "empty failures are left out");
        let back: RunReport = serde_json::from_value(json).expect("parses");
        assert_eq!(back.cell.error, report.cell.error);
        assert!(back.cell.quota_exceeded);
    }

    #[test]
    fn a_plain_run_request_is_just_its_code() {
        let json = serde_json::to_value(RunRequest::code("print(1)")).expect("serialises");
        assert_eq!(json, serde_json::json!({"code": "print(1)"}));
        let unknown = serde_json::from_str::<OpenSessionRequest>(r#"{"session_id": "a", "ttl": 5}"#);
        assert!(unknown.is_err(), "an unknown field is refused");
    }
}
