//! The MCP tools: one per code-interpreter call, each an adapter over
//! [`InterpreterService`] (extract the arguments, call, map the answer), so
//! they have the same checks, quotas, admission and log as the HTTP API.
//!
//! Every failure a caller can cause (bad arguments, a bad filename, an
//! unknown or busy session, a quota) is a [`ToolError`] the model reads,
//! never a protocol error: a result marked `isError` whose text is the JSON
//! `{code, message}`, the code being the HTTP envelope's stable one.

use std::collections::BTreeMap;
use std::sync::Arc;

use anypath_interpreter::{ArtifactContent, FileInfo, LoadArtifactRequest, RunReport, RunRequest, SessionInfo, artifacts, datasets, files, runs, sessions, snapshots};
use anypath_sandbox::{LimitOverrides, Runtime};
use anypath_wire::{DatasetInfo, FigureFormat, ForkedSessions, RunControl, RunStatus, SnapshotInfo, SnapshotList};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;

use super::arguments::{Arguments, input_schema};
use super::descriptions;
use super::tool_error::ToolError;
use crate::interpreter_service::{Caller, Closed, Content, FileList, InterpreterService, ServiceError, Upload};
use crate::live_run::LiveEvents;

/// The code interpreter as an MCP server.
#[derive(Clone)]
pub struct CodeInterpreterTools {
    service: InterpreterService,
    /// The caller of a one-caller transport (stdio). Over HTTP each request
    /// brings its own, resolved by the authentication layer.
    sole_caller: Option<Caller>,
    tool_router: ToolRouter<Self>,
    /// What the server tells a model before it calls anything.
    instructions: Arc<str>,
}

/// `upload_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadFile {
    /// The session to write into (created when new): 1-64 of A-Z a-z 0-9 - _.
    pub session_id: String,
    /// A plain file name (no directories), or the same under /mnt/data/.
    pub filename: String,
    /// The file's bytes, base64-encoded (standard alphabet).
    pub content_base64: String,
    /// Replace the file when it exists; otherwise an existing file is an error.
    #[serde(default)]
    pub overwrite: bool,
    /// The runtime when this call creates the session: `python`,
    /// `python-data` (pandas, matplotlib, ...) or `javascript` (the code is
    /// then JavaScript, run by QuickJS); the server's default otherwise.
    #[serde(default)]
    pub runtime: Option<Runtime>,
}

/// `run_python`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunPython {
    /// The session to run in (created when new).
    pub session_id: String,
    /// Python 3 source, run as a notebook cell: what it prints, and the value of a last
    /// expression (a trailing `;` hides it), display(...) calls and matplotlib figures as results.
    pub code: String,
    /// Lower limits for this run only; a limit can never be raised.
    #[serde(default)]
    pub limits: Option<LimitOverrides>,
    /// Environment variables the code sees (os.environ); nothing of the host's.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// The runtime when this call creates the session: `python`,
    /// `python-data` (pandas, matplotlib, ...) or `javascript` (the code is
    /// then JavaScript, run by QuickJS); the server's default otherwise.
    #[serde(default)]
    pub runtime: Option<Runtime>,
    /// The forms figures come back in: `png` (the default) and/or `svg`.
    #[serde(default)]
    pub figure_formats: Option<Vec<FigureFormat>>,
}

/// `start_run`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// The session to run in (created when new).
    pub session_id: String,
    /// Python 3 source, run as a notebook cell.
    pub code: String,
    /// The run's id (`[A-Za-z0-9_-]{1,64}`), to find it by; a new one otherwise.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Lower limits for this run only; a limit can never be raised.
    #[serde(default)]
    pub limits: Option<LimitOverrides>,
    /// Environment variables the code sees (os.environ); nothing of the host's.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// The runtime when this call creates the session.
    #[serde(default)]
    pub runtime: Option<Runtime>,
    /// Where the run's status and report are POSTed when it ends (signed),
    /// on a host the operator allows.
    #[serde(default)]
    pub callback_url: Option<String>,
}

/// `run_command`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// The session whose files the command works on (created when new).
    pub session_id: String,
    /// A bash command line: pipes, redirections, `&&`/`||`/`;`, quoting,
    /// variables; `python script.py` runs the session's Python.
    pub command: String,
    /// The working directory (default: the session's, /mnt/data).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Environment variables added for the command; nothing of the host's.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Wall-clock limit in milliseconds, at most the server's.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Text given to the command on its standard input.
    #[serde(default)]
    pub stdin: Option<String>,
}

impl RunCommandArgs {
    /// The session and the command request the arguments name.
    fn into_request(self) -> (String, anypath_wire::CommandRequest) {
        let request = anypath_wire::CommandRequest {
            command: self.command,
            cwd: self.cwd,
            env: self.env.unwrap_or_default(),
            timeout_ms: self.timeout_ms,
            stdin: self.stdin,
            user: None,
        };
        (self.session_id, request)
    }
}

/// `get_run`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunOnly {
    /// The session the run is in.
    pub session_id: String,
    /// The run's id, as start_run (or run_python's report) gave it.
    pub run_id: String,
}

/// `get_command`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CommandOnly {
    /// The session the command is in.
    pub session_id: String,
    /// The command's id, as start_command gave it.
    pub command_id: String,
}

/// `read_artifact`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArtifact {
    /// The session holding the file.
    pub session_id: String,
    /// The file, as /mnt/data/<name> or relative to /mnt/data (sub/dir/name is allowed).
    pub path: String,
}

/// Arguments naming only a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionOnly {
    /// The session.
    pub session_id: String,
}

/// Arguments of `fork_session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkArguments {
    /// The session to copy.
    pub session_id: String,
    /// The new session's id (it must not exist yet).
    pub new_session_id: String,
}

/// Arguments of `fork_session_many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkManyArguments {
    /// The session to copy.
    pub session_id: String,
    /// How many new sessions to make, 1 to 100.
    pub count: u32,
    /// The new sessions' common prefix: they are named `{prefix}-1` to
    /// `{prefix}-{count}` (none of them may exist yet). Made up when absent.
    #[serde(default)]
    pub prefix: Option<String>,
}

/// `load_artifact`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadArtifact {
    /// The session to put the file into (created when new).
    pub session_id: String,
    /// The artifact's id, from an earlier run's artifacts (any session of yours, also a closed one).
    pub artifact_id: String,
    /// Its name in /mnt/data (default: the name it had).
    #[serde(default)]
    pub filename: Option<String>,
    /// Replace a file of that name.
    #[serde(default)]
    pub overwrite: bool,
    /// The runtime when this call creates the session: `python` or `python-data`.
    #[serde(default)]
    pub runtime: Option<Runtime>,
}

/// `attach_dataset`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachDataset {
    /// The session to show it in (created when new).
    pub session_id: String,
    /// The dataset's name, as it was staged (`PUT /v1/datasets/{name}`).
    pub name: String,
}

/// `snapshot_session`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArguments {
    /// The session to keep.
    pub session_id: String,
    /// A name to find the snapshot by besides its id (a later snapshot given the same name takes it over).
    #[serde(default)]
    pub name: Option<String>,
}

/// `list_snapshots`' arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListSnapshotArguments {
    /// Only the snapshots taken from this session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Only the snapshot with this name.
    #[serde(default)]
    pub name: Option<String>,
}

/// `start_from_snapshot`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArguments {
    /// The snapshot's id or name.
    pub snapshot: String,
    /// The new session's id (it must not exist yet).
    pub new_session_id: String,
}

/// Arguments naming only a snapshot.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotOnly {
    /// The snapshot's id or name.
    pub snapshot: String,
}

/// `delete_snapshot`'s answer.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub struct Deleted {
    /// Whether there was such a snapshot.
    pub deleted: bool,
}

#[tool_router]
impl CodeInterpreterTools {
    /// Tools for HTTP callers: each request's caller is the [`Caller`] the
    /// authentication layer resolved and put on it.
    pub(crate) fn over_http(service: InterpreterService) -> Self {
        Self::new(service, None)
    }

    /// Tools for the single caller of a stdio server.
    pub(crate) fn for_sole_caller(service: InterpreterService, caller: Caller) -> Self {
        Self::new(service, Some(caller))
    }

    /// The tools, described with the limits the service runs with.
    fn new(service: InterpreterService, sole_caller: Option<Caller>) -> Self {
        let limits = service.limits();
        let mut tool_router = Self::tool_router();
        descriptions::describe(&mut tool_router, &limits);
        let instructions = descriptions::instructions(&limits).into();
        Self { service, sole_caller, tool_router, instructions }
    }

    /// Writes a file into a session; its description, stating the upload
    /// quota, is set from the running limits (`descriptions`).
    #[tool(
        input_schema = input_schema::<UploadFile>(),
        annotations(title = "Upload a file", read_only_hint = false, destructive_hint = false, open_world_hint = false)
    )]
    async fn upload_file(&self, ctx: RequestContext<RoleServer>, args: Arguments<UploadFile>) -> Result<Json<FileInfo>, ToolError> {
        let UploadFile { session_id, filename, content_base64, overwrite, runtime } = args.0?;
        let caller = self.caller(&ctx)?;
        let upload = Upload { session_id, filename, content: Content::Base64(content_base64), overwrite, runtime };
        Ok(Json(self.service.call(&caller, upload).await?))
    }

    /// Runs code in a session; its description, stating each runtime's
    /// bounds, is set from the running limits (`descriptions`).
    ///
    /// When the client sent a progress token, output and results also
    /// arrive while the code runs, as progress notifications.
    #[tool(
        input_schema = input_schema::<RunPython>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<RunReport>(),
        annotations(title = "Run Python", read_only_hint = false, destructive_hint = false, open_world_hint = false)
    )]
    async fn run_python(&self, ctx: RequestContext<RoleServer>, args: Arguments<RunPython>) -> Result<CallToolResult, ToolError> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let request = RunRequest {
            code: args.code,
            env: args.env.unwrap_or_default(),
            limits: args.limits.unwrap_or_default(),
            runtime: args.runtime,
            figure_formats: args.figure_formats.unwrap_or_default(),
            result_data: false,
            run_id: None,
        };
        let report = match ctx.meta.get_progress_token() {
            None => self.service.call(&caller, runs::RunCode { session_id: args.session_id, request, live: None }).await?,
            Some(token) => {
                // The run goes on in this handler and the forwarding on a task of
                // its own, which ends once the run has let go of its sink and every
                // notification was handed to the transport; the answer waits for it.
                let (sink, events) = tokio::sync::mpsc::unbounded_channel();
                let forwarding = tokio::spawn(super::progress::forward(ctx.peer.clone(), token, LiveEvents::new(events)));
                let report = self.service.call(&caller, runs::RunCode { session_id: args.session_id, request, live: Some(sink) }).await;
                let _ = forwarding.await;
                report?
            }
        };
        super::progress::run_result(&report)
    }

    #[tool(
        description = "Start Python in the session in the background and return at once with the run's id and \
state: for work longer than a tool call should wait. Ask get_run with the id for its state (running, done, \
interrupted, failed, lost) and, once done, the report run_python gives. The run goes on whatever happens to this \
connection.",
        input_schema = input_schema::<StartRun>(),
        annotations(title = "Start a run", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn start_run(&self, ctx: RequestContext<RoleServer>, args: Arguments<StartRun>) -> Result<Json<RunStatus>, ToolError> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let request = RunRequest {
            code: args.code,
            env: args.env.unwrap_or_default(),
            limits: args.limits.unwrap_or_default(),
            runtime: args.runtime,
            run_id: args.run_id,
            ..RunRequest::default()
        };
        let control = RunControl { background: true, callback_url: args.callback_url, cancel_on_disconnect: false };
        let started = self.service.start_tracked(&caller, args.session_id, request, &control, true).await?;
        Ok(Json(started.tracked.status()))
    }

    #[tool(
        description = "Run a bash command line on the session's files: ls, cat, grep, sed, awk, find, sort, \
wc, head, tail, mkdir, cp, mv, rm, tar, base64, sha256sum, python script.py and the rest of a shell's \
everyday commands, with pipes, redirections, && and ||. It runs inside the sandbox (no network, nothing of \
the host), beside the session's Python: a file it writes is there for the next run_python, and the \
Python state is not touched. Answers with exit_code (0 is success, 127 a command not found, 124 a timeout), \
stdout and stderr.",
        input_schema = input_schema::<RunCommandArgs>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<anypath_wire::CommandReport>(),
        annotations(title = "Run a command", read_only_hint = false, destructive_hint = true, open_world_hint = false)
    )]
    async fn run_command(&self, ctx: RequestContext<RoleServer>, args: Arguments<RunCommandArgs>) -> Result<Json<anypath_wire::CommandReport>, ToolError> {
        let (session_id, request) = args.0?.into_request();
        let caller = self.caller(&ctx)?;
        let run = anypath_interpreter::commands::RunCommand { session_id, request, streams: Default::default() };
        Ok(Json(self.service.call(&caller, run).await?))
    }

    #[tool(
        description = "Start a bash command line on the session's files, as run_command does, and answer at \
once with its command_id and state: for a long command (a build, a test suite, a loop). get_command gives \
its state and, once it ended, its report.",
        input_schema = input_schema::<RunCommandArgs>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<anypath_wire::CommandStatus>(),
        annotations(title = "Start a command", read_only_hint = false, destructive_hint = true, open_world_hint = false)
    )]
    async fn start_command(&self, ctx: RequestContext<RoleServer>, args: Arguments<RunCommandArgs>) -> Result<Json<anypath_wire::CommandStatus>, ToolError> {
        let (session_id, request) = args.0?.into_request();
        let caller = self.caller(&ctx)?;
        let start = crate::tracked_commands::StartCommand { session_id, request, with_stdin: false, tag: None, config: serde_json::Value::Null };
        Ok(Json(self.service.commands().start(&self.service, caller, start).status()))
    }

    #[tool(
        description = "A command's state (running, done, interrupted, failed) by the id start_command gave and, \
once it ended, its report: the same run_command gives.",
        input_schema = input_schema::<CommandOnly>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<anypath_wire::CommandStatus>(),
        annotations(title = "Get a command", read_only_hint = true, open_world_hint = false)
    )]
    async fn get_command(&self, ctx: RequestContext<RoleServer>, args: Arguments<CommandOnly>) -> Result<Json<anypath_wire::CommandStatus>, ToolError> {
        let CommandOnly { session_id, command_id } = args.0?;
        let caller = self.caller(&ctx)?;
        let audit = crate::interpreter_service::Audit::of(&caller, anypath_interpreter::OperationKind::DescribeCommand).session(&session_id).subject(&command_id);
        let found = self.service.commands().named(&caller.tenant, &session_id, &command_id).map(|command| command.status());
        Ok(Json(audit.finish(found)?))
    }

    #[tool(
        description = "A run's state (running, done, interrupted, failed, lost) by its id and, once it is done, \
its report: the same run_python gives.",
        input_schema = input_schema::<RunOnly>(),
        annotations(title = "Get a run", read_only_hint = true, open_world_hint = false)
    )]
    async fn get_run(&self, ctx: RequestContext<RoleServer>, args: Arguments<RunOnly>) -> Result<Json<RunStatus>, ToolError> {
        let RunOnly { session_id, run_id } = args.0?;
        let caller = self.caller(&ctx)?;
        let audit = crate::interpreter_service::Audit::of(&caller, anypath_interpreter::OperationKind::DescribeRun).session(&session_id).subject(&run_id);
        let found = self.service.runs().find_in(&caller.tenant, &session_id, &run_id).await.map(|t| t.status());
        Ok(Json(audit.finish(found)?))
    }

    /// Reads a file back; its description, stating the read cap, is set
    /// from the running limits (`descriptions`).
    #[tool(
        input_schema = input_schema::<ReadArtifact>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<ArtifactContent>(),
        annotations(title = "Read a file", read_only_hint = true, open_world_hint = false)
    )]
    async fn read_artifact(&self, ctx: RequestContext<RoleServer>, args: Arguments<ReadArtifact>) -> Result<CallToolResult, ToolError> {
        let ReadArtifact { session_id, path } = args.0?;
        let caller = self.caller(&ctx)?;
        let content = self.service.call(&caller, artifacts::ReadArtifact { session_id, path }).await?;
        with_image(&content)
    }

    #[tool(
        description = "List every file in the session's /mnt/data (sub-directories included), with sizes, and the \
read-only datasets the session sees under /data (`datasets`: name, path, size and files).",
        input_schema = input_schema::<SessionOnly>(),
        annotations(title = "List files", read_only_hint = true, open_world_hint = false)
    )]
    async fn list_files(&self, ctx: RequestContext<RoleServer>, args: Arguments<SessionOnly>) -> Result<Json<FileList>, ToolError> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(self.service.call(&caller, files::ListFiles { session_id: args.session_id }).await?))
    }

    #[tool(
        description = "Fork the session: a new session with a copy of its files and of its live Python state \
(variables, functions, imports), so two approaches can be tried from one point. Changes in either never reach \
the other. Files the code held open are closed first.",
        input_schema = input_schema::<ForkArguments>(),
        annotations(title = "Fork a session", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn fork_session(&self, ctx: RequestContext<RoleServer>, args: Arguments<ForkArguments>) -> Result<Json<SessionInfo>, ToolError> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(self.service.call(&caller, sessions::ForkSession { session_id: args.session_id, new_session_id: args.new_session_id }).await?))
    }

    #[tool(
        description = "Fork the session into `count` new sessions in one call, each with a copy of its files and of \
its live Python state, to try several approaches from one point at once (best-of-N, tree search). They are named \
`{prefix}-1` to `{prefix}-{count}` and are all made or none is. Changes in any never reach the others.",
        input_schema = input_schema::<ForkManyArguments>(),
        annotations(title = "Fork a session into many", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn fork_session_many(&self, ctx: RequestContext<RoleServer>, args: Arguments<ForkManyArguments>) -> Result<Json<ForkedSessions>, ToolError> {
        let ForkManyArguments { session_id, count, prefix } = args.0?;
        let caller = self.caller(&ctx)?;
        let new_session_ids = sessions::child_names(prefix.as_deref(), count).map_err(ServiceError::from)?;
        let sessions = self.service.call(&caller, sessions::ForkSessions { session_id, new_session_ids }).await?;
        Ok(Json(ForkedSessions { sessions }))
    }

    #[tool(
        description = "Keep the session's files and live Python state as a snapshot, taken in about the time a \
fork takes; the session goes on unchanged. Start any number of new sessions from it with start_from_snapshot. \
Snapshots expire after a retention period and count toward a per-tenant quota.",
        input_schema = input_schema::<SnapshotArguments>(),
        annotations(title = "Snapshot a session", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn snapshot_session(&self, ctx: RequestContext<RoleServer>, args: Arguments<SnapshotArguments>) -> Result<Json<SnapshotInfo>, ToolError> {
        let SnapshotArguments { session_id, name } = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(self.service.call(&caller, snapshots::CreateSnapshot { session_id, name }).await?))
    }

    #[tool(
        description = "List your snapshots, newest first: all, those taken from one session, or the one with a name.",
        input_schema = input_schema::<ListSnapshotArguments>(),
        annotations(title = "List snapshots", read_only_hint = true, open_world_hint = false)
    )]
    async fn list_snapshots(&self, ctx: RequestContext<RoleServer>, args: Arguments<ListSnapshotArguments>) -> Result<Json<SnapshotList>, ToolError> {
        let ListSnapshotArguments { session_id, name } = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(SnapshotList { snapshots: self.service.call(&caller, snapshots::ListSnapshots { session_id, name }).await? }))
    }

    #[tool(
        description = "Start a new session from a snapshot (its id or name): the snapshot's files and live Python \
state, from which the new session goes its own way.",
        input_schema = input_schema::<StartArguments>(),
        annotations(title = "Start from a snapshot", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn start_from_snapshot(&self, ctx: RequestContext<RoleServer>, args: Arguments<StartArguments>) -> Result<Json<SessionInfo>, ToolError> {
        let StartArguments { snapshot, new_session_id } = args.0?;
        let caller = self.caller(&ctx)?;
        let start = snapshots::StartFromSnapshot { session_id: new_session_id, snapshot, ttl: None, runtime: None };
        Ok(Json(self.service.call(&caller, start).await?))
    }

    #[tool(
        description = "Delete a snapshot (its id or name); sessions started from it are not touched.",
        input_schema = input_schema::<SnapshotOnly>(),
        annotations(title = "Delete a snapshot", read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn delete_snapshot(&self, ctx: RequestContext<RoleServer>, args: Arguments<SnapshotOnly>) -> Result<Json<Deleted>, ToolError> {
        let SnapshotOnly { snapshot } = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(Deleted { deleted: self.service.call(&caller, snapshots::DeleteSnapshot { snapshot }).await? }))
    }

    #[tool(
        description = "Put an artifact an earlier run kept (its artifact_id, from any session of yours, also one \
closed since) into this session's /mnt/data, so yesterday's report can be revised today. The file counts toward \
the session's quota like an upload; an unknown or expired id is an error.",
        input_schema = input_schema::<LoadArtifact>(),
        annotations(title = "Load an artifact", read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn load_artifact(&self, ctx: RequestContext<RoleServer>, args: Arguments<LoadArtifact>) -> Result<Json<FileInfo>, ToolError> {
        let LoadArtifact { session_id, artifact_id, filename, overwrite, runtime } = args.0?;
        let caller = self.caller(&ctx)?;
        let request = LoadArtifactRequest { artifact_id, filename, overwrite, runtime };
        Ok(Json(self.service.call(&caller, artifacts::LoadArtifact { session_id, request }).await?))
    }

    #[tool(
        description = "Show a dataset staged for you (by name) in the session, read-only at /data/<name>: a file, \
or a directory of files when it was staged from a form. Nothing is copied and it counts toward no quota; code \
cannot change it (a write fails with EROFS). Datasets mounted for everyone are at /data already.",
        input_schema = input_schema::<AttachDataset>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<DatasetInfo>(),
        annotations(title = "Attach a dataset", read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn attach_dataset(&self, ctx: RequestContext<RoleServer>, args: Arguments<AttachDataset>) -> Result<Json<DatasetInfo>, ToolError> {
        let AttachDataset { session_id, name } = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(self.service.call(&caller, datasets::AttachDataset { session_id, name }).await?))
    }

    #[tool(
        description = "Close the session: its Python state and files are removed for good. \
Artifacts already returned keep working until their download links expire.",
        input_schema = input_schema::<SessionOnly>(),
        annotations(title = "Close a session", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn close_session(&self, ctx: RequestContext<RoleServer>, args: Arguments<SessionOnly>) -> Result<Json<Closed>, ToolError> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        Ok(Json(self.service.call(&caller, sessions::CloseSession { session_id: args.session_id }).await?))
    }
}

impl CodeInterpreterTools {
    /// The call's caller: the sole caller of a one-caller transport (as a
    /// new request), else the one the HTTP layer resolved for the request.
    /// A request without one is refused rather than given a default tenant.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, ServiceError> {
        if let Some(caller) = &self.sole_caller {
            return Ok(caller.next_request());
        }
        let parts = ctx.extensions.get::<axum::http::request::Parts>();
        parts.and_then(|p| p.extensions.get::<Caller>()).cloned().ok_or(ServiceError::Unauthorized)
    }
}

/// A file's content as the tool's answer: structured, and an image also as
/// image content, so a model can look at a chart it drew (SVG is text).
fn with_image(content: &ArtifactContent) -> Result<CallToolResult, ToolError> {
    let image = content.mime_type.starts_with("image/") && content.mime_type != "image/svg+xml";
    let block = image.then(|| ContentBlock::image(content.content_base64.clone(), content.mime_type.clone()));
    let value = serde_json::to_value(content).map_err(|e| ServiceError::Internal(e.to_string()))?;
    let mut result = CallToolResult::structured(value);
    result.content.extend(block);
    Ok(result)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeInterpreterTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("anypath", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.to_string())
    }
}
