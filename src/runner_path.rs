//! Where the runner component and its compiled cache live by default.

use std::path::{Path, PathBuf};

/// The runner the build puts beside the binary's target directory
/// (`target/python-runner/runner.wasm` for `target/<profile>/anypath`).
pub fn default_runner() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
        .map(|target| target.join("python-runner").join("runner.wasm"))
        .unwrap_or_else(|| PathBuf::from("runner.wasm"))
}
