//! Where the runtimes' components and their compiled caches live by default.

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

/// The data runtime the build lays out beside the binary's target directory
/// (`target/python-data/` for `target/<profile>/anypath`), when it is there.
pub fn default_python_data() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?.join("python-data");
    dir.join("lib").is_dir().then_some(dir)
}

/// The shell runtime the build puts beside the binary's target directory
/// (`target/shell/shell.wasm` for `target/<profile>/anypath`), when it is there.
pub fn default_shell() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("shell").join("shell.wasm");
    path.is_file().then_some(path)
}

/// The JavaScript runtime the build puts beside the binary's target
/// directory (`target/javascript/javascript.wasm` for
/// `target/<profile>/anypath`), when it is there.
pub fn default_javascript() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("javascript").join("javascript.wasm");
    path.is_file().then_some(path)
}
