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

/// The runner component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("cannot read the runner component {path}: {source}")]
    ReadComponent { path: PathBuf, source: std::io::Error },
    #[error("cannot compile the runner component: {0:#}")]
    Compile(wasmtime::Error),
    #[error("cannot write the compiled artifact to {path}: {source}")]
    WriteCache { path: PathBuf, source: std::io::Error },
}

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
