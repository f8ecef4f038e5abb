//! Shared set-up: one sandbox per test binary, on one runtime.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

pub mod app;
pub mod cells;
pub mod fake_llm;
pub mod llama;
pub mod redis_server;
pub mod seaweedfs;
pub mod service;

use anypath_sandbox::{BlockRunner, DataVariant, ExecError, ExecRequest, Failure, JavascriptConfig, PythonDataConfig, Report, RunnerConfig, SessionRuntime, Success};
use serde_json::{Value, json};

/// Polls `done` until it holds (true) or `timeout` passes (false): a
/// condition, not a fixed sleep, since a loaded machine is slow by any margin.
pub fn eventually(timeout: std::time::Duration, done: impl Fn() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// A fresh, empty directory `<tmp>/<prefix><random>`, removed with everything
/// in it when the returned value is dropped: bind it for as long as the
/// directory is used (by the test, or a process serving on it).
pub fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap_or_else(|e| panic!("a temporary directory {prefix}*: {e}"))
}

/// A path in a [`scratch`] directory that keeps the directory alive: it goes
/// when the last holder does, the test's binding or an app or service
/// started on the path (see [`Location`]), so a path passed as a temporary
/// (`App::start(&temp_kv("x"))`) is still there while the app runs.
#[derive(Clone, Debug)]
pub struct TempPath {
    path: PathBuf,
    dir: std::sync::Arc<tempfile::TempDir>,
}

impl TempPath {
    /// `name` in `dir`, which the value then owns.
    pub fn new(dir: tempfile::TempDir, name: impl AsRef<std::path::Path>) -> Self {
        Self { path: dir.path().join(name), dir: std::sync::Arc::new(dir) }
    }

    /// A sibling of this path (as [`std::path::Path::with_file_name`]) that
    /// keeps the same directory alive.
    pub fn with_file_name(&self, name: impl AsRef<std::ffi::OsStr>) -> Self {
        Self { path: self.path.with_file_name(name), dir: self.dir.clone() }
    }

    /// The path itself.
    pub fn as_path(&self) -> &std::path::Path {
        &self.path
    }
}

impl std::ops::Deref for TempPath {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for TempPath {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

/// Where a test starts an app or a service: a plain path, or a [`TempPath`]
/// whose directory the app or service then keeps until it is dropped.
pub trait Location {
    fn path(&self) -> &std::path::Path;

    /// The temporary directory to keep alive with what is started there.
    fn keep(&self) -> Option<std::sync::Arc<tempfile::TempDir>> {
        None
    }
}

impl Location for std::path::Path {
    fn path(&self) -> &std::path::Path {
        self
    }
}

impl Location for PathBuf {
    fn path(&self) -> &std::path::Path {
        self
    }
}

impl Location for TempPath {
    fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn keep(&self) -> Option<std::sync::Arc<tempfile::TempDir>> {
        Some(self.dir.clone())
    }
}

impl<T: Location + ?Sized> Location for &T {
    fn path(&self) -> &std::path::Path {
        (**self).path()
    }

    fn keep(&self) -> Option<std::sync::Arc<tempfile::TempDir>> {
        (**self).keep()
    }
}

/// The suite's venv Python (`ANYPATH_PYTHON`, else `.venv/bin/python`),
/// with the clients `cargo xtask test` installs (MCP, E2B's SDK, ...).
pub fn venv_python() -> PathBuf {
    let path = std::env::var_os("ANYPATH_PYTHON").map(PathBuf::from).unwrap_or_else(|| app::repo().join(".venv/bin/python"));
    assert!(path.is_file(), "python {} is missing: run `cargo xtask test`", path.display());
    path
}

/// The runner built by `cargo xtask build` (or `ANYPATH_RUNNER`).
pub fn runner_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_RUNNER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/python-runner/runner.wasm"));
    assert!(path.is_file(), "runner component {} is missing: run `cargo xtask test`", path.display());
    path
}

/// The shell runtime (`ANYPATH_SHELL`, set by `cargo xtask test`), for
/// servers started without the test's environment (an MCP client's stdio).
pub fn shell_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_SHELL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/shell/shell.wasm"));
    assert!(path.is_file(), "shell component {} is missing: run `cargo xtask test`", path.display());
    path
}

/// The tests' wheelhouse (`target/wheelhouse/`): tabulate, python-slugify
/// and its dependency text-unidecode, pinned by `cargo xtask`.
pub fn wheelhouse_dir() -> PathBuf {
    let dir = std::env::var_os("ANYPATH_WHEELHOUSE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/wheelhouse"));
    let wheels = std::fs::read_dir(&dir).map(|entries| entries.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "whl")).count()).unwrap_or(0);
    assert!(wheels >= 3, "the tests' wheelhouse {} is missing: run `cargo xtask test`", dir.display());
    dir
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
}

/// The shared block runner, with default limits and a warm pool.
pub fn sandbox() -> &'static BlockRunner {
    static SANDBOX: OnceLock<BlockRunner> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        runtime().block_on(BlockRunner::start(RunnerConfig::new(runner_path()))).expect("sandbox starts")
    })
}

/// `python` sessions on the shared block runner's engine.
pub fn python_sessions() -> &'static SessionRuntime {
    static SESSIONS: OnceLock<SessionRuntime> = OnceLock::new();
    SESSIONS.get_or_init(|| runtime().block_on(sandbox().session_runtime()).expect("python sessions start"))
}

/// The data runtime's directory built by `cargo xtask build` (or `ANYPATH_PYTHON_DATA`).
pub fn python_data_dir() -> PathBuf {
    let dir = std::env::var_os("ANYPATH_PYTHON_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/python-data"));
    assert!(dir.join("lib/python315.zip").is_file(), "python-data runtime {} is missing: run `cargo xtask test`", dir.display());
    dir
}

/// The shared data runtime (pre-initialised variant, its default limits).
pub fn data_sandbox() -> &'static SessionRuntime {
    static SANDBOX: OnceLock<SessionRuntime> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        runtime().block_on(SessionRuntime::start_python_data(PythonDataConfig::new(&python_data_dir(), DataVariant::Preimported))).expect("data sandbox starts")
    })
}

/// The JavaScript runtime built by `cargo xtask build` (or `ANYPATH_JAVASCRIPT`).
pub fn javascript_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_JAVASCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/javascript/javascript.wasm"));
    assert!(path.is_file(), "JavaScript runtime {} is missing: run `cargo xtask test`", path.display());
    path
}

/// The shared JavaScript runtime (its default limits).
pub fn javascript_sessions() -> &'static SessionRuntime {
    static SANDBOX: OnceLock<SessionRuntime> = OnceLock::new();
    SANDBOX.get_or_init(|| runtime().block_on(SessionRuntime::start_javascript(JavascriptConfig::new(javascript_path()))).expect("javascript sessions start"))
}

/// Runs `future` on the shared runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// Runs one request on the shared sandbox.
pub fn exec(request: ExecRequest) -> Report {
    runtime().block_on(sandbox().execute(request))
}

/// Runs `code` with `ctx` and a `members` collection holding `docs`.
pub fn run_with(code: &str, ctx: Value, docs: Value) -> Report {
    let request = ExecRequest::new(code)
        .with_ctx(&ctx)
        .and_then(|r| r.with_collection("members", 3, &docs))
        .expect("serialisable request");
    exec(request)
}

/// Runs `code` with an empty context and an empty `members` collection.
pub fn run(code: &str) -> Report {
    run_with(code, json!({}), json!([]))
}

/// The success, or a panic that shows the failure.
pub fn success(report: &Report) -> &Success {
    match &report.outcome {
        Ok(success) => success,
        Err(failure) => panic!("expected success, got {failure:#?}"),
    }
}

/// The failure, or a panic that shows the success.
pub fn failure(report: &Report) -> &Failure {
    match &report.outcome {
        Ok(success) => panic!("expected a failure, got {success:#?}"),
        Err(failure) => failure,
    }
}

/// The error of a failed report.
pub fn error(report: &Report) -> &ExecError {
    &failure(report).error
}

/// The reply body as a JSON value.
pub fn body(report: &Report) -> Value {
    let raw = success(report).reply.body.as_ref().expect("a body");
    serde_json::from_str(raw.get()).expect("body is JSON")
}

/// The journal as JSON values: `[{collection, op, id, document}]`.
pub fn journal(report: &Report) -> Value {
    serde_json::to_value(&success(report).mutations).expect("journal serialises")
}

/// A process a test started: killed on drop, with the JSON log lines it wrote to stderr.
pub struct Spawned {
    child: std::process::Child,
    /// The `listen` address from the log line announcing it serves.
    pub address: String,
    logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Spawned {
    /// Starts `command` (stderr piped) and waits for a log line whose `message`
    /// is `ready`, taking the address from its `listen` field.
    pub fn start(command: &mut std::process::Command, ready: &str) -> Self {
        let ready = ready.to_owned();
        Self::start_when(command, move |line| {
            let entry: Value = serde_json::from_str(line).ok()?;
            (entry["message"] == ready.as_str()).then(|| entry["listen"].as_str().unwrap_or_default().to_owned())
        })
    }

    /// Starts `command` with stdout and stderr piped and waits for the first
    /// line of either from which `address` takes the address it serves on.
    pub fn start_when(command: &mut std::process::Command, address: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        // A group of its own, so dropping it also ends what it started
        // (`spin up` runs its app in a `spin trigger http` child).
        let mut child = command
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} starts: {e}"));
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (found, announced) = std::sync::mpsc::channel();
        let address = std::sync::Arc::new(address);
        let stdout: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().expect("piped stdout"));
        let stderr: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().expect("piped stderr"));
        for stream in [stdout, stderr] {
            let (sink, found, address) = (logs.clone(), found.clone(), address.clone());
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stream).lines().map_while(Result::ok) {
                    let listen = address(&line);
                    // Stored before it is announced, so the caller finds the line.
                    sink.lock().expect("log lock").push(line);
                    if let Some(listen) = listen {
                        let _ = found.send(Some(listen));
                    }
                }
                // The stream closed: the process is gone (or closed it).
                let _ = found.send(None);
            });
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        let mut closed = 0;
        let address = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match announced.recv_timeout(left) {
                Ok(Some(address)) => break Some(address),
                Ok(None) if closed == 0 => closed += 1,
                Ok(None) | Err(_) => break None,
            }
        };
        let Some(address) = address else {
            let _ = child.kill();
            let _ = child.wait();
            let lines = logs.lock().expect("log lock").join("\n");
            panic!("{command:?} did not report its address; its output:\n{lines}");
        };
        Self { child, address, logs }
    }

    /// Stops the process with SIGTERM, as an operator would, and waits for it.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = std::process::Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        self.child.wait().expect("the process exits")
    }

    /// Stops the process with SIGKILL, as a crash would, and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGSTOP: the process stays, holding its ports and leases, but does
    /// nothing, as a host in a long pause or cut off from the network would.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT: a frozen process goes on where it stopped.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: libc::c_int) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid; it touches no memory of ours.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// Every stderr line so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.logs.lock().expect("log lock").clone()
    }

    /// Waits (up to 10 s) for a stderr line that satisfies `wanted`: lines
    /// arrive on a reader thread, after the response the test already has.
    pub fn wait_for_log(&self, wanted: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(line) = self.log_lines().into_iter().find(|l| wanted(l)) {
                return Some(line);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(group) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals that process group
            // (the one `start_when` made); it touches no memory of ours.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `app` on a free loopback port from a thread of its own, for the
/// rest of the test process; answers its `host:port`.
pub fn serve_in_background(app: axum::Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("address").to_string()).expect("report address");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    rx.recv().expect("the server's address")
}

/// The Jupyter clients' venv Python (`ANYPATH_JUPYTER_PYTHON`, else
/// `.venv-jupyter/bin/python`): jupyter_server, nbclient, AutoGen, ipykernel.
pub fn jupyter_python() -> PathBuf {
    let path = std::env::var_os("ANYPATH_JUPYTER_PYTHON").map(PathBuf::from).unwrap_or_else(|| app::repo().join(".venv-jupyter/bin/python"));
    assert!(path.is_file(), "python {} is missing: run `cargo xtask test`", path.display());
    path
}
