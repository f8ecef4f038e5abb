//! The code interpreter's `/execute` and `/contexts`, as E2B's
//! `e2b-code-interpreter` SDKs call them: a run streamed as newline-
//! delimited JSON (`number_of_executions`, `stdout`/`stderr` as the code
//! writes, `result`, `error`, `keepalive`, `end_of_execution`), over the
//! same session run as every other transport.
//!
//! Each code context is an interpreter session; the sandbox's own session
//! is its default context, and the others share its files.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anypath_interpreter::{RunRequest, sessions};
use anypath_sandbox::ExecError;
use anypath_wire::{CellResult, LiveEvent, ResultOrigin};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::call::{ContextCall, SandboxCall};
use super::error::E2bError;
use super::registry::{CodeContext, Part, Sandbox};
use super::{E2b, paths};
use crate::interpreter_service::Caller;
use crate::live_run::{Lined, Lines, LiveRun, Window};

/// E2B's keepalive interval while a run is quiet.
const KEEPALIVE_EVERY: Duration = Duration::from_secs(5);

/// `POST /execute`.
#[derive(Debug, Deserialize)]
struct ExecuteRequest {
    code: String,
    context_id: Option<String>,
    language: Option<String>,
    env_vars: Option<BTreeMap<String, String>>,
}

/// `POST /contexts`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NewContext {
    language: Option<String>,
    cwd: Option<String>,
}

/// Runs going on, so killing or pausing a sandbox ends its streams.
#[derive(Default)]
pub(crate) struct Runs {
    next: AtomicU64,
    live: Mutex<HashMap<u64, (String, CancellationToken)>>,
}

impl Runs {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (String, CancellationToken)>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(&self, sandbox_id: &str) -> (u64, CancellationToken) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        self.table().insert(key, (sandbox_id.to_owned(), token.clone()));
        (key, token)
    }

    fn finish(&self, key: u64) {
        self.table().remove(&key);
    }

    /// Ends every stream of the sandbox's runs (its connections are cut).
    /// Whether a cell of `sandbox_id` runs now (through this process).
    pub(crate) fn running(&self, sandbox_id: &str) -> bool {
        self.table().values().any(|(id, _)| id == sandbox_id)
    }

    pub(crate) fn interrupt_sandbox(&self, sandbox_id: &str) {
        for (id, token) in self.table().values() {
            if id == sandbox_id {
                token.cancel();
            }
        }
    }
}

/// The language a run or a context asks for, by E2B's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    /// Python (also when not given).
    Python,
    /// The shell's: the code runs as a `%%bash` cell.
    Shell,
    /// JavaScript, on the `javascript` runtime.
    Javascript,
}

impl Language {
    /// The language `asked` names, or E2B's 400 saying why not.
    fn of(asked: Option<&str>) -> Result<Self, E2bError> {
        match asked.map(str::to_ascii_lowercase).as_deref() {
            None | Some("" | "python" | "python3" | "py") => Ok(Self::Python),
            Some("bash" | "sh" | "shell") => Ok(Self::Shell),
            Some("js" | "javascript" | "node" | "nodejs") => Ok(Self::Javascript),
            Some(ts @ ("ts" | "typescript")) => Err(E2bError::bad_request(format!(
                "language '{ts}' is not available: the sandbox has no TypeScript compiler; send the code as JavaScript (language 'js') without its types"
            ))),
            Some(other) => Err(E2bError::bad_request(format!("language '{other}' is not available: this sandbox runs Python and JavaScript (and bash, through run_code and commands)"))),
        }
    }

    /// The name contexts report.
    fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Shell => "bash",
            Self::Javascript => "javascript",
        }
    }
}

/// The id of a sandbox's default JavaScript context, made on its first
/// JavaScript run without a context (as E2B keeps one kernel per language).
fn javascript_context_id(sandbox: &Sandbox) -> String {
    format!("{}-js", sandbox.id)
}

/// The session a JavaScript run without a context goes to: the sandbox's
/// default JavaScript context, opened (and recorded) on first use.
async fn javascript_default_context(e2b: &E2b, sandbox: &Sandbox, caller: &Caller) -> Result<String, E2bError> {
    let id = javascript_context_id(sandbox);
    if sandbox.context_session(Some(&id)).is_some() {
        return Ok(id);
    }
    open_context(e2b, sandbox, caller, id.clone(), id.clone(), Language::Javascript, paths::HOME.to_owned()).await?;
    Ok(id)
}

/// Opens a context's session over the sandbox's files and records it.
async fn open_context(e2b: &E2b, sandbox: &Sandbox, caller: &Caller, id: String, session_id: String, language: Language, cwd: String) -> Result<(), E2bError> {
    let runtime = (language == Language::Javascript).then_some(anypath_sandbox::Runtime::Javascript);
    let opened = e2b.service.call(caller, sessions::OpenContext { session_id: sandbox.id.clone(), context_id: session_id.clone(), ttl: Some(e2b.max_ttl), runtime }).await;
    match opened {
        Ok(_) => {}
        // Two first runs at once: the other opened it.
        Err(error) if language == Language::Javascript && sandbox.context_session(Some(&id)).is_some() => {
            tracing::debug!(%error, "the default JavaScript context was opened beside this run");
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    }
    sandbox.life().contexts.push(CodeContext { id, session_id, language: language.name().into(), cwd, executions: 0 });
    e2b.registry.changed(sandbox, &[Part::Contexts]).await?;
    Ok(())
}

/// `POST /execute`.
pub(crate) async fn execute(State(e2b): State<Arc<E2b>>, SandboxCall { sandbox, caller, .. }: SandboxCall, body: Bytes) -> Result<Response, E2bError> {
    let request: ExecuteRequest = serde_json::from_slice(&body).map_err(|e| E2bError::bad_request(format!("the request body is not an execution: {e}")))?;
    let language = Language::of(request.language.as_deref())?;
    let shell = language == Language::Shell;
    let default_javascript = match (language, request.context_id.as_deref()) {
        (Language::Javascript, None) => Some(javascript_default_context(&e2b, &sandbox, &caller).await?),
        _ => None,
    };
    let context = default_javascript.as_deref().or(request.context_id.as_deref());
    let session = sandbox.context_session(context).ok_or_else(|| E2bError::not_found(format!("context {} not found", context.unwrap_or(""))))?;
    let mut env = sandbox.env_vars.clone();
    env.extend(request.env_vars.unwrap_or_default());
    let count = sandbox.count_execution(context);
    let counted = if context.is_none_or(|c| c == sandbox.id) { Part::Executions } else { Part::Contexts };
    // A count another host does not see yet is no reason to refuse the run.
    if let Err(error) = e2b.registry.changed(&sandbox, &[counted]).await {
        tracing::warn!(sandbox = %sandbox.id, %error, "a sandbox's execution count was not shared");
    }
    let code = crate::cell_text::dedent(&request.code);
    let code = if shell { format!("%%bash\n{code}") } else { code };
    // Named by this transport, so that a client going away stops this run and no other.
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let request = RunRequest { code, env, result_data: true, run_id: Some(run_id.clone()), ..RunRequest::default() };
    let (key, cancelled) = e2b.runs.start(&sandbox.id);
    // A refusal or a busy session within the window is a plain error answer.
    let started = e2b.service.start_live(caller.clone(), session.clone(), request, true).unless_failed_early(Window::Whole).await;
    let owner = RunOwner { caller, session, run_id };
    let run = match started {
        Ok(run) => run,
        Err(error) => {
            e2b.runs.finish(key);
            return Err(error.into());
        }
    };
    let mut pending = VecDeque::new();
    pending.push_back(json!({ "type": "number_of_executions", "execution_count": count }));
    let stream = Stream { e2b: e2b.clone(), key, cancelled, run, owner, lines: Lines::default(), pending, finished: false };
    let mut response = Response::new(Body::from_stream(stream.into_stream()));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/x-ndjson"));
    Ok(response)
}

/// A run's answer as it is streamed.
struct Stream {
    e2b: Arc<E2b>,
    key: u64,
    cancelled: CancellationToken,
    run: LiveRun,
    /// Whose run it is, to stop it when the client goes away.
    owner: RunOwner,
    /// Output a line at a time.
    lines: Lines,
    /// Lines ready to send.
    pending: VecDeque<Value>,
    finished: bool,
}

/// The run a stream answers for: its caller, session and id.
struct RunOwner {
    caller: Caller,
    session: String,
    run_id: String,
}

/// Why a stream was cut: the sandbox was killed or paused under the run.
#[derive(Debug, thiserror::Error)]
#[error("the sandbox was killed or paused while the code ran")]
struct Cut;

impl Stream {
    fn into_stream(self) -> impl futures_util::Stream<Item = Result<Bytes, Cut>> {
        futures_util::stream::unfold(self, |mut s| async move {
            loop {
                if let Some(line) = s.pending.pop_front() {
                    let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
                    bytes.push(b'\n');
                    return Some((Ok(Bytes::from(bytes)), s));
                }
                if s.finished {
                    return None;
                }
                // An error item makes the server cut the connection, as a
                // killed sandbox's would be.
                if let Err(cut) = s.step().await {
                    return Some((Err(cut), s));
                }
            }
        })
    }

    /// Waits for the next thing to send; `Err` cuts the stream.
    async fn step(&mut self) -> Result<(), Cut> {
        if self.lines.has_ended() {
            return self.finish().await;
        }
        tokio::select! {
            lined = self.lines.next(&mut self.run, Some(KEEPALIVE_EVERY)) => match lined {
                Some(Lined::Send(events)) => self.pending.extend(events.into_iter().map(|event| live_line(&event))),
                Some(Lined::Quiet) => self.pending.push_back(json!({ "type": "keepalive" })),
                None => {}
            },
            () = self.cancelled.cancelled() => return Err(self.cut()),
        }
        Ok(())
    }

    /// After the last live event: the run's error, if any, and the end.
    async fn finish(&mut self) -> Result<(), Cut> {
        let outcome = tokio::select! {
            // A run that ended within the early window has its outcome at hand.
            biased;
            outcome = self.run.outcome() => outcome,
            () = self.cancelled.cancelled() => return Err(self.cut()),
        };
        match outcome {
            Ok(report) => {
                if let Some(error) = &report.cell.error {
                    self.pending.push_back(error_line(error, report.cell.traceback.as_deref()));
                }
            }
            Err(error) => self.pending.push_back(json!({ "type": "error", "name": "SandboxError", "value": error.to_string(), "traceback": "" })),
        }
        self.pending.push_back(json!({ "type": "end_of_execution" }));
        self.finished = true;
        self.e2b.runs.finish(self.key);
        Ok(())
    }

    /// The stream is cut under a run: the run is stopped.
    fn cut(&mut self) -> Cut {
        self.finished = true;
        self.e2b.runs.finish(self.key);
        Cut
    }
}

impl Drop for Stream {
    /// A client that went away before the end (its `timeout`, a process
    /// that ended) stops its run, as E2B's own server interrupts the kernel
    /// then: the context's next run starts at once instead of waiting
    /// behind it (a run that had not started yet is cancelled). `/v1`'s
    /// runs outlive their callers; this transport's do not.
    fn drop(&mut self) {
        self.e2b.runs.finish(self.key);
        if self.finished {
            return;
        }
        let RunOwner { caller, session, run_id } = &self.owner;
        if !self.e2b.service.interrupt_run(caller, session, run_id)
            && let Some(abort) = self.run.abort_handle()
        {
            abort.abort();
        }
    }
}

/// A live event as E2B's line: output, or a result.
fn live_line(event: &LiveEvent) -> Value {
    match event {
        LiveEvent::Stdout(text) => output_line("stdout", text.clone()),
        LiveEvent::Stderr(text) => output_line("stderr", text.clone()),
        LiveEvent::Result(result) => result_line(result),
    }
}

fn output_line(kind: &str, text: String) -> Value {
    json!({ "type": kind, "text": text, "timestamp": super::control::rfc3339(SystemTime::now()) })
}

/// A result as E2B's `Result`: each MIME form under its short name, what
/// has no name under `extra`; a string's quotes taken off its text, as
/// E2B's server does.
fn result_line(result: &CellResult) -> Value {
    let mut line = Map::new();
    line.insert("type".into(), "result".into());
    let mut extra = Map::new();
    for (mime, value) in &result.mime {
        let (name, parsed) = match mime.as_str() {
            "text/plain" => ("text", Value::String(unquoted(value).to_owned())),
            "text/html" => ("html", value.as_str().into()),
            "text/markdown" => ("markdown", value.as_str().into()),
            "image/svg+xml" => ("svg", value.as_str().into()),
            "image/png" => ("png", value.as_str().into()),
            "image/jpeg" => ("jpeg", value.as_str().into()),
            "application/pdf" => ("pdf", value.as_str().into()),
            "text/latex" => ("latex", value.as_str().into()),
            "application/javascript" => ("javascript", value.as_str().into()),
            "application/json" => ("json", serde_json::from_str(value).unwrap_or(Value::Null)),
            "application/vnd.anypath.columns+json" => ("data", serde_json::from_str(value).unwrap_or(Value::Null)),
            "application/vnd.anypath.chart+json" => ("chart", serde_json::from_str(value).unwrap_or(Value::Null)),
            other => {
                extra.insert(other.to_owned(), value.as_str().into());
                continue;
            }
        };
        line.insert(name.to_owned(), parsed);
    }
    if !extra.is_empty() {
        line.insert("extra".into(), Value::Object(extra));
    }
    line.insert("is_main_result".into(), (result.origin == ResultOrigin::Value).into());
    Value::Object(line)
}

fn unquoted(text: &str) -> &str {
    let quoted = text.len() >= 2 && ((text.starts_with('\'') && text.ends_with('\'')) || (text.starts_with('"') && text.ends_with('"')));
    if quoted { &text[1..text.len() - 1] } else { text }
}

/// A failed run as E2B's `error`.
fn error_line(error: &ExecError, traceback: Option<&str>) -> Value {
    let failure = crate::cell_text::Failure::of(error, traceback);
    json!({ "type": "error", "name": failure.name, "value": failure.value, "traceback": failure.traceback })
}

impl E2b {
    /// Stops the run going on in `session`, if any.
    pub(crate) fn interrupt_run(&self, caller: &Caller, session: &str) {
        self.service.interrupt(caller, session);
    }
}

/// One context as E2B lists it.
fn context_json(id: &str, language: &str, cwd: &str) -> Value {
    json!({ "id": id, "language": language, "cwd": cwd })
}

/// `GET /contexts`: the default context, then the others as made.
pub(crate) async fn list_contexts(ContextCall { sandbox, .. }: ContextCall) -> Json<Vec<Value>> {
    let mut listed = vec![context_json(&sandbox.id, "python", paths::HOME)];
    listed.extend(sandbox.life().contexts.iter().map(|c| context_json(&c.id, &c.language, &c.cwd)));
    Json(listed)
}

/// `POST /contexts`: a Python or JavaScript context over the sandbox's files.
pub(crate) async fn create_context(State(e2b): State<Arc<E2b>>, ContextCall { sandbox, caller }: ContextCall, body: Bytes) -> Result<Json<Value>, E2bError> {
    let asked: NewContext = if body.iter().all(u8::is_ascii_whitespace) {
        NewContext::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| E2bError::bad_request(format!("the request body is not a context: {e}")))?
    };
    let language = match Language::of(asked.language.as_deref())? {
        Language::Shell => return Err(E2bError::bad_request("a bash context is not available: run bash with run_code(language='bash') or commands.run")),
        language => language,
    };
    let id = uuid::Uuid::new_v4().to_string();
    let session_id = context_session_id(&sandbox, &id);
    let cwd = asked.cwd.unwrap_or_else(|| paths::HOME.to_owned());
    open_context(&e2b, &sandbox, &caller, id.clone(), session_id, language, cwd.clone()).await?;
    Ok(Json(context_json(&id, language.name(), &cwd)))
}

/// The session of a sandbox's extra context: the sandbox's id and the
/// context's, without its dashes (a valid session id of at most 53 bytes).
fn context_session_id(sandbox: &Sandbox, context_id: &str) -> String {
    format!("{}-{}", sandbox.id, context_id.replace('-', ""))
}

/// `DELETE /contexts/{id}`.
pub(crate) async fn remove_context(State(e2b): State<Arc<E2b>>, ContextCall { sandbox, caller }: ContextCall, Path(id): Path<String>) -> Result<StatusCode, E2bError> {
    if id == sandbox.id {
        return Err(E2bError::bad_request("the default context stays as long as its sandbox"));
    }
    let context = {
        let mut life = sandbox.life();
        let position = life.contexts.iter().position(|c| c.id == id).ok_or_else(|| E2bError::not_found(format!("context {id} not found")))?;
        life.contexts.remove(position)
    };
    e2b.registry.changed(&sandbox, &[Part::Contexts]).await?;
    e2b.interrupt_run(&caller, &context.session_id);
    e2b.service.call(&caller, sessions::CloseSession { session_id: context.session_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /contexts/{id}/restart`: the context's Python state starts afresh
/// over the same files.
pub(crate) async fn restart_context(State(e2b): State<Arc<E2b>>, ContextCall { sandbox, caller }: ContextCall, Path(id): Path<String>) -> Result<StatusCode, E2bError> {
    let session = sandbox.context_session(Some(&id)).ok_or_else(|| E2bError::not_found(format!("context {id} not found")))?;
    e2b.interrupt_run(&caller, &session);
    e2b.service.call(&caller, sessions::RestartSession { session_id: session }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_carry_e2b_names_and_unquoted_text() {
        let mime = [
            ("text/plain".to_owned(), "'bar'".to_owned()),
            ("text/html".to_owned(), "<b>x</b>".to_owned()),
            ("application/vnd.anypath.columns+json".to_owned(), r#"{"a":[1,2,3]}"#.to_owned()),
            ("application/x-custom".to_owned(), "z".to_owned()),
        ]
        .into();
        let result = CellResult::from_bundle(ResultOrigin::Value, mime, false, None);
        let line = result_line(&result);
        assert_eq!(line.get("text"), Some(&json!("bar")));
        assert_eq!(line.get("html"), Some(&json!("<b>x</b>")));
        assert_eq!(line.get("data"), Some(&json!({ "a": [1, 2, 3] })));
        assert_eq!(line.get("extra"), Some(&json!({ "application/x-custom": "z" })));
        assert_eq!(line.get("is_main_result"), Some(&json!(true)));
        assert_eq!(unquoted("'it's'"), "it's");
        assert_eq!(unquoted("1"), "1");
    }

    #[test]
    fn languages_are_read_by_e2b_names_and_typescript_is_refused() {
        assert_eq!(Language::of(None).ok(), Some(Language::Python));
        assert_eq!(Language::of(Some("Python")).ok(), Some(Language::Python));
        assert_eq!(Language::of(Some("js")).ok(), Some(Language::Javascript));
        assert_eq!(Language::of(Some("JavaScript")).ok(), Some(Language::Javascript));
        assert_eq!(Language::of(Some("bash")).ok(), Some(Language::Shell));
        let refused = Language::of(Some("ts")).expect_err("ts is refused");
        assert!(refused.message.contains("TypeScript"), "{}", refused.message);
        let refused = Language::of(Some("r")).expect_err("r is refused");
        assert!(refused.message.contains("'r' is not available"), "{}", refused.message);
    }
}
