//! The Jupyter clients the tests and the benchmark drive anypath's kernels
//! with, in a venv of their own (`.venv-jupyter`: their dependencies would
//! fight the main venv's pins): jupyter_server (its gateway client, and the
//! server `@jupyterlab/services` talks to), nbclient, AutoGen's Jupyter
//! executor, JupyterLab (its page, in chromium), and ipykernel as the
//! native kernel the benchmark compares with.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::shell::{root, run, step};

/// Every requirement, pinned; pip resolves their own dependencies once.
const PINS: &[&str] = &[
    "jupyter_server==2.21.1",
    "nbclient==0.11.0",
    "nbformat==5.11.1",
    "ipykernel==7.4.0",
    "autogen-core==0.7.5",
    "autogen-ext[docker-jupyter-executor]==0.7.5",
    "jupyterlab==4.6.6",
];

/// Written after a complete install: the pins it was made with.
const STAMP: &str = "anypath-pins.txt";

/// The Jupyter venv's Python, installing the pins when they changed.
pub fn ensure() -> anyhow::Result<PathBuf> {
    let venv = root().join(".venv-jupyter");
    let python = venv.join("bin/python");
    let wanted = PINS.join("\n");
    if std::fs::read_to_string(venv.join(STAMP)).is_ok_and(|stamp| stamp == wanted) && python.is_file() {
        return Ok(python);
    }
    if !venv.join("bin/pip").is_file() {
        step("creating the Jupyter clients' venv in .venv-jupyter");
        run(Command::new(crate::venv::python()).args(["-m", "venv"]).arg(&venv))?;
    }
    step(&format!("installing the Jupyter clients into .venv-jupyter ({})", PINS.join(", ")));
    run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--disable-pip-version-check"]).args(PINS))?;
    std::fs::write(venv.join(STAMP), wanted).with_context(|| format!("writing {}", venv.join(STAMP).display()))?;
    Ok(python)
}
