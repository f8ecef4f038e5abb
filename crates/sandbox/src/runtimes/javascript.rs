//! The `javascript` runtime: QuickJS (by rquickjs, built from
//! `components/javascript`) as a component, instrumented for state images
//! as the `python` runtime is; a cell is one call of its `run-cell` export,
//! and the engine's heap, with every top-level declaration, lives in the
//! instance's linear memory from cell to cell.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anypath_wire::Runtime;
use wasmtime::{Store, StoreContextMut};

use super::LoadedRuntime;
use crate::bindings::anypath::runner::types as wit;
use crate::drain_pipe::DrainPipe;
use crate::engine::{self, EpochTicker, StartError};
use crate::guest::GuestState;
use crate::interrupt::Interrupt;
use crate::limits::Limits;
use crate::profile::{Profile, component_name};
use crate::seam::{CellExports, Placement, RuntimeImage, StartFor, Started};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "javascript",
        exports: { default: async },
        with: { "anypath:runner/types": crate::bindings::anypath::runner::types },
    });
}

pub(crate) use bindings::{Javascript, JavascriptPre};

/// Bytes its stdout keeps between runs: the cell code captures `console`,
/// so only the first call's claiming byte and live frames reach it.
const STDOUT_KEPT: usize = 64 << 10;

/// How to start the `javascript` runtime.
#[derive(Debug, Clone)]
pub struct JavascriptConfig {
    /// The component `cargo xtask build` makes (`target/javascript/javascript.wasm`).
    pub component: PathBuf,
    /// Where compiled artifacts are cached.
    pub cache_dir: PathBuf,
    /// Limits every run starts from.
    pub limits: Limits,
}

impl JavascriptConfig {
    /// The component at `component`, caching next to it, with the default limits.
    pub fn new(component: impl Into<PathBuf>) -> Self {
        let component = component.into();
        let cache_dir = component.parent().map(|p| p.join("cache")).unwrap_or_else(|| PathBuf::from("cache"));
        Self { component, cache_dir, limits: Limits::default() }
    }
}

/// The JavaScript component, pre-linked for sessions.
struct JavascriptRuntime {
    pre: JavascriptPre<GuestState>,
    profile: Profile,
    _ticker: EpochTicker,
}

/// Loads (or instruments, compiles and caches) the JavaScript component.
pub(crate) async fn load(config: &JavascriptConfig) -> Result<LoadedRuntime, StartError> {
    let mut loaded = engine::load(engine::session_engine_config(false), &config.component, &config.cache_dir, &config.limits, engine::Form::WithStateAccess).await?;
    // The engine's question while a cell runs: whether the run's interrupt was raised.
    loaded
        .linker
        .root()
        .func_wrap("interrupted", |cx: StoreContextMut<'_, GuestState>, (): ()| Ok((cx.data().interrupt.as_ref().is_some_and(Interrupt::is_interrupted),)))
        .map_err(StartError::Link)?;
    let pre = loaded.linker.instantiate_pre(&loaded.component).map_err(StartError::Link)?;
    let pre = JavascriptPre::new(pre).map_err(StartError::Link)?;
    let profile = profile(&config.component, config.limits);
    Ok(LoadedRuntime { image: Arc::new(JavascriptRuntime { pre, profile, _ticker: loaded.ticker }), component: loaded.component, state: loaded.state, memories: loaded.memories })
}

fn profile(component: &Path, limits: Limits) -> Profile {
    Profile {
        runtime: Runtime::Javascript,
        component_name: component_name(component),
        origin: serde_json::json!("built from components/javascript (QuickJS by rquickjs)"),
        limits,
        image: None,
    }
}

impl RuntimeImage for JavascriptRuntime {
    type Exports = Javascript;

    fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Instantiates the component: nothing runs in it before its first
    /// call, whatever it is for.
    async fn start(&self, at: Placement<'_>, _start_for: StartFor) -> wasmtime::Result<Started<Javascript>> {
        let stdout = DrainPipe::new(STDOUT_KEPT);
        let mut state = GuestState::for_session(at.memory_cap, at.deadline, at.dir, at.layout, (at.datasets, at.wheelhouse), stdout.clone())?;
        state.quota = at.quota;
        // The engine asks the host whether to stop (the `interrupted`
        // import); the cell then ends with an `Interrupted` error, its state kept.
        state.stops_itself = true;
        let mut store = engine::new_store(self.pre.engine(), state)?;
        let handle = self.pre.instance_pre().instantiate_async(&mut store).await?;
        let exports = Javascript::new(&mut store, &handle)?;
        Ok(Started { store, exports, handle, stdout })
    }

    /// Its first call enters the working directory itself (`/home/user`
    /// where the tree has one, else `/mnt/data`): there is no Python to run
    /// the layout's set-up cell.
    fn enters_layout_at_start(&self) -> bool {
        true
    }

    /// No CPython signal state: an interrupt reaches QuickJS through the
    /// `interrupted` import instead (its instances stop a cell themselves:
    /// `GuestState::stops_itself`, set in [`Self::start`]).
    fn keyboard_interrupts(&self) -> bool {
        false
    }

    /// Making QuickJS's runtime, context and globals is most of a first
    /// cell (about 8 ms): done once, in a template new sessions map.
    fn starts_from_template(&self) -> bool {
        true
    }
}

impl CellExports for Javascript {
    fn run_cell(&self, store: &mut Store<GuestState>, input: &wit::CellInput) -> impl Future<Output = wasmtime::Result<wit::CellOutput>> + Send {
        self.call_run_cell(store, input)
    }
}
