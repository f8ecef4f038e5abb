//! The MCP server as independent clients drive it: the two official MCP
//! SDKs, the Python one (`mcp`, installed into `.venv` by `cargo xtask
//! test`) and the TypeScript one (`@modelcontextprotocol/sdk`, from
//! `tests/frontends`' lockfile), over both transports, `anypath mcp` on
//! stdio and `/mcp` on `anypath sandbox serve`. The scenarios live in
//! `tests/support/mcp_client_checks.py` and, the same ones,
//! `tests/frontends/mcp_ts_checks.mjs`; each test here runs one scenario on
//! one transport with one SDK.
//!
//! Boundaries proved: the tenant of a Streamable HTTP call comes from its
//! key (`tenants_never_meet_over_http`), and `/mcp` refuses a caller without
//! one and a foreign `Host` (`http_refuses_callers_without_a_key`). A tool
//! error reaches both SDKs as a result marked `isError` with its stable code
//! (`errors_are_tool_errors_*`), never as a protocol error.

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

/// The MCP client library a scenario runs with.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// `mcp` on PyPI, `tests/support/mcp_client_checks.py`.
    Python,
    /// `@modelcontextprotocol/sdk` on npm, `tests/frontends/mcp_ts_checks.mjs`.
    TypeScript,
}

impl Sdk {
    /// The command that runs `scenario` with this SDK.
    fn command(self, scenario: &str) -> Command {
        match self {
            Sdk::Python => {
                let mut command = Command::new(common::venv_python());
                command.arg(repo().join("tests/support/mcp_client_checks.py")).arg(scenario);
                command
            }
            Sdk::TypeScript => {
                let (Some(node), Some(frontends)) = (std::env::var_os("ANYPATH_NODE"), std::env::var_os("ANYPATH_FRONTENDS")) else {
                    panic!("ANYPATH_NODE and ANYPATH_FRONTENDS must name node and tests/frontends (cargo xtask test sets them)");
                };
                let mut command = Command::new(node);
                command.arg(repo().join("tests/frontends/mcp_ts_checks.mjs")).arg(scenario).current_dir(frontends);
                command
            }
        }
    }
}

/// Runs one scenario; panics with the client's own report when it fails.
fn check(sdk: Sdk, scenario: &str, transport: &[String]) {
    let output = sdk.command(scenario).args(transport).output().unwrap_or_else(|e| panic!("the {sdk:?} client starts: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{scenario} with the {sdk:?} SDK failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains(&format!("{scenario} over")), "{scenario} with the {sdk:?} SDK did not finish:\n{stdout}\n{stderr}");
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
fn over_http(sdk: Sdk, scenario: &str) {
    let dir = data_dir(&format!("http-{scenario}"));
    let python_data = common::python_data_dir().display().to_string();
    let policy_dir = data_dir(&format!("http-{scenario}-policy"));
    let mut args = limits(policy_dir.path());
    args.extend(["--python-data".to_owned(), python_data, "--javascript".to_owned(), common::javascript_path().display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let service = Service::start_with(dir.path(), &args);
    let url = format!("{}/mcp", service.base);
    check(sdk, scenario, &["http".into(), url, "key-alice".into(), "key-bob".into()]);
    drop(service);
}

/// Over stdio, with [`limits`]: the client starts `anypath mcp` itself.
fn over_stdio(sdk: Sdk, scenario: &str) {
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
        "--shell".into(),
        common::shell_path().display().to_string(),
        "--javascript".into(),
        common::javascript_path().display().to_string(),
    ];
    let mut transport = vec!["stdio".to_owned()];
    transport.extend(command);
    transport.extend(limits);
    check(sdk, scenario, &transport);
}

/// Each scenario test once per SDK: `NAME` with the Python SDK, `NAME_ts`
/// with the TypeScript one.
macro_rules! with_both_sdks {
    ($($name:ident, $ts_name:ident: $transport:ident($scenario:literal);)*) => {$(
        #[test]
        fn $name() {
            $transport(Sdk::Python, $scenario);
        }

        #[test]
        fn $ts_name() {
            $transport(Sdk::TypeScript, $scenario);
        }
    )*};
}

with_both_sdks! {
    tools_and_schemas_over_http, tools_and_schemas_over_http_ts: over_http("tools");
    tools_and_schemas_over_stdio, tools_and_schemas_over_stdio_ts: over_stdio("tools");
    a_python_data_session_runs_pandas_and_matplotlib_over_http, a_python_data_session_runs_pandas_and_matplotlib_over_http_ts: over_http("data_runtime");
    a_python_data_session_runs_pandas_and_matplotlib_over_stdio, a_python_data_session_runs_pandas_and_matplotlib_over_stdio_ts: over_stdio("data_runtime");
    a_javascript_session_over_http, a_javascript_session_over_http_ts: over_http("javascript");
    a_javascript_session_over_stdio, a_javascript_session_over_stdio_ts: over_stdio("javascript");
    notebook_results_images_and_progress_over_http, notebook_results_images_and_progress_over_http_ts: over_http("notebook");
    notebook_results_images_and_progress_over_stdio, notebook_results_images_and_progress_over_stdio_ts: over_stdio("notebook");
    upload_run_read_download_close_over_http, upload_run_read_download_close_over_http_ts: over_http("flow");
    upload_run_read_download_close_over_stdio, upload_run_read_download_close_over_stdio_ts: over_stdio("flow");
    commands_beside_python_over_http, commands_beside_python_over_http_ts: over_http("commands");
    commands_beside_python_over_stdio, commands_beside_python_over_stdio_ts: over_stdio("commands");
    state_lives_across_runs_over_http, state_lives_across_runs_over_http_ts: over_http("state");
    state_lives_across_runs_over_stdio, state_lives_across_runs_over_stdio_ts: over_stdio("state");
    errors_are_tool_errors_over_http, errors_are_tool_errors_over_http_ts: over_http("errors");
    errors_are_tool_errors_over_stdio, errors_are_tool_errors_over_stdio_ts: over_stdio("errors");
    datasets_are_named_read_and_attached_over_http, datasets_are_named_read_and_attached_over_http_ts: over_http("datasets");
    datasets_are_named_and_read_over_stdio, datasets_are_named_and_read_over_stdio_ts: over_stdio("datasets");
    tenants_never_meet_over_http, tenants_never_meet_over_http_ts: over_http("tenants");
    http_refuses_callers_without_a_key, http_refuses_callers_without_a_key_ts: over_http("unauthorized");
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
