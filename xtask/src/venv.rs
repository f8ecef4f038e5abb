//! The project-local Python venv (`.venv`) and the pinned tools and libraries installed into it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::shell::{root, run, step};

/// A command-line tool from PyPI, pinned to one release.
pub struct Tool {
    pub package: &'static str,
    pub version: &'static str,
    /// The command it installs into `.venv/bin`.
    pub command: &'static str,
}

/// Builds the Python runner component.
pub const COMPONENTIZE_PY: Tool = Tool { package: "componentize-py", version: "0.25.1", command: "componentize-py" };

/// The API fuzzer the test suite runs against `/openapi.json`.
pub const SCHEMATHESIS: Tool = Tool { package: "schemathesis", version: "4.32.5", command: "schemathesis" };

/// The official MCP Python SDK: the independent client the MCP tests drive
/// both transports with. Its dependencies come from PyPI as pip resolves them.
pub const MCP_CLIENT: Package = Package { package: "mcp", version: "2.3.0" };

/// Prometheus's own Python client, whose OpenMetrics parser reads
/// `/metrics` in `tests/interpreter_http.rs` as a scraper would.
pub const PROMETHEUS_CLIENT: Package = Package { package: "prometheus-client", version: "0.21.1" };

/// Kubernetes' own JSON schemas (1.25 to 1.37) and their validator: what
/// `tests/kubernetes_manifests.rs` checks `deploy/kubernetes/` against.
pub const KUBERNETES_VALIDATE: Package = Package { package: "kubernetes-validate", version: "1.37.0" };

/// E2B's base SDK, pinned beneath the code interpreter's (which accepts a
/// range of it): the control plane and envd clients. 2.51.0 is the last
/// release whose transports `e2b-code-interpreter` 2.9.1 can build.
pub const E2B_BASE: Package = Package { package: "e2b", version: "2.51.0" };

/// E2B's code-interpreter SDK, the client `tests/e2b_sdk.rs` and the
/// benchmark drive the E2B API with, as its users would.
pub const E2B_SDK: Package = Package { package: "e2b-code-interpreter", version: "2.9.1" };

/// A Python library from PyPI used from Python, pinned to one release.
pub struct Package {
    pub package: &'static str,
    pub version: &'static str,
}

/// A Python library from PyPI, pinned to one release and to the hashes of its files.
pub struct Library {
    pub package: &'static str,
    pub version: &'static str,
    /// sha256 of each distribution file pip may install; any other is refused.
    pub sha256: &'static [&'static str],
}

/// llama.cpp's HTTP server as a Python library: serves the small model the
/// planner tests run against. Its only wheel pinned here is the CPU build
/// for Linux x86_64 (manylinux2014, CPython >= 3.10); it has no runtime
/// dependencies.
pub const XLLAMACPP: Library = Library {
    package: "xllamacpp",
    version: "2026.10.11549",
    sha256: &["c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261"],
};

/// Held while pip changes the venv: `cargo xtask test` installs beside the
/// build, and two pips writing one venv at once could corrupt it.
static PIP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs a pip command that changes the venv, one at a time.
fn pip_install(command: &mut Command) -> anyhow::Result<()> {
    let _only_pip = PIP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    run(command)
}

/// The tool's command in `.venv`, installing the pinned release when it is missing or another.
pub fn ensure(tool: &Tool) -> anyhow::Result<PathBuf> {
    let bin = venv_dir().join("bin").join(tool.command);
    if installed_version(&bin).as_deref() == Some(tool.version) {
        return Ok(bin);
    }
    ensure_venv()?;
    step(&format!("installing {} {} into .venv", tool.package, tool.version));
    pip_install(Command::new(venv_dir().join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("{}=={}", tool.package, tool.version)))?;
    match installed_version(&bin) {
        Some(v) if v == tool.version => Ok(bin),
        other => bail!("{} {} expected in .venv, found {other:?}", tool.package, tool.version),
    }
}

/// The venv's Python, with the pinned library installed: only a file whose
/// hash is pinned is accepted, and nothing else is pulled in.
pub fn ensure_library(library: &Library) -> anyhow::Result<PathBuf> {
    let python = ensure_venv()?;
    if library_version(&python, library.package).as_deref() == Some(library.version) {
        return Ok(python);
    }
    step(&format!("installing {} {} into .venv (hash-pinned)", library.package, library.version));
    let requirements = std::env::temp_dir().join(format!("anypath-{}-{}.txt", library.package, std::process::id()));
    let hashes: Vec<String> = library.sha256.iter().map(|h| format!("--hash=sha256:{h}")).collect();
    std::fs::write(&requirements, format!("{}=={} {}\n", library.package, library.version, hashes.join(" ")))
        .with_context(|| format!("writing {}", requirements.display()))?;
    let installed = pip_install(Command::new(venv_dir().join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--require-hashes", "--no-deps", "-r"])
        .arg(&requirements));
    let _ = std::fs::remove_file(&requirements);
    installed.with_context(|| format!("installing {} {} from PyPI", library.package, library.version))?;
    match library_version(&python, library.package) {
        Some(v) if v == library.version => Ok(python),
        other => bail!("{} {} expected in .venv, found {other:?}", library.package, library.version),
    }
}

/// The venv's Python, with the pinned release of a library that is used
/// from Python rather than as a command (its dependencies included).
pub fn ensure_with_dependencies(library: &Package) -> anyhow::Result<PathBuf> {
    let python = ensure_venv()?;
    if library_version(&python, library.package).as_deref() == Some(library.version) {
        return Ok(python);
    }
    step(&format!("installing {} {} into .venv", library.package, library.version));
    pip_install(Command::new(venv_dir().join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("{}=={}", library.package, library.version)))?;
    match library_version(&python, library.package) {
        Some(v) if v == library.version => Ok(python),
        other => bail!("{} {} expected in .venv, found {other:?}", library.package, library.version),
    }
}

/// E2B's Python SDKs, the base one first so the code interpreter's range
/// finds the pinned release already there.
pub fn ensure_e2b_sdk() -> anyhow::Result<PathBuf> {
    ensure_with_dependencies(&E2B_BASE)?;
    ensure_with_dependencies(&E2B_SDK)
}

/// `.venv/bin/python`, creating the venv when it is missing.
pub fn ensure_venv() -> anyhow::Result<PathBuf> {
    let venv = venv_dir();
    let _only_pip = PIP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !venv.join("bin/pip").is_file() {
        step("creating the project-local python venv in .venv");
        run(Command::new(python()).args(["-m", "venv"]).arg(&venv))?;
    }
    Ok(venv.join("bin/python"))
}

/// The project-local venv.
pub fn venv_dir() -> PathBuf {
    root().join(".venv")
}

/// The installed version of a library, as its metadata says.
fn library_version(python: &Path, package: &str) -> Option<String> {
    let output = Command::new(python)
        .args(["-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))", package])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok().map(|v| v.trim().to_owned())
}

/// The last word of `<command> --version`.
fn installed_version(bin: &Path) -> Option<String> {
    let output = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    text.split_whitespace().last().map(str::to_owned)
}

pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}
