//! A session's state captured once and shared by every instance started
//! from it: a fork's children and a snapshot's sandboxes map its memory
//! copy-on-write instead of restoring its image.
//!
//! Freezing a capture writes the memory's bytes where they differ from the
//! runtime's initial image (the capture's chunks, and the pages the runtime
//! writes as it starts) into a sealed `memfd`, an overlay over that image
//! ([`Frozen::over`]). An instance takes the state by starting as usual,
//! taking its host handles in its first call (so that they exist under the
//! numbers the state holds), and having its memory
//! mapped onto the overlay ([`CowMemories::remap`]): a few system calls
//! instead of writing every chunk. It then owns only the pages it writes.
//! The adapter's state page, which holds the fresh instance's host handles,
//! is written back over the mapping, and the globals are set, as a restore
//! sets them.
//!
//! The image stays the state's portable form: it is what a hibernation, a
//! hand-over or another host keeps. An instance mapped on a shared state
//! captures itself against the baseline like any other, comparing the
//! pages it wrote and the pages where the state differs from the baseline.

use std::io;
use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::Instance;

use super::access::{Access, GlobalValue};
use super::adapter::adapter_kept;
use super::image::{Baseline, Captured, StateError};
use super::ranges::{merged, union};
use crate::cow::{CowMemories, Frozen};
use crate::guest::GuestState;

const PAGE: usize = 4096;
const WASM_PAGE: usize = 64 * 1024;
/// The most separate ranges an overlay holds: every range is two more
/// mappings under each instance started from it, and a process may hold
/// only so many (65,530 by default), so nearby ranges are joined with the
/// bytes between them.
const MAX_REGIONS: usize = 16;

/// A captured state: its image, and where the runtime's memory is the
/// host's, that memory frozen for instances to map. Cheap to share.
pub struct SharedState {
    image: Arc<[u8]>,
    mapped: Option<Arc<MappedState>>,
}

impl SharedState {
    /// A state known only by its image: instances restore it.
    pub(crate) fn image_only(image: Arc<[u8]>) -> Self {
        Self { image, mapped: None }
    }

    /// The state's image, as a capture made it.
    pub fn image(&self) -> &Arc<[u8]> {
        &self.image
    }

    /// Whether instances take the state by mapping its frozen memory.
    pub fn is_mapped(&self) -> bool {
        self.mapped.is_some()
    }

    /// Bytes of memory the frozen state holds (its overlay's pages).
    pub fn frozen_bytes(&self) -> u64 {
        self.mapped.as_ref().map_or(0, |m| m.regions_bytes)
    }

    pub(crate) fn mapped(&self) -> Option<&Arc<MappedState>> {
        self.mapped.as_ref()
    }
}

/// A state's memory frozen as an overlay, with what else an instance
/// needs to take it.
pub(crate) struct MappedState {
    /// The component and baseline the state belongs to.
    component: String,
    baseline: String,
    memory: Arc<Frozen>,
    pages: u32,
    globals: Vec<GlobalValue>,
    /// Where the state's memory differs from the baseline.
    pub(crate) differs: Vec<(usize, usize)>,
    closed_files: Vec<String>,
    regions_bytes: u64,
}

impl MappedState {
    /// The bytes an instance mapped on this state reads at `start..end`
    /// (inside one page) before it writes there.
    pub(crate) fn page_bytes(&self, start: usize, end: usize) -> Option<&[u8]> {
        self.memory.page_bytes(start, end)
    }
}

/// Freezes `captured`, read from `memory` (the instance's one memory, not
/// changed since): an overlay over `initial`, the runtime's initial image.
pub(crate) fn freeze(component: &str, baseline: &Baseline, initial: &Arc<Frozen>, captured: &Captured, memory: &[u8], image: Arc<[u8]>) -> io::Result<SharedState> {
    let (Some(differs), Some(at_start)) = (captured.runs.first(), baseline.written_at_start.first()) else {
        return Ok(SharedState::image_only(image));
    };
    let covered = merged(union(differs, at_start).into_iter().map(|(start, end)| (start / PAGE * PAGE, end.next_multiple_of(PAGE).min(memory.len()))));
    let regions = joined(covered, MAX_REGIONS);
    let regions_bytes = regions.iter().map(|(start, end)| (end - start) as u64).sum();
    let frozen = Frozen::over(initial.clone(), memory, regions)?;
    let mapped = MappedState {
        component: component.to_owned(),
        baseline: baseline.hash.clone(),
        memory: frozen,
        pages: (memory.len() / WASM_PAGE) as u32,
        globals: captured.globals.clone(),
        differs: differs.clone(),
        closed_files: captured.closed_files.clone(),
        regions_bytes,
    };
    Ok(SharedState { image, mapped: Some(Arc::new(mapped)) })
}

/// Has `instance` (just started, past its prologue, of the component the
/// state was captured from) take `state` by mapping its memory onto the
/// frozen overlay: the files closed when it was captured.
pub(crate) async fn map(
    access: &Access,
    component: &str,
    baseline: &Baseline,
    memories: &CowMemories,
    state: &MappedState,
    store: &mut Store<GuestState>,
    instance: &Instance,
) -> Result<Vec<String>, StateError> {
    if state.component != component || state.baseline != baseline.hash {
        return Err(StateError::OtherBuild(format!("a shared state of {}, runtime {component}", state.component)));
    }
    let [memory] = access.memories.as_slice() else {
        return Err(StateError::Unsupported("only a runtime with one memory maps shared states".into()));
    };
    if state.globals.len() != access.globals.len() {
        return Err(StateError::Corrupt("the shared state's globals".into()));
    }
    let current = (memory.read(store, instance).await?.len() / WASM_PAGE) as u32;
    if current > state.pages {
        return Err(StateError::Corrupt(format!("the state's memory ({} pages) is smaller than a fresh instance's ({current})", state.pages)));
    }
    if state.pages > current && !memory.grow(store, instance, state.pages - current).await? {
        return Err(StateError::Instance(wasmtime::format_err!("memory cannot grow to the state's {} pages", state.pages)));
    }
    let (adapter, protected) = adapter_kept(access, &state.globals, store, instance).await?;
    let (base, kept) = {
        let bytes = memory.read(store, instance).await?;
        let kept: Vec<(usize, Vec<u8>)> = protected.iter().filter_map(|&(start, end)| Some((start, bytes.get(start..end)?.to_vec()))).collect();
        (bytes.as_ptr(), kept)
    };
    // SAFETY: between calls into the instance, with no slice of its memory
    // held (`kept` is a copy): nothing reads or writes it meanwhile.
    unsafe { memories.remap(base, state.memory.clone()) }.map_err(|e| StateError::Unsupported(format!("mapping the shared state: {e}")))?;
    for (start, bytes) in kept {
        memory.write(store, instance, start as u32, &bytes).await?;
    }
    for (global, value) in access.globals.iter().zip(&state.globals) {
        if Some(global.slot.module) != adapter {
            global.set(&mut *store, instance, *value).await?;
        }
    }
    Ok(state.closed_files.clone())
}

/// `ranges` (ascending, disjoint) as at most `most` ranges, joining the
/// ones with the smallest gaps between them first.
fn joined(mut ranges: Vec<(usize, usize)>, most: usize) -> Vec<(usize, usize)> {
    while ranges.len() > most.max(1) {
        let smallest = (1..ranges.len()).min_by_key(|&i| ranges[i].0 - ranges[i - 1].1).unwrap_or(1);
        ranges[smallest - 1].1 = ranges[smallest].1;
        ranges.remove(smallest);
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_joined_across_the_smallest_gaps_first() {
        let ranges = vec![(0, 10), (12, 20), (100, 110), (111, 120), (500, 510)];
        assert_eq!(joined(ranges.clone(), 5), ranges);
        assert_eq!(joined(ranges.clone(), 4), vec![(0, 10), (12, 20), (100, 120), (500, 510)]);
        assert_eq!(joined(ranges.clone(), 2), vec![(0, 120), (500, 510)]);
        assert_eq!(joined(ranges, 1), vec![(0, 510)]);
    }
}
