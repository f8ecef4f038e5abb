//! The run's session on a sandbox host, through its code-interpreter API,
//! as the tenant the request is bound to: the tools' side of the loop.
//!
//! A session lives on one host of the pool: the first of the rendezvous
//! ranking of (tenant, session id), so every run of it finds its files and
//! live Python state again. When that host gives no answer, the session opens
//! on the next-ranked host that does, with a fresh state, and the run says so.

use std::time::Duration;

use anypath_agent::tools::{RUN_TESTS_CODE, TEST_TIMEOUT_MS};
use anypath_agent::{FileEntry, ToolFailure, Workspace};
use anypath_rest::sandbox_pool::{no_host_answered, session_key};
use anypath_wire::{CellReport, CommandReport, CommandRequest, ErrorEnvelope, FileList, LimitOverrides, OpenSessionRequest, ResultKind, RunReport, RunRequest, Runtime, UploadRequest};
use base64::Engine;
use http_client::{Answer, CallError, Method, call, call_with};

use crate::Config;

/// Most bytes of a file or a run's output the model is shown.
const OBSERVATION_BYTES: usize = 16 << 10;
/// A run's own wall-clock bound inside the sandbox is its limit; this covers the call.
const RUN_CALL_TIMEOUT: Duration = Duration::from_secs(70);

/// One session of one tenant, on the host that holds it.
pub struct SandboxSession<'a> {
    config: &'a Config,
    tenant: String,
    request_id: String,
    base: String,
    bearer: String,
    /// The host serving the session.
    pub host: String,
    /// The hosts ranked before `host` for this session that gave no answer.
    pub unreachable: Vec<String>,
}

/// Why no session could be opened.
#[derive(Debug)]
pub enum OpenError {
    /// `sandbox_hosts` cannot be used.
    Unconfigured(String),
    /// No host of the pool answered.
    Unreachable(String),
    /// The host that holds the session refused to open it.
    Refused { host: String, status: u16, message: String },
}

impl OpenError {
    /// Status, envelope code and message of the run's answer.
    pub fn refusal(self) -> (u16, &'static str, String) {
        match self {
            Self::Unconfigured(m) => (503, "sandbox_unavailable", format!("no sandbox host can be used: {m}")),
            Self::Unreachable(m) => (503, "sandbox_unavailable", m),
            Self::Refused { host, status, message } => {
                (502, "sandbox_unavailable", format!("the sandbox host {host} refused the session ({status}): {message}"))
            }
        }
    }
}

impl<'a> SandboxSession<'a> {
    /// Opens (or finds) the session on the first host of its ranking that
    /// answers; a host's refusal is final, only silence moves on.
    pub fn open(config: &'a Config, tenant: &str, session_id: &str, runtime: Option<Runtime>, request_id: &str) -> Result<Self, OpenError> {
        let pool = config.sandbox_pool.as_ref().map_err(|e| OpenError::Unconfigured(e.to_string()))?;
        let bearer = format!("Bearer {}", config.sandbox_token);
        let headers = config.sandbox_headers(tenant, request_id, &bearer);
        let open = OpenSessionRequest { session_id: session_id.to_owned(), ttl_seconds: None, runtime, from_snapshot: None };
        let body = serde_json::to_vec(&open).map_err(|e| OpenError::Unconfigured(format!("the session request could not be encoded: {e}")))?;
        let opened = pool.first_answer(&session_key(tenant, session_id), |host| -> Result<Answer, CallError> {
            call(&format!("http://{host}/v1/sessions"), Some(&body), &headers, config.call_timeout)
        });
        let answered = opened.map_err(|failures| OpenError::Unreachable(no_host_answered(&failures)))?;
        if answered.answer.status != 201 {
            return Err(OpenError::Refused {
                host: answered.host.to_owned(),
                status: answered.answer.status,
                message: message(&answered.answer.body),
            });
        }
        Ok(Self {
            config,
            tenant: tenant.to_owned(),
            request_id: request_id.to_owned(),
            base: format!("http://{}/v1/sessions/{session_id}", answered.host),
            bearer,
            host: answered.host.to_owned(),
            unreachable: answered.skipped.iter().map(|(host, _)| (*host).to_owned()).collect(),
        })
    }

    /// What a client continuing `session_id` is told when the session moved:
    /// its first-ranked host gave no answer, so it runs elsewhere from scratch.
    pub fn moved_notice(&self, session_id: &str) -> Option<String> {
        let subject = match self.unreachable.as_slice() {
            [] => return None,
            [one] => format!("sandbox host {one} is"),
            several => format!("sandbox hosts {} are", several.join(", ")),
        };
        Some(format!("{subject} unreachable; session {session_id} continues on host {} with a fresh state (state reset)", self.host))
    }

    /// Closes the session; its files go with it.
    pub fn close(&mut self) {
        let _ = call_with(Method::Delete, &self.base, None, &self.headers(), self.config.call_timeout);
    }

    fn headers(&self) -> Vec<(&str, &str)> {
        self.config.sandbox_headers(&self.tenant, &self.request_id, &self.bearer)
    }

    fn send(&self, path: &str, body: Option<&[u8]>, timeout: Duration) -> Result<(u16, Vec<u8>), ToolFailure> {
        call(&format!("{}{path}", self.base), body, &self.headers(), timeout)
            .map(|answer| (answer.status, answer.body))
            .map_err(|e| ToolFailure(format!("the sandbox host is unreachable: {e}")))
    }
}

impl SandboxSession<'_> {
    /// Uploads `content` as the plain file name `name`.
    fn upload(&self, name: &str, content: &str) -> Result<(), ToolFailure> {
        let upload = UploadRequest {
            filename: name.to_owned(),
            content_base64: base64::engine::general_purpose::STANDARD.encode(content),
            overwrite: true,
            runtime: None,
        };
        match self.send("/files", Some(&encode(&upload)?), self.config.call_timeout)? {
            (201, _) => Ok(()),
            (status, body) => Err(ToolFailure(format!("writing {name} failed ({status}): {}", message(&body)))),
        }
    }

    /// Runs `request` in the session; its report.
    fn run(&self, request: &RunRequest) -> Result<CellReport, ToolFailure> {
        match self.send("/run", Some(&encode(request)?), RUN_CALL_TIMEOUT)? {
            (200, body) => Ok(decode::<RunReport>(&body, "run report")?.cell),
            (status, body) => Err(ToolFailure(format!("the run failed ({status}): {}", message(&body)))),
        }
    }
}

impl Workspace for SandboxSession<'_> {
    /// A plain name is uploaded as it is. The files API takes only plain
    /// names, so a path through folders is uploaded under a hidden name and
    /// moved into place by code in the session, which creates the folders
    /// (and can reach nothing outside the session directory).
    fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure> {
        if !path.contains('/') {
            self.upload(path, content)?;
            return Ok(format!("wrote {} bytes to {path}", content.len()));
        }
        let staged = format!(".agent-write-{}.partial", crate::random_id());
        self.upload(&staged, content)?;
        let cell = self.run(&RunRequest::code(place_code(&staged, path)?))?;
        match (&cell.error, &cell.traceback) {
            (None, _) => Ok(format!("wrote {} bytes to {path}", content.len())),
            (Some(error), traceback) => {
                let why = traceback.as_deref().and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty())).unwrap_or(error.kind());
                Err(ToolFailure(format!("writing {path} failed: {why}")))
            }
        }
    }

    fn read_file(&mut self, path: &str) -> Result<String, ToolFailure> {
        match self.send(&format!("/files/{}", url_path(path)), None, self.config.call_timeout)? {
            (200, bytes) => Ok(capped(&String::from_utf8_lossy(&bytes))),
            (status, body) => Err(ToolFailure(format!("reading {path} failed ({status}): {}", message(&body)))),
        }
    }

    fn list_files(&mut self) -> Result<Vec<FileEntry>, ToolFailure> {
        match self.send("/files", None, self.config.call_timeout)? {
            (200, body) => {
                let listed: FileList = decode(&body, "file list")?;
                Ok(listed.files.into_iter().map(|f| FileEntry { path: f.filename, size_bytes: f.size_bytes }).collect())
            }
            (status, body) => Err(ToolFailure(format!("listing failed ({status}): {}", message(&body)))),
        }
    }

    fn run_python(&mut self, code: &str) -> Result<String, ToolFailure> {
        Ok(capped(&observation(&self.run(&RunRequest::code(code))?)))
    }

    fn run_tests(&mut self) -> Result<String, ToolFailure> {
        let limits = LimitOverrides { timeout_ms: Some(TEST_TIMEOUT_MS), ..LimitOverrides::default() };
        let request = RunRequest { limits, ..RunRequest::code(RUN_TESTS_CODE) };
        Ok(capped(&observation(&self.run(&request)?)))
    }

    fn run_command(&mut self, command: &str) -> Result<String, ToolFailure> {
        let request = CommandRequest { command: command.to_owned(), ..CommandRequest::default() };
        match self.send("/commands", Some(&encode(&request)?), RUN_CALL_TIMEOUT)? {
            (200, body) => {
                let ran: CommandReport = decode(&body, "command report")?;
                let mut text = format!("exit_code: {}\nstdout:\n{}", ran.exit_code, ran.stdout);
                if !ran.stderr.is_empty() {
                    text.push_str(&format!("\nstderr:\n{}", ran.stderr));
                }
                Ok(capped(&text))
            }
            (status, body) => Err(ToolFailure(format!("the command failed ({status}): {}", message(&body)))),
        }
    }
}

/// Code that moves the staged upload to `path`, creating its folders; the
/// staged file is removed when the move fails. Both names are JSON strings,
/// which Python reads as the same string literals.
fn place_code(staged: &str, path: &str) -> Result<String, ToolFailure> {
    let quoted = |text: &str| serde_json::to_string(text).map_err(|e| ToolFailure(format!("the path could not be encoded: {e}")));
    let (staged, path) = (quoted(staged)?, quoted(path)?);
    Ok(format!(
        "def _anypath_place(staged, path):\n    import os\n    try:\n        os.makedirs(os.path.dirname(path), exist_ok=True)\n        os.replace(staged, path)\n    except BaseException:\n        os.remove(staged)\n        raise\ntry:\n    _anypath_place({staged}, {path})\nfinally:\n    del _anypath_place\n"
    ))
}

/// A session path as the files API's URL path: each part percent-encoded.
fn url_path(path: &str) -> String {
    let mut encoded = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => encoded.push(char::from(byte)),
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    encoded
}

/// What the model is shown of a run: exit code, output, the results as a
/// notebook shows them (a picture named, since the model reads text), and
/// the error.
fn observation(cell: &CellReport) -> String {
    let mut text = format!("exit_code: {}\nstdout:\n{}", cell.exit_code, cell.output.stdout);
    if !cell.output.stderr.is_empty() {
        text.push_str(&format!("\nstderr:\n{}", cell.output.stderr));
    }
    for result in &cell.results {
        match result.kind {
            ResultKind::Text => text.push_str(&format!("\nresult:\n{}", result.text)),
            ResultKind::Image => {
                let kinds: Vec<&str> = result.mime.keys().filter(|k| k.starts_with("image/")).map(String::as_str).collect();
                text.push_str(&format!("\nimage ({}): {}", kinds.join(", "), result.text));
            }
        }
    }
    if let Some(traceback) = &cell.traceback {
        text.push_str(&format!("\ntraceback:\n{traceback}"));
    } else if let Some(error) = &cell.error {
        text.push_str(&format!("\nerror: {}", error.kind()));
    }
    text
}

/// The message of an error envelope, or the start of the body.
fn message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorEnvelope>(body) {
        Ok(envelope) => envelope.error.message,
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

/// A request body as JSON.
fn encode(body: &impl serde::Serialize) -> Result<Vec<u8>, ToolFailure> {
    serde_json::to_vec(body).map_err(|e| ToolFailure(format!("the request could not be encoded: {e}")))
}

/// The sandbox host's answer as `T`; a body that is not one is the host's fault.
fn decode<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ToolFailure> {
    serde_json::from_slice(body).map_err(|e| ToolFailure(format!("the sandbox host's {what} is malformed: {e}")))
}

fn capped(text: &str) -> String {
    if text.len() <= OBSERVATION_BYTES {
        return text.to_owned();
    }
    let mut end = OBSERVATION_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes not shown]", &text[..end], text.len() - end)
}
