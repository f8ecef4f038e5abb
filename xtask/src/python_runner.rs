//! Builds the Python runner component with componentize-py from a project-local venv.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::steps::{root, run, step};

/// The componentize-py release the runner is built and tested with.
const COMPONENTIZE_PY: &str = "0.25.1";
const PYTHON_SOURCES: &str = "components/python-runner/src";
const WIT_DIR: &str = "wit";

/// Builds `target/python-runner/runner.wasm` unless its inputs are unchanged.
pub fn build() -> anyhow::Result<PathBuf> {
    let root = root();
    let out_dir = root.join("target/python-runner");
    let output = out_dir.join("runner.wasm");
    let stamp_path = out_dir.join("runner.stamp");
    let stamp = input_digest(&root)?;
    if output.is_file() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("python runner is up to date");
        return Ok(output);
    }
    let componentize = ensure_componentize_py(&root)?;
    std::fs::create_dir_all(&out_dir)?;
    step("building the python runner component with componentize-py (about 15 s)");
    let partial = out_dir.join("runner.wasm.partial");
    run(Command::new(&componentize)
        .args(["-d", WIT_DIR, "-w", "runner", "componentize", "-p", PYTHON_SOURCES, "app", "-o"])
        .arg(&partial))?;
    std::fs::rename(&partial, &output)?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(output)
}

/// Creates `.venv` and installs the pinned componentize-py when missing.
fn ensure_componentize_py(root: &Path) -> anyhow::Result<PathBuf> {
    let venv = root.join(".venv");
    let bin = venv.join("bin/componentize-py");
    if installed_version(&bin).as_deref() == Some(COMPONENTIZE_PY) {
        return Ok(bin);
    }
    if !venv.join("bin/pip").is_file() {
        step("creating the project-local python venv in .venv");
        run(Command::new(python()).args(["-m", "venv"]).arg(&venv))?;
    }
    step(&format!("installing componentize-py {COMPONENTIZE_PY} into .venv"));
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!("componentize-py=={COMPONENTIZE_PY}")))?;
    match installed_version(&bin) {
        Some(v) if v == COMPONENTIZE_PY => Ok(bin),
        other => bail!("componentize-py {COMPONENTIZE_PY} expected in .venv, found {other:?}"),
    }
}

fn installed_version(bin: &Path) -> Option<String> {
    let output = Command::new(bin).arg("--version").output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    text.split_whitespace().last().map(str::to_owned)
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Hash of every input that shapes the component.
fn input_digest(root: &Path) -> anyhow::Result<String> {
    let mut files = Vec::new();
    for dir in [PYTHON_SOURCES, WIT_DIR] {
        for entry in std::fs::read_dir(root.join(dir)).with_context(|| format!("reading {dir}"))? {
            let path = entry?.path();
            if matches!(path.extension().and_then(|e| e.to_str()), Some("py" | "wit")) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut digest = Sha256::new();
    digest.update(COMPONENTIZE_PY.as_bytes());
    for file in files {
        digest.update(file.strip_prefix(root).unwrap_or(&file).to_string_lossy().as_bytes());
        digest.update(std::fs::read(&file)?);
    }
    Ok(hex::encode(digest.finalize()))
}
