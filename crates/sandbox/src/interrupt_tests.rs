//! Stopping a session's running cell from another task: one running wasm (a
//! tight loop) ends by `KeyboardInterrupt` and the session keeps its state;
//! one blocked in a host call (a sleep) is trapped after the grace and the
//! state reset; an interrupt raised before the run starts runs nothing; on
//! both runtimes' live instances.
//!
//! Needs the runner component and the data runtime: `cargo xtask test` sets
//! `ANYPATH_RUNNER` and `ANYPATH_PYTHON_DATA`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{BlockRunner, CellReport, CellRequest, DataVariant, ExecError, Interrupt, LimitOverrides, Limits, LiveInstance, PythonDataConfig, RunnerConfig, SessionRuntime};

/// How long the interrupting task waits once the cell has started, so that
/// it lands inside the sleep or the loop rather than on the way there.
const INTERRUPT_AFTER: Duration = Duration::from_millis(200);

/// An interrupted loop must end within this of the interrupt.
const KEYBOARD_INTERRUPT_WITHIN: Duration = Duration::from_secs(1);

/// How often the interrupting task looks for the cell's start marker.
const MARKER_POLL: Duration = Duration::from_millis(20);

/// Far above anything the tests wait for, so that only an interrupt can end
/// their cells: a timeout or exhausted fuel would be reported as such.
fn generous(base: Limits) -> Limits {
    Limits { fuel: 1_000_000_000_000, timeout_ms: 120_000, ..base }
}

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
}

fn runner_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_RUNNER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-runner/runner.wasm"));
    assert!(path.is_file(), "runner component {} is missing: run `cargo xtask test` or set ANYPATH_RUNNER", path.display());
    path
}

fn python_data_dir() -> PathBuf {
    let dir = std::env::var_os("ANYPATH_PYTHON_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-data"));
    assert!(dir.join("lib/python315.zip").is_file(), "python-data runtime {} is missing: run `cargo xtask test` or set ANYPATH_PYTHON_DATA", dir.display());
    dir
}

/// `python` sessions, from a block runner kept alongside them.
pub(crate) fn python() -> &'static SessionRuntime {
    static SESSIONS: OnceLock<(BlockRunner, SessionRuntime)> = OnceLock::new();
    &SESSIONS
        .get_or_init(|| {
            let config = RunnerConfig { limits: generous(Limits::default()), warm_instances: 0, instance_slots: 4, ..RunnerConfig::new(runner_path()) };
            runtime().block_on(async {
                let runner = BlockRunner::start(config).await.expect("the runner starts");
                let sessions = runner.session_runtime().await.expect("python sessions start");
                (runner, sessions)
            })
        })
        .1
}

/// `python-data` sessions (the pre-initialised reactor).
pub(crate) fn python_data() -> &'static SessionRuntime {
    static SESSIONS: OnceLock<SessionRuntime> = OnceLock::new();
    SESSIONS.get_or_init(|| {
        let config = PythonDataConfig::new(&python_data_dir(), DataVariant::Preimported);
        let config = PythonDataConfig { limits: generous(config.limits), ..config };
        runtime().block_on(SessionRuntime::start_python_data(config)).expect("the data runtime starts")
    })
}

/// A live instance of `sessions` on a directory of its own (kept alive by the returned guard).
fn session(sessions: &SessionRuntime) -> (LiveInstance, tempfile::TempDir) {
    let dir = tempfile::Builder::new().prefix("anypath-interrupt-").tempdir().expect("a session directory");
    (sessions.live_instance(Some(dir.path().to_path_buf()), &LimitOverrides::default()), dir)
}

fn cell(code: &str) -> CellRequest {
    CellRequest { code: code.into(), ..CellRequest::default() }
}

/// Runs `code` and checks it succeeded.
async fn run_ok(live: &mut LiveInstance, code: &str) -> CellReport {
    let report = live.run(cell(code)).await;
    assert!(report.error.is_none() && report.exit_code == 0, "expected success: {report:#?}");
    report
}

/// Runs `code`, which first creates `started` in the session directory and
/// then never ends by itself; another task interrupts it once the marker
/// shows (the cell is then inside its guest call) and a moment has passed.
/// Also gives how long the run went on after the interrupt.
async fn run_interrupted(live: &mut LiveInstance, dir: &Path, code: &str) -> (CellReport, Duration) {
    let marker = dir.join("started");
    let interrupt = Interrupt::new();
    let stopper = interrupt.clone();
    let stopping = tokio::spawn(async move {
        while !marker.exists() {
            tokio::time::sleep(MARKER_POLL).await;
        }
        tokio::time::sleep(INTERRUPT_AFTER).await;
        stopper.interrupt();
        // Idempotent: a second raise changes nothing.
        stopper.interrupt();
        Instant::now()
    });
    let code = format!("open('/mnt/data/started', 'w').close()\n{code}");
    let report = live.run(CellRequest { interrupt: Some(interrupt), ..cell(&code) }).await;
    let raised_at = stopping.await.expect("the interrupting task ends");
    (report, raised_at.elapsed())
}

/// The interrupted loop ends within a second by a `KeyboardInterrupt`
/// raised in it, reported as the cell's exception; the instance and the
/// names earlier cells defined stay.
async fn interrupted_keeps_state(sessions: &SessionRuntime, code: &str) {
    let (mut live, dir) = session(sessions);
    run_ok(&mut live, "x = 41").await;
    let (report, after) = run_interrupted(&mut live, dir.path(), code).await;
    assert!(
        matches!(&report.error, Some(ExecError::Exception { type_name, .. }) if type_name == "KeyboardInterrupt"),
        "{report:#?}"
    );
    assert!(after < KEYBOARD_INTERRUPT_WITHIN, "the loop went on for {after:?} after the interrupt");
    assert_eq!(report.exit_code, 1);
    assert!(!report.state_reset, "{report:#?}");
    assert!(live.is_live());
    let next = run_ok(&mut live, "x + 1").await;
    assert_eq!(next.results.first().map(|r| r.text.as_str()), Some("42"), "{next:#?}");
    assert!(!next.state_reset, "{next:#?}");
    // The interrupt was consumed: a later run is not interrupted.
    let later = run_ok(&mut live, "import time\nfor _ in range(20):\n    time.sleep(0.01)\nprint(x)").await;
    assert_eq!(later.output.stdout, "41\n");
}

/// The interrupted run reports the interrupt (not the limit it would
/// otherwise have reached), and, its instance dropped, the next run starts
/// afresh on the same files.
async fn interrupted_then_fresh(sessions: &SessionRuntime, code: &str) {
    let (mut live, dir) = session(sessions);
    run_ok(&mut live, "open('/mnt/data/kept.txt', 'w').write('still here')\nx = 1").await;
    let (report, _) = run_interrupted(&mut live, dir.path(), code).await;
    assert_eq!(report.error, Some(ExecError::Interrupted {}), "{report:#?}");
    assert_ne!(report.exit_code, 0);
    assert!(report.state_reset, "the interrupted instance is dropped: {report:#?}");
    assert!(!live.is_live());
    let next = run_ok(&mut live, "print(open('/mnt/data/kept.txt').read(), 'x' in globals())").await;
    assert_eq!(next.output.stdout, "still here False\n");
    assert!(next.state_reset, "the next run says the state was reset: {next:#?}");
}

/// A sleep is woken and ends by KeyboardInterrupt too.
#[test]
fn a_sleep_blocked_in_the_host_is_interrupted_and_keeps_the_state() {
    let sessions = python();
    runtime().block_on(interrupted_keeps_state(sessions, "import time\ntime.sleep(30)"));
}

#[test]
fn a_tight_loop_is_interrupted_and_keeps_the_state() {
    let sessions = python();
    runtime().block_on(interrupted_keeps_state(sessions, "while True:\n    pass"));
}

#[test]
fn a_data_runtime_sleep_is_interrupted_and_keeps_the_state() {
    let sessions = python_data();
    runtime().block_on(interrupted_keeps_state(sessions, "import time\ntime.sleep(30)"));
}

#[test]
fn a_data_runtime_tight_loop_is_interrupted_and_keeps_the_state() {
    let sessions = python_data();
    runtime().block_on(interrupted_keeps_state(sessions, "while True:\n    pass"));
}

/// Code that swallows its KeyboardInterrupt is trapped once the grace has
/// passed, as before, in a loop and in a sleep.
#[test]
fn code_that_swallows_the_interrupt_is_trapped_after_the_grace() {
    let sessions = python();
    runtime().block_on(async {
        let swallowing = "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass";
        let started = Instant::now();
        interrupted_then_fresh(sessions, swallowing).await;
        assert!(started.elapsed() >= INTERRUPT_AFTER + crate::engine::INTERRUPT_GRACE);
        let sleeping = "import time\nwhile True:\n    try:\n        time.sleep(30)\n    except KeyboardInterrupt:\n        pass";
        interrupted_then_fresh(sessions, sleeping).await;
    });
}

/// With SIGINT ignored nothing would raise: the interrupt traps at once.
#[test]
fn a_data_runtime_cell_ignoring_sigint_is_trapped() {
    let sessions = python_data();
    runtime().block_on(interrupted_then_fresh(sessions, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"));
}

/// Both runtimes' CPython signal state is found (so their interrupts keep the state).
#[test]
fn the_signal_state_of_both_runtimes_is_found() {
    let (python, data) = (python(), python_data());
    runtime().block_on(async {
        for sessions in [python, data] {
            let layout = sessions.signal_layout().await;
            eprintln!("{}: {layout:?}", sessions.runtime());
            assert!(layout.is_some(), "{}", sessions.runtime());
        }
    });
}

/// Raised before the run, the interrupt stops it before any code runs: the
/// code's effects never happen and the instance keeps its state.
#[test]
fn an_interrupt_raised_before_the_run_stops_it_at_once() {
    // Started outside the runtime: starting it blocks on the runtime too.
    let sessions = python();
    runtime().block_on(async {
        let (mut live, dir) = session(sessions);
        run_ok(&mut live, "x = 41").await;
        let interrupt = Interrupt::new();
        interrupt.interrupt();
        let code = "x = 0\nopen('/mnt/data/ran', 'w').close()\nimport time\ntime.sleep(60)";
        let report = live.run(CellRequest { interrupt: Some(interrupt), ..cell(code) }).await;
        assert_eq!(report.error, Some(ExecError::Interrupted {}), "{report:#?}");
        assert_ne!(report.exit_code, 0);
        assert!(!dir.path().join("ran").exists(), "the code did not run");
        let next = run_ok(&mut live, "print(x + 1)").await;
        assert_eq!(next.output.stdout, "42\n");
        assert!(!next.state_reset, "{next:#?}");
    });
}

/// An interrupt belongs to its run: raised after that run finished, it
/// stops nothing later, and a run's own limits still report as such.
#[test]
fn an_interrupt_ends_with_its_run() {
    // Started outside the runtime: starting it blocks on the runtime too.
    let sessions = python();
    runtime().block_on(async {
        let (mut live, _dir) = session(sessions);
        let interrupt = Interrupt::new();
        let report = live.run(CellRequest { interrupt: Some(interrupt.clone()), ..cell("x = 1") }).await;
        assert!(report.error.is_none(), "{report:#?}");
        interrupt.interrupt();
        let next = run_ok(&mut live, "import time\ntime.sleep(0.5)\nprint(x)").await;
        assert_eq!(next.output.stdout, "1\n");
        assert!(!next.state_reset, "{next:#?}");
        let limited = CellRequest { limits: LimitOverrides { timeout_ms: Some(200), ..LimitOverrides::default() }, interrupt: Some(Interrupt::new()), ..cell("import time\ntime.sleep(60)") };
        let over = live.run(limited).await;
        assert_eq!(over.error, Some(ExecError::Timeout { timeout_ms: 200 }), "{over:#?}");
    });
}
