//! Command-line interface.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use anypath_sandbox::{BlockRunner, JavascriptConfig, Policy, PythonDataConfig, RunnerConfig, SessionRuntime};
use clap::{Args, Parser, Subcommand};

use crate::runner_path::default_runner;
use anypath_service::serve::ServeOptions;

/// Any HTTP path becomes a REST endpoint: planned Python run in a WebAssembly sandbox.
#[derive(Parser)]
#[command(name = "anypath", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The Python sandbox on its own.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Run one Python file in the sandbox and print the report as JSON.
    Exec(ExecArgs),
    /// Run the Spin app in spin.toml with Spin's semantics (no Spin CLI needed).
    Up(UpArgs),
    /// Serve the code interpreter as MCP tools on stdin/stdout (for agents
    /// that start their tool servers, such as Claude Code).
    Mcp(McpArgs),
    /// Print the configuration reference (every Spin variable and flag) as Markdown.
    #[command(hide = true)]
    ConfigReference,
}

#[derive(Args)]
struct McpArgs {
    /// The tenant every call of this server acts as.
    #[arg(long, default_value = "default")]
    tenant: String,
    /// Loopback address serving the signed download links (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    downloads_listen: SocketAddr,
    #[command(flatten)]
    admission: AdmissionArgs,
    #[command(flatten)]
    interpreter: InterpreterArgs,
    #[command(flatten)]
    runner: RunnerArgs,
    #[command(flatten)]
    sharing: crate::session_sharing::SharingArgs,
}

#[derive(Args)]
struct UpArgs {
    /// Address to listen on, as in `spin up`.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// The Spin manifest.
    #[arg(long = "from", short = 'f', default_value = "spin.toml")]
    manifest: PathBuf,
    /// The runtime configuration (key-value store labels and paths), as in `spin up`.
    #[arg(long)]
    runtime_config_file: Option<PathBuf>,
    /// SQLite file of the `default` key-value store, over the runtime
    /// configuration's (default: .spin/sqlite_key_value.db beside the manifest).
    #[arg(long)]
    kv: Option<PathBuf>,
    /// Where the sandbox service (REST executor and code interpreter) listens.
    #[arg(long, default_value = "127.0.0.1:3001")]
    sandbox_listen: SocketAddr,
    /// `key:tenant` pairs for the code interpreter, as for `sandbox serve`.
    #[arg(long, env = "ANYPATH_API_KEYS", hide_env_values = true, default_value = "")]
    api_keys: String,
    /// Where E2B's API (for E2B's SDKs) listens.
    #[arg(long, default_value = "127.0.0.1:3002")]
    e2b_listen: SocketAddr,
    /// Do not serve E2B's API.
    #[arg(long)]
    no_e2b: bool,
    /// Where Jupyter kernels keep their files: `shared` (every kernel of a
    /// tenant works in one directory that outlives the kernels, as on a
    /// Jupyter server) or `per-kernel` (each kernel's own, removed with it).
    #[arg(long, env = "ANYPATH_JUPYTER_KERNEL_FILES", value_enum, default_value_t = KernelFilesArg::Shared)]
    jupyter_kernel_files: KernelFilesArg,
    #[command(flatten)]
    admission: AdmissionArgs,
    #[command(flatten)]
    interpreter: InterpreterArgs,
    #[command(flatten)]
    runner: RunnerArgs,
    #[command(flatten)]
    sharing: crate::session_sharing::SharingArgs,
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Serve the sandbox over HTTP: `POST /v1/exec`, `GET /healthz`.
    Serve(Box<ServeArgs>),
    /// Compile the runtimes (the runner, python-data, javascript, the shell) into the artifact cache and exit.
    Precompile(RunnerArgs),
    /// Pre-initialise the data runtime's reactor: import numpy, pandas,
    /// matplotlib and seaborn in a scratch instance and write its memory
    /// image back into the module (`cargo xtask build` runs this).
    PreinitData(PreinitArgs),
}

/// What `sandbox preinit-data` reads and writes.
#[derive(Args)]
struct PreinitArgs {
    /// The reactor's core module (the wheel's `python-snapshot.wasm`).
    #[arg(long)]
    core: PathBuf,
    /// The data runtime's directory (`lib/`, `mpl-data/`), as the instances will see it.
    #[arg(long)]
    python_data: PathBuf,
    /// Where the pre-initialised core module goes.
    #[arg(long)]
    out: PathBuf,
    /// Where the summary of what the image holds goes (JSON).
    #[arg(long)]
    summary: PathBuf,
}

/// Where the runner is and which policy applies.
#[derive(Args, Clone)]
pub struct RunnerArgs {
    /// The runner component (default: `python-runner/runner.wasm` in the target directory).
    #[arg(long, env = "ANYPATH_RUNNER")]
    runner: Option<PathBuf>,
    /// Directory for compiled artifacts: the runtimes' native code and, under
    /// `anypath up`, the Spin app's components' (default: `cache/` beside the runner).
    #[arg(long, env = "ANYPATH_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// A policy TOML file setting each runtime's ceilings
    /// (`[runtime.python]`, `[runtime.python-data]`: fuel, memory, wall
    /// time, code, input and output caps); unknown keys are refused. A
    /// request may only lower them.
    #[arg(long, env = "ANYPATH_POLICY")]
    policy: Option<PathBuf>,
    /// One ceiling over the policy file, as `RUNTIME.KEY=VALUE`
    /// (`python-data.memory_bytes=1073741824`); repeatable.
    #[arg(long = "limit", value_name = "RUNTIME.KEY=VALUE")]
    limits: Vec<String>,
    /// Instances kept started ahead of demand.
    #[arg(long, default_value_t = 2)]
    warm_instances: usize,
    /// The data runtime's directory as `cargo xtask build` lays it out
    /// (python-data-preimported.wasm, python-data-snapshot.wasm,
    /// python-data.wasm, lib/); by default
    /// `target/python-data` beside the binary, when it is there. Without it,
    /// sessions cannot ask for `python-data`.
    #[arg(long, env = "ANYPATH_PYTHON_DATA")]
    python_data: Option<PathBuf>,
    /// Which reactor python-data instances start from: `preimported`
    /// (numpy, pandas, matplotlib and seaborn already imported), `snapshot`
    /// (CPython started, nothing imported) or `plain`.
    #[arg(long, value_enum, default_value_t = DataVariant::Preimported)]
    python_data_variant: DataVariant,
    /// The shell runtime (`shell.wasm`) that runs sessions' commands; by
    /// default `target/shell/shell.wasm` beside the binary, when it is
    /// there. Without it, commands are refused as unavailable.
    #[arg(long, env = "ANYPATH_SHELL")]
    shell: Option<PathBuf>,
    /// The JavaScript runtime (`javascript.wasm`, QuickJS) sessions may ask
    /// for as `javascript`; by default `target/javascript/javascript.wasm`
    /// beside the binary, when it is there. Without it, sessions run Python only.
    #[arg(long, env = "ANYPATH_JAVASCRIPT")]
    javascript: Option<PathBuf>,
    /// A folder of wheels (`*.whl`, read-only) that `pip install` in
    /// sessions' commands and cells installs from: the sandbox has no
    /// network. Only pure-Python wheels (`py3-none-any`) install.
    #[arg(long, env = "ANYPATH_WHEELHOUSE")]
    wheelhouse: Option<PathBuf>,
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    runner: RunnerArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3001")]
    listen: SocketAddr,
    /// Shared secret callers must send as `Authorization: Bearer <token>`.
    #[arg(long, env = "ANYPATH_SANDBOX_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// `key:tenant` pairs separated by commas; an `X-API-Key` header selects
    /// the tenant of a code-interpreter call.
    #[arg(long, env = "ANYPATH_API_KEYS", hide_env_values = true, default_value = "")]
    api_keys: String,
    /// Also serve E2B's API (for E2B's SDKs) on this address.
    #[arg(long)]
    e2b_listen: Option<SocketAddr>,
    /// Where Jupyter kernels keep their files: `shared` (every kernel of a
    /// tenant works in one directory that outlives the kernels, as on a
    /// Jupyter server; a fleet sharing `--session-store` keeps them per
    /// kernel all the same) or `per-kernel` (each kernel's own, removed
    /// with it).
    #[arg(long, env = "ANYPATH_JUPYTER_KERNEL_FILES", value_enum, default_value_t = KernelFilesArg::Shared)]
    jupyter_kernel_files: KernelFilesArg,
    #[command(flatten)]
    interpreter: InterpreterArgs,
    #[command(flatten)]
    sharing: crate::session_sharing::SharingArgs,
}

/// How executions are admitted: slots and queue places, in all and per tenant.
#[derive(Args, Clone)]
pub struct AdmissionArgs {
    /// Executions running at once over all tenants (default: twice the CPUs).
    #[arg(long)]
    max_concurrent: Option<usize>,
    /// Executions one tenant may run at once (default: the number of CPUs).
    #[arg(long)]
    tenant_max_concurrent: Option<usize>,
    /// Requests waiting for a slot over all tenants; beyond that the answer is 503.
    #[arg(long, default_value_t = 64)]
    queue_depth: usize,
    /// Requests one tenant may keep waiting while other tenants are active
    /// (a tenant alone may fill the whole queue); beyond that its answer is 429.
    #[arg(long, default_value_t = 8)]
    tenant_queue_depth: usize,
}

impl AdmissionArgs {
    /// The admission bounds these arguments describe.
    pub fn config(&self) -> anypath_service::admission::AdmissionConfig {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let defaults = anypath_service::admission::AdmissionConfig::for_cpus(cpus);
        let tenant_running = self.tenant_max_concurrent.unwrap_or(defaults.tenant_running);
        anypath_service::admission::AdmissionConfig {
            max_running: self.max_concurrent.unwrap_or(defaults.max_running),
            tenant_running,
            contended_running: anypath_service::admission::AdmissionConfig::half(tenant_running),
            max_queued: self.queue_depth,
            tenant_queued: self.tenant_queue_depth,
            ..defaults
        }
    }
}

/// How the code interpreter keeps sessions.
#[derive(Args, Clone)]
pub struct InterpreterArgs {
    /// Where session directories live.
    #[arg(long, env = "ANYPATH_DATA_DIR", default_value = ".anypath/data")]
    data_dir: PathBuf,
    /// Idle minutes after which a session and its files are removed.
    #[arg(long, default_value_t = 15)]
    session_ttl_minutes: u64,
    /// The longest idle TTL a session may ask for, in minutes.
    #[arg(long, default_value_t = 240)]
    max_session_ttl_minutes: u64,
    /// Memory the live Python instances of all sessions may hold together,
    /// in MiB, counted as the pages each has made its own (not the runtime
    /// image's pages, which they share) and the state image one keeps after
    /// a fork or snapshot until its next run; beyond it the least recently used
    /// idle sessions are hibernated (their state saved beside their files,
    /// restored on their next run).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u64).range(64..))]
    session_memory_mb: u64,
    /// Seconds a session may sit idle before its state is hibernated.
    #[arg(long, default_value_t = 60)]
    hibernate_after_idle_seconds: u64,
    /// When a live session's state is written to its store: `idle` (when
    /// it is hibernated; a host that dies loses the runs since, and the
    /// next run says so) or `every-run` (before each run's answer goes
    /// out: no acknowledged run is lost, at the cost of an image per run).
    #[arg(long, env = "ANYPATH_CHECKPOINT", value_enum, default_value_t = CheckpointArg::Idle)]
    checkpoint: CheckpointArg,
    /// Where sessions and artifacts live: `disk` (under the data directory,
    /// survives a restart) or `memory` (a RAM-backed directory removed at exit).
    #[arg(long, value_enum, env = "ANYPATH_STORAGE", default_value_t = StorageArg::Disk)]
    storage: StorageArg,
    /// Largest file code or an upload may make in a session, in MiB.
    #[arg(long, default_value_t = 100)]
    max_file_mb: u64,
    /// Bytes a session directory may hold, in MiB.
    #[arg(long, default_value_t = 500)]
    max_session_mb: u64,
    /// Files and directories a session directory may hold.
    #[arg(long, default_value_t = 1000)]
    max_session_files: u64,
    /// Hours an artifact and its download links live.
    #[arg(long, default_value_t = 24)]
    artifact_retention_hours: u64,
    /// Megabytes of artifacts one tenant may hold.
    #[arg(long, default_value_t = 1024)]
    artifact_quota_mb: u64,
    /// Seconds a snapshot lives after it was taken (default: 7 days).
    #[arg(long, default_value_t = 7 * 24 * 3600)]
    snapshot_retention_seconds: u64,
    /// Megabytes of snapshots (saved state and files) one tenant may hold.
    #[arg(long, default_value_t = 2048)]
    snapshot_quota_mb: u64,
    /// Snapshots one tenant may hold.
    #[arg(long, default_value_t = 100)]
    max_snapshots: usize,
    /// Largest artifact returned inline as base64, in KiB; larger ones are fetched by link.
    #[arg(long, default_value_t = 5120)]
    read_cap_kib: u64,
    /// Secret signing download links (default: generated and kept under the data directory).
    #[arg(long, env = "ANYPATH_SIGNING_KEY", hide_env_values = true)]
    signing_key: Option<String>,
    /// Public base URL of the sandbox service for absolute links (default: the request's Host).
    #[arg(long, env = "ANYPATH_PUBLIC_URL")]
    public_url: Option<String>,
    /// Hosts runs' callbacks (`callback_url`) may go to, `HOST:PORT`
    /// separated by commas. None by default: a run naming any other host is
    /// refused when it is submitted.
    #[arg(long, env = "ANYPATH_CALLBACK_ALLOW", default_value = "")]
    callback_allow: String,
    /// Seconds a graceful stop waits for background runs to end before it
    /// interrupts them (their reports are kept either way).
    #[arg(long, default_value_t = 30)]
    drain_runs_seconds: u64,
    /// `Host` values `/mcp` answers, separated by commas (`*`: any). The
    /// default is loopback only, a guard against DNS rebinding; the host of
    /// `--public-url` is added to it.
    #[arg(long, env = "ANYPATH_MCP_ALLOWED_HOSTS", default_value = "localhost,127.0.0.1,::1")]
    mcp_allowed_hosts: String,
    /// The runtime of a session created without naming one: `python-data`
    /// (numpy, pandas, matplotlib, ...; the default when its files are
    /// there) or `python` (standard library only, smaller and lighter).
    /// REST blocks always run on `python`.
    #[arg(long, env = "ANYPATH_DEFAULT_RUNTIME")]
    default_runtime: Option<anypath_sandbox::Runtime>,
    /// Origins whose web pages may call this service from a browser
    /// (download links, sessions): comma-separated `scheme://host[:port]`,
    /// or `*`. Empty: no CORS headers. `anypath up` takes the app's
    /// `cors_allowed_origins` when this is empty.
    #[arg(long, env = "ANYPATH_CORS_ALLOWED_ORIGINS", default_value = "")]
    cors_allowed_origins: String,
    /// Let those pages send credentials (never with `*`).
    #[arg(long, env = "ANYPATH_CORS_ALLOW_CREDENTIALS")]
    cors_allow_credentials: bool,
    /// A directory whose sub-directories are datasets: each is read-only at
    /// `/data/<name>/` in every session of the tenants allowed to see it,
    /// linked, never copied, and counted in no quota.
    #[arg(long, env = "ANYPATH_DATASETS")]
    datasets: Option<PathBuf>,
    /// Which tenants see which mounted dataset: a TOML file with a
    /// `[datasets]` table of `name = ["tenant", ...]` (`"*"`: every
    /// tenant); a dataset it does not name is shown to none. Without it
    /// every tenant sees every dataset.
    #[arg(long, env = "ANYPATH_DATASETS_ACL", requires = "datasets")]
    datasets_acl: Option<PathBuf>,
    /// Megabytes of staged datasets (`PUT /v1/datasets/{name}`) one tenant may hold.
    #[arg(long, default_value_t = 2048)]
    dataset_quota_mb: u64,
    /// Artifacts one run may keep; past it the report's `artifact_errors`
    /// names each changed file not kept (the first ones by name are kept,
    /// every file stays in the session).
    #[arg(long, default_value_t = anypath_interpreter::DEFAULT_MAX_ARTIFACTS_PER_RUN as u64, value_parser = clap::value_parser!(u64).range(1..))]
    max_artifacts_per_run: u64,
    /// Environment variable names a run may set (`env` of a run, E2B's
    /// `envs`): comma-separated names and `PREFIX*` patterns; `*` allows
    /// any name; empty allows none. `PYTHON*`, `HOME`, `TMPDIR`,
    /// `MPLBACKEND`, `MPLCONFIGDIR` and `ANYPATH_STATE_*` are the runtime's
    /// own and always refused. Outside the list a run is refused
    /// (`env_not_allowed`).
    #[arg(long, env = "ANYPATH_RUN_ENV_ALLOW", default_value = "*")]
    run_env_allow: String,
}

/// Where the code interpreter keeps sessions and artifacts.
/// The reactor a python-data instance starts from.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DataVariant {
    Preimported,
    Snapshot,
    Plain,
}

impl From<DataVariant> for anypath_sandbox::DataVariant {
    fn from(variant: DataVariant) -> Self {
        match variant {
            DataVariant::Preimported => Self::Preimported,
            DataVariant::Snapshot => Self::Snapshot,
            DataVariant::Plain => Self::Plain,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum KernelFilesArg {
    Shared,
    PerKernel,
}

impl From<KernelFilesArg> for anypath_service::jupyter::KernelFiles {
    fn from(files: KernelFilesArg) -> Self {
        match files {
            KernelFilesArg::Shared => Self::Shared,
            KernelFilesArg::PerKernel => Self::PerKernel,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CheckpointArg {
    Idle,
    EveryRun,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum StorageArg {
    Disk,
    Memory,
}

impl InterpreterArgs {
    /// The interpreter configuration these arguments describe (reading the
    /// datasets' access list, when one is named).
    pub fn config(&self) -> anyhow::Result<anypath_interpreter::InterpreterConfig> {
        let mut config = anypath_interpreter::InterpreterConfig::new(&self.data_dir);
        config.default_ttl = std::time::Duration::from_secs(self.session_ttl_minutes * 60);
        config.max_ttl = std::time::Duration::from_secs(self.max_session_ttl_minutes.max(self.session_ttl_minutes) * 60);
        config.session_memory_bytes = self.session_memory_mb << 20;
        config.hibernate_after_idle = std::time::Duration::from_secs(self.hibernate_after_idle_seconds);
        config.checkpoint = match self.checkpoint {
            CheckpointArg::Idle => anypath_interpreter::Checkpoint::Idle,
            CheckpointArg::EveryRun => anypath_interpreter::Checkpoint::EveryRun,
        };
        config.storage = match self.storage {
            StorageArg::Disk => anypath_interpreter::Storage::Disk,
            StorageArg::Memory => anypath_interpreter::Storage::Memory,
        };
        config.quota = anypath_sandbox::FileQuota {
            max_file_bytes: self.max_file_mb << 20,
            max_session_bytes: self.max_session_mb << 20,
            max_files: self.max_session_files,
        };
        config.artifacts.retention = std::time::Duration::from_secs(self.artifact_retention_hours * 3600);
        config.artifacts.tenant_quota_bytes = self.artifact_quota_mb << 20;
        config.snapshots = anypath_interpreter::SnapshotConfig {
            retention: std::time::Duration::from_secs(self.snapshot_retention_seconds),
            tenant_quota_bytes: self.snapshot_quota_mb << 20,
            max_per_tenant: self.max_snapshots,
        };
        config.read_cap_bytes = self.read_cap_kib << 10;
        config.signing_key = self.signing_key.as_ref().map(|key| key.as_bytes().to_vec());
        config.public_url = self.public_url.clone();
        config.default_runtime = self.default_runtime;
        config.datasets.mounted = self.datasets.clone();
        config.datasets.access = self.datasets_acl.as_deref().map(anypath_interpreter::DatasetAccess::load).transpose()?;
        config.datasets.tenant_quota_bytes = self.dataset_quota_mb << 20;
        config.artifacts.max_per_run = usize::try_from(self.max_artifacts_per_run).unwrap_or(usize::MAX);
        Ok(config)
    }

    /// Which environment variable names a run may set.
    pub fn run_env(&self) -> anyhow::Result<anypath_service::run_env::RunEnvPolicy> {
        Ok(anypath_service::run_env::RunEnvPolicy::parse(&self.run_env_allow)?)
    }

    /// The hosts runs' callbacks may go to.
    pub fn callbacks(&self) -> anyhow::Result<anypath_service::background_runs::CallbackPolicy> {
        let entries: Vec<String> = self.callback_allow.split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect();
        Ok(anypath_service::background_runs::CallbackPolicy::parse(&entries)?)
    }

    /// How long a graceful stop waits for background runs.
    pub fn drain_runs(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.drain_runs_seconds)
    }

    /// Which web pages on other origins may call; `fallback` (the app's own
    /// setting, for `anypath up`) when no origin is given here.
    pub fn cors(&self, fallback: Option<String>) -> anyhow::Result<anypath_rest::cors::CorsPolicy> {
        let origins = match (self.cors_allowed_origins.trim(), fallback) {
            ("", Some(app)) => app,
            (given, _) => given.to_owned(),
        };
        anypath_rest::cors::CorsPolicy::parse(&origins, self.cors_allow_credentials).context("--cors-allowed-origins")
    }

    /// The `Host` values `/mcp` answers; empty means any.
    pub fn mcp_allowed_hosts(&self) -> anyhow::Result<Vec<String>> {
        let mut hosts: Vec<String> =
            self.mcp_allowed_hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect();
        if hosts.iter().any(|h| h == "*") {
            return Ok(Vec::new());
        }
        if let Some(public) = &self.public_url {
            let url = url::Url::parse(public).with_context(|| format!("--public-url {public:?} is not a URL"))?;
            let host = url.host_str().with_context(|| format!("--public-url {public:?} names no host"))?;
            hosts.push(host.trim_start_matches('[').trim_end_matches(']').to_owned());
        }
        Ok(hosts)
    }
}

#[derive(Args)]
struct ExecArgs {
    /// The Python file to run.
    file: PathBuf,
    /// The request context as JSON.
    #[arg(long, default_value = "{}")]
    ctx: String,
    /// A collection as NAME=FILE, where FILE holds a JSON array (repeatable).
    #[arg(long = "collection", value_name = "NAME=FILE")]
    collections: Vec<String>,
    #[command(flatten)]
    runner: RunnerArgs,
}

impl RunnerArgs {
    /// The runner configuration these arguments describe.
    pub fn config(&self) -> anyhow::Result<RunnerConfig> {
        let mut config = RunnerConfig::new(self.runner_component());
        if !config.runner_component.is_file() {
            anyhow::bail!(
                "runner component {} not found; build it with `cargo xtask build` or pass --runner",
                config.runner_component.display()
            );
        }
        config.cache_dir = self.cache_dir();
        config.limits = self.policy()?.python;
        config.warm_instances = self.warm_instances;
        Ok(config)
    }

    /// Where native code is cached: `--cache-dir`, else `cache/` beside the
    /// runner. Reads no file, unlike [`Self::config`].
    pub fn cache_dir(&self) -> PathBuf {
        match &self.cache_dir {
            Some(dir) => dir.clone(),
            None => RunnerConfig::new(self.runner_component()).cache_dir,
        }
    }

    /// The runner component: `--runner`, else the built one.
    fn runner_component(&self) -> PathBuf {
        self.runner.clone().unwrap_or_else(default_runner)
    }

    /// Each runtime's ceilings: the defaults, the policy file, the `--limit` flags.
    pub fn policy(&self) -> anyhow::Result<Policy> {
        Ok(Policy::load(self.policy.as_deref(), &self.limits)?)
    }

    /// Starts the block runner these arguments describe.
    pub async fn start(&self) -> anyhow::Result<BlockRunner> {
        BlockRunner::start(self.config()?).await.context("starting the sandbox")
    }

    /// The runtimes code-interpreter sessions run on: `python` (on the block
    /// runner already started) and, when their files are there, `python-data`
    /// and `javascript`.
    pub async fn session_sandboxes(&self, python: &BlockRunner) -> anyhow::Result<Vec<SessionRuntime>> {
        let mut sandboxes = vec![python.session_runtime().await.context("starting python sessions")?];
        if let Some(javascript) = self.javascript_runtime().await? {
            sandboxes.push(javascript);
        }
        let dir = match &self.python_data {
            Some(dir) if dir.join("lib").is_dir() => dir.clone(),
            Some(dir) => anyhow::bail!("--python-data {} holds no data runtime (lib/ is missing); build it with `cargo xtask build`", dir.display()),
            None => match crate::runner_path::default_python_data() {
                Some(dir) => dir,
                None => {
                    tracing::info!("no python-data runtime beside the binary: sessions run python only");
                    return Ok(sandboxes);
                }
            },
        };
        let config = PythonDataConfig { limits: self.policy()?.python_data, ..PythonDataConfig::new(&dir, self.python_data_variant.into()) };
        if !config.component.is_file() {
            anyhow::bail!(
                "{} is missing: build it with `cargo xtask build`, or start from another form with --python-data-variant snapshot",
                config.component.display()
            );
        }
        tracing::info!(component = %config.component.display(), "loading the python-data runtime");
        sandboxes.push(SessionRuntime::start_python_data(config).await.context("starting the python-data runtime")?);
        Ok(sandboxes)
    }

    /// The JavaScript runtime, compiled (or taken from the cache), when there is one.
    async fn javascript_runtime(&self) -> anyhow::Result<Option<SessionRuntime>> {
        let component = match &self.javascript {
            Some(path) if path.is_file() => path.clone(),
            Some(path) => anyhow::bail!("--javascript {} is not a file; build it with `cargo xtask build`", path.display()),
            None => match crate::runner_path::default_javascript() {
                Some(path) => path,
                None => {
                    tracing::info!("no javascript runtime beside the binary: sessions run Python only");
                    return Ok(None);
                }
            },
        };
        let config = JavascriptConfig { component, cache_dir: self.cache_dir(), limits: self.policy()?.javascript };
        Ok(Some(SessionRuntime::start_javascript(config).await.context("starting the javascript runtime")?))
    }

    /// `interpreter` with the shell runtime, when there is one (`--shell`,
    /// else the built one beside the binary), under the `python` runtime's
    /// ceilings, and the wheelhouse `pip` installs from, when given.
    pub async fn with_shell(&self, interpreter: anypath_interpreter::Interpreter) -> anyhow::Result<anypath_interpreter::Interpreter> {
        let interpreter = match self.shell_runtime().await? {
            Some(shell) => interpreter.with_shell(shell),
            None => interpreter,
        };
        Ok(match &self.wheelhouse {
            Some(dir) if dir.is_dir() => interpreter.with_wheelhouse(dir.clone()),
            Some(dir) => anyhow::bail!("--wheelhouse {} is not a folder", dir.display()),
            None => interpreter,
        })
    }

    /// The shell runtime, compiled (or taken from the cache), when there is one.
    async fn shell_runtime(&self) -> anyhow::Result<Option<anypath_sandbox::shell::ShellRuntime>> {
        let component = match &self.shell {
            Some(path) if path.is_file() => path.clone(),
            Some(path) => anyhow::bail!("--shell {} is not a file; build it with `cargo xtask build`", path.display()),
            None => match crate::runner_path::default_shell() {
                Some(path) => path,
                None => {
                    tracing::info!("no shell runtime beside the binary: sessions run no commands");
                    return Ok(None);
                }
            },
        };
        let config = anypath_sandbox::shell::ShellConfig { component, cache_dir: self.cache_dir(), limits: self.policy()?.python };
        Ok(Some(anypath_sandbox::shell::ShellRuntime::start(config).await.context("starting the shell runtime")?))
    }

    /// Starts a block runner with no warm pool, for one-off runs.
    pub async fn start_cold(&self) -> anyhow::Result<BlockRunner> {
        let mut args = self.clone();
        args.warm_instances = 0;
        args.start().await
    }
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Sandbox { command: SandboxCommand::Serve(args) } => {
            let sandbox = args.runner.start().await?;
            let options = ServeOptions {
                listen: args.listen,
                token: args.token.filter(|t| !t.is_empty()),
                admission: args.admission.config(),
                api_keys: anypath_rest::caller::parse_api_keys(&args.api_keys).context("--api-keys")?,
                interpreter: Some(std::sync::Arc::new(args.runner.with_shell(args.sharing.open(args.runner.session_sandboxes(&sandbox).await?, args.interpreter.config()?).await?).await?)),
                mcp_allowed_hosts: args.interpreter.mcp_allowed_hosts()?,
                trusted_token: None,
                cors: args.interpreter.cors(None)?,
                e2b_listen: args.e2b_listen,
                exec_like_every_route: false,
                run_env: args.interpreter.run_env()?,
                jupyter_kernel_files: args.jupyter_kernel_files.into(),
                app_requests: None,
                callbacks: args.interpreter.callbacks()?,
                drain_runs: args.interpreter.drain_runs(),
            };
            anypath_service::serve::serve(sandbox, options).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sandbox { command: SandboxCommand::Precompile(args) } => {
            let sandbox = args.start_cold().await?;
            eprintln!("anypath: runner compiled and cached");
            for runtime in args.session_sandboxes(&sandbox).await?.iter().map(SessionRuntime::runtime).filter(|r| *r != anypath_sandbox::Runtime::Python) {
                eprintln!("anypath: {runtime} runtime compiled and cached");
            }
            if args.shell_runtime().await?.is_some() {
                eprintln!("anypath: shell runtime compiled and cached");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Sandbox { command: SandboxCommand::PreinitData(args) } => {
            preinit_data(args).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Up(args) => {
            let options = crate::up::UpOptions {
                manifest: args.manifest,
                listen: args.listen,
                runtime_config: args.runtime_config_file,
                kv_path: args.kv,
                sandbox_listen: args.sandbox_listen,
                e2b_listen: (!args.no_e2b).then_some(args.e2b_listen),
                api_keys: anypath_rest::caller::parse_api_keys(&args.api_keys).context("--api-keys")?,
                admission: args.admission.config(),
                interpreter: args.interpreter.config()?,
                mcp_allowed_hosts: args.interpreter.mcp_allowed_hosts()?,
                cors: args.interpreter.cors(std::env::var("SPIN_VARIABLE_CORS_ALLOWED_ORIGINS").ok())?,
                run_env: args.interpreter.run_env()?,
                jupyter_kernel_files: args.jupyter_kernel_files.into(),
                callbacks: args.interpreter.callbacks()?,
                drain_runs: args.interpreter.drain_runs(),
            };
            crate::up::up(options, &args.runner, &args.sharing).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(args) => {
            anypath_interpreter::names::tenant(&args.tenant)?;
            let sandbox = args.runner.start().await?;
            let interpreter = args.sharing.open(args.runner.session_sandboxes(&sandbox).await?, args.interpreter.config()?).await?;
            let interpreter = args.runner.with_shell(interpreter).await?;
            let interpreter = std::sync::Arc::new(interpreter);
            let options = ServeOptions {
                listen: args.downloads_listen,
                token: None,
                admission: args.admission.config(),
                api_keys: Vec::new(),
                interpreter: Some(interpreter),
                mcp_allowed_hosts: Vec::new(),
                trusted_token: None,
                cors: args.interpreter.cors(None)?,
                e2b_listen: None,
                exec_like_every_route: false,
                run_env: args.interpreter.run_env()?,
                jupyter_kernel_files: anypath_service::jupyter::KernelFiles::default(),
                app_requests: None,
                callbacks: args.interpreter.callbacks()?,
                drain_runs: args.interpreter.drain_runs(),
            };
            let state = anypath_service::state::AppState::new(sandbox, &options);
            // On a shared store, this host hands its sessions over and takes
            // interrupts for their runs, as `sandbox serve` does.
            anypath_service::serve::spawn_fleet_duties(&state);
            anypath_service::mcp::stdio::serve(state, args.tenant, args.downloads_listen).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Exec(args) => crate::exec_file::run(args.file, &args.ctx, &args.collections, &args.runner).await,
        Command::ConfigReference => {
            print!("{}", crate::reference::markdown(&<Cli as clap::CommandFactory>::command()));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `sandbox preinit-data`: pre-initialises the reactor and writes the
/// module and its summary, all on a blocking thread (a minute of compiling
/// and running, and a large file written).
async fn preinit_data(args: PreinitArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let (summary, image_bytes) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let preinitialised =
            tokio::runtime::Handle::current().block_on(anypath_sandbox::preinit::preinitialise(&args.core, &args.python_data))?;
        std::fs::write(&args.out, &preinitialised.module).with_context(|| format!("writing {}", args.out.display()))?;
        let summary = preinitialised.summary;
        std::fs::write(&args.summary, serde_json::to_vec_pretty(&summary)?).with_context(|| format!("writing {}", args.summary.display()))?;
        Ok((summary, preinitialised.module.len()))
    })
    .await
    .context("the pre-initialiser's thread")??;
    eprintln!(
        "anypath: pre-initialised the data runtime in {:.1} s: {} modules imported, {} MiB of memory, image {} MiB",
        started.elapsed().as_secs_f64(),
        summary.module_count,
        summary.memory_bytes >> 20,
        image_bytes >> 20,
    );
    Ok(())
}
