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
    build_with(&["build", "--release", "--workspace", "--bins"])
}

/// Like [`build_all`], but the native build is `cargo <native...>`: the test
/// build passes `test --no-run` so the binaries are built once, with the
/// features the tests need, instead of twice.
fn build_with(native: &[&str]) -> anyhow::Result<Built> {
    let started = Instant::now();
    let runner = python_runner::build()?;
    let python_data = crate::python_data::build()?;
    build_components()?;
    step("building the native host (release; the first build compiles wasmtime and takes minutes)");
    run(Command::new(cargo()).args(native))?;
    let binary = root().join("target/release/anypath");
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
    let status = Command::new(cargo())
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

/// `cargo xtask test`: build, then the book (built, its links checked), then
/// every test of the workspace.
pub fn test(extra: &[String]) -> anyhow::Result<()> {
    let built = build_with(&["test", "--release", "--workspace", "--no-run"])?;
    let schemathesis = crate::venv::ensure(&crate::venv::SCHEMATHESIS)?;
    crate::venv::ensure_with_dependencies(&crate::venv::MCP_CLIENT)?;
    crate::venv::ensure_with_dependencies(&crate::venv::PROMETHEUS_CLIENT)?;
    crate::venv::ensure_with_dependencies(&crate::venv::KUBERNETES_VALIDATE)?;
    let redis_server = crate::redis_server::ensure()?;
    let (python, model) = small_model()?;
    let chromium = crate::chromium::ensure();
    let frontends = crate::frontends::ensure()?;
    crate::docs::build()?;
    let tests = || {
        let mut command = Command::new(cargo());
        command
            .args(["test", "--release"])
            .env("ANYPATH_RUNNER", &built.runner)
            .env("ANYPATH_PYTHON_DATA", &built.python_data)
            .env("ANYPATH_SCHEMATHESIS", &schemathesis)
            .env("ANYPATH_PYTHON", &python)
            .env("ANYPATH_LLM_MODEL", &model)
            .env("ANYPATH_REDIS_SERVER", &redis_server);
        if let Some(chromium) = &chromium {
            command.env("ANYPATH_CHROMIUM", chromium);
        }
        command.env("ANYPATH_NODE", &frontends.node).env("ANYPATH_FRONTENDS", &frontends.dir);
        command
    };
    step("running every test");
    run(tests().arg("--workspace").args(extra))?;
    step("running the store's unit tests");
    run(Command::new(cargo()).args(["test", "-p", "store", "--manifest-path"]).arg(root().join("components/Cargo.toml")))?;
    step("running the app's REST suites again with the store on Redis");
    let suites = |command: &mut Command, names: &[&str]| {
        command.args(["-p", "anypath"]).args(names.iter().flat_map(|suite| ["--test", *suite]));
    };
    let mut on_redis = tests();
    suites(&mut on_redis, REST_SUITES);
    run(on_redis.args(extra).env("ANYPATH_TEST_STORE_BACKEND", "redis"))?;

    let Some(spin) = crate::spin::find()? else {
        eprintln!("==> skipped the tests under the real Spin (spin build; {} under spin up, on key-value and on Redis): no Spin CLI found (set SPIN_BIN, or put spin on PATH)", SPIN_SUITES.join(", "));
        return Ok(());
    };
    step(&format!("spin build, with {} ({})", spin.version, spin.path.display()));
    run(Command::new(&spin.path).arg("build"))?;
    step("running the app's suites under the real spin up, store on key-value");
    let mut under_spin = tests();
    suites(&mut under_spin, SPIN_SUITES);
    run(under_spin.args(extra).env("ANYPATH_TEST_APP_HOST", "spin").env("SPIN_BIN", &spin.path))?;
    step("running the app's REST suites under the real spin up, store on Redis");
    let mut under_spin_on_redis = tests();
    suites(&mut under_spin_on_redis, REST_SUITES);
    run(under_spin_on_redis
        .args(extra)
        .env("ANYPATH_TEST_APP_HOST", "spin")
        .env("SPIN_BIN", &spin.path)
        .env("ANYPATH_TEST_STORE_BACKEND", "redis"))
}

/// The whole-app REST suites, which run unchanged on either store backend.
const REST_SUITES: &[&str] = &["app_http", "rest_contract", "llm_planner"];

/// The suites run a second time under the real `spin up`: the REST suites,
/// the agent's (scripted model), several sandbox hosts, and the manifest
/// rules against Spin itself.
const SPIN_SUITES: &[&str] =
    &["app_http", "rest_contract", "llm_planner", "agent_run", "sandbox_pool", "spin_manifest_rules", "frontend_dialects", "frontend_providers"];

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

/// `cargo xtask bench`: build, then the benchmark binary.
pub fn bench(extra: &[String]) -> anyhow::Result<()> {
    let built = build_all()?;
    step("running the benchmarks");
    run(Command::new(root().join("target/release/anypath-bench"))
        .arg("--runner")
        .arg(&built.runner)
        .arg("--python-data")
        .arg(&built.python_data)
        .arg("--baseline-venv")
        .arg(root().join("target/bench-venv"))
        .args(extra))?;
    let redis_server = crate::redis_server::ensure()?;
    crate::app_bench::run_app_bench(&built.binary, &built.runner, &redis_server)
}

/// The cargo that runs this xtask, so the pinned toolchain is used throughout.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}
