//! Native code for the runner component, compiled once and cached on disk
//! through the workspace's one cache ([`anypath_native_cache`]); a
//! component instrumented for state images is cached with its layout.

use std::path::Path;

use anypath_native_cache::{CacheError, deserialize, write_atomically};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::state_image::instrument::InitialMemory;
use crate::state_image::layout::Layout;

/// The runner component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Instrument(#[from] crate::state_image::InstrumentError),
    #[error("the component's memory image cannot be made: {0}")]
    Memory(String),
}

/// A component compiled with its state accessors ([`crate::state_image`]).
pub(crate) struct Instrumented {
    pub(crate) component: Component,
    pub(crate) layout: Layout,
    /// The cache key: the original component's bytes and the engine settings.
    pub(crate) key: String,
    /// Its one memory's data, moved out of it for the memory creator.
    pub(crate) initial: Option<InitialMemory>,
}

/// Loads `component_path` instrumented for state images, through the cache
/// in `cache_dir` (the compiled code and the layout beside it); instruments
/// and compiles on a miss.
pub(crate) fn load_instrumented(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Instrumented, ArtifactError> {
    let source = anypath_native_cache::Source::open(component_path, cache_dir)?;
    let key = format!("{}-{STATE_FORM}", source.key(engine));
    let cached = cache_dir.join(format!("{}-{key}.cwasm", source.stem()));
    let layout_path = cache_dir.join(format!("{}-{key}.layout.json", source.stem()));
    let memory_path = cache_dir.join(format!("{}-{key}.memory", source.stem()));
    let layout = std::fs::read(&layout_path).ok().and_then(|b| serde_json::from_slice::<Layout>(&b).ok());
    let initial = std::fs::read(&memory_path).ok().and_then(|bytes| decode_initial(&bytes));
    if let Some(layout) = layout
        && let Some(initial) = initial
        && let Some(component) = deserialize(engine, &cached)
    {
        return Ok(Instrumented { component, layout, key, initial });
    }
    tracing::info!(component = %component_path.display(), cache = %cache_dir.display(), "instrumenting for state images and compiling to native code (once; then cached)");
    let (instrumented, layout, initial) = crate::state_image::instrument::instrument(&source.into_bytes()?)?;
    let component = anypath_native_cache::compile_into(engine, &instrumented, &cached)?;
    write_atomically(&memory_path, &encode_initial(initial.as_ref()))?;
    write_atomically(&layout_path, &serde_json::to_vec(&layout).unwrap_or_default())?;
    Ok(Instrumented { component, layout, key, initial })
}

/// Leading bytes of a cached initial memory (`.memory`).
const MEMORY_MAGIC: &[u8; 8] = b"APMEMRY1";

/// An initial memory as bytes: magic, minimum (u64), then each segment's
/// offset and length (u32) and bytes; the magic alone for none.
fn encode_initial(initial: Option<&InitialMemory>) -> Vec<u8> {
    let mut bytes = MEMORY_MAGIC.to_vec();
    if let Some(initial) = initial {
        bytes.extend_from_slice(&initial.minimum_bytes.to_le_bytes());
        for (offset, data) in &initial.segments {
            bytes.extend_from_slice(&offset.to_le_bytes());
            bytes.extend_from_slice(&(data.len() as u32).to_le_bytes());
            bytes.extend_from_slice(data);
        }
    }
    bytes
}

/// [`encode_initial`]'s bytes back; `None` inside for none. A file this
/// cache did not write whole reads as `None` outside, so it is made again.
fn decode_initial(bytes: &[u8]) -> Option<Option<InitialMemory>> {
    let rest = bytes.strip_prefix(MEMORY_MAGIC)?;
    if rest.is_empty() {
        return Some(None);
    }
    let (minimum, mut rest) = rest.split_first_chunk::<8>()?;
    let mut initial = InitialMemory { minimum_bytes: u64::from_le_bytes(*minimum), segments: Vec::new() };
    while !rest.is_empty() {
        let (offset, after) = rest.split_first_chunk::<4>()?;
        let (len, after) = after.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let data = after.get(..len)?;
        initial.segments.push((u32::from_le_bytes(*offset), data.to_vec()));
        rest = &after[len..];
    }
    Some(Some(initial))
}

/// Names the instrumentation's version in cache keys and state images.
const STATE_FORM: &str = "state1";

/// Loads `component_path` through the cache in `cache_dir`, compiling on a miss.
pub fn load(engine: &Engine, component_path: &Path, cache_dir: &Path) -> Result<Component, ArtifactError> {
    Ok(anypath_native_cache::load(engine, component_path, cache_dir)?)
}
