//! What the block runner and the session runtime share: the two engine
//! configurations, the epoch ticker, the linker (WASI with the quota
//! filesystem in front, and the host's own imports), artifact loading,
//! store construction and arming a run's limits (fuel, memory cap, deadline).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::bindings::filesystem::types as filesystem_types;

use crate::artifact::{self, ArtifactError};
use crate::cow::{CowMemories, Frozen};
use crate::bindings::anypath::runner::types as wit;
use crate::guest::GuestState;
use crate::interrupt::Interrupt;
use crate::limits::Limits;
use crate::outcome::{ExecError, Metrics, Output};
use crate::quota_fs::QuotaFs;
use crate::state_image::layout::Layout;
use crate::{host_store, keyboard_interrupt};

/// How often the epoch advances; the deadline is checked at this granularity.
const EPOCH_TICK: Duration = Duration::from_millis(5);
/// Extra wall-clock time granted past the guest deadline before the call is dropped.
const HOST_GRACE: Duration = Duration::from_millis(50);
/// Linear memory kept mapped in a pool slot between instances.
const KEEP_RESIDENT_BYTES: usize = 64 << 20;
/// Bytes one guest call may transfer to the host (wasmtime's default).
const HOSTCALL_FUEL: usize = 128 << 20;
/// Largest memory cap the engine reserves room for, whatever the policy says.
const MAX_MEMORY_CAP: u64 = 4 << 30;
/// How long an interrupted guest has to end by its `KeyboardInterrupt`
/// before it is trapped as before (a handler that swallows it, a call
/// blocked in the host).
pub(crate) const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// A runtime could not start.
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

/// A started instance: its store and its exports (`G`, by runtime).
pub(crate) struct Instance<G> {
    pub(crate) store: Store<GuestState>,
    pub(crate) guest: G,
}

/// The engine for the runner: instances are many and short, so they come
/// from reserved pool slots (`instance_slots` of them), each capped at
/// `memory_cap`.
pub(crate) fn runner_engine_config(instance_slots: u32, memory_cap: u64) -> Config {
    let mut wasm = Config::new();
    wasm.consume_fuel(true)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .wasm_component_model(true)
        // The crate is built with GC for the data runtime's exceptions; the
        // runner uses none of it, and a GC heap per instance costs its start.
        .gc_support(false);
    let slots = instance_slots.max(1);
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
        // And find the touched pages with the kernel's page-table scan
        // (Linux 6.7+) rather than copying the whole resident prefix back
        // (tens of MiB of the image for a one-line block): a slot's reset
        // then costs what the block wrote.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .max_memory_size(memory_cap.next_multiple_of(1 << 16) as usize);
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    wasm
}

/// The engine for code-interpreter sessions: their instances live long and
/// their number is bounded by memory, not by reserved slots, so they are
/// allocated on demand (`exceptions` for the data runtime's reactor).
pub(crate) fn session_engine_config(exceptions: bool) -> Config {
    let mut wasm = Config::new();
    wasm.consume_fuel(true).epoch_interruption(true).memory_init_cow(true).wasm_component_model(true);
    if exceptions {
        wasm.wasm_exceptions(true);
    } else {
        wasm.gc_support(false);
    }
    wasm
}

/// An engine running, its component compiled for it, and a linker serving
/// WASI through the quota filesystem, ready for the runtime's own imports.
pub(crate) struct Loaded {
    pub(crate) component: Component,
    pub(crate) linker: Linker<GuestState>,
    pub(crate) ticker: EpochTicker,
    /// The state accessors, when loaded [`Form::WithStateAccess`].
    pub(crate) state: Option<(Layout, String)>,
    /// What makes the instances' memories, when loaded [`Form::WithStateAccess`].
    pub(crate) memories: Option<Arc<CowMemories>>,
}

/// Which form of a component to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// As built.
    AsBuilt,
    /// Instrumented so the host can capture and restore its state (sessions).
    WithStateAccess,
}

/// Checks `limits` against what the engine can hold, builds the engine from
/// `engine_config`, loads `component` through the cache in `cache_dir`, and
/// starts the engine's epoch ticker.
pub(crate) async fn load(engine_config: Config, component: &Path, cache_dir: &Path, limits: &Limits, form: Form) -> Result<Loaded, StartError> {
    if limits.memory_bytes > MAX_MEMORY_CAP {
        return Err(StartError::MemoryCap(limits.memory_bytes));
    }
    let mut engine_config = engine_config;
    // A session's memory is made by the host (copy-on-write from the
    // component's image, and later from a frozen state): the component's
    // data segments for it are moved out when it is instrumented.
    let memories = Arc::new(CowMemories::default());
    if form == Form::WithStateAccess {
        engine_config.memory_init_cow(false).with_host_memory(memories.clone());
    }
    let engine = Engine::new(&engine_config).map_err(StartError::Engine)?;
    let (component, state) = {
        let (engine, path, dir, memories) = (engine.clone(), component.to_path_buf(), cache_dir.to_path_buf(), memories.clone());
        // Compiling takes seconds: off the async workers.
        tokio::task::spawn_blocking(move || match form {
            Form::AsBuilt => artifact::load(&engine, &path, &dir).map(|c| (c, None)),
            Form::WithStateAccess => artifact::load_instrumented(&engine, &path, &dir).and_then(|i| {
                if let Some(initial) = &i.initial {
                    let size = usize::try_from(initial.minimum_bytes).unwrap_or(usize::MAX);
                    let frozen = Frozen::of_segments(size, &initial.segments).map_err(|e| ArtifactError::Memory(e.to_string()))?;
                    memories.start_as(frozen, size);
                }
                Ok((i.component, Some((i.layout, i.key))))
            }),
        })
        .await
        .map_err(|e| StartError::Engine(wasmtime::Error::msg(e.to_string())))??
    };
    let linker = guest_linker(&engine).map_err(StartError::Link)?;
    let ticker = EpochTicker::start(engine).map_err(StartError::Thread)?;
    let memories = (form == Form::WithStateAccess).then_some(memories);
    Ok(Loaded { component, linker, ticker, state, memories })
}

/// The guest's imports: WASI with the quota filesystem and the
/// interruptible poll in front, and the host's own `store`.
///
/// A plain function, not part of the async [`load`]: an async function's
/// body is compiled again in every crate that awaits it, and these generic
/// bindings are the largest code in the host. Here they compile once.
fn guest_linker(engine: &Engine) -> wasmtime::Result<Linker<GuestState>> {
    let mut linker = Linker::<GuestState>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // Serve wasi:filesystem/types through the quota check instead.
    linker.allow_shadowing(true);
    filesystem_types::add_to_linker::<GuestState, QuotaFs>(&mut linker, GuestState::quota_fs)?;
    // And wasi:io/poll.poll through one an interrupt wakes (a sleep ends by KeyboardInterrupt).
    keyboard_interrupt::add_to_linker(&mut linker)?;
    linker.allow_shadowing(false);
    // The runner's `store`; unused by the data runtime, which does not import it.
    host_store::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// Advances an engine's epoch so running guests notice their deadline;
/// stops when dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    fn start(engine: Engine) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::Builder::new().name("anypath-epoch".into()).spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })?;
        Ok(Self { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A store for one instance: unmetered and under the start deadline until
/// a run arms its own limits, with the memory guard as limiter.
pub(crate) fn new_store(engine: &Engine, state: GuestState) -> wasmtime::Result<Store<GuestState>> {
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.memory);
    store.set_fuel(u64::MAX)?;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let now = Instant::now();
        let state = ctx.data_mut();
        let interrupted = state.interrupt.as_ref().is_some_and(Interrupt::is_interrupted);
        if now >= state.deadline {
            return Ok(UpdateDeadline::Interrupt);
        }
        if interrupted {
            // A Jupyter-style interrupt first: the guest is stopped at this
            // check, on this thread, so its signal state can be set as a
            // C signal handler would; it raises at its next eval-breaker
            // check. Trapped after the grace, or at once without a handler.
            match (state.keyboard, state.tripped_at) {
                (Some(trip), None) if trip.trip() => state.tripped_at = Some(now),
                // A guest that stops itself was told through its own question.
                (None, None) if state.stops_itself => state.tripped_at = Some(now),
                (_, Some(at)) if now < at + INTERRUPT_GRACE => {}
                _ => return Ok(UpdateDeadline::Interrupt),
            }
        }
        // Yield so other requests on this executor thread make progress.
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

/// Arms `store` for one run: a new memory accounting period under the run's
/// cap, the deadline counted from now, and the run's fuel.
pub(crate) fn arm(store: &mut Store<GuestState>, limits: &Limits) -> Result<(), ExecError> {
    let state = store.data_mut();
    state.memory.reset(limits.memory_bytes);
    state.deadline = Instant::now() + limits.timeout();
    // What one guest call may hand the host: wasmtime's default, whatever a
    // capture between runs set.
    store.set_hostcall_fuel(HOSTCALL_FUEL);
    store.set_fuel(limits.fuel).map_err(|e| internal("setting fuel", &e))
}

/// Arms `store` for the host's own calls between runs (capturing or
/// restoring state): unmetered, under a deadline of its own.
pub(crate) fn arm_for_host(store: &mut Store<GuestState>, budget: Duration) -> wasmtime::Result<()> {
    let state = store.data_mut();
    let cap = state.memory.cap;
    state.memory.reset(cap);
    state.deadline = Instant::now() + budget;
    // A whole memory is lifted as one list (viewed in place, not copied).
    store.set_hostcall_fuel(MAX_MEMORY_CAP as usize);
    store.set_fuel(u64::MAX)
}

/// What a guest call came to: its result, or the host dropping it.
pub(crate) type Called<T> = Result<wasmtime::Result<T>, Dropped>;

/// Why the host dropped a guest call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// The run's deadline and the host's grace passed.
    Deadline,
    /// Its interrupt was raised.
    Interrupted,
}

/// Awaits a guest call on its own thread, dropped once the run's deadline
/// and the host's grace have passed: a call blocked in the host never sees
/// the epoch.
pub(crate) async fn call<T>(limits: &Limits, call: impl Future<Output = wasmtime::Result<T>>) -> Called<T> {
    call_interruptible(limits, None, false, call).await
}

/// [`call`], also dropped once `interrupt` is raised: a call blocked in the
/// host (a sleep) never reaches the epoch check that stops running wasm, so
/// the host's await of it must be woken too. When the guest can be sent a
/// `KeyboardInterrupt` (`graceful`), it is given [`INTERRUPT_GRACE`] (and a
/// tick) to end by it first.
pub(crate) async fn call_interruptible<T>(limits: &Limits, interrupt: Option<&Interrupt>, graceful: bool, call: impl Future<Output = wasmtime::Result<T>>) -> Called<T> {
    let raised = async {
        match interrupt {
            Some(interrupt) => interrupt.raised().await,
            None => std::future::pending().await,
        }
    };
    on_worker_then_own_thread(async {
        let call = tokio::time::timeout(limits.timeout() + HOST_GRACE, call);
        tokio::pin!(call);
        tokio::select! {
            // The interrupt first: one raised before the call starts never lets it run.
            biased;
            () = raised => {}
            finished = &mut call => return finished.map_err(|_| Dropped::Deadline),
        }
        if !graceful {
            return Err(Dropped::Interrupted);
        }
        match tokio::time::timeout(INTERRUPT_GRACE + EPOCH_TICK * 2, &mut call).await {
            Ok(finished) => finished.map_err(|_| Dropped::Deadline),
            Err(_) => Err(Dropped::Interrupted),
        }
    })
    .await
}

/// After a call on `store`: records its fuel and peak memory in `metrics`,
/// and gives what it returned with whether the memory guard refused a
/// growth, or the limit or trap that ended it. Reads the store's interrupt,
/// so it must still be armed: a trap the interrupt caused is no timeout.
pub(crate) fn settle<T>(store: &Store<GuestState>, limits: &Limits, metrics: &mut Metrics, called: Called<T>) -> Result<(T, bool), ExecError> {
    metrics.fuel_consumed = limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
    metrics.peak_memory_bytes = store.data().memory.peak;
    let memory_refused = store.data().memory.refused;
    let interrupted = store.data().interrupt.as_ref().is_some_and(Interrupt::is_interrupted);
    match called {
        Err(Dropped::Interrupted) => Err(ExecError::Interrupted {}),
        Err(Dropped::Deadline) => Err(ExecError::Timeout { timeout_ms: limits.timeout_ms }),
        Ok(Err(_)) if interrupted => Err(ExecError::Interrupted {}),
        Ok(Err(trap)) => Err(trap_error(&trap, limits, memory_refused)),
        Ok(Ok(returned)) => Ok((returned, memory_refused)),
    }
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

/// How long a guest call runs on the async worker that made it before it
/// moves to a thread of its own ([`on_worker_then_own_thread`]).
const ON_WORKER_FOR: Duration = Duration::from_millis(2);

/// A guest call, polled on the async worker first: most calls (a warm
/// one-line cell takes well under a millisecond) end there, without the
/// thread hand-off [`on_own_thread`] costs on every call (a blocking thread
/// woken to take the worker's place, about a tenth of a millisecond). One
/// still running after [`ON_WORKER_FOR`] moves to a thread of its own at
/// its next yield (the guest yields at every epoch tick, and whenever it
/// waits on the host), so a long execution holds a worker for at most that
/// and a tick. Only for futures that yield: host work that never does
/// would run to its end on the worker (use [`on_own_thread`] for it).
pub(crate) async fn on_worker_then_own_thread<F: Future>(future: F) -> F::Output {
    let began = Instant::now();
    let mut future = std::pin::pin!(future);
    let ended = std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        std::task::Poll::Ready(output) => std::task::Poll::Ready(Some(output)),
        std::task::Poll::Pending if began.elapsed() >= ON_WORKER_FOR => std::task::Poll::Ready(None),
        std::task::Poll::Pending => std::task::Poll::Pending,
    })
    .await;
    match ended {
        Some(output) => output,
        None => on_own_thread(future).await,
    }
}

pub(crate) fn internal(context: &str, error: &wasmtime::Error) -> ExecError {
    ExecError::Internal { message: format!("{context}: {error:#}") }
}

fn trap_error(error: &wasmtime::Error, limits: &Limits, memory_refused: bool) -> ExecError {
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
