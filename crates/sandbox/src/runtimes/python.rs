//! The `python` runtime: the runner component (CPython built with
//! componentize-py), instrumented for state images, on an engine of its
//! own; a cell is one call of its `run-cell` export.

use std::path::Path;
use std::sync::Arc;

use anypath_wire::Runtime;
use wasmtime::Store;

use super::LoadedRuntime;
use crate::bindings::anypath::runner::types as wit;
use crate::bindings::{Runner, RunnerPre};
use crate::config::RunnerConfig;
use crate::drain_pipe::DrainPipe;
use crate::engine::{self, EpochTicker, StartError};
use crate::guest::GuestState;
use crate::limits::Limits;
use crate::profile::{Profile, component_name};
use crate::seam::{CellExports, Placement, RuntimeImage, StartFor, Started};

/// Bytes the `python` runtime's stdout keeps between runs: the cell code
/// captures `print`, so only what is written to the descriptor itself lands
/// there, and it is not reported.
const RUNNER_STDOUT_KEPT: usize = 64 << 10;

/// The runner, pre-linked for sessions.
struct PythonRuntime {
    pre: RunnerPre<GuestState>,
    profile: Profile,
    _ticker: EpochTicker,
}

/// Loads (or instruments, compiles and caches) the runner for sessions.
pub(crate) async fn load(config: &RunnerConfig) -> Result<LoadedRuntime, StartError> {
    let loaded = engine::load(engine::session_engine_config(false), &config.runner_component, &config.cache_dir, &config.limits, engine::Form::WithStateAccess).await?;
    let pre = loaded.linker.instantiate_pre(&loaded.component).map_err(StartError::Link)?;
    let pre = RunnerPre::new(pre).map_err(StartError::Link)?;
    let profile = profile(&config.runner_component, config.limits);
    Ok(LoadedRuntime { image: Arc::new(PythonRuntime { pre, profile, _ticker: loaded.ticker }), component: loaded.component, state: loaded.state, memories: loaded.memories })
}

/// The runner's profile: the componentize-py component at `component`, under `limits`.
pub(crate) fn profile(component: &Path, limits: Limits) -> Profile {
    Profile {
        runtime: Runtime::Python,
        component_name: component_name(component),
        origin: serde_json::json!("built from components/python-runner by componentize-py"),
        limits,
        image: None,
    }
}

impl RuntimeImage for PythonRuntime {
    type Exports = Runner;

    fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Instantiates the runner: nothing runs in it before its first cell,
    /// whatever it is for.
    async fn start(&self, at: Placement<'_>, _start_for: StartFor) -> wasmtime::Result<Started<Runner>> {
        // Only live frames matter on it: what else reaches it is dropped each run.
        let stdout = DrainPipe::new(RUNNER_STDOUT_KEPT);
        let mut state = GuestState::for_session(at.memory_cap, at.deadline, at.dir, at.layout, (at.datasets, at.wheelhouse), stdout.clone())?;
        state.quota = at.quota;
        let mut store = engine::new_store(self.pre.engine(), state)?;
        let handle = self.pre.instance_pre().instantiate_async(&mut store).await?;
        let exports = Runner::new(&mut store, &handle)?;
        Ok(Started { store, exports, handle, stdout })
    }

    fn starts_ahead(&self) -> bool {
        true
    }

    fn keyboard_interrupts(&self) -> bool {
        true
    }
}

impl CellExports for Runner {
    fn run_cell(&self, store: &mut Store<GuestState>, input: &wit::CellInput) -> impl Future<Output = wasmtime::Result<wit::CellOutput>> + Send {
        self.call_run_cell(store, input)
    }
}
