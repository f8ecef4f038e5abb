//! REST blocks: each runs in a fresh instance of the Python runner, taken
//! from the warm pool when one is ready, under the configured limits.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anypath_collections::{Documents, Loaded};
use futures_util::future::BoxFuture;
use serde_json::value::RawValue;

use crate::bindings::anypath::runner::types as wit;
use crate::bindings::{Runner, RunnerPre};
use crate::config::RunnerConfig;
use crate::engine::{self, Instance, StartError, internal, output_of};
use crate::guest::GuestState;
use crate::host_store::{Record, RequestStore};
use crate::limits::Limits;
use crate::outcome::{ExecError, Failure, Metrics, Output, Reply, Report, Success};
use crate::pool::WarmPool;
use crate::profile::Profile;
use crate::recycler::Recycler;
use crate::request::{ExecRequest, PolicyGate};
use crate::runtimes::RuntimeConfig;
use crate::session::SessionRuntime;

/// Deadline for warming a fresh instance (no tenant code runs then).
const WARM_UP_BUDGET: Duration = Duration::from_secs(30);

/// Runs Python blocks, each in a fresh runner instance under the configured limits.
///
/// Cheap to clone; clones share the engine and the warm pool.
#[derive(Clone)]
pub struct BlockRunner {
    inner: Arc<BlockInner>,
}

struct BlockInner {
    image: Arc<RunnerImage>,
    config: RunnerConfig,
    sessions: tokio::sync::OnceCell<SessionRuntime>,
    pool: OnceLock<WarmPool<Instance<Runner>>>,
    recycler: Recycler,
}

/// The runner, pre-linked on its engine: REST blocks start their instances from it.
pub(crate) struct RunnerImage {
    pub(crate) pre: RunnerPre<GuestState>,
    pub(crate) profile: Profile,
    _ticker: engine::EpochTicker,
}

impl BlockRunner {
    /// Loads (or compiles and caches) the runner and starts the warm pool.
    /// Must be called inside a Tokio runtime.
    pub fn start(config: RunnerConfig) -> BoxFuture<'static, Result<Self, StartError>> {
        Box::pin(async move {
            let engine_config = engine::runner_engine_config(config.instance_slots, config.limits.memory_bytes);
            let loaded = engine::load(engine_config, &config.runner_component, &config.cache_dir, &config.limits, engine::Form::AsBuilt).await?;
            let pre = loaded.linker.instantiate_pre(&loaded.component).map_err(StartError::Link)?;
            let pre = RunnerPre::new(pre).map_err(StartError::Link)?;
            let recycler = Recycler::start().map_err(StartError::Thread)?;
            let profile = crate::runtimes::python::profile(&config.runner_component, config.limits);
            let image = Arc::new(RunnerImage { pre, profile, _ticker: loaded.ticker });
            let inner = Arc::new(BlockInner { image, config: config.clone(), sessions: tokio::sync::OnceCell::new(), pool: OnceLock::new(), recycler });
            if config.warm_instances > 0 {
                // Started only once `inner` exists, so the refill task can always
                // reach it; a weak reference, so the pool never keeps it alive.
                let runner = Arc::downgrade(&inner);
                let start = move || {
                    let inner = runner.upgrade()?;
                    // Holds `inner` only while the instance starts.
                    Some(async move { inner.start_instance(true).await })
                };
                let _ = inner.pool.set(WarmPool::start(config.warm_instances, start));
            }
            Ok(Self { inner })
        })
    }

    /// The limits every execution starts from.
    pub fn limits(&self) -> Limits {
        self.inner.image.profile.limits
    }

    /// What the runner runs, for health reports: the runtime, the
    /// component's file name, its origin and the limits.
    pub fn describe(&self) -> serde_json::Value {
        self.inner.image.profile.describe()
    }

    /// `python` sessions: the same runner component, instrumented for state
    /// images, on an engine of their own (instances allocated on demand, so
    /// sessions never take the REST blocks' pool slots), under this runner's
    /// limits. Loaded once; later calls share it.
    pub fn session_runtime(&self) -> BoxFuture<'_, Result<SessionRuntime, StartError>> {
        Box::pin(async move {
            let config = &self.inner.config;
            self.inner.sessions.get_or_try_init(|| SessionRuntime::start(RuntimeConfig::Python(config.clone()))).await.cloned()
        })
    }

    /// Runs one block. Never panics on guest behaviour: every failure is a typed error.
    pub fn execute(&self, request: ExecRequest) -> BoxFuture<'_, Report> {
        Box::pin(self.execute_gated(request, PolicyGate::Enforced))
    }

    /// Runs one block under `gate`: `PolicyGate::Disabled` exists only in
    /// this crate's test build (`wasm_layer_tests`), to prove the WebAssembly
    /// layer holds by itself.
    pub(crate) async fn execute_gated(&self, request: ExecRequest, gate: PolicyGate) -> Report {
        let started = Instant::now();
        let mut limits = self.limits().narrowed_by(&request.limits);
        // A block's fuel follows what it was handed: runaway code over little
        // data ends long before the ceiling that a search over the largest
        // collection needs. Session cells keep the whole ceiling.
        limits.fuel = crate::limits::block_fuel(request.input_bytes(), limits.fuel);
        let mut metrics = Metrics::default();
        let outcome = self.inner.run(request, gate, limits, &mut metrics).await;
        metrics.duration_us = started.elapsed().as_micros() as u64;
        Report { outcome, metrics }
    }
}

impl BlockInner {
    /// Starts and warms a fresh runner instance for a REST block. No tenant
    /// code or data touches it.
    async fn start_instance(&self, warm: bool) -> wasmtime::Result<Instance<Runner>> {
        let pre = &self.image.pre;
        let state = GuestState::new(self.image.profile.limits.memory_bytes, Instant::now() + WARM_UP_BUDGET);
        let mut store = engine::new_store(pre.engine(), state)?;
        let runner = pre.instantiate_async(&mut store).await?;
        if warm {
            store.data_mut().store = Some(RequestStore::warm_up());
            let warmed = runner.call_warm_up(&mut store).await;
            // Nothing of the warm-up's collection outlives it.
            store.data_mut().store = None;
            warmed?;
        }
        Ok(Instance { store, guest: runner })
    }

    async fn run(&self, request: ExecRequest, gate: PolicyGate, limits: Limits, metrics: &mut Metrics) -> Result<Success, Failure> {
        let fail = |error| Failure { error, output: Output::default() };
        check_request(&request, &limits).map_err(fail)?;
        let gate = host_gate(&request.code, gate).map_err(fail)?;
        let (instance, warm) = match self.pool.get().and_then(WarmPool::take) {
            Some(instance) => (instance, true),
            None => (self.start_instance(false).await.map_err(|e| fail(internal("starting an instance", &e)))?, false),
        };
        let mut instance = self.recycler.lease(instance);
        metrics.warm = warm;

        let Instance { store, guest: runner } = &mut *instance;
        engine::arm(store, &limits).map_err(fail)?;
        // Memory never shrinks: an instance that warming grew past this
        // run's cap has breached it before the block starts.
        let largest = store.data().memory.largest;
        if largest > limits.memory_bytes {
            metrics.peak_memory_bytes = largest;
            return Err(fail(ExecError::MemoryLimit { limit_bytes: limits.memory_bytes }));
        }

        let (input, request_store) = wit_input(request, gate, &limits);
        store.data_mut().store = Some(request_store);
        let called = engine::call(&limits, runner.call_execute(&mut *store, &input)).await;
        // Taken whatever the call came to: the instance never serves another request.
        let request_store = store.data_mut().store.take();
        let (returned, memory_refused) = engine::settle(store, &limits, metrics, called).map_err(fail)?;
        if memory_refused {
            // A block that caught MemoryError still breached the cap.
            let output = match &returned {
                Ok(s) => output_of(&s.output),
                Err(f) => output_of(&f.output),
            };
            return Err(Failure { error: ExecError::MemoryLimit { limit_bytes: limits.memory_bytes }, output });
        }
        let record = request_store
            .ok_or_else(|| ExecError::Internal { message: "the request's store was lost during the run".into() })
            .and_then(RequestStore::finish)
            .map_err(fail)?;
        // The host's verdicts come first, whatever the block did with the
        // exception its call raised: an answer computed from a partial view,
        // or a journal past the cap, must never be returned.
        let verdict = match (&record.needs_data, &record.over_limit) {
            (Some(message), _) => Some(ExecError::NeedsData { message: message.clone() }),
            (None, Some(message)) => Some(ExecError::OutputLimit { message: message.clone() }),
            (None, None) => None,
        };
        if let Some(error) = verdict {
            let output = match &returned {
                Ok(s) => output_of(&s.output),
                Err(f) => output_of(&f.output),
            };
            return Err(Failure { error, output });
        }
        match returned {
            Ok(success) => convert_success(success, record, &limits),
            Err(failure) => Err(Failure { error: convert_failure(failure.kind), output: output_of(&failure.output) }),
        }
    }
}

/// What the guest still does of the gate once the host has walked the
/// code's tree: nothing but compile it (`Checked`), or all of it when the
/// host's parser could not settle the code (`Enforced`: the guest parses
/// it with CPython, so a syntax error reads as CPython's). Code the host
/// refuses fails here, with the guest's own verdict, before any instance
/// is taken.
fn host_gate(code: &str, gate: PolicyGate) -> Result<PolicyGate, ExecError> {
    if gate != PolicyGate::Enforced {
        return Ok(gate);
    }
    match anypath_block_gate::check(code) {
        anypath_block_gate::Verdict::Allowed => Ok(PolicyGate::Checked),
        anypath_block_gate::Verdict::Unparsed => Ok(PolicyGate::Enforced),
        anypath_block_gate::Verdict::Refused(refusal) => {
            Err(ExecError::Policy { node: refusal.node, line: refusal.line, column: refusal.column, message: refusal.message })
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

/// Splits the request: the guest gets the code, the context and the
/// collections' names; the host keeps the documents (megabytes, possibly)
/// in the store that serves the guest's `store` calls.
fn wit_input(request: ExecRequest, gate: PolicyGate, limits: &Limits) -> (wit::ExecInput, RequestStore) {
    let raw = |value: Box<serde_json::value::RawValue>| Box::<str>::from(value).into_string();
    let names = request.collections.iter().map(|c| c.name.clone()).collect();
    let loaded = request
        .collections
        .into_iter()
        .map(|c| Loaded {
            name: c.name,
            documents: Documents::Json(raw(c.documents)),
            complete: c.complete,
            absent_ids: c.absent_ids,
            reserved_id: c.reserved_id,
        })
        .collect();
    let input = wit::ExecInput {
        policy_gate: gate.applies(),
        gate_checked: gate == PolicyGate::Checked,
        code: request.code,
        ctx_json: raw(request.ctx),
        collections: names,
        limits: wit::OutputLimits { stdout_bytes: limits.stdout_bytes, stderr_bytes: limits.stderr_bytes },
    };
    (input, RequestStore::new(loaded, limits.result_bytes))
}

fn convert_failure(kind: wit::FailureKind) -> ExecError {
    match kind {
        wit::FailureKind::Policy(p) => ExecError::Policy { node: p.node, line: p.line, column: p.column, message: p.message },
        wit::FailureKind::Exception(e) => {
            ExecError::Exception { type_name: e.type_name, message: e.message, traceback: e.traceback }
        }
        wit::FailureKind::InvalidReply(message) => ExecError::InvalidReply { message },
        wit::FailureKind::Internal(message) => ExecError::Internal { message: format!("runner: {message}") },
    }
}

/// Re-checks what the guest returned (the host trusts no size it did not
/// verify) and joins it with the journal and reads the host recorded.
fn convert_success(success: wit::Success, record: Record, limits: &Limits) -> Result<Success, Failure> {
    let output = output_of(&success.output);
    let fail = |error| Failure { error, output: output.clone() };
    if output.stdout.len() > limits.stdout_bytes as usize || output.stderr.len() > limits.stderr_bytes as usize {
        return Err(fail(ExecError::OutputLimit { message: "captured output exceeds its cap".into() }));
    }
    let size = success.reply.body_json.as_ref().map_or(0, |b| b.len() as u64).saturating_add(record.journal_bytes);
    if size > u64::from(limits.result_bytes) {
        return Err(fail(ExecError::OutputLimit { message: format!("reply and journal exceed {} bytes", limits.result_bytes) }));
    }
    let body = success
        .reply
        .body_json
        .map(RawValue::from_string)
        .transpose()
        .map_err(|e| fail(ExecError::InvalidReply { message: format!("body is not JSON: {e}") }))?;
    Ok(Success {
        reply: Reply { status: success.reply.status, headers: success.reply.headers, body },
        mutations: record.mutations,
        reads: record.reads,
        output,
    })
}
