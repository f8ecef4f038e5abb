//! Native code for the runner component, compiled once and cached on disk
//! through the workspace's one cache ([`anypath_native_cache`]); a
//! component instrumented for state images is cached with its layout.

use std::path::Path;

use anypath_native_cache::{CacheError, deserialize, write_atomically};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::state_image::layout::Layout;

/// The runner component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Instrument(#[from] crate::state_image::InstrumentError),
}

/// A component compiled with its state accessors ([`crate::state_image`]).
pub(crate) struct Instrumented {
    pub(crate) component: Component,
    pub(crate) layout: Layout,
    /// The cache key: the original component's bytes and the engine settings.
    pub(crate) key: String,
}

/// Loads `component_path` instrumented for state images, through the cache
/// in `cache_dir` (the compiled code and the layout beside it); instruments
/// and compiles on a miss.
pub(crate) fn load_instrumented(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Instrumented, ArtifactError> {
    let source = anypath_native_cache::Source::open(component_path, cache_dir)?;
    let key = format!("{}-{STATE_FORM}", source.key(engine));
    let cached = cache_dir.join(format!("{}-{key}.cwasm", source.stem()));
    let layout_path = cache_dir.join(format!("{}-{key}.layout.json", source.stem()));
    let layout = std::fs::read(&layout_path).ok().and_then(|b| serde_json::from_slice::<Layout>(&b).ok());
    if let Some(layout) = layout
        && let Some(component) = deserialize(engine, &cached)
    {
        return Ok(Instrumented { component, layout, key });
    }
    tracing::info!(component = %component_path.display(), cache = %cache_dir.display(), "instrumenting for state images and compiling to native code (once; then cached)");
    let (instrumented, layout) = crate::state_image::instrument::instrument(&source.into_bytes()?)?;
    let component = anypath_native_cache::compile_into(engine, &instrumented, &cached)?;
    write_atomically(&layout_path, &serde_json::to_vec(&layout).unwrap_or_default())?;
    Ok(Instrumented { component, layout, key })
}

/// Names the instrumentation's version in cache keys and state images.
const STATE_FORM: &str = "state1";

/// Loads `component_path` through the cache in `cache_dir`, compiling on a miss.
pub fn load(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Component, ArtifactError> {
    Ok(anypath_native_cache::load(engine, component_path, cache_dir)?)
}
