//! Hostile blocks with the policy gate switched off: each test is one attack
//! that the WebAssembly layer (the WASI context, the component's imports and
//! the host's deadline) must stop by itself. The gate's switch exists only in
//! this crate's own test build, so no binary and no other crate can reach it.
//!
//! Needs the runner component: `cargo xtask test` sets `ANYPATH_RUNNER`.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::request::PolicyGate;
use crate::{BlockRunner, ExecError, ExecRequest, LimitOverrides, Report, RunnerConfig};

pub(crate) fn runner_path() -> PathBuf {
    let path = std::env::var_os("ANYPATH_RUNNER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-runner/runner.wasm"));
    assert!(path.is_file(), "runner component {} is missing: run `cargo xtask test` or set ANYPATH_RUNNER", path.display());
    path
}

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime"))
}

pub(crate) fn sandbox() -> &'static BlockRunner {
    static SANDBOX: OnceLock<BlockRunner> = OnceLock::new();
    SANDBOX.get_or_init(|| runtime().block_on(BlockRunner::start(RunnerConfig::new(runner_path()))).expect("sandbox starts"))
}

/// Runs `request` with the policy gate switched off.
pub(crate) fn exec_ungated(request: ExecRequest) -> Report {
    runtime().block_on(sandbox().execute_gated(request, PolicyGate::Disabled))
}

pub(crate) fn run_ungated(code: &str) -> Report {
    exec_ungated(ExecRequest::new(code))
}

/// Runs `code` through the gate, with a `members` collection holding `docs`.
pub(crate) fn run_gated(code: &str, docs: serde_json::Value) -> Report {
    let request = ExecRequest::new(code)
        .with_ctx(&serde_json::json!({}))
        .and_then(|r| r.with_collection("members", 3, &docs))
        .expect("serialisable request");
    runtime().block_on(sandbox().execute(request))
}

pub(crate) fn error(report: &Report) -> &ExecError {
    match &report.outcome {
        Ok(success) => panic!("expected a failure, got {success:#?}"),
        Err(failure) => &failure.error,
    }
}

pub(crate) fn body(report: &Report) -> serde_json::Value {
    let success = report.outcome.as_ref().unwrap_or_else(|f| panic!("expected success, got {f:#?}"));
    let raw = success.reply.body.as_ref().expect("a body");
    serde_json::from_str(raw.get()).expect("body is JSON")
}

pub(crate) fn assert_exception(report: &Report, type_names: &[&str]) {
    match error(report) {
        ExecError::Exception { type_name, message, .. } => {
            assert!(type_names.contains(&type_name.as_str()), "unexpected {type_name}: {message}");
        }
        other => panic!("expected one of {type_names:?}, got {other:?}"),
    }
}

/// Boundary: the wall-clock deadline (epoch interruption plus a host-side timeout).
#[test]
fn sleep_blocked_in_the_host_is_cut_at_the_deadline() {
    let request = ExecRequest::new("import time\ntime.sleep(30)\nREPLY = {'status': 200}")
        .with_limits(LimitOverrides { timeout_ms: Some(200), ..Default::default() });
    let report = exec_ungated(request);
    assert_eq!(error(&report), &ExecError::Timeout { timeout_ms: 200 });
    // The 30 s sleep did not run to its end.
    assert!(report.metrics.duration_us < 10_000_000, "{:?}", report.metrics);
}

/// Boundary: the WASI context (no preopens, no environment, no sockets).
mod wasm_layer {
    use super::*;

    #[test]
    fn reading_etc_passwd_fails() {
        assert_exception(&run_ungated("REPLY = {'status': 200, 'body': open('/etc/passwd').read()}"), &["FileNotFoundError", "PermissionError", "OSError"]);
    }

    #[test]
    fn reading_a_file_in_the_hosts_working_directory_fails() {
        assert!(std::path::Path::new("Cargo.toml").is_file(), "the host can see it");
        assert_exception(&run_ungated("REPLY = {'status': 200, 'body': open('Cargo.toml').read()}"), &["FileNotFoundError", "PermissionError", "OSError"]);
    }

    #[test]
    fn listing_the_root_directory_fails() {
        assert_exception(&run_ungated("import os\nREPLY = {'status': 200, 'body': os.listdir('/')}"), &["FileNotFoundError", "PermissionError", "OSError"]);
    }

    #[test]
    fn writing_a_file_fails_and_leaves_nothing_on_the_host() {
        // A host path the guest must not reach, in a directory of its own removed at the end.
        let outside = tempfile::Builder::new().prefix("anypath-escape-").tempdir().expect("a temporary directory");
        let target = outside.path().join("pwned");
        let code = format!("open({:?}, 'w').write('pwned')", target.display().to_string());
        assert_exception(&run_ungated(&code), &["FileNotFoundError", "PermissionError", "OSError"]);
        assert!(!target.exists());
    }

    #[test]
    fn the_environment_is_empty() {
        assert!(std::env::var_os("PATH").is_some(), "the host has an environment");
        let report = run_ungated("import os\nREPLY = {'status': 200, 'body': dict(os.environ)}");
        assert_eq!(body(&report), serde_json::json!({}));
    }

    #[test]
    fn sockets_are_unavailable_and_nothing_reaches_a_host_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("its address").port();
        let code = format!("import socket\ns = socket.create_connection(('127.0.0.1', {port}))\nREPLY = {{'status': 200}}");
        // Name resolution is denied by the WASI context (allow_ip_name_lookup(false)).
        assert_exception(&run_ungated(&code), &["OSError", "PermissionError", "gaierror"]);
        let code = format!("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\ns.connect(('127.0.0.1', {port}))");
        assert_exception(&run_ungated(&code), &["OSError", "PermissionError", "ConnectionRefusedError"]);
        let code = format!("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/')");
        assert_exception(&run_ungated(&code), &["OSError", "URLError"]);
        assert!(listener.accept().is_err(), "a connection reached the host");
    }

    #[test]
    fn subprocesses_cannot_be_started() {
        assert_exception(&run_ungated("import subprocess\nsubprocess.run(['id'])"), &["ModuleNotFoundError", "OSError"]);
        assert_exception(&run_ungated("import os\nos.system('id')"), &["AttributeError"]);
        assert_exception(&run_ungated("import os\nos.popen('id').read()"), &["ModuleNotFoundError", "OSError", "AttributeError"]);
    }

    #[test]
    fn a_block_that_poisons_modules_does_not_affect_the_next_execution() {
        let poisoned = run_ungated("import sys, json\njson.dumps = None\nsys.modules['resource_store'].Collection._call = None\nREPLY = {'status': 200}");
        assert!(poisoned.outcome.is_ok(), "the poisoning block itself completes");
        let clean = run_gated("REPLY = {'status': 200, 'body': store.get(1)}", serde_json::json!([{"id": 1}]));
        assert_eq!(body(&clean), serde_json::json!({"id": 1}));
    }
}

/// Boundary: the journal is the host's. A block that rewrites the `store`
/// wrapper (so its calls answer whatever it likes, or never reach the host)
/// changes only what it sees: what is committed is what the host's store
/// did, and nothing the block claims.
#[test]
fn a_block_tampering_with_the_store_wrapper_cannot_change_the_journal() {
    let code = "import sys\n\
        real = store.insert({'name': 'real'})\n\
        wrapper = sys.modules['resource_store']\n\
        wrapper.Collection._call = lambda self, op, args: {'id': 99}\n\
        forged = store.insert({'name': 'forged'})\n\
        store.delete(1)\n\
        REPLY = {'status': 200, 'body': [real, forged]}";
    let request = ExecRequest::new(code).with_collection("members", 3, &serde_json::json!([{"id": 1, "name": "kept"}])).expect("request");
    let report = exec_ungated(request);
    assert_eq!(body(&report), serde_json::json!([2, 99]), "the block saw its forged answers");
    let success = report.outcome.as_ref().expect("success");
    let journal: Vec<(crate::MutationOp, serde_json::Value, Option<String>)> =
        success.mutations.iter().map(|m| (m.op, m.id.clone(), m.document.as_ref().map(|d| d.get().to_owned()))).collect();
    assert_eq!(journal, vec![(crate::MutationOp::Insert, serde_json::json!(2), Some(r#"{"id":2,"name":"real"}"#.to_owned()))], "only what reached the host is committed");
}

/// Boundary: the runner's own check of a partial load. A block cannot turn a
/// partial view into an answer by catching the signal, even with the
/// handlers the gate refuses (`except:` and `BaseException`).
#[test]
fn catching_needs_data_does_not_hide_it_with_the_gate_off() {
    let block = |handler: &str| {
        format!("try:\n    rows = store.list()['items']\n{handler}\n    rows = []\nREPLY = {{'status': 200, 'body': rows}}")
    };
    for handler in ["except BaseException:", "except:"] {
        let request = ExecRequest::new(block(handler))
            .with_partial_collection("members", &serde_json::json!([{"id": 7}]), vec![], None)
            .expect("request");
        let report = exec_ungated(request);
        assert!(matches!(error(&report), ExecError::NeedsData { .. }), "{handler} with the gate off: {report:?}");
    }
}
