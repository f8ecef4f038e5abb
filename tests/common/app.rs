//! A running `anypath up` for whole-app tests, and helpers for its answers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use serde_json::Value;

use super::{Location, TempPath};

/// The program a whole-app test runs the app under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppHost {
    /// `anypath up`: the app and its own sandbox host in one process.
    AnypathUp,
    /// The Spin CLI at this path (`spin up`), with `anypath sandbox serve --token` beside it.
    Spin(PathBuf),
}

impl AppHost {
    /// `ANYPATH_TEST_APP_HOST=spin` (set by `cargo xtask test` for its pass
    /// under the real Spin) picks the Spin CLI named by `SPIN_BIN`.
    pub fn from_env() -> Self {
        match std::env::var("ANYPATH_TEST_APP_HOST").as_deref() {
            Ok("spin") => {
                let bin = std::env::var_os("SPIN_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("spin"));
                AppHost::Spin(bin)
            }
            _ => AppHost::AnypathUp,
        }
    }
}

/// A running app with its own key-value file (or Redis server).
pub struct App {
    /// `anypath up`, or `spin up`.
    pub process: super::Spawned,
    pub base: String,
    /// The sandbox host the app's components call (`host:port`).
    pub sandbox: String,
    /// E2B's API beside it (`host:port`), under `anypath up`.
    pub e2b: Option<String>,
    /// The separate sandbox host under Spin.
    _sandbox_process: Option<super::Spawned>,
    /// The temporary directory the app's files are in, when it was started on
    /// a [`TempPath`]: removed after the processes above are gone.
    _dir: Option<Arc<tempfile::TempDir>>,
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `kv.db` in a fresh temporary directory `anypath-app-<name>-*`, removed
/// when the returned path and every app or service started on it (or on a
/// sibling from [`TempPath::with_file_name`]) are dropped.
pub fn temp_kv(name: &str) -> TempPath {
    TempPath::new(super::scratch(&format!("anypath-app-{name}-")), "kv.db")
}

/// The shared secret the app presents to its sandbox host under Spin.
pub const SANDBOX_TOKEN: &str = "test-sandbox-token";

impl App {
    pub fn start<K: Location + ?Sized>(kv: &K) -> Self {
        Self::start_with(kv, "spin.toml", &[])
    }

    /// Starts `manifest` (relative to the repository) under the host the
    /// test run chose, with `env` over the environment and the defaults.
    pub fn start_with<K: Location + ?Sized>(kv: &K, manifest: &str, env: &[(&str, &str)]) -> Self {
        let (dir, kv) = (kv.keep(), kv.path());
        let mut settings: Vec<(String, String)> = Vec::new();
        if super::redis_server::suite_on_redis() {
            settings.extend(super::redis_server::for_app(kv));
        }
        settings.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let app = match AppHost::from_env() {
            AppHost::AnypathUp => Self::start_anypath_up(kv, manifest, &settings),
            AppHost::Spin(bin) => Self::start_spin(&bin, kv, manifest, &settings),
        };
        App { _dir: dir, ..app }
    }

    fn start_anypath_up(kv: &Path, manifest: &str, settings: &[(String, String)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        command
            .args(["up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--e2b-listen", "127.0.0.1:0", "--from"])
            .arg(repo().join(manifest))
            .arg("--kv")
            .arg(kv)
            .arg("--data-dir")
            .arg(kv.with_file_name("interpreter"))
            .arg("--runner")
            .arg(super::runner_path())
            .env_remove("SPIN_VARIABLE_AUTH_TOKEN")
            .envs(settings.iter().map(|(k, v)| (k, v)));
        let process = super::Spawned::start(&mut command, "app serving");
        let sandbox = own_sandbox(&process).expect("the log names the app's own sandbox listener");
        let e2b = served(&process, "e2b");
        let base = format!("http://{}", process.address);
        App { process, base, sandbox, e2b, _sandbox_process: None, _dir: None }
    }

    /// `spin up` over a runtime configuration that puts the `default` store
    /// in `kv`, beside a sandbox host of its own that requires a token.
    fn start_spin(spin: &Path, kv: &Path, manifest: &str, settings: &[(String, String)]) -> Self {
        let dir = kv.parent().expect("kv has a directory");
        let mut sandbox_command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        sandbox_command
            .args(["sandbox", "serve", "--listen", "127.0.0.1:0", "--token", SANDBOX_TOKEN, "--runner"])
            .arg(super::runner_path())
            .arg("--data-dir")
            .arg(dir.join("interpreter"));
        let sandbox_process = super::Spawned::start(&mut sandbox_command, "sandbox serving");
        let sandbox = sandbox_process.address.clone();
        let runtime_config = dir.join("runtime-config.toml");
        let kv_entry = toml::Value::String(kv.display().to_string());
        std::fs::write(&runtime_config, format!("[key_value_store.default]\ntype = \"spin\"\npath = {kv_entry}\n"))
            .expect("runtime config written");
        let mut command = Command::new(spin);
        command
            .args(["up", "--listen", "127.0.0.1:0", "--from"])
            .arg(repo().join(manifest))
            .arg("--runtime-config-file")
            .arg(&runtime_config)
            .arg("--state-dir")
            .arg(dir.join("spin-state"))
            .env_remove("SPIN_VARIABLE_AUTH_TOKEN")
            .env("SPIN_VARIABLE_SANDBOX_HOSTS", &sandbox)
            .env("SPIN_VARIABLE_SANDBOX_ALLOWED", &sandbox)
            .env("SPIN_VARIABLE_SANDBOX_TOKEN", SANDBOX_TOKEN)
            .envs(settings.iter().map(|(k, v)| (k, v)));
        let process = super::Spawned::start_when(&mut command, |line| {
            line.trim().strip_prefix("Serving http://").map(str::to_owned)
        });
        let base = format!("http://{}", process.address);
        App { process, base, sandbox, e2b: None, _sandbox_process: Some(sandbox_process), _dir: None }
    }

    pub fn send(&self, method: &str, path: &str, body: Option<Value>) -> Response {
        self.send_as(method, path, body, &[])
    }

    pub fn send_as(&self, method: &str, path: &str, body: Option<Value>, headers: &[(&str, &str)]) -> Response {
        let mut request = client().request(method.parse().unwrap(), format!("{}{path}", self.base));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().expect("request sent")
    }
}

/// A client that waits as long as the app may take: an agent run of several
/// turns and test runs outlasts reqwest's default of 30 s on a loaded
/// machine, and a call that hangs is caught by the test runner's own timeout.
fn client() -> Client {
    Client::builder().timeout(std::time::Duration::from_secs(300)).build().expect("an HTTP client")
}

pub fn json_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().unwrap();
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}

pub fn assert_envelope(response: Response, status: u16, code: &str) {
    let got = response.status().as_u16();
    let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let (_, body) = json_of(response);
    assert_eq!(got, status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["error"]["request_id"], id.as_str());
}


/// The `anypath` binary, Spin manifest and runner component an app runs with.
pub struct Build {
    pub binary: PathBuf,
    pub manifest: PathBuf,
    pub runner: PathBuf,
}

impl Build {
    /// This build, or another one (to measure an older build) named by
    /// `ANYPATH_UP_BIN`, `ANYPATH_UP_MANIFEST` and `ANYPATH_UP_RUNNER`, each
    /// optional; a manifest's relative paths resolve from its own directory.
    pub fn from_env() -> Self {
        let chosen = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let build = Build {
            binary: chosen("ANYPATH_UP_BIN").unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_anypath"))),
            manifest: chosen("ANYPATH_UP_MANIFEST").unwrap_or_else(|| repo().join("spin.toml")),
            runner: chosen("ANYPATH_UP_RUNNER").unwrap_or_else(super::runner_path),
        };
        for path in [&build.binary, &build.manifest, &build.runner] {
            assert!(path.is_file(), "{} is missing", path.display());
        }
        build
    }
}

impl App {
    /// Starts `build` with its own key-value file and `env` on top of the test's environment.
    pub fn start_build<K: Location + ?Sized>(kv: &K, build: &Build, env: &[(String, String)]) -> Self {
        let (dir, kv) = (kv.keep(), kv.path());
        let mut command = Command::new(&build.binary);
        command.args(["up", "--listen", "127.0.0.1:0"]);
        if build.binary == Path::new(env!("CARGO_BIN_EXE_anypath")) {
            // Builds before the code interpreter have neither flag.
            command.arg("--sandbox-listen").arg("127.0.0.1:0").arg("--data-dir").arg(kv.with_file_name("interpreter"));
            command.args(["--e2b-listen", "127.0.0.1:0"]);
        }
        command
            .args(["--from"])
            .arg(&build.manifest)
            .arg("--kv")
            .arg(kv)
            .arg("--runner")
            .arg(&build.runner)
            .env_remove("SPIN_VARIABLE_AUTH_TOKEN")
            .envs(env.iter().map(|(k, v)| (k, v)));
        let process = super::Spawned::start(&mut command, "app serving");
        let base = format!("http://{}", process.address);
        // Builds before the code interpreter name no sandbox listener.
        let sandbox = own_sandbox(&process).unwrap_or_default();
        let e2b = served(&process, "e2b");
        App { process, base, sandbox, e2b, _sandbox_process: None, _dir: dir }
    }
}

/// The sandbox listener `anypath up` announced with "app serving".
fn own_sandbox(process: &super::Spawned) -> Option<String> {
    served(process, "sandbox")
}

/// The address `anypath up`'s "app serving" line gives under `field`.
fn served(process: &super::Spawned, field: &str) -> Option<String> {
    process
        .log_lines()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|entry| entry["message"] == "app serving")
        .and_then(|entry| entry[field].as_str().map(str::to_owned))
        .filter(|address| address != "off")
}
