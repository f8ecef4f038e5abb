//! E2B's own SDKs, unchanged, against anypath's E2B API: the Python SDK
//! (`e2b-code-interpreter`, installed into `.venv` by `cargo xtask test`)
//! and the JavaScript one (`@e2b/code-interpreter`, from
//! `tests/frontends`' lockfile), pointed at the listener with `E2B_API_URL`
//! and `E2B_SANDBOX_URL` as their users would. The behaviours live in
//! `tests/support/e2b_sdk_checks.py` and `tests/frontends/e2b_sdk_checks.mjs`; each test here runs them
//! all against one server and passes when every one passed.
//!
//! Boundaries proved (in the scripts): another tenant's key finds neither a
//! sandbox nor its list entry (`tenants_never_meet`); a secure sandbox's
//! envd and `/execute` refuse calls without its access token
//! (`secure_sandbox`); a signed link opens only the path and operation it
//! was signed for (`signed_links`); file paths never leave the session's
//! directory (`files`).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::service::Service;

/// Two tenants' keys, in the form E2B's SDKs accept (`e2b_` and hex).
const KEYS: &str = "e2b_a11ce:alice,e2b_b0b:bob";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The E2B listener's address, from the line the service logs for it.
pub(crate) fn e2b_address(process: &common::Spawned) -> String {
    let line = process.wait_for_log(|line| line.contains("E2B API serving")).expect("the service announces its E2B listener");
    let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON log line");
    format!("http://{}", entry["listen"].as_str().expect("the listener's address"))
}

/// `anypath sandbox serve --e2b-listen` with two tenants, the data runtime and JavaScript.
fn service(dir: &tempfile::TempDir) -> Service {
    let python_data = common::python_data_dir().display().to_string();
    let wheelhouse = common::wheelhouse_dir().display().to_string();
    let javascript = common::javascript_path().display().to_string();
    Service::start_open(dir.path(), &["--api-keys", KEYS, "--e2b-listen", "127.0.0.1:0", "--python-data", &python_data, "--wheelhouse", &wheelhouse, "--javascript", &javascript])
}

/// Runs `program` with `args`; panics with its report unless every check passed.
pub(crate) fn run_checks(mut command: Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("checks passed") && !stdout.contains("FAIL "), "{what} did not finish:\n{stdout}\n{stderr}");
}

#[test]
fn python_sdk_against_sandbox_serve() {
    let dir = common::scratch("anypath-e2b-python-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_sdk_checks.py")).args([&url, "e2b_a11ce", "e2b_b0b"]);
    run_checks(command, "the Python SDK's checks");
}

#[test]
fn javascript_sdk_against_sandbox_serve() {
    let (Some(node), Some(frontends)) = (std::env::var_os("ANYPATH_NODE"), std::env::var_os("ANYPATH_FRONTENDS")) else {
        panic!("ANYPATH_NODE and ANYPATH_FRONTENDS must name node and tests/frontends (cargo xtask test sets them)");
    };
    let dir = common::scratch("anypath-e2b-js-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(node);
    command.arg(repo().join("tests/frontends/e2b_sdk_checks.mjs")).args([&url, "e2b_a11ce", "e2b_b0b"]).current_dir(frontends);
    run_checks(command, "the JavaScript SDK's checks");
}

/// `anypath up` serves E2B's API beside the app, on the same sessions.
#[test]
fn python_sdk_against_anypath_up() {
    let kv = common::app::temp_kv("e2b-up");
    let app = common::app::App::start(&kv);
    let url = e2b_address(&app.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_sdk_checks.py")).args([&url, "e2b_0", "e2b_1", "basic", "dataframe_data_and_html", "files", "pause_and_connect"]);
    run_checks(command, "the Python SDK's checks against anypath up");
}

/// The sandbox's files as envd serves them, through the Python SDK
/// (`tests/support/e2b_files_checks.py`): metadata, permission bits, quiet
/// removals, envd's words for an expired link, watches (entries, new
/// subfolders), files served while a cell runs and in parallel, the home,
/// root's home and absolute paths. Boundary proved there: `..` stops at the
/// sandbox's own root (`dot_dot_never_leaves_the_sandbox`).
#[test]
fn python_sdk_files_as_envd_serves_them() {
    let dir = common::scratch("anypath-e2b-files-python-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_files_checks.py")).args([&url, "e2b_a11ce"]);
    run_checks(command, "the Python SDK's file checks");
}

/// The same through the JavaScript SDK (`tests/frontends/e2b_files_checks.mjs`).
#[test]
fn javascript_sdk_files_as_envd_serves_them() {
    let (Some(node), Some(frontends)) = (std::env::var_os("ANYPATH_NODE"), std::env::var_os("ANYPATH_FRONTENDS")) else {
        panic!("ANYPATH_NODE and ANYPATH_FRONTENDS must name node and tests/frontends (cargo xtask test sets them)");
    };
    let dir = common::scratch("anypath-e2b-files-js-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(node);
    command.arg(repo().join("tests/frontends/e2b_files_checks.mjs")).args([&url, "e2b_a11ce"]).current_dir(frontends);
    run_checks(command, "the JavaScript SDK's file checks");
}

/// Cell results as E2B's SDK reads them: raw MIME bundles and
/// `IPython.display`'s objects, PIL images shown, displayed and saved, a
/// box-and-whiskers chart's numbers, lists' and dicts' JSON, DataFrames and
/// several results of one cell (`tests/support/e2b_results_checks.py`).
#[test]
fn python_sdk_reads_cell_results() {
    let dir = common::scratch("anypath-e2b-results-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_results_checks.py")).args([&url, "e2b_a11ce"]);
    run_checks(command, "the Python SDK's result checks");
}

/// `sandbox.commands` from E2B's Python SDK: the shell inside the sandbox
/// (see `tests/support/e2b_commands_checks.py`; its attacks name their boundaries).
#[test]
fn python_sdk_runs_commands() {
    let dir = common::scratch("anypath-e2b-commands-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_commands_checks.py")).args([&url, "e2b_a11ce"]);
    run_checks(command, "the Python SDK's commands checks");
}

/// JavaScript through E2B's Python SDK (`tests/support/e2b_javascript_checks.py`):
/// the default JavaScript context and contexts made with `language="js"`,
/// state across cells, results, streamed `console.log`, errors, a Python
/// and a JavaScript context over the same files, a paused sandbox's
/// JavaScript state, and TypeScript refused.
#[test]
fn python_sdk_runs_javascript() {
    let dir = common::scratch("anypath-e2b-javascript-");
    let service = service(&dir);
    let url = e2b_address(&service.process);
    let mut command = Command::new(common::venv_python());
    command.arg(repo().join("tests/support/e2b_javascript_checks.py")).args([&url, "e2b_a11ce"]);
    run_checks(command, "the Python SDK's JavaScript checks");
}
