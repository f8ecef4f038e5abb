//! `cargo xtask build`: the Python and JavaScript runtimes, the Spin components and the
//! native host, built side by side; `up`, `test`, `bench` and `docs` build
//! through it first.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::python_runner;
use crate::shell::{cargo_command, root, run, step};

/// What a full build produced.
pub struct Built {
    pub runner: PathBuf,
    /// The data runtime's directory (`target/python-data`).
    pub python_data: PathBuf,
    pub binary: PathBuf,
    /// The tests' wheelhouse (`target/wheelhouse`), which `up` serves too.
    pub wheelhouse: PathBuf,
}

/// Builds the runner component and the native host, and warms the artifact cache.
pub fn build_all() -> anyhow::Result<Built> {
    build_with(APP_BUILD)
}

/// The cargo command of `build`, `up`, `bench` and `docs`: the same profile and
/// features as the test build ([`crate::test_run::TEST_BUILD`]), so after `cargo xtask test`
/// it has nothing left to do ([`crate::shared_build`] checks that it does not).
pub const APP_BUILD: &[&str] = &["build", "--release", "--workspace", "--bins"];

/// Like [`build_all`], but the native build is `cargo <native...>`: the test
/// build ([`crate::test_run::TEST_BUILD`]) also builds the tests. The native build runs beside
/// the Python runtimes and the Spin components (downloads, conversions and a
/// second compiler fill the cores the native build's long single-crate
/// stretches leave idle); pre-initialisation and native compilation of the
/// runtimes need both.
pub fn build_with(native: &[&str]) -> anyhow::Result<Built> {
    let started = Instant::now();
    let (runtimes, binary) = std::thread::scope(|scope| {
        let runtimes = scope.spawn(|| -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
            let runner = python_runner::build()?;
            let python_data = crate::python_data::build()?;
            build_components()?;
            build_shell_runtime()?;
            crate::javascript_runtime::build()?;
            let wheelhouse = crate::runtime_wheels::test_wheelhouse()?;
            Ok((runner, python_data, wheelhouse))
        });
        step("building the native host (release; the first build compiles wasmtime and takes minutes)");
        let binary = run(cargo_command().args(native)).map(|()| root().join("target/release/anypath"));
        let runtimes = runtimes.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the runtime build thread panicked")));
        (runtimes, binary)
    });
    let ((runner, python_data, wheelhouse), binary) = (runtimes?, binary?);
    crate::python_data::preinitialise(&binary, &python_data)?;
    step("compiling the runner and the python-data runtime to native code (cached; the data runtime takes about a minute the first time)");
    run(Command::new(&binary).args(["sandbox", "precompile", "--runner"]).arg(&runner).arg("--python-data").arg(&python_data))?;
    step(&format!("build finished in {:.1} s", started.elapsed().as_secs_f64()));
    Ok(Built { runner, python_data, binary, wheelhouse })
}

/// The WebAssembly target the Spin components are built for.
const WASM_TARGET: &str = "wasm32-wasip2";

/// Builds the Spin components (gateway, planner, store) for `wasm32-wasip2`.
fn build_components() -> anyhow::Result<()> {
    ensure_wasm_target()?;
    step("building the Spin components (wasm32-wasip2)");
    let status = cargo_command()
        .args(["build", "--release", "--target", WASM_TARGET])
        .current_dir(root().join("components"))
        .status()
        .context("starting cargo for the components")?;
    if !status.success() {
        bail!("building the components failed with {status}");
    }
    Ok(())
}

/// Where the shell runtime is put, beside the runner (`target/shell/shell.wasm`).
pub const SHELL_RUNTIME: &str = "target/shell/shell.wasm";

/// Builds the shell runtime (`components/shell`, its own workspace) for
/// `wasm32-wasip2` and puts it at [`SHELL_RUNTIME`].
fn build_shell_runtime() -> anyhow::Result<()> {
    ensure_wasm_target()?;
    step("building the shell runtime (wasm32-wasip2)");
    let target_dir = root().join("target/shell-build");
    let status = cargo_command()
        .args(["build", "--release", "--locked", "--target", WASM_TARGET, "--target-dir"])
        .arg(&target_dir)
        .current_dir(root().join("components/shell"))
        .status()
        .context("starting cargo for the shell runtime")?;
    if !status.success() {
        bail!("building the shell runtime failed with {status}");
    }
    let built = target_dir.join(WASM_TARGET).join("release/shell.wasm");
    let placed = root().join(SHELL_RUNTIME);
    std::fs::create_dir_all(placed.parent().context("the shell runtime's folder")?)?;
    std::fs::copy(&built, &placed).with_context(|| format!("copying {} to {}", built.display(), placed.display()))?;
    Ok(())
}

/// Installs the wasm target when the toolchain lacks it (rust-toolchain.toml
/// names it, but a toolchain installed earlier does not pick that up).
fn ensure_wasm_target() -> anyhow::Result<()> {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).current_dir(root()).output();
    match installed {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == WASM_TARGET) => Ok(()),
        Ok(_) => {
            step(&format!("installing the {WASM_TARGET} target"));
            run(Command::new("rustup").args(["target", "add", WASM_TARGET]))
        }
        // Without rustup the toolchain must already have the target; cargo will say if not.
        Err(_) => Ok(()),
    }
}

