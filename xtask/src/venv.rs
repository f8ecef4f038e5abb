//! The project-local Python venv (`.venv`) and the pinned tools installed into it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use crate::steps::{root, run, step};

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

/// The tool's command in `.venv`, installing the pinned release when it is missing or another.
pub fn ensure(tool: &Tool) -> anyhow::Result<PathBuf> {
    let venv = root().join(".venv");
    let bin = venv.join("bin").join(tool.command);
    if installed_version(&bin).as_deref() == Some(tool.version) {
        return Ok(bin);
    }
    if !venv.join("bin/pip").is_file() {
        step("creating the project-local python venv in .venv");
        run(Command::new(python()).args(["-m", "venv"]).arg(&venv))?;
    }
    step(&format!("installing {} {} into .venv", tool.package, tool.version));
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("{}=={}", tool.package, tool.version)))?;
    match installed_version(&bin) {
        Some(v) if v == tool.version => Ok(bin),
        other => bail!("{} {} expected in .venv, found {other:?}", tool.package, tool.version),
    }
}

/// The last word of `<command> --version`.
fn installed_version(bin: &Path) -> Option<String> {
    let output = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    text.split_whitespace().last().map(str::to_owned)
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}
