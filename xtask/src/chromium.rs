//! Debian's chromium, for the browser tests (`tests/app_http.rs` drives the
//! REST face from a page on another origin). Installed with `apt-get` where
//! it works; elsewhere the browser tests say they were skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::shell::{run, step};

/// Where Debian puts it.
const CHROMIUM: &str = "/usr/bin/chromium";

/// The browser's path, installing it first when `apt-get` can; None (with
/// the reason printed) when it cannot be had.
pub fn ensure() -> Option<PathBuf> {
    let path = Path::new(CHROMIUM);
    if path.is_file() {
        return Some(path.to_path_buf());
    }
    if !Path::new("/usr/bin/apt-get").is_file() {
        eprintln!("==> no chromium and no apt-get: the browser tests will be skipped");
        return None;
    }
    step("installing chromium with apt-get, for the browser tests (about a minute)");
    let install = || run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "chromium"]).env("DEBIAN_FRONTEND", "noninteractive"));
    // A fresh machine may have no package lists yet.
    let installed = install().or_else(|_| run(Command::new("apt-get").arg("update")).and_then(|()| install()));
    match installed {
        Ok(()) if path.is_file() => Some(path.to_path_buf()),
        Ok(()) => {
            eprintln!("==> apt-get installed chromium, but not at {CHROMIUM}: the browser tests will be skipped");
            None
        }
        Err(error) => {
            eprintln!("==> chromium could not be installed ({error:#}): the browser tests will be skipped");
            None
        }
    }
}
