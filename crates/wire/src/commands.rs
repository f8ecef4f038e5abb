//! A command line run in a session's shell, and what it left: the body of
//! `/v1/sessions/{id}/commands`, MCP's `run_command`, and what E2B's
//! `commands.run` is mapped to.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{ErrorBody, ExecError, RunState};

/// One command line for a session's shell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandRequest {
    /// The command line, as `bash -c` takes it: pipes, redirections,
    /// `&&`/`||`/`;`, quoting and variables.
    pub command: String,
    /// The working directory (default: the session's home, `/home/user` in
    /// a sandbox, `/mnt/data` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Variables added to (or replacing) the command's default environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Wall-clock limit in milliseconds, at most the operator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Everything the command reads on its standard input (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    /// Who runs it: `user` (the default) or `root`; only `$USER` and
    /// `$HOME` differ, since the tree has one owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// What a command line left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandReport {
    pub session_id: String,
    /// As bash gives it: 0 on success, 127 for a command not found, 124
    /// when the time limit stopped it, 130 when it was interrupted, 137
    /// when another limit (fuel, memory) stopped it.
    pub exit_code: i32,
    /// Its standard output; bytes that are not UTF-8 are replaced with U+FFFD.
    pub stdout: String,
    pub stdout_truncated: bool,
    pub stderr: String,
    pub stderr_truncated: bool,
    /// The limit or interrupt that stopped it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExecError>,
    /// Wall-clock time it took, in microseconds.
    pub duration_us: u64,
}

/// What `GET /v1/sessions/{id}/commands/{command_id}` answers (and a
/// background command's 202): a command tracked by its id, as a run is.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandStatus {
    pub command_id: String,
    pub session_id: String,
    /// `running`, `done` (it ended by itself, whatever its exit code),
    /// `interrupted` (stopped) or `failed` (the service could not run it).
    pub state: RunState,
    /// The command line.
    pub command: String,
    /// When it was started (RFC 3339).
    pub started_at: String,
    /// When it ended (RFC 3339), once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Output events kept so far (the SSE stream's ids are 1 to this).
    pub events: u64,
    /// Its report, once it ended: the same a foreground command answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<CommandReport>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}
