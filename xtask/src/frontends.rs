//! The frontend data providers the provider tests drive from Node
//! (`tests/frontend_providers.rs`): react-admin's `ra-data-json-server` and
//! `ra-data-simple-rest`, Refine's `@refinedev/simple-rest`, and json-server
//! 0.17.4 as the reference backend, at the versions `tests/frontends/
//! package-lock.json` pins (npm checks each package's integrity hash).
//! Installed with `npm ci` once per lockfile; without Node the tests say
//! they were skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::steps::{root, run, step};

/// What the provider tests need: Node and the installed packages.
pub struct Frontends {
    pub node: PathBuf,
    pub dir: PathBuf,
}

/// Node (installed with `apt-get` when missing and possible) and the
/// packages of the lockfile; None, with the reason printed, when either
/// cannot be had.
pub fn ensure() -> Option<Frontends> {
    let Some(node) = node() else { return None };
    let dir = root().join("tests/frontends");
    match install(&dir) {
        Ok(()) => Some(Frontends { node, dir }),
        Err(error) => {
            eprintln!("==> the frontend providers could not be installed ({error:#}): their tests will be skipped");
            None
        }
    }
}

fn node() -> Option<PathBuf> {
    let found = || which("node").filter(|_| which("npm").is_some());
    if let Some(node) = found() {
        return Some(node);
    }
    if !Path::new("/usr/bin/apt-get").is_file() {
        eprintln!("==> no Node and no apt-get: the frontend provider tests will be skipped");
        return None;
    }
    step("installing Node with apt-get, for the frontend provider tests");
    let install = || run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "nodejs", "npm"]).env("DEBIAN_FRONTEND", "noninteractive"));
    if let Err(error) = install().or_else(|_| run(Command::new("apt-get").arg("update")).and_then(|()| install())) {
        eprintln!("==> Node could not be installed ({error:#}): the frontend provider tests will be skipped");
    }
    found()
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(program)).find(|path| path.is_file()))
}

/// `npm ci` unless `node_modules` already holds this lockfile's packages.
fn install(dir: &Path) -> anyhow::Result<()> {
    let lock = std::fs::read(dir.join("package-lock.json"))?;
    let wanted = hex::encode(Sha256::digest(&lock));
    let stamp = dir.join("node_modules/.anypath-lock-sha256");
    if std::fs::read_to_string(&stamp).is_ok_and(|have| have.trim() == wanted) {
        return Ok(());
    }
    step("installing the frontend data providers and json-server with npm ci (pinned by tests/frontends/package-lock.json)");
    // `run` works from the repository root: `--prefix` points npm at the lockfile.
    run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix"]).arg(dir))?;
    std::fs::write(&stamp, wanted)?;
    Ok(())
}
