//! What the interpreter's unit tests share: an interpreter on a real
//! runner, and gates that hold up one step of file work so a test can
//! act while it waits.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anypath_sandbox::{BlockRunner, RunnerConfig};
use anypath_wire::{RunReport, RunRequest};

use crate::config::InterpreterConfig;
use crate::interpreter::Interpreter;

/// The file work a test may hold up.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    /// A session's tree is removed.
    Removal,
    /// A state image is written.
    ImageWrite,
    /// A state image is read to be resumed.
    ImageRead,
    /// A resumed session's state image is removed.
    ImageRemove,
}

/// Steps that fail, a number of times, under a root: (root, step, failures left).
static FAILURES: Mutex<Vec<(PathBuf, Step, usize)>> = Mutex::new(Vec::new());

/// Makes the next `times` of `step` under `root` fail.
pub(crate) fn fail(root: &Path, step: Step, times: usize) {
    FAILURES.lock().expect("failures").push((root.to_path_buf(), step, times));
}

/// Whether this `step` at `path` is to fail (counting it).
pub(crate) fn fails_at(step: Step, path: &Path) -> bool {
    let mut failures = FAILURES.lock().unwrap_or_else(|p| p.into_inner());
    match failures.iter_mut().find(|(root, s, left)| *s == step && *left > 0 && path.starts_with(root)) {
        Some((_, _, left)) => {
            *left -= 1;
            true
        }
        None => false,
    }
}

/// A step held up under `root`: it reports the path, then waits to be let go.
struct Gate {
    root: PathBuf,
    step: Step,
    entered: Sender<PathBuf>,
    release: Receiver<()>,
}

/// Steps the test holds up; tests in this process share it, each under its own root.
static GATES: Mutex<Vec<Gate>> = Mutex::new(Vec::new());

/// Called before each step of file work: one under a gated root waits there.
pub(crate) fn pause_at(step: Step, path: &Path) {
    let gate = {
        let mut gates = GATES.lock().unwrap_or_else(|p| p.into_inner());
        let at = gates.iter().position(|g| g.step == step && path.starts_with(&g.root));
        at.map(|at| gates.remove(at))
    };
    if let Some(gate) = gate {
        let _ = gate.entered.send(path.to_path_buf());
        let _ = gate.release.recv_timeout(Duration::from_secs(30));
    }
}

/// Holds up the next `step` under `root`: a receiver told when it is
/// reached, and the sender that lets it go.
pub(crate) fn hold(root: &Path, step: Step) -> (Receiver<PathBuf>, Sender<()>) {
    let (entered_tx, entered) = channel();
    let (release, release_rx) = channel();
    GATES.lock().expect("gates").push(Gate { root: root.to_path_buf(), step, entered: entered_tx, release: release_rx });
    (entered, release)
}

fn runner() -> PathBuf {
    let path = std::env::var_os("ANYPATH_RUNNER")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/python-runner/runner.wasm"));
    assert!(path.is_file(), "runner component {} is missing: run `cargo xtask build` or set ANYPATH_RUNNER", path.display());
    path
}

/// An interpreter on `root`, and the runtime its sandbox started on
/// (kept alive as long as the sandbox).
pub(crate) fn interpreter(root: &Path) -> (tokio::runtime::Runtime, Arc<Interpreter>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let mut config = RunnerConfig::new(runner());
    config.warm_instances = 0;
    let runner = runtime.block_on(BlockRunner::start(config)).expect("the runner starts");
    let sessions = runtime.block_on(runner.session_runtime()).expect("sessions start");
    (runtime, Arc::new(Interpreter::new(vec![sessions], InterpreterConfig::new(root)).expect("interpreter")))
}

/// Runs `work` on its own thread; its answer, or `None` when it takes
/// longer than `within`.
pub(crate) fn within<T: Send + 'static>(within: Duration, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(within).ok()
}

/// Runs `code` in tenant `t`'s session `s`.
pub(crate) fn run(runtime: &tokio::runtime::Runtime, interpreter: &Arc<Interpreter>, code: &str) -> RunReport {
    runtime.block_on(interpreter.runs().run_python("t", "s", RunRequest::code(code), "http://h")).expect("run")
}
