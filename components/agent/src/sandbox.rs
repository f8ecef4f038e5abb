//! The run's session on the sandbox host, through its code-interpreter API,
//! as the tenant the request is bound to: the tools' side of the loop.

use std::time::Duration;

use anypath_agent::{ToolFailure, Workspace};
use base64::Engine;
use http_client::{Method, call, call_with};
use serde_json::{Value, json};

use crate::Config;

/// Most bytes of a file or a run's output the model is shown.
const OBSERVATION_BYTES: usize = 16 << 10;
/// A run's own wall-clock bound inside the sandbox is its limit; this covers the call.
const RUN_CALL_TIMEOUT: Duration = Duration::from_secs(70);

/// One session of one tenant.
pub struct SandboxSession<'a> {
    config: &'a Config,
    tenant: String,
    request_id: String,
    base: String,
    bearer: String,
}

impl<'a> SandboxSession<'a> {
    /// Opens (or finds) the session.
    pub fn open(config: &'a Config, tenant: &str, session_id: &str, request_id: &str) -> Result<Self, String> {
        let session = Self {
            config,
            tenant: tenant.to_owned(),
            request_id: request_id.to_owned(),
            base: format!("{}/v1/sessions/{session_id}", config.sandbox_url),
            bearer: format!("Bearer {}", config.sandbox_token),
        };
        let body = json!({"session_id": session_id}).to_string();
        let url = format!("{}/v1/sessions", config.sandbox_url);
        match call(&url, Some(body.as_bytes()), &session.headers(), config.call_timeout) {
            Ok(answer) if answer.status == 201 => Ok(session),
            Ok(answer) => Err(format!("the sandbox host refused the session ({}): {}", answer.status, message(&answer.body))),
            Err(e) => Err(format!("the sandbox host is unreachable: {e}")),
        }
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

impl Workspace for SandboxSession<'_> {
    fn write_file(&mut self, path: &str, content: &str) -> Result<String, ToolFailure> {
        let body = json!({
            "filename": path,
            "content_base64": base64::engine::general_purpose::STANDARD.encode(content),
            "overwrite": true,
        });
        match self.send("/files", Some(body.to_string().as_bytes()), self.config.call_timeout)? {
            (201, _) => Ok(format!("wrote {} bytes to {path}", content.len())),
            (status, body) => Err(ToolFailure(format!("writing {path} failed ({status}): {}", message(&body)))),
        }
    }

    fn read_file(&mut self, path: &str) -> Result<String, ToolFailure> {
        match self.send(&format!("/files/{path}"), None, self.config.call_timeout)? {
            (200, bytes) => Ok(capped(&String::from_utf8_lossy(&bytes))),
            (status, body) => Err(ToolFailure(format!("reading {path} failed ({status}): {}", message(&body)))),
        }
    }

    fn list_files(&mut self) -> Result<String, ToolFailure> {
        match self.send("/files", None, self.config.call_timeout)? {
            (200, body) => {
                let listed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let lines: Vec<String> = listed["files"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|f| format!("{} ({} bytes)", f["filename"].as_str().unwrap_or("?"), f["size_bytes"]))
                    .collect();
                Ok(if lines.is_empty() { "(no files)".into() } else { lines.join("\n") })
            }
            (status, body) => Err(ToolFailure(format!("listing failed ({status}): {}", message(&body)))),
        }
    }

    fn run_python(&mut self, code: &str) -> Result<String, ToolFailure> {
        let body = json!({"code": code}).to_string();
        match self.send("/run", Some(body.as_bytes()), RUN_CALL_TIMEOUT)? {
            (200, body) => {
                let report: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let mut text = format!("exit_code: {}\nstdout:\n{}", report["exit_code"], report["stdout"].as_str().unwrap_or(""));
                if let Some(stderr) = report["stderr"].as_str().filter(|s| !s.is_empty()) {
                    text.push_str(&format!("\nstderr:\n{stderr}"));
                }
                if let Some(traceback) = report["traceback"].as_str() {
                    text.push_str(&format!("\ntraceback:\n{traceback}"));
                } else if let Some(kind) = report["error"]["kind"].as_str() {
                    text.push_str(&format!("\nerror: {kind}"));
                }
                Ok(capped(&text))
            }
            (status, body) => Err(ToolFailure(format!("the run failed ({status}): {}", message(&body)))),
        }
    }
}

/// The message of an error envelope, or the start of the body.
fn message(body: &[u8]) -> String {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    parsed["error"]["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
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
