//! Jupyter's own clients, unchanged, run notebooks and code on anypath's
//! kernels: JupyterLab's client code (`@jupyterlab/services`, from
//! `tests/frontends`' lockfile) through `jupyter server --gateway-url`,
//! nbclient through jupyter_server's `GatewayKernelManager`, and AutoGen's
//! `DockerJupyterCodeExecutor` (both from `.venv-jupyter`, pinned by
//! `cargo xtask test`). The behaviours live in
//! `tests/frontends/jupyter_services_checks.mjs` and
//! `tests/support/jupyter_client_checks.py`; each test passes when every
//! check of its client passed.

use std::path::PathBuf;
use std::process::Command;

use crate::common;
use common::service::Service;

/// The trusted token of the service: what the Jupyter clients present.
const TOKEN: &str = "jupyter-clients-token";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `anypath sandbox serve` with the data runtime, behind a token.
fn service(dir: &tempfile::TempDir) -> Service {
    let python_data = common::python_data_dir().display().to_string();
    Service::start_open(dir.path(), &["--token", TOKEN, "--python-data", &python_data])
}

/// Runs a client's checks; panics with its report unless every one passed.
fn run_checks(mut command: Command, what: &str) {
    let output = command.output().unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(!stdout.contains("FAIL "), "{what} reported a failure:\n{stdout}\n{stderr}");
}

#[test]
fn jupyterlab_services_through_jupyter_server_gateway() {
    let (Some(node), Some(frontends)) = (std::env::var_os("ANYPATH_NODE"), std::env::var_os("ANYPATH_FRONTENDS")) else {
        panic!("ANYPATH_NODE and ANYPATH_FRONTENDS must name node and tests/frontends (cargo xtask test sets them)");
    };
    let dir = common::scratch("anypath-jupyterlab-");
    let service = service(&dir);
    let jupyter_dir = tempfile::tempdir().expect("a temp dir");
    let server_token = "jupyter-server-token";
    let mut server = Command::new(common::jupyter_python());
    server
        .args(["-m", "jupyter_server", "--allow-root", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.open_browser=False"])
        .arg(format!("--IdentityProvider.token={server_token}"))
        .arg(format!("--gateway-url={}", service.base))
        .arg(format!("--GatewayClient.auth_token={TOKEN}"))
        .arg(format!("--ServerApp.root_dir={}", jupyter_dir.path().display()))
        .env("JUPYTER_RUNTIME_DIR", jupyter_dir.path().join("runtime"))
        .env("JUPYTER_DATA_DIR", jupyter_dir.path().join("data"))
        .env("JUPYTER_CONFIG_DIR", jupyter_dir.path().join("config"));
    // "Jupyter Server 2.21.1 is running at: http://127.0.0.1:PORT/?token=..."
    let server = common::Spawned::start_when(&mut server, |line| {
        // Its own address carries the token; the gateway's, also logged, does not.
        line.contains("/?token=").then_some(())?;
        let at = line.find("http://127.0.0.1:")?;
        let address = &line[at + "http://".len()..];
        Some(address[..address.find('/')?].to_owned())
    });
    let mut command = Command::new(node);
    command
        .arg(repo().join("tests/frontends/jupyter_services_checks.mjs"))
        .args([&format!("http://{}", server.address), server_token, &service.base, TOKEN])
        .current_dir(frontends);
    run_checks(command, "@jupyterlab/services through jupyter server");
}

#[test]
fn nbclient_runs_a_notebook_through_the_gateway_kernel_manager() {
    let dir = common::scratch("anypath-nbclient-");
    let service = service(&dir);
    let mut command = Command::new(common::jupyter_python());
    command.arg(repo().join("tests/support/jupyter_client_checks.py")).args(["nbclient", &service.base, TOKEN]);
    run_checks(command, "nbclient's checks");
}

#[test]
fn autogen_runs_code_blocks_on_an_anypath_kernel() {
    let dir = common::scratch("anypath-autogen-");
    let service = service(&dir);
    let (host, port) = service.process.address.rsplit_once(':').expect("host:port");
    let output = tempfile::tempdir().expect("a temp dir");
    let mut command = Command::new(common::jupyter_python());
    command.arg(repo().join("tests/support/jupyter_client_checks.py")).args(["autogen", host, port, TOKEN]).arg(output.path());
    run_checks(command, "AutoGen's checks");
}
