//! Open WebUI's code interpreter on anypath: its own Jupyter client
//! (`open_webui/utils/code_interpreter.py` of the release `cargo xtask
//! test` pins, unchanged) runs code blocks against `anypath sandbox
//! serve`, as Open WebUI does with `CODE_INTERPRETER_ENGINE=jupyter`: a
//! kernel started and deleted per block, each block over the kernel's
//! websocket with Open WebUI's timeout. The behaviours live in
//! `tests/support/open_webui_checks.py`; the test passes when every check
//! passed.
//!
//! Boundary proved: tenants. A file one tenant's blocks keep for the next
//! is never seen by another tenant's blocks
//! (`another_tenants_blocks_never_see_the_files` in the checks).

use std::path::PathBuf;
use std::process::Command;

use crate::common;
use common::service::Service;

/// Where `cargo xtask test` put Open WebUI's client module.
fn module_dir() -> PathBuf {
    let dir = std::env::var_os("ANYPATH_OPEN_WEBUI").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/open-webui"));
    assert!(dir.join("open_webui/utils/code_interpreter.py").is_file(), "Open WebUI's client module is missing under {}: run `cargo xtask test`", dir.display());
    dir
}

#[test]
fn open_webuis_jupyter_client_runs_code_blocks_on_anypath() {
    let dir = common::scratch("anypath-open-webui-");
    let python_data = common::python_data_dir().display().to_string();
    let service = Service::start_with(dir.path(), &["--python-data", &python_data]);
    let output = Command::new(common::jupyter_python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/open_webui_checks.py"))
        .arg(module_dir())
        .args([&service.base, "key-alice", "key-bob"])
        .output()
        .expect("the checks start");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The timed-out block's figure, for the log.
    println!("{stdout}");
    assert!(output.status.success(), "Open WebUI's client failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("6 checks passed"), "every check ran and passed:\n{stdout}\n{stderr}");
}
