//! Native code for the runner component, compiled once and cached on disk.
//!
//! Compiling the CPython component takes seconds; loading a cached artifact
//! takes milliseconds. The cache key covers the component bytes and the
//! engine's compatibility hash, so a changed component or engine setting
//! never loads stale code.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::state_image::layout::Layout;

/// The runner component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("cannot read the runner component {path}: {source}")]
    ReadComponent { path: PathBuf, source: std::io::Error },
    #[error("cannot compile the runner component: {0:#}")]
    Compile(wasmtime::Error),
    #[error("cannot write the compiled artifact to {path}: {source}")]
    WriteCache { path: PathBuf, source: std::io::Error },
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
    let bytes = std::fs::read(component_path).map_err(|source| ArtifactError::ReadComponent {
        path: component_path.to_path_buf(),
        source,
    })?;
    let stem = component_path.file_stem().and_then(|s| s.to_str()).unwrap_or("component");
    let key = format!("{}-{STATE_FORM}", cache_key(engine, &bytes));
    let cached = cache_dir.join(format!("{stem}-{key}.cwasm"));
    let layout_path = cache_dir.join(format!("{stem}-{key}.layout.json"));
    let layout = std::fs::read(&layout_path).ok().and_then(|b| serde_json::from_slice::<Layout>(&b).ok());
    if let Some(layout) = layout
        && cached.is_file()
    {
        // SAFETY: as in `load`: a file this module wrote, named by its source's and engine's hash.
        match unsafe { Component::deserialize_file(engine, &cached) } {
            Ok(component) => return Ok(Instrumented { component, layout, key }),
            Err(error) => tracing::warn!(%error, path = %cached.display(), "recompiling unusable cached artifact"),
        }
    }
    tracing::info!(component = %component_path.display(), cache = %cache_dir.display(), "instrumenting for state images and compiling to native code (once; then cached)");
    let (instrumented, layout) = crate::state_image::instrument::instrument(&bytes)?;
    let compiled = engine.precompile_component(&instrumented).map_err(ArtifactError::Compile)?;
    write_atomically(&cached, &compiled)?;
    write_atomically(&layout_path, &serde_json::to_vec(&layout).unwrap_or_default())?;
    // SAFETY: as above; the bytes were produced by this engine a moment ago.
    let component = unsafe { Component::deserialize_file(engine, &cached) }.map_err(ArtifactError::Compile)?;
    Ok(Instrumented { component, layout, key })
}

/// Names the instrumentation's version in cache keys and state images.
const STATE_FORM: &str = "state1";

/// Loads `component_path` through the cache in `cache_dir`, compiling on a miss.
pub fn load(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Component, ArtifactError> {
    let bytes = std::fs::read(component_path).map_err(|source| ArtifactError::ReadComponent {
        path: component_path.to_path_buf(),
        source,
    })?;
    let stem = component_path.file_stem().and_then(|s| s.to_str()).unwrap_or("component");
    let cached = cache_dir.join(format!("{stem}-{}.cwasm", cache_key(engine, &bytes)));
    if cached.is_file() {
        // SAFETY: the file is one this module wrote, named by the hash of its source and of
        // the engine configuration; wasmtime also refuses an artifact from another engine.
        match unsafe { Component::deserialize_file(engine, &cached) } {
            Ok(component) => return Ok(component),
            Err(error) => tracing::warn!(%error, path = %cached.display(), "recompiling unusable cached artifact"),
        }
    }
    tracing::info!(component = %component_path.display(), cache = %cache_dir.display(), "compiling to native code (once; then cached)");
    let compiled = engine.precompile_component(&bytes).map_err(ArtifactError::Compile)?;
    write_atomically(&cached, &compiled)?;
    // SAFETY: as above; the bytes were produced by this engine a moment ago.
    unsafe { Component::deserialize_file(engine, &cached) }.map_err(ArtifactError::Compile)
}

fn cache_key(engine: &Engine, component: &[u8]) -> String {
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    let mut digest = Sha256::new();
    digest.update(component);
    digest.update(engine_hash.finish().to_le_bytes());
    digest.update(env!("CARGO_PKG_VERSION").as_bytes());
    hex::encode(&digest.finalize()[..16])
}

/// Writes via a temporary file and rename, so concurrent loaders never see half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    let fail = |source| ArtifactError::WriteCache { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let temp = dir.join(format!(".{}.{}.tmp", std::process::id(), unique_suffix()));
    std::fs::write(&temp, bytes).map_err(fail)?;
    std::fs::rename(&temp, path).map_err(fail)
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    COUNTER.fetch_add(1, Ordering::Relaxed)
}
