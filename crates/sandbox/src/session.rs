//! The runtime a code-interpreter session runs on, whichever it is: it
//! starts the session's instances through the runtime's seam
//! (`seam::SessionImage`), and captures, restores and interrupts them the
//! same way on every runtime (state images, the keyboard interrupt).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use crate::bindings::anypath::runner::types as wit;
use crate::engine::{self, Instance, StartError};
use crate::footprint::MemoryRegions;
use crate::interrupt::Interrupt;
use crate::keyboard_interrupt::{self as keyboard, CalibrationError, FirstScan, KeyboardTrip, Probed, SignalLayout};
use crate::layout::FilesLayout;
use crate::limits::Limits;
use crate::profile::Profile;
use crate::quota_fs::QuotaState;
use crate::runtimes::{self, JavascriptConfig, PythonDataConfig, RuntimeConfig};
use crate::seam::{Placement, RunCell, SessionGuest, SessionImage, StartFor};
use crate::state_image::access::Access;
use crate::state_image::image::{self as state, Baseline, StateError};
use crate::state_image::layout::Layout;
use crate::state_image::shared::{self, MappedState, SharedState};
use crate::cow::CowMemories;
use anypath_wire::Runtime;

/// Deadline for starting a session's instance (no tenant code runs then):
/// the data runtime's plain reactor initialises CPython and loads the cell code.
const SESSION_START_BUDGET: Duration = Duration::from_secs(60);

/// Starts code-interpreter sessions' instances, on any runtime.
///
/// Cheap to clone; clones share the engine. Started by
/// [`SessionRuntime::start`]; `python` also from
/// [`BlockRunner::session_runtime`](crate::BlockRunner::session_runtime),
/// sharing the block runner's configuration.
#[derive(Clone)]
pub struct SessionRuntime {
    /// The runtime, pre-linked: what session instances start from.
    image: Arc<dyn SessionImage>,
    states: Arc<StateImages>,
}

/// What capturing and restoring a runtime's state needs.
struct StateImages {
    access: Access,
    /// The instrumented component's cache key: images name it.
    component: String,
    /// A bare instance's memories, read on first use.
    baseline: tokio::sync::OnceCell<Arc<Baseline>>,
    /// Where CPython keeps its SIGINT state, found on first use (`None`
    /// when it was not found: interrupts then reset the session).
    signals: tokio::sync::OnceCell<Option<SignalLayout>>,
    /// Pages found not to map the baseline's bytes when given back.
    #[cfg(target_os = "linux")]
    unreturnable: crate::state_image::give_back::Unreturnable,
    /// What makes the instances' memories: shared states are mapped
    /// through it.
    memories: Option<Arc<CowMemories>>,
    /// New sessions' starting states, for a runtime that starts from one.
    templates: crate::template::Templates,
}

/// Deadline for the host's own calls that capture or restore state.
const STATE_BUDGET: Duration = Duration::from_secs(30);

impl SessionRuntime {
    /// Loads (or compiles, instruments and caches) the runtime `config`
    /// names. Must be called inside a Tokio runtime.
    pub fn start(config: RuntimeConfig) -> BoxFuture<'static, Result<Self, StartError>> {
        Box::pin(async move {
            let loaded = runtimes::load(&config).await?;
            let states = StateImages::new(&loaded.component, loaded.state, loaded.memories)?;
            Ok(Self { image: loaded.image, states })
        })
    }

    /// Loads (or compiles and caches) the data runtime.
    /// Must be called inside a Tokio runtime.
    pub fn start_python_data(config: PythonDataConfig) -> BoxFuture<'static, Result<Self, StartError>> {
        Self::start(RuntimeConfig::PythonData(config))
    }

    /// Loads (or compiles and caches) the JavaScript runtime.
    /// Must be called inside a Tokio runtime.
    pub fn start_javascript(config: JavascriptConfig) -> BoxFuture<'static, Result<Self, StartError>> {
        Self::start(RuntimeConfig::Javascript(config))
    }

    fn profile(&self) -> &Profile {
        self.image.profile()
    }

    /// The limits every run starts from.
    pub fn limits(&self) -> Limits {
        self.profile().limits
    }

    /// Which runtime this is.
    pub fn runtime(&self) -> Runtime {
        self.profile().runtime
    }

    /// What the runtime runs, for health reports: the runtime, the
    /// component's file name, its origin (the data runtime's `origin.json`),
    /// the limits, and for the data runtime the image it starts from.
    pub fn describe(&self) -> serde_json::Value {
        self.profile().describe()
    }

    /// Whether this runtime's instances start in their layout's working
    /// directory; otherwise they need a first cell for it.
    pub(crate) fn enters_layout_at_start(&self) -> bool {
        self.image.enters_layout_at_start()
    }

    /// Whether an image can be restored into an instance that ran nothing
    /// yet; otherwise a first call that takes the host handles must come
    /// before the restore.
    pub(crate) fn restores_without_prologue(&self) -> bool {
        self.image.restores_without_prologue()
    }

    /// Whether this runtime's instances may be started ahead of their
    /// session ([`Self::prestart`]).
    pub fn starts_ahead(&self) -> bool {
        self.image.starts_ahead()
    }

    /// How a live instance of this runtime runs a cell.
    pub(crate) fn cell_runner(&self) -> RunCell {
        self.image.cell_runner()
    }

    /// Runs a cell of the host's own (a probe, a set-up, parking files) in
    /// `instance`, armed by the caller.
    pub(crate) fn host_cell<'a>(&self, instance: &'a mut Instance<SessionGuest>, input: &'a wit::CellInput) -> BoxFuture<'a, wasmtime::Result<wit::CellOutput>> {
        let Instance { store, guest } = instance;
        self.image.run_cell(store, guest, input)
    }

    /// Starts a session's instance: it sees `dir` (when given) at
    /// `/mnt/data` (or as its tree, in the sandbox `layout`), `datasets`
    /// (when given) at `/data` and a `wheelhouse` at `/wheelhouse`, writes under `quota`, and grows to `memory_cap`.
    /// What it runs before it is handed out depends on what it is `for`.
    pub(crate) async fn start_instance(
        &self,
        dir: Option<&Path>,
        layout: FilesLayout,
        (datasets, wheelhouse): (Option<&Path>, Option<&Path>),
        quota: Option<Arc<QuotaState>>,
        memory_cap: u64,
        start_for: StartFor,
    ) -> wasmtime::Result<Instance<SessionGuest>> {
        let deadline = Instant::now() + SESSION_START_BUDGET;
        self.image.start(Placement { dir, layout, datasets, wheelhouse, quota, memory_cap, deadline }, start_for).await
    }

    /// The baseline state images are taken against: a bare instance's
    /// memories, read once.
    async fn baseline(&self) -> Result<Arc<Baseline>, StateError> {
        self.states
            .baseline
            .get_or_try_init(|| async {
                let mut bare = self.start_instance(None, FilesLayout::MntData, (None, None), None, self.limits().memory_bytes, StartFor::Baseline).await?;
                engine::arm_for_host(&mut bare.store, STATE_BUDGET)?;
                let baseline = Baseline::read(&self.states.access, &mut bare.store, &bare.guest.handle).await?;
                Ok::<_, StateError>(Arc::new(baseline))
            })
            .await
            .cloned()
    }

    /// Captures `instance`'s state between runs (after its open files were
    /// closed, named in `closed_files`): the image's bytes.
    pub(crate) async fn capture(&self, instance: &mut Instance<SessionGuest>, closed_files: Vec<String>) -> Result<Vec<u8>, StateError> {
        Ok(self.capture_parts(instance, closed_files).await?.image)
    }

    async fn capture_parts(&self, instance: &mut Instance<SessionGuest>, closed_files: Vec<String>) -> Result<state::Captured, StateError> {
        let baseline = self.baseline().await?;
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        let mut memo = instance.guest.memo.take();
        let source = instance.guest.source.clone();
        let mapped = source.as_ref().map_or(&[][..], |source| source.differs.as_slice());
        let captured = engine::on_own_thread(state::capture(&self.states.access, &self.states.component, &baseline, &mut instance.store, &handle, closed_files, &mut memo, mapped)).await;
        instance.guest.memo = memo;
        captured
    }

    /// Captures `instance`'s state between runs, as [`Self::capture`], and
    /// where this runtime's memory is the host's, freezes it for other
    /// instances to map ([`SharedState`]).
    pub(crate) async fn share(&self, instance: &mut Instance<SessionGuest>, closed_files: Vec<String>) -> Result<SharedState, StateError> {
        let mut captured = self.capture_parts(instance, closed_files).await?;
        let image: Arc<[u8]> = std::mem::take(&mut captured.image).into();
        let initial = self.states.memories.as_ref().and_then(|memories| memories.initial().cloned());
        let (Some(initial), [memory]) = (initial, self.states.access.memories.as_slice()) else {
            return Ok(SharedState::image_only(image));
        };
        let baseline = self.baseline().await?;
        let handle = instance.guest.handle;
        let component = &self.states.component;
        // Writing the overlay is memory-speed blocking work: off the async workers.
        engine::on_own_thread(async {
            let bytes = memory.read(&mut instance.store, &handle).await?;
            shared::freeze(component, &baseline, &initial, &captured, bytes, image).map_err(|e| StateError::Unsupported(format!("freezing the state: {e}")))
        })
        .await
    }

    /// Whether instances of this runtime can take a shared state by mapping it.
    /// The state a new session of `shape` starts from, when this runtime
    /// starts from a template and its states can be mapped.
    pub(crate) async fn template(&self, shape: crate::template::Shape) -> Option<Arc<SharedState>> {
        if !self.image.starts_from_template() || !self.maps_shared_states() {
            return None;
        }
        self.states.templates.get(self, shape).await
    }

    pub(crate) fn maps_shared_states(&self) -> bool {
        self.states.memories.as_ref().is_some_and(|memories| memories.initial().is_some()) && self.states.access.memories.len() == 1
    }

    /// Has `instance`, just started and past its first (empty) run, take
    /// `state` by mapping its frozen memory; returns the files closed when
    /// it was captured.
    pub(crate) async fn map_shared(&self, instance: &mut Instance<SessionGuest>, state: &Arc<MappedState>) -> Result<Vec<String>, StateError> {
        let Some(memories) = self.states.memories.clone() else {
            return Err(StateError::Unsupported("this runtime's memories are not the host's".into()));
        };
        let baseline = self.baseline().await?;
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        let closed = engine::on_own_thread(shared::map(&self.states.access, &self.states.component, &baseline, &memories, state, &mut instance.store, &handle)).await?;
        instance.guest.source = Some(state.clone());
        instance.guest.memo = None;
        Ok(closed)
    }

    /// Where `instance`'s memories lie now: found through the state
    /// accessors once, and again only after a memory grew (they never move:
    /// the engine reserves each one's whole reach).
    pub(crate) async fn memory_regions(&self, instance: &mut Instance<SessionGuest>) -> Result<MemoryRegions, StateError> {
        let growths = instance.store.data().memory.growths;
        if let Some((seen, regions)) = &instance.guest.regions
            && *seen == growths
        {
            return Ok(regions.clone());
        }
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        let mut found = Vec::with_capacity(self.states.access.memories.len());
        for memory in &self.states.access.memories {
            let bytes = memory.read(&mut instance.store, &handle).await?;
            found.push((bytes.as_ptr() as usize, bytes.len()));
        }
        let regions = MemoryRegions::new(found);
        instance.guest.regions = Some((growths, regions.clone()));
        Ok(regions)
    }

    /// Gives back the pages `instance` (between runs) wrote that hold the
    /// baseline's bytes again: the bytes given back
    /// (`state_image::give_back`). Nothing where the page tables or the
    /// baseline cannot be read; an error only when the memory may no longer
    /// be what it was.
    pub(crate) async fn give_back(&self, instance: &mut Instance<SessionGuest>) -> Result<u64, StateError> {
        #[cfg(target_os = "linux")]
        {
            let baseline = match self.baseline().await {
                Ok(baseline) => baseline,
                Err(error) => {
                    tracing::debug!(%error, "no pages given back: the baseline could not be read");
                    return Ok(0);
                }
            };
            if let Err(error) = engine::arm_for_host(&mut instance.store, STATE_BUDGET) {
                tracing::debug!(%error, "no pages given back: the instance could not be armed for the host's calls");
                return Ok(0);
            }
            let handle = instance.guest.handle;
            let states = &self.states;
            let source = instance.guest.source.clone();
            engine::on_own_thread(crate::state_image::give_back::give_back(&states.access, &baseline, source.as_deref(), &states.unreturnable, &mut instance.store, &handle)).await
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = instance;
            Ok(0)
        }
    }

    /// What checks and decompresses a saved image on the blocking pool: with
    /// the baseline read already (it is after a runtime's first capture or
    /// restore), it turns the image's chunks back from their deltas there
    /// too, beside the instance's start rather than after it.
    pub(crate) fn decoder(&self) -> impl FnOnce(&[u8]) -> Result<state::Decoded, StateError> + Send + 'static {
        let baseline = self.states.baseline.get().cloned();
        let globals = self.states.access.globals.len();
        move |bytes| state::decode_against(bytes, baseline.as_deref(), globals)
    }

    /// Makes `instance` (just started and past its first run) ready for an
    /// image laid out as `plan`, while the image itself is still decoded.
    pub(crate) async fn prepare(&self, instance: &mut Instance<SessionGuest>, plan: &state::Plan) -> Result<(), StateError> {
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        engine::on_own_thread(state::prepare(&self.states.access, plan, &mut instance.store, &handle)).await
    }

    /// Restores a decoded image into `instance`, just started and past its
    /// first (empty) run; returns the files closed when it was captured.
    pub(crate) async fn restore(&self, instance: &mut Instance<SessionGuest>, mut image: state::Decoded) -> Result<Vec<String>, StateError> {
        let baseline = self.baseline().await?;
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        engine::on_own_thread(state::restore(&self.states.access, &self.states.component, &baseline, &mut image, &mut instance.store, &handle)).await?;
        instance.guest.memo = image.memo.take();
        Ok(std::mem::take(&mut image.closed_files))
    }

    /// Lets `instance`'s interrupts raise `KeyboardInterrupt` in the guest
    /// instead of trapping it, once this runtime's signal state is known
    /// (found on first use). Nothing changes when it is not.
    pub(crate) async fn arm_keyboard(&self, instance: &mut Instance<SessionGuest>) {
        if instance.store.data().keyboard.is_some() {
            return;
        }
        if let Some(layout) = self.signal_layout().await {
            self.attach_trip(instance, layout).await;
        }
    }

    /// Where this runtime's CPython keeps its SIGINT state (found on first use).
    pub(crate) async fn signal_layout(&self) -> Option<SignalLayout> {
        if !self.image.keyboard_interrupts() {
            return None;
        }
        *self
            .states
            .signals
            .get_or_init(|| async {
                // Once more on failure: the end-to-end check is timed, and a
                // host busy enough to miss it once seldom misses it twice.
                let calibrated = match self.calibrate().await {
                    Ok(layout) => Ok(layout),
                    Err(error) => {
                        tracing::debug!(%error, runtime = %self.runtime(), "CPython's signal state was not found at the first try");
                        self.calibrate().await
                    }
                };
                match calibrated {
                    Ok(layout) => {
                        tracing::debug!(?layout, runtime = %self.runtime(), "CPython's signal state found: an interrupt raises KeyboardInterrupt");
                        Some(layout)
                    }
                    Err(error) => {
                        tracing::warn!(%error, runtime = %self.runtime(), "CPython's signal state was not found: an interrupt resets the session");
                        None
                    }
                }
            })
            .await
    }

    /// Points `instance`'s epoch callback at its memory's signal state.
    async fn attach_trip(&self, instance: &mut Instance<SessionGuest>, layout: SignalLayout) {
        // The trip writes by address: only where memories never move (the
        // engine reserves the 4 GiB a 32-bit memory can reach, on 64-bit hosts).
        if !cfg!(target_pointer_width = "64") {
            return;
        }
        let Some(memory) = self.states.access.memories.get(layout.memory) else {
            return;
        };
        if engine::arm_for_host(&mut instance.store, STATE_BUDGET).is_err() {
            return;
        }
        let handle = instance.guest.handle;
        let trip = match memory.read(&mut instance.store, &handle).await {
            // SAFETY: the whole memory of the store's only instance, which
            // never moves (above); the trip is kept in that store's data and
            // used by its epoch callback and between calls only.
            Ok(bytes) => unsafe { KeyboardTrip::new(bytes, layout) },
            Err(_) => None,
        };
        instance.store.data_mut().keyboard = trip;
    }

    /// Finds where this runtime's CPython keeps its SIGINT state, in a
    /// throwaway instance (see `keyboard_interrupt`), checked end to end.
    async fn calibrate(&self) -> Result<SignalLayout, CalibrationError> {
        let limits = self.limits();
        let memory_error = |e: wasmtime::Error| CalibrationError::Memory(format!("{e:#}"));
        let mut probe = self.start_instance(None, FilesLayout::MntData, (None, None), None, limits.memory_bytes, StartFor::Runs).await.map_err(|e| CalibrationError::Probe(format!("{e:#}")))?;
        let handle = probe.guest.handle;
        let memories = &self.states.access.memories;
        let probed = Probed::parse(&self.probe_cell(&mut probe, &limits, &keyboard::first_probe()).await?.output.stdout)?;
        let mut scans = Vec::with_capacity(memories.len());
        for memory in memories {
            engine::arm_for_host(&mut probe.store, STATE_BUDGET).map_err(memory_error)?;
            scans.push(FirstScan::new(memory.read(&mut probe.store, &handle).await.map_err(memory_error)?, &probed));
        }
        self.probe_cell(&mut probe, &limits, &keyboard::second_probe()).await?;
        let mut found = Vec::new();
        for (index, (memory, scan)) in memories.iter().zip(&scans).enumerate() {
            engine::arm_for_host(&mut probe.store, STATE_BUDGET).map_err(memory_error)?;
            let bytes = memory.read(&mut probe.store, &handle).await.map_err(memory_error)?;
            match scan.narrow(bytes, &probed) {
                (funcs, _) if funcs.is_empty() => {}
                (funcs, limits) => match (&funcs[..], &limits[..]) {
                    ([func], [limit]) => found.push((index, *func, keyboard::breaker_window(bytes, *limit))),
                    _ => {
                        return Err(CalibrationError::NotFound(format!("{} handler slots and {} thread states in memory {index}", funcs.len(), limits.len())));
                    }
                },
            }
        }
        let [(index, func, before)] = &found[..] else {
            return Err(CalibrationError::NotFound(format!("the handler slot was found in {} memories", found.len())));
        };
        self.probe_cell(&mut probe, &limits, keyboard::THIRD_PROBE).await?;
        engine::arm_for_host(&mut probe.store, STATE_BUDGET).map_err(memory_error)?;
        let bytes = memories[*index].read(&mut probe.store, &handle).await.map_err(memory_error)?;
        let layout = keyboard::layout(*index, bytes, &probed, *func, before)?;
        // End to end: a loop tripped as a real interrupt would be must end by KeyboardInterrupt.
        self.attach_trip(&mut probe, layout).await;
        if probe.store.data().keyboard.is_none() {
            return Err(CalibrationError::Check("the probe's memory cannot be written by address".into()));
        }
        let interrupt = Interrupt::new();
        probe.store.data_mut().interrupt = Some(interrupt.clone());
        let raising = tokio::spawn(async move {
            tokio::time::sleep(keyboard::check_after()).await;
            interrupt.interrupt();
            Instant::now()
        });
        let checked = self.probe_cell(&mut probe, &limits, keyboard::CHECK_PROBE).await;
        let raised_at = raising.await.map_err(|e| CalibrationError::Check(e.to_string()))?;
        keyboard::check_outcome(checked?.error.as_ref().map(|e| e.type_name.as_str()), raised_at)?;
        Ok(layout)
    }

    /// Runs `code` as a cell of `probe` under `limits`: its output, or why it failed.
    async fn probe_cell(&self, probe: &mut Instance<SessionGuest>, limits: &Limits, code: &str) -> Result<wit::CellOutput, CalibrationError> {
        engine::arm(&mut probe.store, limits).map_err(|e| CalibrationError::Probe(e.to_string()))?;
        let input = wit::CellInput {
            code: code.to_owned(),
            env: Vec::new(),
            stdout_bytes: limits.stdout_bytes,
            stderr_bytes: limits.stderr_bytes,
            result_bytes: 0,
            figure_formats: Vec::new(),
            live: false,
        };
        let called = engine::call(limits, self.host_cell(probe, &input)).await;
        match called {
            Ok(Ok(output)) if output.error.is_none() || code == keyboard::CHECK_PROBE => Ok(output),
            Ok(Ok(output)) => Err(CalibrationError::Probe(format!("{:?}", output.error))),
            Ok(Err(trap)) => Err(CalibrationError::Probe(format!("{trap:#}"))),
            Err(dropped) => Err(CalibrationError::Probe(format!("{dropped:?}"))),
        }
    }
}


impl StateImages {
    fn new(component: &wasmtime::component::Component, state: Option<(Layout, String)>, memories: Option<Arc<CowMemories>>) -> Result<Arc<Self>, StartError> {
        let (layout, key) = state.ok_or_else(|| StartError::Link(wasmtime::format_err!("the session component was loaded without state access")))?;
        let access = Access::resolve(component, &layout).map_err(StartError::Link)?;
        Ok(Arc::new(Self {
            access,
            component: key,
            baseline: tokio::sync::OnceCell::new(),
            signals: tokio::sync::OnceCell::new(),
            #[cfg(target_os = "linux")]
            unreturnable: Default::default(),
            memories,
            templates: Default::default(),
        }))
    }
}
