//! The runtimes code-interpreter sessions run on: `python`, on the block
//! runner's engine and image, or `python-data`, on an engine of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bindings::Runner;
use crate::block::RunnerImage;
use crate::data_runtime::preinit::ImageSummary;
use crate::data_runtime::{DataGuest, DataImage, PythonDataPre};
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
}

/// The pre-linked component session instances start from.
#[derive(Clone)]
enum Image {
    Python(Arc<RunnerImage>),
    Data(Arc<DataRuntime>),
}

struct DataRuntime {
    image: DataImage,
    profile: Profile,
    _ticker: EpochTicker,
}

/// The exports of a session's instance, by runtime.
pub(crate) enum Guest {
    Runner(Runner),
    Data(DataGuest),
}

impl SessionRuntime {
    pub(crate) fn python(image: Arc<RunnerImage>) -> Self {
        Self { image: Image::Python(image) }
    }

    /// Loads (or compiles and caches) the data runtime.
    /// Must be called inside a Tokio runtime.
    pub async fn start_python_data(config: PythonDataConfig) -> Result<Self, StartError> {
        let mut loaded = engine::load(engine::data_engine_config(), &config.component, &config.cache_dir, &config.limits).await?;
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
        Ok(Self { image: Image::Data(Arc::new(DataRuntime { image, profile, _ticker: loaded.ticker })) })
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
    /// `/mnt/data`, writes under `quota`, and grows to `memory_cap`.
    pub(crate) async fn start_instance(
        &self,
        dir: Option<&Path>,
        quota: Option<Arc<QuotaState>>,
        memory_cap: u64,
    ) -> wasmtime::Result<Instance<Guest>> {
        let deadline = Instant::now() + SESSION_START_BUDGET;
        match &self.image {
            Image::Python(image) => {
                let mut state = match dir {
                    Some(dir) => GuestState::with_session_dir(memory_cap, deadline, dir)?,
                    None => GuestState::new(memory_cap, deadline),
                };
                state.quota = quota;
                let mut store = engine::new_store(image.pre.engine(), state)?;
                let runner = image.pre.instantiate_async(&mut store).await?;
                Ok(Instance { store, guest: Guest::Runner(runner) })
            }
            Image::Data(data) => {
                let wasm = data.image.pre.engine().clone();
                let (store, guest) = data.image.start(dir, quota, memory_cap, deadline, |state| engine::new_store(&wasm, state)).await?;
                Ok(Instance { store, guest: Guest::Data(guest) })
            }
        }
    }
}
