//! envd's `process.Process` service over the session's shell: what E2B's
//! `sandbox.commands` calls (`run`, `list`, `kill`, `connect`, `send_stdin`,
//! `close_stdin`). A command is started and kept by the service's tracked
//! commands ([`crate::tracked_commands`]), admitted and audited like every
//! run; its id is its pid. This module maps envd's messages (Connect's JSON
//! form of `process.proto`) onto it.
//!
//! As envd does, a command outlives the stream that started it (E2B's
//! `disconnect()`), a stream's deadline (the SDK's `timeout`) stops the
//! command and ends the stream with `deadline_exceeded`, and `Connect`
//! streams a running command's events (from its start, so a late handle
//! still gets the whole output). A terminal (`pty`) is refused: the shell
//! has no line discipline.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anypath_sandbox::shell::Stream;
use anypath_wire::CommandRequest;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::E2b;
use super::call::SandboxCall;
use super::error::ConnectError;
use super::filesystem::{envelope, parse, stream_error, unenvelope, user_of};
use crate::interpreter_service::Caller;
use crate::tracked_commands::{Ended, StartCommand, TrackedCommand};

/// How often a quiet stream says it is alive (envd's keepalive).
const KEEPALIVE_EVERY: Duration = Duration::from_secs(30);
/// A command's end as envd reports a kill.
const KILLED_STATUS: &str = "signal: killed";

/// The sandbox's running command a selector names (a pid or a tag).
fn find(e2b: &E2b, caller: &Caller, sandbox: &str, selector: &Selector) -> Result<Arc<TrackedCommand>, ConnectError> {
    let found = match (selector.pid, &selector.tag) {
        (Some(pid), _) => e2b.commands.find(&caller.tenant, sandbox, pid).filter(|c| c.ended().is_none()),
        (None, Some(tag)) => e2b.commands.running(&caller.tenant, sandbox).into_iter().find(|c| c.tag.as_ref() == Some(tag)),
        (None, None) => None,
    };
    found.ok_or_else(|| ConnectError::new("not_found", format!("process with {} not found", selector.describe())))
}

/// `ProcessSelector`: a pid or a tag.
#[derive(Debug, Default, Deserialize)]
struct Selector {
    pid: Option<u32>,
    tag: Option<String>,
}

impl Selector {
    fn describe(&self) -> String {
        match (self.pid, &self.tag) {
            (Some(pid), _) => format!("pid {pid}"),
            (None, Some(tag)) => format!("tag {tag}"),
            (None, None) => "no pid or tag".to_owned(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ProcessConfig {
    #[serde(default)]
    cmd: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    envs: std::collections::BTreeMap<String, String>,
    cwd: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct StartRequest {
    #[serde(default)]
    process: ProcessConfig,
    pty: Option<Value>,
    tag: Option<String>,
    #[serde(default)]
    stdin: bool,
}

#[derive(Debug, Default, Deserialize)]
struct SelectorRequest {
    #[serde(default)]
    process: Selector,
}

#[derive(Debug, Default, Deserialize)]
struct SendInputRequest {
    #[serde(default)]
    process: Selector,
    #[serde(default)]
    input: Input,
}

#[derive(Debug, Default, Deserialize)]
struct Input {
    stdin: Option<String>,
    pty: Option<String>,
}

/// The command line `cmd args...` stands for: a shell's `-c` script as it
/// is (what the SDKs send: `/bin/bash -l -c CMD`), anything else quoted
/// word by word.
fn command_line(config: &ProcessConfig) -> String {
    let program = config.cmd.rsplit('/').next().unwrap_or_default();
    if matches!(program, "bash" | "sh" | "dash" | "zsh")
        && let Some(at) = config.args.iter().position(|a| a == "-c" || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('c')))
        && let Some(script) = config.args.get(at + 1)
    {
        return script.clone();
    }
    std::iter::once(&config.cmd).chain(&config.args).map(|word| quoted(word)).collect::<Vec<_>>().join(" ")
}

/// `word` as one shell word.
fn quoted(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A stream's deadline, from Connect's `Connect-Timeout-Ms` header.
fn deadline(headers: &HeaderMap) -> Option<Duration> {
    let millis: u64 = headers.get("connect-timeout-ms")?.to_str().ok()?.trim().parse().ok()?;
    (millis > 0).then(|| Duration::from_millis(millis))
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// envd's end event for how a command ended.
fn end_event(ended: &Ended) -> Value {
    match &ended.report {
        _ if ended.stopped => json!({ "exitCode": -1, "exited": false, "status": KILLED_STATUS, "error": KILLED_STATUS }),
        Ok(report) => {
            let mut end = json!({ "exitCode": report.exit_code, "exited": true, "status": format!("exit status {}", report.exit_code) });
            if let Some(error) = &report.error {
                end["error"] = json!(error.to_string());
            }
            end
        }
        Err(error) => json!({ "exitCode": -1, "exited": false, "status": "error", "error": error.message }),
    }
}

/// `POST /process.Process/{method}`.
pub(crate) async fn call(
    State(e2b): State<Arc<E2b>>,
    SandboxCall { sandbox, caller, .. }: SandboxCall<ConnectError>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ConnectError> {
    let streamed = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/connect+"));
    let answer = match method.as_str() {
        "Start" => start(&e2b, caller, &sandbox.id, &headers, unenvelope(&body)).await,
        "Connect" => connect(&e2b, &caller, &sandbox.id, &headers, unenvelope(&body)),
        _ => unary(&e2b, &caller, &sandbox.id, &method, &body).map(|value| (StatusCode::OK, axum::Json(value)).into_response()),
    };
    match answer {
        Err(error) if streamed => Ok(stream_error(&error)),
        answer => answer,
    }
}

fn unary(e2b: &E2b, caller: &Caller, sandbox: &str, method: &str, body: &[u8]) -> Result<Value, ConnectError> {
    match method {
        "List" => {
            let listed = e2b.commands.running(&caller.tenant, sandbox);
            let entries: Vec<Value> = listed
                .iter()
                .map(|p| {
                    let mut info = json!({ "config": p.config, "pid": p.id });
                    if let Some(tag) = &p.tag {
                        info["tag"] = json!(tag);
                    }
                    info
                })
                .collect();
            Ok(json!({ "processes": entries }))
        }
        "SendInput" => {
            let request: SendInputRequest = parse(body)?;
            let process = find(e2b, caller, sandbox, &request.process)?;
            if request.input.pty.is_some() {
                return Err(ConnectError::new("failed_precondition", "this process has no terminal (pty); send its input as stdin"));
            }
            let stdin = process.stdin.as_ref().ok_or_else(|| ConnectError::new("failed_precondition", "the process was started without stdin (pass stdin=True)"))?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(request.input.stdin.unwrap_or_default())
                .map_err(|e| ConnectError::new("invalid_argument", format!("input.stdin is not base64: {e}")))?;
            stdin.send(&bytes);
            Ok(json!({}))
        }
        "CloseStdin" => {
            let request: SelectorRequest = parse(body)?;
            let process = find(e2b, caller, sandbox, &request.process)?;
            if let Some(stdin) = &process.stdin {
                stdin.close();
            }
            Ok(json!({}))
        }
        "SendSignal" => {
            let request: SelectorRequest = parse(body)?;
            let process = find(e2b, caller, sandbox, &request.process)?;
            process.stop();
            Ok(json!({}))
        }
        "Update" => Err(ConnectError::new("unimplemented", "process.Process/Update resizes a terminal, and this sandbox's shell has no terminal (pty)")),
        "StreamInput" => Err(ConnectError::new("unimplemented", "process.Process/StreamInput is not served; send stdin with SendInput")),
        other => Err(ConnectError::new("unimplemented", format!("process.Process/{other} is not a method this sandbox serves"))),
    }
}

/// `Start`: starts the command on its own task and streams its events.
async fn start(e2b: &Arc<E2b>, caller: Caller, sandbox: &str, headers: &HeaderMap, body: &[u8]) -> Result<Response, ConnectError> {
    let request: StartRequest = parse(body)?;
    if request.pty.is_some() {
        return Err(ConnectError::new(
            "unimplemented",
            "a terminal (pty) is not available: this sandbox's shell runs inside WebAssembly without a line discipline; run commands with commands.run",
        ));
    }
    if request.process.cmd.trim().is_empty() {
        return Err(ConnectError::new("invalid_argument", "process.cmd is empty"));
    }
    let user = user_of(headers);
    let command = CommandRequest {
        command: command_line(&request.process),
        cwd: request.process.cwd.clone().filter(|cwd| !cwd.is_empty()),
        env: request.process.envs.clone(),
        timeout_ms: None,
        stdin: None,
        user: user.clone().filter(|u| u == "root" || u == "user"),
    };
    let mut config = json!({ "cmd": request.process.cmd, "args": request.process.args, "envs": request.process.envs });
    if let Some(cwd) = &request.process.cwd {
        config["cwd"] = json!(cwd);
    }
    let start = StartCommand { session_id: sandbox.to_owned(), request: command, with_stdin: request.stdin, tag: request.tag, config };
    let process = e2b.commands.start(&e2b.service, caller, start);
    Ok(event_stream(process, deadline(headers), true))
}

/// `Connect`: the running command's events, from its start.
fn connect(e2b: &E2b, caller: &Caller, sandbox: &str, headers: &HeaderMap, body: &[u8]) -> Result<Response, ConnectError> {
    let request: SelectorRequest = parse(body)?;
    let process = find(e2b, caller, sandbox, &request.process)?;
    Ok(event_stream(process, deadline(headers), false))
}

/// The stream of a command's events: `start`, each chunk of output as
/// `data`, then `end`; a keepalive when quiet; past `deadline`, the command
/// is stopped (when this stream `owns` it) and the stream ends with
/// `deadline_exceeded`.
fn event_stream(process: Arc<TrackedCommand>, deadline: Option<Duration>, owns: bool) -> Response {
    struct Streamed {
        process: Arc<TrackedCommand>,
        started: bool,
        sent: usize,
        pending: std::collections::VecDeque<Bytes>,
        ends_at: Option<tokio::time::Instant>,
        owns: bool,
        done: bool,
    }
    let ends_at = deadline.map(|d| tokio::time::Instant::now() + d);
    let streamed = Streamed { process, started: false, sent: 0, pending: Default::default(), ends_at, owns, done: false };
    let stream = futures_util::stream::unfold(streamed, |mut s| async move {
        if let Some(next) = s.pending.pop_front() {
            return Some((Ok::<_, Infallible>(next), s));
        }
        if s.done {
            return None;
        }
        if !s.started {
            s.started = true;
            return Some((Ok(envelope(0, &json!({ "event": { "start": { "pid": s.process.id } } }))), s));
        }
        loop {
            let process = s.process.clone();
            let changed = process.changed();
            let (data, end) = process.since(s.sent);
            if !data.is_empty() {
                s.sent += data.len();
                for (stream, bytes) in data {
                    let name = if stream == Stream::Stdout { "stdout" } else { "stderr" };
                    s.pending.push_back(envelope(0, &json!({ "event": { "data": { name: base64(&bytes) } } })));
                }
                let next = s.pending.pop_front()?;
                return Some((Ok(next), s));
            }
            if let Some(end) = end {
                s.done = true;
                // Refused before it started (no shell, too many commands, a
                // bad request): the stream ends with the error, as envd's
                // does when a process cannot start, so the SDK raises it.
                if let Err(refused) = &end.report {
                    let error = ConnectError::from(super::error::E2bError::new(StatusCode::from_u16(refused.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), refused.message.clone()));
                    return Some((Ok(envelope(2, &json!({ "error": error.body() }))), s));
                }
                s.pending.push_back(envelope(2, &json!({})));
                return Some((Ok(envelope(0, &json!({ "event": { "end": end_event(&end) } }))), s));
            }
            let wait = async {
                match s.ends_at {
                    Some(at) => tokio::time::timeout_at(at, tokio::time::timeout(KEEPALIVE_EVERY, changed)).await.ok(),
                    None => Some(tokio::time::timeout(KEEPALIVE_EVERY, changed).await),
                }
            };
            match wait.await {
                Some(Ok(())) => continue,
                Some(Err(_quiet)) => return Some((Ok(envelope(0, &json!({ "event": { "keepalive": {} } }))), s)),
                None => {
                    if s.owns {
                        s.process.stop();
                    }
                    s.done = true;
                    let error = ConnectError::new("deadline_exceeded", "the command's timeout passed; it was stopped");
                    return Some((Ok(envelope(2, &json!({ "error": error.body() }))), s));
                }
            }
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/connect+json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shells_script_is_run_as_it_is_and_other_programs_are_quoted() {
        let config = |cmd: &str, args: &[&str]| ProcessConfig { cmd: cmd.into(), args: args.iter().map(|a| (*a).to_owned()).collect(), ..ProcessConfig::default() };
        assert_eq!(command_line(&config("/bin/bash", &["-l", "-c", "echo hi | wc -c"])), "echo hi | wc -c");
        assert_eq!(command_line(&config("sh", &["-lc", "ls"])), "ls");
        assert_eq!(command_line(&config("python3", &["-c", "print('a b')"])), "python3 -c 'print('\\''a b'\\'')'");
        assert_eq!(command_line(&config("ls", &["-la", "/home/user"])), "ls -la /home/user");
    }
}
