//! Builds the Python runner component with componentize-py from a project-local venv,
//! with `packaging` and `installer` (for `pip` in the shell) on its source path.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use sha2::{Digest, Sha256};

use crate::shell::{root, run, step};
use crate::venv::{self, COMPONENTIZE_PY};
const PYTHON_SOURCES: &str = "components/python-runner/src";
const WIT_DIR: &str = "wit";

/// Builds `target/python-runner/runner.wasm` unless its inputs are unchanged.
pub fn build() -> anyhow::Result<PathBuf> {
    let root = root();
    let out_dir = root.join("target/python-runner");
    let output = out_dir.join("runner.wasm");
    let stamp_path = out_dir.join("runner.stamp");
    let packages = crate::runtime_wheels::runner_packages()?;
    let stamp = input_digest(&root)?;
    if output.is_file() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        step("python runner is up to date");
        return Ok(output);
    }
    let componentize = venv::ensure(&COMPONENTIZE_PY)?;
    std::fs::create_dir_all(&out_dir)?;
    step("building the python runner component with componentize-py (about 15 s)");
    let partial = out_dir.join("runner.wasm.partial");
    run(Command::new(&componentize)
        .args(["-d", WIT_DIR, "-w", "runner", "componentize", "-p", PYTHON_SOURCES, "-p"])
        .arg(&packages)
        .args(["app", "-o"])
        .arg(&partial))?;
    std::fs::rename(&partial, &output)?;
    std::fs::write(&stamp_path, stamp)?;
    Ok(output)
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
    digest.update(COMPONENTIZE_PY.version.as_bytes());
    for library in crate::runtime_wheels::PIP_LIBRARIES {
        digest.update(format!("{} {} {}\n", library.package, library.version, library.sha256.join(",")).as_bytes());
    }
    for file in files {
        digest.update(file.strip_prefix(root).unwrap_or(&file).to_string_lossy().as_bytes());
        digest.update(std::fs::read(&file)?);
    }
    Ok(hex::encode(digest.finalize()))
}
