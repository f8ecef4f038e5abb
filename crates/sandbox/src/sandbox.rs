//! The wasmtime embedding: engine, pre-instantiated runner, limits, execution.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::bindings::filesystem::types as filesystem_types;

use crate::artifact::{self, ArtifactError};
use crate::bindings::anypath::runner::types as wit;
use crate::bindings::{Runner, RunnerPre};
use crate::data_runtime::{DataGuest, DataImage, PythonDataPre};
use crate::guest::GuestState;
use crate::limits::Limits;
use crate::outcome::{ExecError, Failure, Metrics, Mutation, MutationOp, Output, ReadSet, Reply, Report, Success};
use crate::pool::WarmPool;
use crate::quota_fs::{QuotaFs, QuotaState};
use crate::runtime::Runtime;
use crate::recycler::Recycler;
use crate::request::{ExecRequest, PolicyGate};

/// How often the epoch advances; the deadline is checked at this granularity.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Extra wall-clock time granted past the guest deadline before the call is dropped.
pub(crate) const HOST_GRACE: Duration = Duration::from_millis(50);
/// Deadline for warming a fresh instance (no tenant code runs then).
const WARM_UP_BUDGET: Duration = Duration::from_secs(30);
/// Deadline for starting a session's instance (no tenant code runs then):
/// the data runtime's plain reactor initialises CPython and loads the cell code.
const SESSION_START_BUDGET: Duration = Duration::from_secs(60);
/// Linear memory kept mapped in a pool slot between instances.
const KEEP_RESIDENT_BYTES: usize = 64 << 20;
/// Largest memory cap the engine reserves room for, whatever the policy says.
const MAX_MEMORY_CAP: u64 = 4 << 30;

/// How to build a [`Sandbox`].
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Which Python the component is.
    pub runtime: Runtime,
    /// The component: the runner built by componentize-py, or the data
    /// runtime's converted reactor.
    pub runner_component: PathBuf,
    /// The data runtime's directory as `cargo xtask` lays it out: `lib/`
    /// (holding `python315.zip`) and `mpl-data/` (matplotlib's data), both
    /// seen read-only.
    pub data_layout: Option<PathBuf>,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
    /// Limits every execution starts from.
    pub limits: Limits,
    /// Instances kept started ahead of demand (0 disables the pool).
    pub warm_instances: usize,
    /// Instance slots the pooling allocator reserves; bounds concurrency.
    pub instance_slots: u32,
}

impl SandboxConfig {
    /// Defaults for `runner_component`, caching next to it.
    pub fn new(runner_component: impl Into<PathBuf>) -> Self {
        let runner_component = runner_component.into();
        let cache_dir = runner_component
            .parent()
            .map(|p| p.join("cache"))
            .unwrap_or_else(|| PathBuf::from("cache"));
        Self {
            runtime: Runtime::Python,
            runner_component,
            data_layout: None,
            cache_dir,
            limits: Limits::default(),
            warm_instances: 2,
            instance_slots: 64,
        }
    }

    /// The data runtime laid out in `dir` by `cargo xtask` (`python-data.wasm`,
    /// `python-data-snapshot.wasm`, `lib/`), from the snapshotted reactor or
    /// the plain one, with the data runtime's own default limits.
    pub fn python_data(dir: &Path, snapshot: bool) -> Self {
        let file = if snapshot { "python-data-snapshot.wasm" } else { "python-data.wasm" };
        Self {
            runtime: Runtime::PythonData,
            runner_component: dir.join(file),
            data_layout: Some(dir.to_path_buf()),
            cache_dir: dir.join("cache"),
            limits: Limits::python_data(),
            warm_instances: 0,
            instance_slots: 64,
        }
    }
}

/// The sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid engine configuration: {0:#}")]
    Engine(wasmtime::Error),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error("the runner component does not fit the runner world: {0:#}")]
    Link(wasmtime::Error),
    #[error("memory limit {0} bytes exceeds the supported maximum of {MAX_MEMORY_CAP}")]
    MemoryCap(u64),
    #[error("cannot start a sandbox thread: {0}")]
    Thread(std::io::Error),
    #[error("the python-data runtime's files are incomplete: {0}")]
    DataLayout(String),
}

/// Runs Python blocks, each in a fresh runner instance under the configured limits.
///
/// Cheap to clone; clones share the engine and the warm pool.
#[derive(Clone)]
pub struct Sandbox {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    image: Image,
    pub(crate) runtime: Runtime,
    component_name: String,
    origin: serde_json::Value,
    pub(crate) limits: Limits,
    pool: OnceLock<WarmPool>,
    recycler: Recycler,
    ticker_stop: Arc<AtomicBool>,
}

/// The pre-linked component a sandbox starts its instances from.
enum Image {
    Runner(RunnerPre<GuestState>),
    Data(DataImage),
}

/// A started instance.
pub(crate) struct Instance {
    pub(crate) store: Store<GuestState>,
    pub(crate) guest: Guest,
}

/// The exports of a started instance, by runtime.
pub(crate) enum Guest {
    Runner(Runner),
    Data(DataGuest),
}

impl Sandbox {
    /// Loads (or compiles and caches) the runner and starts the warm pool.
    /// Must be called inside a Tokio runtime.
    pub async fn start(config: SandboxConfig) -> Result<Self, StartError> {
        if config.limits.memory_bytes > MAX_MEMORY_CAP {
            return Err(StartError::MemoryCap(config.limits.memory_bytes));
        }
        let engine_config = match config.runtime {
            Runtime::Python => engine_config(&config),
            Runtime::PythonData => data_engine_config(),
        };
        let engine = Engine::new(&engine_config).map_err(StartError::Engine)?;
        let component = {
            let (engine, path, dir) = (engine.clone(), config.runner_component.clone(), config.cache_dir.clone());
            tokio::task::spawn_blocking(move || artifact::load(&engine, &path, &dir))
                .await
                .map_err(|e| StartError::Engine(wasmtime::Error::msg(e.to_string())))??
        };
        let mut linker = Linker::<GuestState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(StartError::Link)?;
        // Serve wasi:filesystem/types through the quota check instead.
        linker.allow_shadowing(true);
        filesystem_types::add_to_linker::<GuestState, QuotaFs>(&mut linker, GuestState::quota_fs).map_err(StartError::Link)?;
        linker.allow_shadowing(false);
        let image = match config.runtime {
            Runtime::Python => {
                let pre = linker.instantiate_pre(&component).map_err(StartError::Link)?;
                Image::Runner(RunnerPre::new(pre).map_err(StartError::Link)?)
            }
            Runtime::PythonData => {
                crate::data_runtime::add_to_linker(&mut linker).map_err(StartError::Link)?;
                let pre = linker.instantiate_pre(&component).map_err(StartError::Link)?;
                let pre = PythonDataPre::new(pre).map_err(StartError::Link)?;
                let layout = config.data_layout.as_deref().ok_or_else(|| StartError::DataLayout("no directory given".into()))?;
                Image::Data(DataImage::new(pre, layout).map_err(StartError::DataLayout)?)
            }
        };

        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_epoch_ticker(engine, ticker_stop.clone()).map_err(StartError::Thread)?;
        let recycler = Recycler::start().map_err(StartError::Thread)?;
        let component_name = config.runner_component.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let origin = match (&config.runtime, &config.data_layout) {
            (Runtime::PythonData, Some(layout)) => std::fs::read(layout.join("origin.json"))
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or(serde_json::Value::Null),
            _ => serde_json::json!("built from components/python-runner by componentize-py"),
        };
        let inner = Arc::new(Inner {
            image,
            runtime: config.runtime,
            component_name,
            origin,
            limits: config.limits,
            pool: OnceLock::new(),
            recycler,
            ticker_stop,
        });
        if config.warm_instances > 0 && config.runtime == Runtime::Python {
            // Started only once `inner` exists, so the refill task can always reach it.
            let _ = inner.pool.set(WarmPool::start(Arc::downgrade(&inner), config.warm_instances));
        }
        Ok(Self { inner })
    }

    /// The limits every execution starts from.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// The Python this sandbox runs.
    pub fn runtime(&self) -> Runtime {
        self.inner.runtime
    }

    /// What the sandbox runs, for health reports: the runtime, the
    /// component's file name, its origin (the data runtime's `origin.json`)
    /// and the limits.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "runtime": self.inner.runtime,
            "component": self.inner.component_name,
            "origin": self.inner.origin,
            "limits": self.inner.limits,
        })
    }

    /// Runs one block. Never panics on guest behaviour: every failure is a typed error.
    pub async fn execute(&self, request: ExecRequest) -> Report {
        self.execute_gated(request, PolicyGate::Enforced).await
    }

    /// Runs one block with the policy gate switched off, to prove the
    /// WebAssembly layer holds by itself. Exists only with the
    /// `unsafe-test-hooks` feature.
    #[cfg(feature = "unsafe-test-hooks")]
    pub async fn execute_without_policy_gate(&self, request: ExecRequest) -> Report {
        self.execute_gated(request, PolicyGate::Disabled).await
    }

    async fn execute_gated(&self, request: ExecRequest, gate: PolicyGate) -> Report {
        let started = Instant::now();
        let mut limits = self.inner.limits.narrowed_by(&request.limits);
        // A block's fuel follows what it was handed: runaway code over little
        // data ends long before the ceiling that a search over the largest
        // collection needs. Session cells keep the whole ceiling.
        limits.fuel = crate::limits::block_fuel(request.input_bytes(), limits.fuel);
        let mut metrics = Metrics::default();
        let outcome = match self.inner.runtime {
            Runtime::Python => self.inner.run(request, gate, limits, &mut metrics).await,
            runtime => Err(Failure {
                error: invalid(&format!("the {runtime} runtime runs code-interpreter sessions, not REST blocks")),
                output: Output::default(),
            }),
        };
        metrics.duration_us = started.elapsed().as_micros() as u64;
        Report { outcome, metrics }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// The data runtime's engine: the reactor uses the exception-handling
/// proposal; its instances live as long as sessions and are few, so they are
/// allocated on demand rather than from reserved pool slots.
fn data_engine_config() -> Config {
    let mut wasm = Config::new();
    wasm.consume_fuel(true)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .wasm_component_model(true)
        .wasm_exceptions(true);
    wasm
}

fn engine_config(config: &SandboxConfig) -> Config {
    let mut wasm = Config::new();
    wasm.consume_fuel(true)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .wasm_component_model(true)
        // The crate is built with GC for the data runtime's exceptions; the
        // runner uses none of it, and a GC heap per instance costs its start.
        .gc_support(false);
    let slots = config.instance_slots.max(1);
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(slots)
        .total_core_instances(slots * 32)
        .total_memories(slots * 4)
        .total_tables(slots * 8)
        .total_stacks(slots)
        .max_core_instances_per_component(32)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_component_instance_size(1 << 20)
        .max_core_instance_size(1 << 20)
        .table_elements(1 << 16)
        // Restore touched pages by copy when a slot is reused instead of
        // unmapping them: fresh copy-on-write faults cost a TLB shootdown each.
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(1 << 20)
        .max_memory_size(config.limits.memory_bytes.next_multiple_of(1 << 16) as usize);
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    wasm
}

/// Runs guest code on a thread of its own, out of the async scheduler, when
/// the runtime has worker threads to spare. A guest yields at every epoch
/// tick, but the scheduler hands the worker straight back to the task that
/// yielded, so a long execution would hold its worker and starve the short
/// ones queued behind it; on their own threads the kernel shares the cores
/// fairly between executions, and request handling keeps its workers.
pub(crate) async fn on_own_thread<F: Future>(future: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| handle.block_on(future))
        }
        _ => future.await,
    }
}

/// A store for one instance: unmetered and under the start deadline until
/// a run sets its own fuel and deadline, with the memory guard as limiter.
fn new_store(engine: &Engine, state: GuestState) -> wasmtime::Result<Store<GuestState>> {
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.memory);
    store.set_fuel(u64::MAX)?;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            // Yield so other requests on this executor thread make progress.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    Ok(store)
}

/// Advances the engine's epoch so running guests notice their deadline.
fn spawn_epoch_ticker(engine: Engine, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("anypath-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })
        .map(drop)
}

impl Inner {
    /// Starts and warms a fresh runner instance for a REST block. No tenant
    /// code or data touches it.
    pub(crate) async fn start_instance(&self, warm: bool) -> wasmtime::Result<Instance> {
        let Image::Runner(pre) = &self.image else {
            wasmtime::bail!("the {} runtime has no REST instances", self.runtime);
        };
        let state = GuestState::new(self.limits.memory_bytes, Instant::now() + WARM_UP_BUDGET);
        let mut store = new_store(pre.engine(), state)?;
        let runner = pre.instantiate_async(&mut store).await?;
        if warm {
            runner.call_warm_up(&mut store).await?;
        }
        Ok(Instance { store, guest: Guest::Runner(runner) })
    }

    /// Starts a session's instance: it sees `dir` (when given) at
    /// `/mnt/data`, writes under `quota`, and grows to `memory_cap`.
    pub(crate) async fn start_session_instance(
        &self,
        dir: Option<&Path>,
        quota: Option<Arc<QuotaState>>,
        memory_cap: u64,
    ) -> wasmtime::Result<Instance> {
        let deadline = Instant::now() + SESSION_START_BUDGET;
        match &self.image {
            Image::Runner(pre) => {
                let mut state = match dir {
                    Some(dir) => GuestState::with_session_dir(memory_cap, deadline, dir)?,
                    None => GuestState::new(memory_cap, deadline),
                };
                state.quota = quota;
                let mut store = new_store(pre.engine(), state)?;
                let runner = pre.instantiate_async(&mut store).await?;
                Ok(Instance { store, guest: Guest::Runner(runner) })
            }
            Image::Data(image) => {
                let engine = image.pre.engine().clone();
                let (store, guest) = image.start(dir, quota, memory_cap, deadline, |state| new_store(&engine, state)).await?;
                Ok(Instance { store, guest: Guest::Data(guest) })
            }
        }
    }

    async fn run(&self, request: ExecRequest, gate: PolicyGate, limits: Limits, metrics: &mut Metrics) -> Result<Success, Failure> {
        let fail = |error| Failure { error, output: Output::default() };
        check_request(&request, &limits).map_err(fail)?;
        let (instance, warm) = match self.pool.get().and_then(WarmPool::take) {
            Some(instance) => (instance, true),
            None => (self.start_instance(false).await.map_err(|e| fail(internal("starting an instance", &e)))?, false),
        };
        let mut instance = self.recycler.lease(instance);
        metrics.warm = warm;

        let store = &mut instance.store;
        let state = store.data_mut();
        state.memory.reset(limits.memory_bytes);
        state.deadline = Instant::now() + limits.timeout();
        if state.memory.largest > limits.memory_bytes {
            metrics.peak_memory_bytes = state.memory.largest;
            return Err(fail(ExecError::MemoryLimit { limit_bytes: limits.memory_bytes }));
        }
        store.set_fuel(limits.fuel).map_err(|e| fail(internal("setting fuel", &e)))?;

        let input = wit_input(request, gate, &limits);
        let Instance { store, guest: Guest::Runner(runner) } = &mut *instance else {
            return Err(fail(invalid("a REST block needs the runner")));
        };
        let call = runner.call_execute(store, &input);
        let result = on_own_thread(tokio::time::timeout(limits.timeout() + HOST_GRACE, call)).await;

        let store = &instance.store;
        metrics.fuel_consumed = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        metrics.peak_memory_bytes = store.data().memory.peak;
        let memory_refused = store.data().memory.refused;

        let returned = match result {
            Err(_elapsed) => return Err(fail(ExecError::Timeout { timeout_ms: limits.timeout_ms })),
            Ok(Err(trap)) => return Err(fail(trap_error(&trap, &limits, memory_refused))),
            Ok(Ok(returned)) => returned,
        };
        if memory_refused {
            // A block that caught MemoryError still breached the cap.
            let output = match &returned {
                Ok(s) => output_of(&s.output),
                Err(f) => output_of(&f.output),
            };
            return Err(Failure { error: ExecError::MemoryLimit { limit_bytes: limits.memory_bytes }, output });
        }
        match returned {
            Ok(success) => convert_success(success, &input.collections, &limits),
            Err(failure) => Err(Failure { error: convert_failure(failure.kind), output: output_of(&failure.output) }),
        }
    }
}

fn check_request(request: &ExecRequest, limits: &Limits) -> Result<(), ExecError> {
    let code = request.code.len() as u64;
    if code > limits.max_code_bytes {
        return Err(ExecError::CodeTooLarge { size_bytes: code, limit_bytes: limits.max_code_bytes });
    }
    let input = request.input_bytes();
    if input > limits.max_input_bytes {
        return Err(ExecError::InputTooLarge { size_bytes: input, limit_bytes: limits.max_input_bytes });
    }
    if !request.ctx.get().trim_start().starts_with('{') {
        return Err(invalid("ctx must be a JSON object"));
    }
    let mut seen = std::collections::HashSet::new();
    for collection in &request.collections {
        if collection.name.is_empty() || !seen.insert(collection.name.as_str()) {
            return Err(invalid(&format!("collection name {:?} is empty or repeated", collection.name)));
        }
        if !collection.documents.get().trim_start().starts_with('[') {
            return Err(invalid(&format!("documents of {:?} must be a JSON array", collection.name)));
        }
    }
    Ok(())
}

fn invalid(message: &str) -> ExecError {
    ExecError::InvalidRequest { message: message.to_owned() }
}

pub(crate) fn internal(context: &str, error: &wasmtime::Error) -> ExecError {
    ExecError::Internal { message: format!("{context}: {error:#}") }
}

/// Moves the request's text into the guest input: documents can be megabytes,
/// and the host needs nothing of them after the call but the collection names.
fn wit_input(request: ExecRequest, gate: PolicyGate, limits: &Limits) -> wit::ExecInput {
    let raw = |value: Box<serde_json::value::RawValue>| Box::<str>::from(value).into_string();
    wit::ExecInput {
        policy_gate: gate == PolicyGate::Enforced,
        code: request.code,
        ctx_json: raw(request.ctx),
        collections: request
            .collections
            .into_iter()
            .map(|c| wit::Collection {
                name: c.name,
                version: c.version,
                documents_json: raw(c.documents),
                complete: c.complete,
                absent_ids: c.absent_ids,
                reserved_id: c.reserved_id,
            })
            .collect(),
        limits: wit::OutputLimits {
            stdout_bytes: limits.stdout_bytes,
            stderr_bytes: limits.stderr_bytes,
            result_bytes: limits.result_bytes,
        },
    }
}

pub(crate) fn trap_error(error: &wasmtime::Error, limits: &Limits, memory_refused: bool) -> ExecError {
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => ExecError::FuelExhausted { budget: limits.fuel },
        Some(Trap::Interrupt) => ExecError::Timeout { timeout_ms: limits.timeout_ms },
        _ if memory_refused => ExecError::MemoryLimit { limit_bytes: limits.memory_bytes },
        Some(trap) => ExecError::Trap { message: trap.to_string() },
        None => ExecError::Trap { message: format!("{error:#}") },
    }
}

pub(crate) fn output_of(output: &wit::CapturedOutput) -> Output {
    Output {
        stdout: output.stdout.clone(),
        stdout_truncated: output.stdout_truncated,
        stderr: output.stderr.clone(),
        stderr_truncated: output.stderr_truncated,
    }
}

fn convert_failure(kind: wit::FailureKind) -> ExecError {
    match kind {
        wit::FailureKind::Policy(p) => ExecError::Policy { node: p.node, line: p.line, column: p.column, message: p.message },
        wit::FailureKind::Exception(e) => {
            ExecError::Exception { type_name: e.type_name, message: e.message, traceback: e.traceback }
        }
        wit::FailureKind::InvalidReply(message) => ExecError::InvalidReply { message },
        wit::FailureKind::OutputLimit(message) => ExecError::OutputLimit { message },
        wit::FailureKind::Internal(message) => ExecError::Internal { message: format!("runner: {message}") },
        wit::FailureKind::NeedsData(message) => ExecError::NeedsData { message },
    }
}

/// Re-checks what the guest returned: the host trusts no size or name it did not verify.
fn convert_success(success: wit::Success, loaded: &[wit::Collection], limits: &Limits) -> Result<Success, Failure> {
    let output = output_of(&success.output);
    let fail = |error| Failure { error, output: output.clone() };
    if output.stdout.len() > limits.stdout_bytes as usize || output.stderr.len() > limits.stderr_bytes as usize {
        return Err(fail(ExecError::OutputLimit { message: "captured output exceeds its cap".into() }));
    }
    let mut size = success.reply.body_json.as_ref().map_or(0, String::len);
    let mut mutations = Vec::with_capacity(success.mutations.len());
    for m in success.mutations {
        if !loaded.iter().any(|c| c.name == m.collection) {
            return Err(fail(ExecError::Internal { message: format!("journal names unknown collection {:?}", m.collection) }));
        }
        size += m.document_json.as_ref().map_or(0, String::len);
        let id = serde_json::from_str(&m.id_json)
            .map_err(|e| fail(ExecError::Internal { message: format!("journal id is not JSON: {e}") }))?;
        let document = m
            .document_json
            .map(RawValue::from_string)
            .transpose()
            .map_err(|e| fail(ExecError::Internal { message: format!("journal document is not JSON: {e}") }))?;
        mutations.push(Mutation { collection: m.collection, op: op(m.op), id, document });
    }
    if size > limits.result_bytes as usize {
        return Err(fail(ExecError::OutputLimit { message: format!("reply and journal exceed {} bytes", limits.result_bytes) }));
    }
    let body = success
        .reply
        .body_json
        .map(RawValue::from_string)
        .transpose()
        .map_err(|e| fail(ExecError::InvalidReply { message: format!("body is not JSON: {e}") }))?;
    let mut reads = Vec::with_capacity(success.reads.len());
    for r in success.reads {
        if !loaded.iter().any(|c| c.name == r.collection) {
            return Err(fail(ExecError::Internal { message: format!("read set names unknown collection {:?}", r.collection) }));
        }
        reads.push(ReadSet { collection: r.collection, scanned: r.scanned, ids: r.ids });
    }
    Ok(Success { reply: Reply { status: success.reply.status, headers: success.reply.headers, body }, mutations, reads, output })
}

fn op(op: wit::MutationOp) -> MutationOp {
    match op {
        wit::MutationOp::Insert => MutationOp::Insert,
        wit::MutationOp::Replace => MutationOp::Replace,
        wit::MutationOp::Patch => MutationOp::Patch,
        wit::MutationOp::Delete => MutationOp::Delete,
    }
}

