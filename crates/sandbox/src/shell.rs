//! The shell runtime: a command line run by a bash interpreter compiled to
//! WebAssembly (`components/shell`, bashkit's), one fresh instance per
//! command, on a session's tree and under the session runtime's limits.
//!
//! WASI has no processes, so the shell runs its utilities in process and
//! asks the host for what it cannot: `python` starts a fresh instance of
//! the session's runtime on the same tree ([`PythonHost`]), `node` one of
//! the JavaScript runtime ([`NodeHost`]), and the exit
//! status comes back through the same import (a WASI 0.2 exit says only
//! success or failure). Nothing runs on the host: no process is spawned, the
//! host's environment is not passed, and the guest's paths resolve below
//! the session's preopens as a Python cell's do.

mod node;
mod program;
mod python;
mod streams;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures_util::future::BoxFuture;
use wasmtime::component::{Component, Linker};
use wasmtime::{AsContextMut, StoreContextMut};
use wasmtime_wasi::p2::bindings::Command;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub use node::NodeHost;
pub use program::ProgramHost;
pub use python::PythonHost;
pub use streams::{OutputSink, StdinFeed, Stream};

use crate::engine::{self, EpochTicker, Form, StartError};
use crate::guest::{DATASETS_DIR, GuestState, SESSION_DIR};
use crate::interrupt::Interrupt;
use crate::layout::FilesLayout;
use crate::limits::{LimitOverrides, Limits};
use crate::outcome::{ExecError, Metrics};
use crate::quota_fs::{FileQuota, QuotaState};
use streams::OutputPipe;

/// The import as the shell world names it.
const INTERFACE: &str = "anypath:shell/host@0.1.0";

/// Exit status of a command stopped by its time limit (coreutils' `timeout`).
pub const TIMED_OUT: i32 = 124;
/// Exit status of a command stopped by an interrupt (SIGINT).
pub const INTERRUPTED: i32 = 130;
/// Exit status of a command stopped by another limit (killed, as by SIGKILL).
pub const KILLED: i32 = 137;

/// How to start the shell runtime.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// The shell component (`shell.wasm`, built by `cargo xtask build`).
    pub component: PathBuf,
    /// Where its native code is cached.
    pub cache_dir: PathBuf,
    /// The ceilings every command starts from (a session's runtime's).
    pub limits: Limits,
}

/// The tree a command runs on: a session's directory, as its code sees it.
#[derive(Debug, Clone)]
pub struct CommandTree {
    pub dir: PathBuf,
    pub layout: FilesLayout,
    pub datasets: Option<PathBuf>,
    pub quota: Option<FileQuota>,
}

/// One command line to run.
pub struct ShellCommand {
    /// The script, as `bash -c` takes it.
    pub script: String,
    /// The working directory, a guest path.
    pub cwd: String,
    /// The whole environment the command sees (nothing of the host's).
    pub env: Vec<(String, String)>,
    pub tree: CommandTree,
    /// The command's stdin while it runs; closed and empty when `None`.
    pub stdin: Option<StdinFeed>,
    /// Where stdout and stderr go as they are written.
    pub output: OutputSink,
    /// Lower limits for this command (a caller's timeout).
    pub limits: LimitOverrides,
    /// Stops the command when raised (a kill).
    pub interrupt: Option<Interrupt>,
    /// How `python` starts, when the session has a Python runtime.
    pub python: Option<PythonHost>,
    /// How `node` starts, when the host has the JavaScript runtime.
    pub node: Option<NodeHost>,
}

/// How a command ended.
#[derive(Debug, Clone)]
pub struct CommandExit {
    /// As bash gives it; [`TIMED_OUT`], [`INTERRUPTED`] or [`KILLED`] when a
    /// limit or an interrupt stopped it.
    pub exit_code: i32,
    /// The limit or failure that stopped it, if one did.
    pub error: Option<ExecError>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub metrics: Metrics,
}

/// The shell component, compiled and linked, ready to start commands.
/// Cheap to clone.
#[derive(Clone)]
pub struct ShellRuntime {
    inner: Arc<Loaded>,
}

struct Loaded {
    component: Component,
    linker: Linker<GuestState>,
    limits: Limits,
    _ticker: EpochTicker,
}

/// The shell's own requests to the host, for one command.
#[derive(Default)]
pub(crate) struct ShellCtx {
    python: Option<PythonHost>,
    node: Option<NodeHost>,
    exit_status: Option<i32>,
}

impl ShellRuntime {
    /// Loads (or compiles and caches) the shell component. Must be called
    /// inside a Tokio runtime.
    pub fn start(config: ShellConfig) -> BoxFuture<'static, Result<Self, StartError>> {
        Box::pin(async move {
            let loaded = engine::load(engine::session_engine_config(false), &config.component, &config.cache_dir, &config.limits, Form::AsBuilt).await?;
            let mut linker = loaded.linker;
            add_to_linker(&mut linker).map_err(StartError::Link)?;
            Ok(Self { inner: Arc::new(Loaded { component: loaded.component, linker, limits: config.limits, _ticker: loaded.ticker }) })
        })
    }

    /// The ceilings every command starts from.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Runs `command` to its end. Never panics on guest behaviour.
    ///
    /// The command runs on a thread of the blocking pool, where its file
    /// calls (a `ls -la` makes one per entry) run inline instead of each
    /// hopping to that pool and back; the rest (timers, `python`'s instance,
    /// its streams) stays on the runtime that called.
    pub fn run(&self, command: ShellCommand) -> BoxFuture<'static, CommandExit> {
        let shell = self.clone();
        Box::pin(async move {
            let runtime = tokio::runtime::Handle::current();
            let lost = |error: String| CommandExit {
                exit_code: KILLED,
                error: Some(ExecError::Internal { message: format!("the command's thread ended early: {error}") }),
                stdout_truncated: false,
                stderr_truncated: false,
                metrics: Metrics::default(),
            };
            tokio::task::spawn_blocking(move || runtime.block_on(shell.run_command(command))).await.unwrap_or_else(|e| lost(e.to_string()))
        })
    }

    async fn run_command(&self, command: ShellCommand) -> CommandExit {
        let started = Instant::now();
        let limits = self.inner.limits.narrowed_by(&command.limits);
        let stdout = OutputPipe::new(Stream::Stdout, command.output.clone(), u64::from(limits.stdout_bytes));
        let stderr = OutputPipe::new(Stream::Stderr, command.output.clone(), u64::from(limits.stderr_bytes));
        let mut metrics = Metrics::default();
        let ended = self.instantiate_and_run(&command, &limits, &stdout, &stderr, &mut metrics).await;
        metrics.duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let (exit_code, error) = match ended {
            Ok(code) => (code, None),
            Err(error) => {
                let code = match error {
                    ExecError::Timeout { .. } => TIMED_OUT,
                    ExecError::Interrupted {} => INTERRUPTED,
                    _ => KILLED,
                };
                (command.output)(Stream::Stderr, format!("anypath: the command was stopped: {error}\n").into());
                (code, Some(error))
            }
        };
        CommandExit { exit_code, error, stdout_truncated: stdout.truncated(), stderr_truncated: stderr.truncated(), metrics }
    }

    async fn instantiate_and_run(&self, command: &ShellCommand, limits: &Limits, stdout: &OutputPipe, stderr: &OutputPipe, metrics: &mut Metrics) -> Result<i32, ExecError> {
        let state = guest_state(command, limits, stdout, stderr).map_err(|e| engine::internal("preparing the command's context", &e))?;
        let mut store = engine::new_store(self.inner.component.engine(), state).map_err(|e| engine::internal("creating a store", &e))?;
        store.data_mut().shell = ShellCtx { python: command.python.clone(), node: command.node.clone(), exit_status: None };
        store.data_mut().interrupt = command.interrupt.clone();
        engine::arm(&mut store, limits)?;
        let (component, linker) = (&self.inner.component, &self.inner.linker);
        let called = engine::call_interruptible(limits, command.interrupt.as_ref(), false, async {
            let instance = Command::instantiate_async(&mut store, component, linker).await?;
            instance.wasi_cli_run().call_run(&mut store).await
        })
        .await;
        let (ran, _) = engine::settle(&store, limits, metrics, called)?;
        match (store.data().shell.exit_status, ran) {
            (Some(code), _) => Ok(code),
            // The shell ended without saying how: it failed before its script ran.
            (None, Ok(())) => Ok(0),
            (None, Err(())) => Ok(1),
        }
    }
}

/// The command's WASI context: its tree's preopens, its arguments
/// (`shell CWD open|closed SCRIPT`), its environment and its streams; no
/// network (switched off whatever the builder says).
fn guest_state(command: &ShellCommand, limits: &Limits, stdout: &OutputPipe, stderr: &OutputPipe) -> wasmtime::Result<GuestState> {
    let mut builder = WasiCtxBuilder::new();
    // The command runs on a blocking-pool thread (`ShellRuntime::run`). Set
    // before the preopens: each directory takes the setting when it is opened.
    builder.allow_blocking_current_thread(true);
    let tree = &command.tree;
    let dirs = tree.layout.guest_dirs(&tree.dir);
    builder.preopened_dir(&dirs.mnt_data, SESSION_DIR, FsPerms::ReadWrite)?;
    if let Some(datasets) = &tree.datasets {
        builder.preopened_dir(datasets, DATASETS_DIR, FsPerms::ReadOnly)?;
    }
    if let Some(root) = &dirs.root {
        builder.preopened_dir(root, "/", FsPerms::ReadWrite)?;
    }
    // Any stdin given is piped into the script (one already closed ends at once).
    let stdin_mode = if command.stdin.is_some() { "open" } else { "closed" };
    builder.args(&["shell", command.cwd.as_str(), stdin_mode, command.script.as_str()]);
    builder.envs(&command.env);
    builder.stdin(command.stdin.clone().unwrap_or_else(|| StdinFeed::closed_with(&[])));
    builder.stdout(stdout.clone());
    builder.stderr(stderr.clone());
    let mut state = GuestState::from_builder(builder, limits.memory_bytes, Instant::now() + limits.timeout());
    state.quota = tree.quota.map(|quota| Arc::new(QuotaState::new(quota)));
    Ok(state)
}

/// Serves the shell's `host` import.
fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    let mut instance = linker.instance(INTERFACE)?;
    instance.func_wrap("exit-status", |mut cx: StoreContextMut<'_, GuestState>, (code,): (i32,)| {
        cx.data_mut().shell.exit_status.get_or_insert(code);
        Ok(())
    })?;
    instance.func_wrap_async(
        "run-python",
        |mut cx: StoreContextMut<'_, GuestState>, (args, cwd, env, stdin): (Vec<String>, String, Vec<(String, String)>, Vec<u8>)| {
            let python = cx.as_context_mut().data_mut().shell.python.clone();
            Box::new(async move {
                let exit = match python {
                    Some(python) => python::run(&python, &args, &cwd, env, &stdin).await,
                    None => program::ProgramExit::missing("python", "this session has no Python runtime"),
                };
                Ok(((exit.code, exit.stdout, exit.stderr),))
            })
        },
    )?;
    instance.func_wrap_async(
        "run-node",
        |mut cx: StoreContextMut<'_, GuestState>, (args, cwd, env, stdin): (Vec<String>, String, Vec<(String, String)>, Vec<u8>)| {
            let node = cx.as_context_mut().data_mut().shell.node.clone();
            Box::new(async move {
                let exit = match node {
                    Some(node) => node::run(&node, &args, &cwd, env, &stdin).await,
                    None => program::ProgramExit::missing("node", "this host has no JavaScript runtime"),
                };
                Ok(((exit.code, exit.stdout, exit.stderr),))
            })
        },
    )?;
    Ok(())
}

/// Output gathered whole, for callers that do not stream (and tests).
#[derive(Default, Clone)]
pub struct Collected {
    chunks: Arc<Mutex<(Vec<u8>, Vec<u8>)>>,
}

impl Collected {
    /// A sink that appends to this collection.
    pub fn sink(&self) -> OutputSink {
        self.sink_then(None)
    }

    /// A sink that appends to this collection, then passes each chunk on to `then`.
    pub fn sink_then(&self, then: Option<OutputSink>) -> OutputSink {
        let chunks = self.chunks.clone();
        Arc::new(move |stream, bytes| {
            {
                let mut chunks = chunks.lock().unwrap_or_else(PoisonError::into_inner);
                match stream {
                    Stream::Stdout => chunks.0.extend_from_slice(&bytes),
                    Stream::Stderr => chunks.1.extend_from_slice(&bytes),
                }
            }
            if let Some(then) = &then {
                then(stream, bytes);
            }
        })
    }

    /// Stdout and stderr so far, as text (broken UTF-8 replaced).
    pub fn text(&self) -> (String, String) {
        let chunks = self.chunks.lock().unwrap_or_else(PoisonError::into_inner);
        (String::from_utf8_lossy(&chunks.0).into_owned(), String::from_utf8_lossy(&chunks.1).into_owned())
    }
}
