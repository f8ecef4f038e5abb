//! The real small model the LLM-driven faces are tested with:
//! Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by llama.cpp
//! (`tests/support/llama_server.py`) on two threads. `cargo xtask test`
//! provides the model and the server's Python (`ANYPATH_LLM_MODEL`,
//! `ANYPATH_PYTHON`).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::app::repo;

/// The model name the components send (llama.cpp serves whatever it loaded).
pub const MODEL_NAME: &str = "qwen2.5-coder-1.5b";

/// A path from the environment that must name a file.
pub fn required_file(name: &str) -> PathBuf {
    let path = std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{name} is not set: run `cargo xtask test`, which provides the small model and its server")
    });
    assert!(path.is_file(), "{name}={} is not a file: run `cargo xtask test`", path.display());
    path
}

/// The model server a small-model test plans with: the one `cargo xtask test`
/// started for the whole run (`ANYPATH_LLM_ADDRESS`, so the suites share one
/// loaded model), or else one of the test's own on the model and Python the
/// environment names.
pub enum ModelServer {
    /// Started by the caller of the tests; lives as long as their run.
    Shared(String),
    /// Started by this test; stopped when this value is dropped.
    Own(LlamaServer),
}

impl ModelServer {
    /// The shared server when there is one, else a new one of this test's own.
    pub fn shared_or_start() -> Self {
        match std::env::var("ANYPATH_LLM_ADDRESS").ok().filter(|a| !a.is_empty()) {
            Some(address) => Self::Shared(address),
            None => Self::Own(LlamaServer::start(&required_file("ANYPATH_PYTHON"), &required_file("ANYPATH_LLM_MODEL"))),
        }
    }

    /// `127.0.0.1:port`.
    pub fn address(&self) -> &str {
        match self {
            Self::Shared(address) => address,
            Self::Own(server) => &server.address,
        }
    }
}

/// `llama_server.py` serving the model; killed on drop. Its stdin stays open
/// while this lives, and the server exits when it closes, so it cannot
/// outlive a test process that dies.
pub struct LlamaServer {
    child: Child,
    _stdin: ChildStdin,
    /// `127.0.0.1:port`.
    pub address: String,
}

impl LlamaServer {
    /// Starts the server on `model` and waits until it answers.
    pub fn start(python: &Path, model: &Path) -> Self {
        let script = repo().join("tests/support/llama_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg("--model")
            .arg(model)
            .args(["--port", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the model server starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let log = drain(child.stderr.take().expect("piped stderr"));
        let (found, address) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(entry) = serde_json::from_str::<Value>(&line)
                    && entry["message"] == "llm serving"
                {
                    let _ = found.send(entry["listen"].as_str().unwrap_or_default().to_owned());
                }
            }
        });
        let mut server = LlamaServer { child, _stdin: stdin, address: String::new() };
        match address.recv_timeout(Duration::from_secs(300)) {
            Ok(address) => server.address = address,
            Err(_) => panic!("the model server did not report its address; its log ends:\n{}", tail(&log, 30)),
        }
        server
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a pipe to its end on a thread (a full pipe would stall the writer), keeping the text.
fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            sink.lock().expect("log lock").push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    text
}

fn tail(log: &Mutex<String>, lines: usize) -> String {
    let text = log.lock().expect("log lock");
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}


/// The Spin variables that point the planner (and through it the agent)
/// at the local model in planner mode `mode`, with timeouts long enough for
/// a 1.5B model on two cores.
pub fn llm_env(llm_address: &str, mode: &str) -> Vec<(String, String)> {
    [
        ("SPIN_VARIABLE_LLM_PROVIDER", "openai"),
        ("SPIN_VARIABLE_LLM_SCHEME", "http"),
        ("SPIN_VARIABLE_LLM_HOST", llm_address),
        ("SPIN_VARIABLE_LLM_MODEL", MODEL_NAME),
        // A loopback host needs no key.
        ("SPIN_VARIABLE_LLM_API_KEY", ""),
        ("SPIN_VARIABLE_PLANNER_MODE", mode),
        ("SPIN_VARIABLE_LLM_TIMEOUT_MS", "180000"),
        ("SPIN_VARIABLE_PLANNER_TIMEOUT_MS", "600000"),
        ("SPIN_VARIABLE_CALL_TIMEOUT_MS", "60000"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}
