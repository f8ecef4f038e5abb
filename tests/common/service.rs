//! `anypath sandbox serve` as a client sees it: a child process with API
//! keys for two tenants (`key-alice`, `key-bob`) and JSON helpers, alone or
//! as one host of a fleet sharing an object store and a Redis.

use std::process::Command;
use std::sync::Arc;

use reqwest::blocking::{Client, Response};
use serde_json::Value;

use super::Location;

/// The signing key every host of a fleet is started with.
pub const FLEET_SIGNING_KEY: &str = "a-fleet-signing-key-of-thirty-two-bytes";

/// What the hosts of a fleet share: where sessions' images and files are
/// kept, and the Redis holding who runs each session.
#[derive(Clone, Debug)]
pub struct SharedStores {
    /// `s3://<bucket>/<prefix>`, given as `--session-store`.
    pub s3_url: String,
    /// The variables that put the hosts' S3 client on the object store
    /// (`AWS_ENDPOINT_URL`, credentials, ...).
    pub endpoint_env: Vec<(String, String)>,
    /// `redis://127.0.0.1:<port>`, given as `--coordination`.
    pub redis_url: String,
}

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
        Self::spawn(data_dir, extra, &[])
    }

    /// The service with the two tenants' keys and `env` set in its own
    /// environment (a host's secrets, for the tests that look for them).
    pub fn start_with_env<D: Location + ?Sized>(data_dir: &D, env: &[(String, String)]) -> Self {
        Self::spawn(data_dir, &["--api-keys", "key-alice:alice,key-bob:bob"], env)
    }

    /// One host of a fleet: its own `data_dir` (its local cache), the
    /// fleet's object store and Redis, the fleet's signing key (a link one
    /// host signs is good on every other) and the two tenants' API keys,
    /// with `extra` arguments.
    pub fn start_shared<D: Location + ?Sized>(data_dir: &D, stores: &SharedStores, extra: &[&str]) -> Self {
        let shared: &[&str] = &["--session-store", &stores.s3_url, "--coordination", &stores.redis_url, "--signing-key", FLEET_SIGNING_KEY];
        // Alice's second key has the form E2B's SDKs accept (`e2b_` and hex).
        let tenants: &[&str] = &["--api-keys", "key-alice:alice,key-bob:bob,e2b_a11ce:alice"];
        Self::spawn(data_dir, &[shared, tenants, extra].concat(), &stores.endpoint_env)
    }

    fn spawn<D: Location + ?Sized>(data_dir: &D, args: &[&str], env: &[(String, String)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        command
            .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--warm-instances", "0", "--runner"])
            .arg(super::runner_path())
            .arg("--data-dir")
            .arg(data_dir.path())
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)));
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
