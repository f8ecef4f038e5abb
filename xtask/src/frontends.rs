//! The frontend data providers the provider tests drive from Node
//! (`tests/frontend_providers.rs`): react-admin's `ra-data-json-server` and
//! `ra-data-simple-rest`, Refine's `@refinedev/simple-rest`, and json-server
//! 0.17.4 as the reference backend, at the versions `tests/frontends/
//! package-lock.json` pins (npm checks each package's integrity hash).
//! Installed with `npm ci` once per lockfile; Node comes from `apt-get`
//! when the machine has none. The tests need both, so a failed install
//! stops `cargo xtask test` with its reason.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::shell::{root, run, step};

/// What the provider tests need: Node and the installed packages.
pub struct Frontends {
    pub node: PathBuf,
    pub dir: PathBuf,
}

/// Node (installed with `apt-get` when missing) and the packages of the lockfile.
pub fn ensure() -> anyhow::Result<Frontends> {
    let node = node()?;
    let dir = root().join("tests/frontends");
    install(&dir).context("installing the frontend providers with npm ci")?;
    Ok(Frontends { node, dir })
}

fn node() -> anyhow::Result<PathBuf> {
    let found = || which("node").filter(|_| which("npm").is_some());
    if let Some(node) = found() {
        return Ok(node);
    }
    if !Path::new("/usr/bin/apt-get").is_file() {
        bail!("the frontend provider tests need Node 18 or later with npm, and this machine has neither Node nor apt-get to install it");
    }
    step("installing Node with apt-get, for the frontend provider tests");
    let install = || run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "nodejs", "npm"]).env("DEBIAN_FRONTEND", "noninteractive"));
    install().or_else(|_| run(Command::new("apt-get").arg("update")).and_then(|()| install())).context("installing Node with apt-get")?;
    found().context("apt-get installed Node, but node or npm is still not on PATH")
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
