//! The MCP server as an independent client drives it: the official MCP
//! Python SDK (`mcp`, installed into `.venv` by `cargo xtask test`) over
//! both transports, `anypath mcp` on stdio and `/mcp` on `anypath sandbox
//! serve`. The scenarios live in `tests/support/mcp_client_checks.py`; each
//! test here runs one of them on one transport.
//!
//! Boundaries proved: the tenant of a Streamable HTTP call comes from its
//! key (`tenants_never_meet_over_http`), and `/mcp` refuses a caller without
//! one and a foreign `Host` (`http_refuses_callers_without_a_key`).

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::service::Service;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh data directory, removed when the returned value is dropped: bind
/// it before the service (or client) using it, so it outlives the process.
fn data_dir(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("anypath-mcp-{name}-"))
}

/// Runs one scenario; panics with the client's own report when it fails.
fn check(scenario: &str, transport: &[String]) {
    let output = Command::new(common::venv_python())
        .arg(repo().join("tests/support/mcp_client_checks.py"))
        .arg(scenario)
        .args(transport)
        .output()
        .expect("the python client starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{scenario} failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains(&format!("{scenario} over")), "{scenario} did not finish:\n{stdout}\n{stderr}");
}

/// Limits unlike the defaults every server here runs with, which the
/// `tools` scenario expects the tool descriptions to state: a 1 KiB read
/// cap, 7 MiB files, 9-minute sessions and (from the policy file) a 7 s
/// wall clock for python runs.
fn limits(dir: &std::path::Path) -> Vec<String> {
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "[limits]\ntimeout_ms = 7000\n").expect("policy written");
    // A mounted dataset, for the `datasets` scenario.
    let census = dir.join("datasets/census");
    std::fs::create_dir_all(&census).expect("dataset dir");
    std::fs::write(census.join("people.csv"), "name,age\nAda,36\nAlan,41\nGrace,45\n").expect("dataset file");
    ["--read-cap-kib", "1", "--max-file-mb", "7", "--session-ttl-minutes", "9", "--policy"]
        .map(str::to_owned)
        .into_iter()
        .chain([policy.display().to_string(), "--datasets".to_owned(), dir.join("datasets").display().to_string()])
        .collect()
}

/// Over Streamable HTTP, against a fresh service with [`limits`].
fn over_http(scenario: &str) {
    let dir = data_dir(&format!("http-{scenario}"));
    let python_data = common::python_data_dir().display().to_string();
    let policy_dir = data_dir(&format!("http-{scenario}-policy"));
    let mut args = limits(policy_dir.path());
    args.extend(["--python-data".to_owned(), python_data]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let service = Service::start_with(dir.path(), &args);
    let url = format!("{}/mcp", service.base);
    check(scenario, &["http".into(), url, "key-alice".into(), "key-bob".into()]);
    drop(service);
}

/// Over stdio, with [`limits`]: the client starts `anypath mcp` itself.
fn over_stdio(scenario: &str) {
    let dir = data_dir(&format!("stdio-{scenario}"));
    let policy_dir = data_dir(&format!("stdio-{scenario}-policy"));
    let limits = limits(policy_dir.path());
    let command = [
        env!("CARGO_BIN_EXE_anypath").to_owned(),
        "mcp".into(),
        "--warm-instances".into(),
        "0".into(),
        "--runner".into(),
        common::runner_path().display().to_string(),
        "--data-dir".into(),
        dir.path().display().to_string(),
        "--python-data".into(),
        common::python_data_dir().display().to_string(),
    ];
    let mut transport = vec!["stdio".to_owned()];
    transport.extend(command);
    transport.extend(limits);
    check(scenario, &transport);
}

#[test]
fn tools_and_schemas_over_http() {
    over_http("tools");
}

#[test]
fn tools_and_schemas_over_stdio() {
    over_stdio("tools");
}

#[test]
fn a_python_data_session_runs_pandas_and_matplotlib_over_http() {
    over_http("data_runtime");
}

#[test]
fn a_python_data_session_runs_pandas_and_matplotlib_over_stdio() {
    over_stdio("data_runtime");
}

#[test]
fn notebook_results_images_and_progress_over_http() {
    over_http("notebook");
}

#[test]
fn notebook_results_images_and_progress_over_stdio() {
    over_stdio("notebook");
}

#[test]
fn upload_run_read_download_close_over_http() {
    over_http("flow");
}

#[test]
fn upload_run_read_download_close_over_stdio() {
    over_stdio("flow");
}

#[test]
fn state_lives_across_runs_over_http() {
    over_http("state");
}

#[test]
fn state_lives_across_runs_over_stdio() {
    over_stdio("state");
}

#[test]
fn errors_are_tool_errors_over_http() {
    over_http("errors");
}

#[test]
fn errors_are_tool_errors_over_stdio() {
    over_stdio("errors");
}

#[test]
fn datasets_are_named_read_and_attached_over_http() {
    over_http("datasets");
}

#[test]
fn datasets_are_named_and_read_over_stdio() {
    over_stdio("datasets");
}

#[test]
fn tenants_never_meet_over_http() {
    over_http("tenants");
}

#[test]
fn http_refuses_callers_without_a_key() {
    over_http("unauthorized");
}

/// The worked example in `examples/` runs as documented and leaves the
/// chart and the report it downloaded.
#[test]
fn the_example_agent_script_downloads_its_chart_and_report() {
    let dir = data_dir("example");
    let service = Service::start(dir.path());
    let out = dir.path().join("downloads");
    let output = Command::new(common::venv_python())
        .arg(repo().join("examples/mcp_agent.py"))
        .arg(format!("{}/mcp", service.base))
        .arg("key-alice")
        .arg(&out)
        .output()
        .expect("the example starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the example failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("best region: north (405)"), "{stdout}");
    let report = std::fs::read_to_string(out.join("report.md")).expect("report.md downloaded");
    assert!(report.contains("| north | 405 |") && report.contains("Best region: **north**"), "{report}");
    let chart = std::fs::read_to_string(out.join("revenue.svg")).expect("revenue.svg downloaded");
    assert!(chart.starts_with("<svg") && chart.matches("<rect").count() == 2, "{chart}");
    drop(service);
}
