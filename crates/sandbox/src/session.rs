//! The runtimes code-interpreter sessions run on: `python`, on the block
//! runner's engine and image, or `python-data`, on an engine of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Instance as Handle;

use crate::bindings::{Runner, RunnerPre};
use crate::block::RunnerConfig;
use crate::state_image::access::Access;
use crate::state_image::image::{self as state, Baseline, StateError};
use crate::data_runtime::preinit::ImageSummary;
use crate::data_runtime::{DataGuest, DataImage, PythonDataPre};
use crate::drain_pipe::DrainPipe;
use crate::engine::{self, EpochTicker, Instance, Profile, StartError};
use crate::guest::GuestState;
use crate::limits::Limits;
use crate::quota_fs::QuotaState;
use anypath_wire::Runtime;

/// Deadline for starting a session's instance (no tenant code runs then):
/// the data runtime's plain reactor initialises CPython and loads the cell code.
const SESSION_START_BUDGET: Duration = Duration::from_secs(60);

/// Which form of the data runtime's reactor instances start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataVariant {
    /// Pre-initialised by `cargo xtask` (`anypath sandbox preinit-data`):
    /// numpy, pandas, matplotlib, seaborn and the cell code already imported.
    #[default]
    Preimported,
    /// The wheel's own snapshot: CPython started, nothing imported.
    Snapshot,
    /// The plain reactor: CPython starts in every instance.
    Plain,
}

impl DataVariant {
    /// The component's file name in the runtime's directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Preimported => "python-data-preimported.wasm",
            Self::Snapshot => "python-data-snapshot.wasm",
            Self::Plain => "python-data.wasm",
        }
    }
}

/// The summary `cargo xtask` writes beside the pre-initialised component.
pub const PREIMPORTED_SUMMARY: &str = "python-data-preimported.json";

/// Which image a data runtime starts from, for health reports.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImageDescription {
    pub(crate) variant: DataVariant,
    /// What the pre-initialised image holds.
    pub(crate) preimported: Option<ImageSummary>,
}

/// How to start the `python-data` [`SessionRuntime`].
#[derive(Debug, Clone)]
pub struct PythonDataConfig {
    /// The data runtime's converted reactor.
    pub component: PathBuf,
    /// The data runtime's directory as `cargo xtask` lays it out: `lib/`
    /// (holding `python315.zip`) and `mpl-data/` (matplotlib's data), both
    /// seen read-only.
    pub layout: PathBuf,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
    /// Limits every run starts from.
    pub limits: Limits,
    /// Which form of the reactor `component` is.
    pub variant: DataVariant,
}

impl PythonDataConfig {
    /// The data runtime laid out in `dir` by `cargo xtask`
    /// (`python-data-preimported.wasm`, `python-data-snapshot.wasm`,
    /// `python-data.wasm`, `lib/`), in the given variant, with the data
    /// runtime's own default limits.
    pub fn new(dir: &Path, variant: DataVariant) -> Self {
        Self {
            component: dir.join(variant.file_name()),
            layout: dir.to_path_buf(),
            cache_dir: dir.join("cache"),
            limits: Limits::python_data(),
            variant,
        }
    }
}

/// Starts code-interpreter sessions' instances, on either runtime.
///
/// Cheap to clone; clones share the engine. `python` comes from
/// [`BlockRunner::session_runtime`](crate::BlockRunner::session_runtime),
/// `python-data` from [`SessionRuntime::start_python_data`].
#[derive(Clone)]
pub struct SessionRuntime {
    image: Image,
    states: Arc<StateImages>,
}

/// The pre-linked component session instances start from.
#[derive(Clone)]
enum Image {
    Python(Arc<PythonRuntime>),
    Data(Arc<DataRuntime>),
}

struct PythonRuntime {
    pre: RunnerPre<GuestState>,
    profile: Profile,
    _ticker: EpochTicker,
}

struct DataRuntime {
    image: DataImage,
    profile: Profile,
    _ticker: EpochTicker,
}

/// What capturing and restoring a runtime's state needs.
struct StateImages {
    access: Access,
    /// The instrumented component's cache key: images name it.
    component: String,
    /// A bare instance's memories, read on first use.
    baseline: tokio::sync::OnceCell<Arc<Baseline>>,
}

/// The exports of a session's instance, by runtime.
pub(crate) enum Guest {
    Runner(Runner),
    Data(DataGuest),
}

/// A session's started instance: its exports, the component instance
/// (through which its state is captured and restored) and its stdout (which
/// carries a streaming run's live frames).
pub(crate) struct SessionGuest {
    pub(crate) exports: Guest,
    pub(crate) handle: Handle,
    pub(crate) stdout: DrainPipe,
}

/// Bytes the `python` runtime's stdout keeps between runs: the cell code
/// captures `print`, so only what is written to the descriptor itself lands
/// there, and it is not reported.
const RUNNER_STDOUT_KEPT: usize = 64 << 10;

/// Deadline for the host's own calls that capture or restore state.
const STATE_BUDGET: Duration = Duration::from_secs(30);

impl SessionRuntime {
    /// Loads (or instruments, compiles and caches) the runner for sessions.
    pub(crate) async fn start_python(config: &RunnerConfig) -> Result<Self, StartError> {
        let mut loaded = engine::load(engine::session_engine_config(false), &config.runner_component, &config.cache_dir, &config.limits, engine::Form::WithStateAccess).await?;
        let pre = loaded.linker.instantiate_pre(&loaded.component).map_err(StartError::Link)?;
        let pre = RunnerPre::new(pre).map_err(StartError::Link)?;
        let states = StateImages::new(&loaded.component, loaded.state.take())?;
        let profile = Profile::python_runner(&config.runner_component, config.limits);
        Ok(Self { image: Image::Python(Arc::new(PythonRuntime { pre, profile, _ticker: loaded.ticker })), states })
    }

    /// Loads (or compiles and caches) the data runtime.
    /// Must be called inside a Tokio runtime.
    pub async fn start_python_data(config: PythonDataConfig) -> Result<Self, StartError> {
        let mut loaded = engine::load(engine::session_engine_config(true), &config.component, &config.cache_dir, &config.limits, engine::Form::WithStateAccess).await?;
        let states = StateImages::new(&loaded.component, loaded.state.take())?;
        crate::data_runtime::add_to_linker(&mut loaded.linker).map_err(StartError::Link)?;
        let pre = loaded.linker.instantiate_pre(&loaded.component).map_err(StartError::Link)?;
        let pre = PythonDataPre::new(pre).map_err(StartError::Link)?;
        let preinitialised = config.variant == DataVariant::Preimported;
        let image = DataImage::new(pre, &config.layout, preinitialised).map_err(StartError::DataLayout)?;
        // Best effort: a missing or unreadable origin or summary only leaves the health report without it.
        let origin = std::fs::read(config.layout.join("origin.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(serde_json::Value::Null);
        let preimported = match config.variant {
            DataVariant::Preimported => std::fs::read(config.layout.join(PREIMPORTED_SUMMARY))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<ImageSummary>(&bytes).ok()),
            DataVariant::Snapshot | DataVariant::Plain => None,
        };
        let profile = Profile {
            runtime: Runtime::PythonData,
            component_name: engine::component_name(&config.component),
            origin,
            limits: config.limits,
            image: Some(ImageDescription { variant: config.variant, preimported }),
        };
        Ok(Self { image: Image::Data(Arc::new(DataRuntime { image, profile, _ticker: loaded.ticker })), states })
    }

    fn profile(&self) -> &Profile {
        match &self.image {
            Image::Python(image) => &image.profile,
            Image::Data(data) => &data.profile,
        }
    }

    /// The limits every run starts from.
    pub fn limits(&self) -> Limits {
        self.profile().limits
    }

    /// The Python this runtime runs.
    pub fn runtime(&self) -> Runtime {
        self.profile().runtime
    }

    /// What the runtime runs, for health reports: the runtime, the
    /// component's file name, its origin (the data runtime's `origin.json`),
    /// the limits, and for the data runtime the image it starts from.
    pub fn describe(&self) -> serde_json::Value {
        self.profile().describe()
    }

    /// Starts a session's instance: it sees `dir` (when given) at
    /// `/mnt/data` and `datasets` (when given) at `/data`, writes under
    /// `quota`, and grows to `memory_cap`.
    /// A `bare` instance runs nothing after instantiation (the baseline).
    pub(crate) async fn start_instance(
        &self,
        dir: Option<&Path>,
        datasets: Option<&Path>,
        quota: Option<Arc<QuotaState>>,
        memory_cap: u64,
        bare: bool,
    ) -> wasmtime::Result<Instance<SessionGuest>> {
        let deadline = Instant::now() + SESSION_START_BUDGET;
        match &self.image {
            Image::Python(image) => {
                // Only live frames matter on it: what else reaches it is dropped each run.
                let stdout = DrainPipe::new(RUNNER_STDOUT_KEPT);
                let mut state = GuestState::for_session(memory_cap, deadline, dir, datasets, stdout.clone())?;
                state.quota = quota;
                let mut store = engine::new_store(image.pre.engine(), state)?;
                let handle = image.pre.instance_pre().instantiate_async(&mut store).await?;
                let runner = Runner::new(&mut store, &handle)?;
                Ok(Instance { store, guest: SessionGuest { exports: Guest::Runner(runner), handle, stdout } })
            }
            Image::Data(data) => {
                let wasm = data.image.pre.engine().clone();
                let (store, guest, handle) = data.image.start(dir, datasets, quota, memory_cap, deadline, bare, |state| engine::new_store(&wasm, state)).await?;
                let stdout = guest.stdout().clone();
                Ok(Instance { store, guest: SessionGuest { exports: Guest::Data(guest), handle, stdout } })
            }
        }
    }

    /// The baseline state images are taken against: a bare instance's
    /// memories, read once.
    async fn baseline(&self) -> Result<Arc<Baseline>, StateError> {
        self.states
            .baseline
            .get_or_try_init(|| async {
                let mut bare = self.start_instance(None, None, None, self.limits().memory_bytes, true).await?;
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
        let baseline = self.baseline().await?;
        engine::arm_for_host(&mut instance.store, STATE_BUDGET)?;
        let handle = instance.guest.handle;
        engine::on_own_thread(state::capture(&self.states.access, &self.states.component, &baseline, &mut instance.store, &handle, closed_files)).await
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
        engine::on_own_thread(state::restore(&self.states.access, &self.states.component, &baseline, &image, &mut instance.store, &handle)).await?;
        Ok(std::mem::take(&mut image.closed_files))
    }
}

impl StateImages {
    fn new(component: &wasmtime::component::Component, state: Option<(crate::state_image::layout::Layout, String)>) -> Result<Arc<Self>, StartError> {
        let (layout, key) = state.ok_or_else(|| StartError::Link(wasmtime::format_err!("the session component was loaded without state access")))?;
        let access = Access::resolve(component, &layout).map_err(StartError::Link)?;
        Ok(Arc::new(Self { access, component: key, baseline: tokio::sync::OnceCell::new() }))
    }
}
