//! A running `anypath up` for whole-app tests, and helpers for its answers.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use serde_json::Value;

/// A running `anypath up` with its own key-value file.
pub struct App {
    pub process: super::Spawned,
    pub base: String,
}

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn temp_kv(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("anypath-app-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("kv.db")
}

impl App {
    pub fn start(kv: &Path) -> Self {
        Self::start_with(kv, "spin.toml", &[])
    }

    pub fn start_with(kv: &Path, manifest: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_anypath"));
        command
            .args(["up", "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--from"])
            .arg(repo().join(manifest))
            .arg("--kv")
            .arg(kv)
            .arg("--data-dir")
            .arg(kv.with_file_name("interpreter"))
            .arg("--runner")
            .arg(super::runner_path())
            .env_remove("SPIN_VARIABLE_AUTH_TOKEN");
        if super::redis_server::suite_on_redis() {
            command.envs(super::redis_server::for_app(kv));
        }
        command.envs(env.iter().copied());
        let process = super::Spawned::start(&mut command, "app serving");
        let base = format!("http://{}", process.address);
        App { process, base }
    }

    pub fn send(&self, method: &str, path: &str, body: Option<Value>) -> Response {
        self.send_as(method, path, body, &[])
    }

    pub fn send_as(&self, method: &str, path: &str, body: Option<Value>, headers: &[(&str, &str)]) -> Response {
        let mut request = Client::new().request(method.parse().unwrap(), format!("{}{path}", self.base));
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().expect("request sent")
    }
}

pub fn json_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().unwrap();
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}

pub fn assert_envelope(response: Response, status: u16, code: &str) {
    assert_eq!(response.status().as_u16(), status);
    let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let (_, body) = json_of(response);
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
    pub fn start_build(kv: &Path, build: &Build, env: &[(String, String)]) -> Self {
        let mut command = Command::new(&build.binary);
        command.args(["up", "--listen", "127.0.0.1:0"]);
        if build.binary == Path::new(env!("CARGO_BIN_EXE_anypath")) {
            // Builds before the code interpreter have neither flag.
            command.arg("--sandbox-listen").arg("127.0.0.1:0").arg("--data-dir").arg(kv.with_file_name("interpreter"));
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
        App { process, base }
    }
}
