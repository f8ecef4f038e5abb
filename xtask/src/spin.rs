//! The Spin CLI the tests and benchmarks run the app under, when there is
//! one: `SPIN_BIN`, else `spin` on `PATH`. It is in no package registry, so
//! nothing installs it; without it those steps say so and are skipped.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

/// A Spin CLI that answered `--version`.
pub struct SpinCli {
    pub path: PathBuf,
    /// Its version line, e.g. `spin 4.1.0-pre0 (94a8fc8a 2026-08-21)`.
    pub version: String,
}

/// The Spin CLI to use, if any. `SPIN_BIN` set to something that does not
/// run is an error (it was asked for); `spin` missing from `PATH` is not.
pub fn find() -> anyhow::Result<Option<SpinCli>> {
    let (path, named) = match std::env::var_os("SPIN_BIN").filter(|v| !v.is_empty()) {
        Some(path) => (PathBuf::from(path), true),
        None => (PathBuf::from("spin"), false),
    };
    let output = match Command::new(&path).arg("--version").output() {
        Ok(output) => output,
        Err(_) if !named => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("running SPIN_BIN={} --version", path.display())),
    };
    if !output.status.success() {
        bail!("{} --version failed: {}", path.display(), String::from_utf8_lossy(&output.stderr).trim());
    }
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Ok(Some(SpinCli { path, version }))
}
