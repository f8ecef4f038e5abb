//! The MCP tools: one per code-interpreter call, each a thin shell over
//! [`Interpreter`](anypath_interpreter::Interpreter) with the same checks,
//! quotas and admission as the HTTP API.
//!
//! Every failure a caller can cause (bad arguments, a bad filename, an
//! unknown or busy session, a quota) is a tool error the model reads, never a
//! protocol error: the text starts with the stable code of the HTTP envelope.

use std::collections::BTreeMap;
use std::sync::Arc;

use anypath_interpreter::{ArtifactContent, FileInfo, InterpreterError, RunReport, RunRequest};
use anypath_sandbox::{LimitOverrides, Runtime};
use base64::Engine;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Json;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::arguments::{Arguments, input_schema};
use crate::serve::AppState;

/// The tenant the HTTP layer bound to a request, from its key or token.
#[derive(Debug, Clone)]
pub struct Tenant(pub String);

/// What the server tells a model before it calls anything.
const INSTRUCTIONS: &str = "A Python 3 code interpreter in a WebAssembly sandbox (no network, no host files). \
Work happens in sessions you name: pass the same session_id (1-64 of A-Z a-z 0-9 - _) to every call. \
upload_file or run_python creates the session on first use, on the runtime it names: `python` \
(standard library only, starts in milliseconds) or `python-data` (numpy, pandas, matplotlib, scipy, \
scikit-learn, statsmodels, seaborn, reportlab, openpyxl, ...; seconds for the first import); a session \
keeps its runtime. Files live in /mnt/data. Variables, imports \
and functions persist across run_python calls in one session until close_session or an idle timeout \
(15 minutes by default). Files a run creates or changes come back as artifacts with signed download_url \
links; read_artifact returns a file's bytes (images also as image content).";

/// The code interpreter as an MCP server.
#[derive(Clone)]
pub struct CodeInterpreterTools {
    state: Arc<AppState>,
    /// The caller of a one-caller transport (stdio): its tenant and the base of
    /// its links. Over HTTP each request brings its own.
    one_caller: Option<(String, String)>,
    tool_router: ToolRouter<Self>,
}

/// A call's tenant and the base URL of the links it returns.
struct Caller {
    tenant: String,
    base_url: String,
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
    /// The runtime when this call creates the session: `python` or
    /// `python-data` (pandas, matplotlib, ...); the server's default otherwise.
    #[serde(default)]
    pub runtime: Option<Runtime>,
}

/// `run_python`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunPython {
    /// The session to run in (created when new).
    pub session_id: String,
    /// Python 3 source. Output is what the code prints (a bare expression is not echoed).
    pub code: String,
    /// Lower limits for this run only; a limit can never be raised.
    #[serde(default)]
    pub limits: Option<LimitOverrides>,
    /// Environment variables the code sees (os.environ); nothing of the host's.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// The runtime when this call creates the session: `python` or
    /// `python-data` (pandas, matplotlib, ...); the server's default otherwise.
    #[serde(default)]
    pub runtime: Option<Runtime>,
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

/// The files of a session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileList {
    pub files: Vec<FileInfo>,
}

/// A closed session.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Closed {
    /// Always `closed`.
    pub status: String,
}

#[tool_router]
impl CodeInterpreterTools {
    /// Tools for HTTP callers: each request's tenant comes from the [`Tenant`]
    /// the authentication layer put on it.
    pub fn over_http(state: Arc<AppState>) -> Self {
        Self { state, one_caller: None, tool_router: Self::tool_router() }
    }

    /// Tools for the single caller of a stdio server.
    pub fn for_one_caller(state: Arc<AppState>, tenant: String, base_url: String) -> Self {
        Self { state, one_caller: Some((tenant, base_url)), tool_router: Self::tool_router() }
    }

    #[tool(
        description = "Write a file into the session's /mnt/data (the session is created when new). \
Returns its path as code sees it. Fails when the file exists unless overwrite is true, when the name \
has a directory part, or past the session's quota (100 MiB per file, 500 MiB and 1000 files per \
session by default). Cannot run while code runs in the same session.",
        input_schema = input_schema::<UploadFile>(),
        annotations(title = "Upload a file", read_only_hint = false, destructive_hint = false, open_world_hint = false)
    )]
    async fn upload_file(&self, ctx: RequestContext<RoleServer>, args: Arguments<UploadFile>) -> Result<Json<FileInfo>, String> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(args.content_base64.trim())
            .map_err(|e| format!("invalid_base64: content_base64: {e}"))?;
        let interpreter = self.interpreter()?.clone();
        let UploadFile { session_id, filename, overwrite, runtime, .. } = args;
        off_workers(move || interpreter.upload_file(&caller.tenant, &session_id, &filename, &bytes, overwrite, runtime)).await.map(Json)
    }

    #[tool(
        description = "Run Python 3 code in the session (created when new); /mnt/data holds its files. \
State persists: variables, imports and functions from earlier calls in the session are still defined. \
Returns exit_code (0 on success), stdout, stderr, traceback, error (kind: exception, fuel_exhausted, \
timeout, memory_limit, ...), state_reset (true when earlier state was lost, e.g. after a limit), \
quota_exceeded, metrics, and artifacts: every file the run created or changed, with a signed \
download_url. The standard library is available, and in python-data sessions numpy, pandas, \
matplotlib (save figures to /mnt/data), scipy, scikit-learn, statsmodels, seaborn, pillow, reportlab, \
openpyxl, xlsxwriter, pypdf, lxml and jinja2; there is no network. Runs are bounded by \
fuel (CPU), memory and wall-clock time; limits may lower them for one run.",
        input_schema = input_schema::<RunPython>(),
        annotations(title = "Run Python", read_only_hint = false, destructive_hint = false, open_world_hint = false)
    )]
    async fn run_python(&self, ctx: RequestContext<RoleServer>, args: Arguments<RunPython>) -> Result<Json<RunReport>, String> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let service = crate::interpreter_service::InterpreterService::of(&self.state).map_err(|e| format!("{}: {e}", e.code()))?;
        let request = RunRequest {
            code: args.code,
            env: args.env.unwrap_or_default(),
            limits: args.limits.unwrap_or_default(),
            runtime: args.runtime,
        };
        let caller = crate::interpreter_service::Caller { tenant: caller.tenant, request_id: uuid::Uuid::new_v4().to_string(), base_url: caller.base_url };
        let report = service.run_python(&caller, args.session_id, request).await.map_err(|e| format!("{}: {e}", e.code()))?;
        Ok(Json(report))
    }

    #[tool(
        description = "Read a file of the session: its bytes as base64 with mime_type, size_bytes and \
sha256. An image also comes back as image content, so you can look at a chart you drew. Files over the \
read cap (5 MiB by default) are not returned inline: the error gives a download_url instead.",
        input_schema = input_schema::<ReadArtifact>(),
        output_schema = rmcp::handler::server::common::schema_for_output::<ArtifactContent>(),
        annotations(title = "Read a file", read_only_hint = true, open_world_hint = false)
    )]
    async fn read_artifact(&self, ctx: RequestContext<RoleServer>, args: Arguments<ReadArtifact>) -> Result<CallToolResult, String> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let interpreter = self.interpreter()?.clone();
        let content = off_workers(move || interpreter.read_artifact(&caller.tenant, &args.session_id, &args.path, &caller.base_url)).await?;
        let image = content.mime_type.starts_with("image/") && content.mime_type != "image/svg+xml";
        let block = image.then(|| ContentBlock::image(content.content_base64.clone(), content.mime_type.clone()));
        let value = serde_json::to_value(&content).map_err(|e| format!("internal: {e}"))?;
        let mut result = CallToolResult::structured(value);
        result.content.extend(block);
        Ok(result)
    }

    #[tool(
        description = "List every file in the session's /mnt/data (sub-directories included), with sizes.",
        input_schema = input_schema::<SessionOnly>(),
        annotations(title = "List files", read_only_hint = true, open_world_hint = false)
    )]
    async fn list_files(&self, ctx: RequestContext<RoleServer>, args: Arguments<SessionOnly>) -> Result<Json<FileList>, String> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        let files = self.interpreter()?.list_files(&caller.tenant, &args.session_id).map_err(|e| tool_error(&e))?;
        Ok(Json(FileList { files }))
    }

    #[tool(
        description = "Close the session: its Python state and files are removed for good. \
Artifacts already returned keep working until their download links expire.",
        input_schema = input_schema::<SessionOnly>(),
        annotations(title = "Close a session", read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false)
    )]
    async fn close_session(&self, ctx: RequestContext<RoleServer>, args: Arguments<SessionOnly>) -> Result<Json<Closed>, String> {
        let args = args.0?;
        let caller = self.caller(&ctx)?;
        self.interpreter()?.close_session(&caller.tenant, &args.session_id).await.map_err(|e| tool_error(&e))?;
        Ok(Json(Closed { status: "closed".to_owned() }))
    }
}

impl CodeInterpreterTools {
    fn interpreter(&self) -> Result<&Arc<anypath_interpreter::Interpreter>, String> {
        self.state.interpreter.as_ref().ok_or_else(|| "not_found: this service runs no code interpreter".to_owned())
    }

    /// The call's tenant: fixed for a one-caller transport, else the one the
    /// HTTP layer bound to the request. A request without one is refused
    /// rather than given a default tenant.
    fn caller(&self, ctx: &RequestContext<RoleServer>) -> Result<Caller, String> {
        if let Some((tenant, base_url)) = &self.one_caller {
            return Ok(Caller { tenant: tenant.clone(), base_url: base_url.clone() });
        }
        let parts = ctx.extensions.get::<axum::http::request::Parts>();
        let tenant = parts.and_then(|p| p.extensions.get::<Tenant>()).ok_or("unauthorized: no tenant is bound to this request")?;
        let headers = parts.map(|p| p.headers.clone()).unwrap_or_default();
        let base_url = self.state.base_url(self.interpreter()?, &headers);
        Ok(Caller { tenant: tenant.0.clone(), base_url })
    }
}

/// Runs interpreter work that touches files on the blocking pool, off the
/// async workers; its error is the tool error text.
async fn off_workers<T: Send + 'static>(work: impl FnOnce() -> Result<T, InterpreterError> + Send + 'static) -> Result<T, String> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done.map_err(|e| tool_error(&e)),
        Err(e) => Err(format!("internal: {e}")),
    }
}

/// The text of a tool error: the envelope's stable code, then the message.
fn tool_error(error: &InterpreterError) -> String {
    format!("{}: {error}", error.code())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeInterpreterTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("anypath", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}
