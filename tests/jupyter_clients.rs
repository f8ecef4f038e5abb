//! Jupyter's own clients, unchanged, run notebooks and code on anypath's
//! kernels: JupyterLab's client code (`@jupyterlab/services`, from
//! `tests/frontends`' lockfile) through `jupyter server --gateway-url`,
//! nbclient through jupyter_server's `GatewayKernelManager`, AutoGen's
//! `DockerJupyterCodeExecutor`, and `websockets` closing kernel sockets
//! (all from `.venv-jupyter`, pinned by `cargo xtask test`). The behaviours live in
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

/// `anypath sandbox serve` with the data runtime, JavaScript and the
/// tests' wheelhouse, behind a token.
fn service(dir: &tempfile::TempDir) -> Service {
    let python_data = common::python_data_dir().display().to_string();
    let wheelhouse = common::wheelhouse_dir().display().to_string();
    let javascript = common::javascript_path().display().to_string();
    Service::start_open(dir.path(), &["--token", TOKEN, "--python-data", &python_data, "--wheelhouse", &wheelhouse, "--javascript", &javascript])
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

/// A socket closed by its client (idle, or during a cell) gets its close
/// frame answered with 1000 at once, the cell going on; a kernel shut down
/// closes its sockets with 1000 (`websockets`, Open WebUI's library).
#[test]
fn kernel_sockets_close_as_a_jupyter_servers_do() {
    let dir = common::scratch("anypath-jupyter-closing-");
    let service = service(&dir);
    let mut command = Command::new(common::jupyter_python());
    command.arg(repo().join("tests/support/jupyter_client_checks.py")).args(["closing", &service.base, TOKEN]);
    run_checks(command, "the closing checks");
}

/// The notebook the browser opens: one cell drawing a figure.
const FIGURE_NOTEBOOK: &str = r#"{
 "cells": [{"cell_type": "code", "execution_count": null, "id": "figure", "metadata": {}, "outputs": [],
   "source": ["import matplotlib.pyplot as plt\n", "plt.plot([1, 3, 2])\n", "plt.title('drawn on anypath')\n", "plt.show()"]}],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (anypath)", "language": "python"}},
 "nbformat": 4, "nbformat_minor": 5
}"#;

/// Boundary: none; the browser end to end. JupyterLab's own page, in
/// headless chromium, opens a notebook whose kernel runs on anypath, runs
/// its cell, and shows the figure; the screenshot is kept in
/// `target/test-artefacts/jupyterlab-figure.png`.
#[test]
fn jupyterlab_in_a_browser_renders_a_figure_from_an_anypath_kernel() {
    let chromium = std::env::var_os("ANYPATH_CHROMIUM").map(PathBuf::from).unwrap_or_else(|| "/usr/bin/chromium".into());
    assert!(chromium.is_file(), "chromium {} is missing: `cargo xtask test` installs it (or set ANYPATH_CHROMIUM)", chromium.display());
    let dir = common::scratch("anypath-jupyterlab-page-");
    let service = service(&dir);
    let lab_dir = tempfile::tempdir().expect("a temp dir");
    let lab_state = tempfile::tempdir().expect("a temp dir");
    std::fs::write(lab_dir.path().join("figure.ipynb"), FIGURE_NOTEBOOK).expect("the notebook is written");
    let lab_token = "jupyterlab-page-token";
    let mut lab = Command::new(common::jupyter_python());
    lab.args(["-m", "jupyterlab", "--allow-root", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.open_browser=False"])
        .args(["--LabApp.expose_app_in_browser=True", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"])
        .arg(format!("--IdentityProvider.token={lab_token}"))
        .arg(format!("--gateway-url={}", service.base))
        .arg(format!("--GatewayClient.auth_token={TOKEN}"))
        .arg(format!("--ServerApp.root_dir={}", lab_dir.path().display()));
    for (name, sub) in [("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")] {
        lab.env(name, lab_state.path().join(sub));
    }
    let lab = common::Spawned::start_when(&mut lab, |line| {
        line.contains("/lab?token=").then_some(())?;
        let at = line.find("http://127.0.0.1:")?;
        let address = &line[at + "http://".len()..];
        Some(address[..address.find('/')?].to_owned())
    });
    let mut browser = cdp::Browser::start(&chromium);
    browser.call("Page.enable", serde_json::json!({}));
    browser.call("Page.navigate", serde_json::json!({ "url": format!("http://{}/lab/tree/figure.ipynb?token={lab_token}", lab.address) }));
    // On a loaded machine `jupyter server` has answered the first visit with
    // its login form despite the token in the URL; a person then logs in
    // with the token, and so does the test.
    let login_form = "document.querySelector('input[name=password]')";
    browser.wait_for(&format!("window.jupyterapp !== undefined || {login_form} !== null"), "the lab or its login form");
    if browser.evaluate(&format!("{login_form} !== null")) == serde_json::json!(true) {
        browser.evaluate(&format!("{login_form}.value = '{lab_token}'; {login_form}.form.submit(); true"));
    }
    // The notebook's panel (headless, the shell may have no current widget).
    let notebook = "Array.from(window.jupyterapp?.shell?.widgets('main') ?? []).find((w) => w.sessionContext)";
    let kernel_idle = format!("{notebook}?.sessionContext?.session?.kernel?.status === 'idle'");
    browser.wait_for(&kernel_idle, "the notebook's kernel is idle");
    let kernels: serde_json::Value = reqwest::blocking::Client::new()
        .get(format!("{}/api/kernels", service.base))
        .header("authorization", format!("token {TOKEN}"))
        .send()
        .expect("sent")
        .json()
        .expect("kernels");
    assert_eq!(kernels.as_array().map(Vec::len), Some(1), "the page's kernel runs on anypath: {kernels}");
    browser.evaluate(&format!("window.jupyterapp.shell.activateById({notebook}.id)"));
    browser.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true)");
    let rendered = "Array.from(document.querySelectorAll('.jp-OutputArea-output img')).some((img) => img.complete && img.naturalWidth > 100 && img.src.startsWith('data:image/png'))";
    browser.wait_for(rendered, "the figure is rendered in the page");
    let artefacts = repo().join("target/test-artefacts");
    std::fs::create_dir_all(&artefacts).expect("the artefacts directory");
    let shot = browser.screenshot();
    assert_eq!(&shot[1..4], b"PNG");
    std::fs::write(artefacts.join("jupyterlab-figure.png"), shot).expect("the screenshot is kept");
}

/// Headless chromium driven over the DevTools protocol: just what the
/// JupyterLab page test needs.
mod cdp {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};
    use tungstenite::stream::MaybeTlsStream;
    use tungstenite::{Message, WebSocket};

    use crate::common;

    /// How long the page may take to get somewhere.
    const PAGE_WAIT: Duration = Duration::from_secs(90);

    /// What the page shows, for a failure's message.
    const PAGE_STATE: &str = "JSON.stringify({ url: location.href, app: !!window.jupyterapp, widgets: Array.from(window.jupyterapp?.shell?.widgets('main') ?? []).map((w) => [w.title.label, w.sessionContext?.session?.kernel?.status]), text: document.body?.innerText?.slice(0, 400) })";

    pub struct Browser {
        _process: common::Spawned,
        _profile: tempfile::TempDir,
        page: WebSocket<MaybeTlsStream<std::net::TcpStream>>,
        next_id: u64,
    }

    impl Browser {
        /// Chromium on a fresh profile, with its first page's socket.
        pub fn start(chromium: &Path) -> Self {
            let profile = common::scratch("anypath-cdp-");
            let mut command = std::process::Command::new(chromium);
            command
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update"])
                .args(["--disable-sync", "--window-size=1280,900", "--remote-debugging-port=0"])
                .arg(format!("--user-data-dir={}", profile.path().display()))
                .arg("about:blank");
            // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
            let process = common::Spawned::start_when(&mut command, |line| {
                let at = line.find("ws://127.0.0.1:")?;
                let address = &line[at + "ws://".len()..];
                Some(address[..address.find('/')?].to_owned())
            });
            let targets: Value = reqwest::blocking::get(format!("http://{}/json/list", process.address)).expect("the targets").json().expect("JSON targets");
            let page_url = targets
                .as_array()
                .and_then(|targets| targets.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["webSocketDebuggerUrl"].as_str())
                .expect("a page target")
                .to_owned();
            let (page, _) = tungstenite::connect(page_url).expect("the page's DevTools socket");
            Self { _process: process, _profile: profile, page, next_id: 0 }
        }

        /// Calls `method`; its result (events in between are skipped).
        pub fn call(&mut self, method: &str, params: Value) -> Value {
            self.next_id += 1;
            let id = self.next_id;
            self.page.send(Message::text(json!({ "id": id, "method": method, "params": params }).to_string())).expect("sent to chromium");
            loop {
                let Message::Text(text) = self.page.read().expect("chromium answers") else { continue };
                let message: Value = serde_json::from_str(text.as_str()).expect("a JSON message");
                if message["id"] == id {
                    assert!(message.get("error").is_none(), "{method} failed: {message}");
                    return message["result"].clone();
                }
            }
        }

        /// The value of a JavaScript expression in the page (promises awaited).
        pub fn evaluate(&mut self, expression: &str) -> Value {
            let result = self.call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }));
            result["result"]["value"].clone()
        }

        /// Polls `expression` until it is true.
        pub fn wait_for(&mut self, expression: &str, what: &str) {
            let started = Instant::now();
            while self.evaluate(expression) != json!(true) {
                if started.elapsed() > PAGE_WAIT {
                    let page = self.evaluate(PAGE_STATE);
                    panic!("{what}: not within {PAGE_WAIT:?}; the page: {page}");
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }

        /// The page as a PNG.
        pub fn screenshot(&mut self) -> Vec<u8> {
            use base64::Engine;
            let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
            base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().expect("image data")).expect("base64")
        }
    }
}
