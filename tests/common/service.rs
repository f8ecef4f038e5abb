//! `anypath sandbox serve` as a client sees it: a child process with API
//! keys for two tenants (`key-alice`, `key-bob`) and JSON helpers.

use std::process::Command;
use std::sync::Arc;

use reqwest::blocking::{Client, Response};
use serde_json::Value;

use super::Location;

/// A running sandbox service.
pub struct Service {
    pub process: super::Spawned,
    pub base: String,
    /// The temporary directory the data directory is in, when it was given
    /// as a [`super::TempPath`]: removed after the process is gone.
    _dir: Option<Arc<tempfile::TempDir>>,
}

impl Service {
    /// Serves the code interpreter on `data_dir`.
    pub fn start<D: Location + ?Sized>(data_dir: &D) -> Self {
        Self::start_with(data_dir, &[])
    }

    /// The same, with more command-line arguments.
    pub fn start_with<D: Location + ?Sized>(data_dir: &D, extra: &[&str]) -> Self {
        Self::start_open(data_dir, &[&["--api-keys", "key-alice:alice,key-bob:bob"], extra].concat())
    }

    /// Serves the code interpreter without API keys, with `extra` arguments
    /// (none: an open service, where every caller is tenant `default`).
    pub fn start_open<D: Location + ?Sized>(data_dir: &D, extra: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        command
            .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--warm-instances", "0", "--runner"])
            .arg(super::runner_path())
            .arg("--data-dir")
            .arg(data_dir.path())
            .args(extra);
        let process = super::Spawned::start(&mut command, "sandbox serving");
        let base = format!("http://{}", process.address);
        Self { process, base, _dir: data_dir.keep() }
    }

    /// One request; `key` empty sends no API key.
    pub fn call(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> Response {
        let mut request = Client::new().request(method.parse().expect("method"), format!("{}{path}", self.base));
        if !key.is_empty() {
            request = request.header("x-api-key", key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().expect("request sent")
    }

    /// One request, its status and JSON body (`null` when not JSON).
    pub fn json(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let response = self.call(key, method, path, body);
        let status = response.status().as_u16();
        (status, response.json().unwrap_or(Value::Null))
    }
}
