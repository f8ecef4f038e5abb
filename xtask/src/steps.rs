//! The steps behind each xtask command.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::python_runner;

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

/// What a full build produced.
pub struct Built {
    pub runner: PathBuf,
    /// The data runtime's directory (`target/python-data`).
    pub python_data: PathBuf,
    pub binary: PathBuf,
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
        let runtimes = scope.spawn(|| -> anyhow::Result<(PathBuf, PathBuf)> {
            let runner = python_runner::build()?;
            let python_data = crate::python_data::build()?;
            build_components()?;
            Ok((runner, python_data))
        });
        step("building the native host (release; the first build compiles wasmtime and takes minutes)");
        let binary = run(cargo_command().args(native)).map(|()| root().join("target/release/anypath"));
        let runtimes = runtimes.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the runtime build thread panicked")));
        (runtimes, binary)
    });
    let ((runner, python_data), binary) = (runtimes?, binary?);
    crate::python_data::preinitialise(&binary, &python_data)?;
    step("compiling the runner and the python-data runtime to native code (cached; the data runtime takes about a minute the first time)");
    run(Command::new(&binary).args(["sandbox", "precompile", "--runner"]).arg(&runner).arg("--python-data").arg(&python_data))?;
    step(&format!("build finished in {:.1} s", started.elapsed().as_secs_f64()));
    Ok(Built { runner, python_data, binary })
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

/// The venv's Python with the llama.cpp server, and the small model's path:
/// what `tests/small_model.rs` runs a real model with.
fn small_model() -> anyhow::Result<(PathBuf, PathBuf)> {
    let python = crate::venv::ensure_library(&crate::venv::XLLAMACPP)?;
    let model = crate::model::ensure_small_model()?;
    Ok((python, model))
}

/// `cargo xtask model`: install the model server and the small model, and
/// print the settings the small-model test reads.
pub fn model() -> anyhow::Result<()> {
    let (python, model) = small_model()?;
    println!("ANYPATH_PYTHON={}", python.display());
    println!("ANYPATH_LLM_MODEL={}", model.display());
    Ok(())
}

/// `cargo xtask up`: build, then run the app on 127.0.0.1:3000 until Ctrl-C.
pub fn up(extra: &[String]) -> anyhow::Result<()> {
    let built = build_all()?;
    step("running the app on http://127.0.0.1:3000 (Ctrl-C stops)");
    let mut command = Command::new(&built.binary);
    command.args(["up", "--listen", "127.0.0.1:3000", "--runner"]).arg(&built.runner).arg("--python-data").arg(&built.python_data);
    if !extra.is_empty() {
        command.args(extra);
    }
    run(&mut command)
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
