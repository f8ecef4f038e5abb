//! The shell every command runs through: the repository root, progress
//! lines, commands run from the root (cargo among them, without the
//! variables `cargo run` gave this xtask), and the child processes and
//! scratch directories a command owns until it ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use anyhow::{Context, bail};

/// The repository root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."))
}

/// Prints a progress line for a step.
pub fn step(message: &str) {
    eprintln!("==> {message}");
}

/// Runs a command from the repository root, failing on a non-zero exit.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let shown = format!("{command:?}");
    let status = command.current_dir(root()).status().with_context(|| format!("starting {shown}"))?;
    if !status.success() {
        bail!("{shown} failed with {status}");
    }
    Ok(())
}

/// The cargo that runs this xtask, so the pinned toolchain is used throughout.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// A command running [`cargo`] without the variables `cargo run` gave this
/// xtask about itself (`CARGO_MANIFEST_DIR=xtask/`, `CARGO_PKG_*`, ...):
/// build scripts that watch them (ring's watches `CARGO_MANIFEST_DIR`) would
/// otherwise see a change between a build from here and one from a shell,
/// and everything above them (rustls, wasmtime-wasi-http, the host) would be
/// rebuilt each time one follows the other.
pub fn cargo_command() -> Command {
    let mut command = Command::new(cargo());
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("CARGO_PKG_") || RUN_VARIABLES.contains(&name) {
            command.env_remove(name);
        }
    }
    command
}

/// What `cargo run` sets for the program it runs, besides `CARGO_PKG_*`.
const RUN_VARIABLES: &[&str] =
    &["CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE", "CARGO_RUSTC_CURRENT_DIR"];

/// A child process killed when this is dropped, however the command ends:
/// with the process group it leads, when it was started in one of its own
/// (`spin up`, whose app runs in a `spin trigger http` child).
pub struct Running(pub Child);

impl Running {
    /// Waits for the process to end by itself and gives its standard output.
    pub fn finish(mut self) -> std::io::Result<Vec<u8>> {
        let mut output = Vec::new();
        if let Some(mut stdout) = self.0.stdout.take() {
            std::io::Read::read_to_end(&mut stdout, &mut output)?;
        }
        self.0.wait()?;
        Ok(output)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(group) = i32::try_from(self.0.id()) {
            // SAFETY: kill(2) on a negative pid signals that process group;
            // a process not leading one has no such group and nothing happens.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory removed when this is dropped: made to be dropped after
/// every process that writes into it (a binding made before theirs).
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    /// `<temp>/<name>-<this process's id>`, emptied of what a killed run left.
    pub fn in_temp(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
