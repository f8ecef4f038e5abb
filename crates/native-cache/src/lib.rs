//! Native code for WebAssembly components, compiled once and cached on disk.
//!
//! Compiling a component takes from a fraction of a second (a Spin app's
//! components) to seconds (the CPython runner); loading a cached artifact
//! takes milliseconds. The cache key covers the component's bytes and the
//! engine's compatibility hash, so a changed component or engine setting
//! never loads stale code. The sandbox's runtimes and the Spin host load
//! through this one cache. A component's digest is remembered by its file's
//! identity ([`Source`]), so a hit reads only the artifact.

mod source;

pub use source::Source;

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot read the component {path}: {source}")]
    ReadComponent { path: PathBuf, source: std::io::Error },
    #[error("cannot compile the component: {0:#}")]
    Compile(wasmtime::Error),
    #[error("cannot write the compiled artifact to {path}: {source}")]
    WriteCache { path: PathBuf, source: std::io::Error },
}

/// Reads the component at `path`.
pub fn read(path: &Path) -> Result<Vec<u8>, CacheError> {
    std::fs::read(path).map_err(|source| CacheError::ReadComponent { path: path.to_path_buf(), source })
}

/// Loads `component_path` through the cache in `cache_dir`, compiling on a miss.
pub fn load(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Component, CacheError> {
    let source = Source::open(component_path, cache_dir)?;
    let cached = cache_dir.join(format!("{}-{}.cwasm", source.stem(), source.key(engine)));
    if let Some(component) = deserialize(engine, &cached) {
        return Ok(component);
    }
    tracing::info!(component = %component_path.display(), cache = %cache_dir.display(), "compiling to native code (once; then cached)");
    compile_into(engine, &source.into_bytes()?, &cached)
}

/// Compiles `component` with `engine`, writes the native code to `cached`
/// and loads it from there.
pub fn compile_into(engine: &Engine, component: &[u8], cached: &Path) -> Result<Component, CacheError> {
    let compiled = engine.precompile_component(component).map_err(CacheError::Compile)?;
    write_atomically(cached, &compiled)?;
    // SAFETY: as in `deserialize`; the bytes were produced by this engine a moment ago.
    unsafe { Component::deserialize_file(engine, cached) }.map_err(CacheError::Compile)
}

/// The component compiled earlier into `cached`, if that file is there and
/// this engine can load it; an unusable file is reported and compiled again.
pub fn deserialize(engine: &Engine, cached: &Path) -> Option<Component> {
    if !cached.is_file() {
        return None;
    }
    // SAFETY: the file is one this crate wrote, named by the hash of its
    // source and of the engine configuration; wasmtime also refuses an
    // artifact from another engine or version.
    match unsafe { Component::deserialize_file(engine, cached) } {
        Ok(component) => Some(component),
        Err(error) => {
            tracing::warn!(%error, path = %cached.display(), "recompiling unusable cached artifact");
            None
        }
    }
}

/// The cache key of `component` compiled by `engine`: its bytes' digest,
/// the engine's compatibility hash and this crate's version.
pub fn key(engine: &Engine, component: &[u8]) -> String {
    key_of_digest(engine, &Sha256::digest(component).into())
}

/// [`key`] from the component's SHA-256.
fn key_of_digest(engine: &Engine, component_digest: &[u8; 32]) -> String {
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut engine_hash);
    let mut digest = Sha256::new();
    digest.update(component_digest);
    digest.update(engine_hash.finish().to_le_bytes());
    digest.update(env!("CARGO_PKG_VERSION").as_bytes());
    hex::encode(&digest.finalize()[..16])
}

/// Writes via a temporary file and rename, so concurrent loaders never see half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let fail = |source| CacheError::WriteCache { path: path.to_path_buf(), source };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: compiles in milliseconds.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).expect("an engine")
    }

    fn cwasm_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "cwasm")).collect())
            .unwrap_or_default();
        files.sort();
        files
    }

    /// A scratch directory with the component at `app.wasm`, loaded once
    /// through the cache at `cache/`: (directory, source, cache, engine).
    fn loaded_once() -> (tempfile::TempDir, PathBuf, PathBuf, Engine) {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let source = dir.path().join("app.wasm");
        std::fs::write(&source, EMPTY_COMPONENT).expect("the component is written");
        let cache = dir.path().join("cache");
        let engine = engine();
        load(&engine, &source, &cache).expect("the first load compiles");
        (dir, source, cache, engine)
    }

    #[test]
    fn a_component_is_compiled_once_then_loaded_from_the_cache() {
        let (_dir, source, cache, engine) = loaded_once();
        let first = cwasm_files(&cache);
        assert_eq!(first.len(), 1, "one artifact after the first load: {first:?}");
        let written = std::fs::metadata(&first[0]).and_then(|m| m.modified()).expect("the artifact's time");
        load(&engine, &source, &cache).expect("the second load reads the cache");
        assert_eq!(cwasm_files(&cache), first, "the second load wrote no other artifact");
        let still = std::fs::metadata(&first[0]).and_then(|m| m.modified()).expect("the artifact's time");
        assert_eq!(written, still, "the second load did not rewrite the artifact");
    }

    #[test]
    fn a_changed_component_or_engine_gets_its_own_artifact() {
        let engine = engine();
        let mut other_config = wasmtime::Config::new();
        other_config.wasm_component_model(true).consume_fuel(true);
        let other_engine = Engine::new(&other_config).expect("an engine");
        let base = key(&engine, EMPTY_COMPONENT);
        assert_ne!(base, key(&other_engine, EMPTY_COMPONENT), "another engine setting, another key");
        let mut changed = EMPTY_COMPONENT.to_vec();
        changed.extend_from_slice(b"\0\x04\x03abc");
        assert_ne!(base, key(&engine, &changed), "other bytes, another key");
    }

    #[test]
    fn a_corrupt_artifact_is_compiled_again() {
        let (_dir, source, cache, engine) = loaded_once();
        let artifact = cwasm_files(&cache).pop().expect("an artifact");
        std::fs::write(&artifact, b"not native code").expect("the artifact is overwritten");
        load(&engine, &source, &cache).expect("a corrupt artifact is compiled again");
        assert!(deserialize(&engine, &artifact).is_some(), "the artifact is whole again");
    }
}
