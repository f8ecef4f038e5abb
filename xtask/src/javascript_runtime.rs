//! The JavaScript runtime (`components/javascript`, its own workspace):
//! QuickJS's C, by way of rquickjs, built for `wasm32-wasip2` and put at
//! [`JAVASCRIPT_RUNTIME`]. QuickJS needs a C compiler for WebAssembly:
//! Debian's clang, llvm-ar and wasi-libc (installed with `apt-get` when
//! missing), laid out as the WASI SDK rquickjs's build script expects
//! (`$WASI_SDK/bin/clang`, `bin/ar`, `share/wasi-sysroot`), instead of the
//! SDK it would download.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::shell::{cargo_command, root, run, step};

/// Where the JavaScript runtime is put (`target/javascript/javascript.wasm`).
pub const JAVASCRIPT_RUNTIME: &str = "target/javascript/javascript.wasm";

/// The WebAssembly target it is built for.
const WASM_TARGET: &str = "wasm32-wasip2";

/// wasi-libc's headers and libraries as Debian lays them out.
const WASI_INCLUDE: &str = "/usr/include/wasm32-wasi";
const WASI_LIB: &str = "/usr/lib/wasm32-wasi";

/// Builds the runtime and puts it at [`JAVASCRIPT_RUNTIME`].
pub fn build() -> anyhow::Result<()> {
    let sdk = wasi_sdk()?;
    step("building the JavaScript runtime (QuickJS, wasm32-wasip2)");
    let target_dir = root().join("target/javascript-build");
    let status = cargo_command()
        .args(["build", "--release", "--locked", "--target", WASM_TARGET, "--target-dir"])
        .arg(&target_dir)
        .env("WASI_SDK", &sdk)
        .current_dir(root().join("components/javascript"))
        .status()
        .context("starting cargo for the JavaScript runtime")?;
    if !status.success() {
        bail!("building the JavaScript runtime failed with {status}");
    }
    let built = target_dir.join(WASM_TARGET).join("release/anypath_javascript.wasm");
    let placed = root().join(JAVASCRIPT_RUNTIME);
    std::fs::create_dir_all(placed.parent().context("the JavaScript runtime's folder")?)?;
    std::fs::copy(&built, &placed).with_context(|| format!("copying {} to {}", built.display(), placed.display()))?;
    Ok(())
}

/// The WASI SDK layout over Debian's tools (`target/wasi-c`), made once;
/// the tools installed first when missing.
fn wasi_sdk() -> anyhow::Result<PathBuf> {
    let (clang, ar) = c_tools()?;
    let sdk = root().join("target/wasi-c");
    let bin = sdk.join("bin");
    let sysroot = sdk.join("share/wasi-sysroot");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(sysroot.join("lib"))?;
    // rquickjs names the target as rustc does (`wasm32-wasip2`), which an
    // older clang does not know: every target becomes `wasm32-wasi`, whose
    // code is the same (the link is rustc's, with its own libc).
    let wrapper = format!(
        "#!/bin/sh\n# clang for WASI, the target rewritten (see xtask/src/javascript_runtime.rs).\nfor arg in \"$@\"; do\n  case \"$arg\" in --target=*) arg=--target=wasm32-wasi;; esac\n  set -- \"$@\" \"$arg\"; shift\ndone\nexec {} --target=wasm32-wasi \"$@\"\n",
        clang.display()
    );
    write_executable(&bin.join("clang"), &wrapper)?;
    relink(&ar, &bin.join("ar"))?;
    relink(Path::new(WASI_INCLUDE), &sysroot.join("include"))?;
    relink(Path::new(WASI_LIB), &sysroot.join("lib/wasm32-wasi"))?;
    Ok(sdk)
}

/// clang and llvm-ar, with wasi-libc beside them, installed with `apt-get` when missing.
fn c_tools() -> anyhow::Result<(PathBuf, PathBuf)> {
    let found = || Some((which("clang")?, which("llvm-ar")?)).filter(|_| Path::new(WASI_INCLUDE).join("stdio.h").is_file());
    if let Some(tools) = found() {
        return Ok(tools);
    }
    if !Path::new("/usr/bin/apt-get").is_file() {
        bail!("the JavaScript runtime needs clang, llvm-ar and wasi-libc (headers in {WASI_INCLUDE}), and this machine has no apt-get to install them");
    }
    step("installing clang, llvm and wasi-libc with apt-get, for the JavaScript runtime (about a minute)");
    let install = || run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "clang", "llvm", "wasi-libc"]).env("DEBIAN_FRONTEND", "noninteractive"));
    install().or_else(|_| run(Command::new("apt-get").arg("update")).and_then(|()| install())).context("installing the C tools with apt-get")?;
    found().context("apt-get installed clang, llvm and wasi-libc, but clang, llvm-ar or wasi-libc's headers are still missing")
}

/// `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file()))
}

fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// `link` made a symbolic link to `target`, replacing what was there.
fn relink(target: &Path, link: &Path) -> anyhow::Result<()> {
    if std::fs::read_link(link).ok().as_deref() == Some(target) {
        return Ok(());
    }
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).with_context(|| format!("linking {} to {}", link.display(), target.display()))
}
