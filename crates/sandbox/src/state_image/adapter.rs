//! The preview-1 adapter's own state in a data runtime's memory: a
//! restore, and a shared state's mapping, keep the fresh instance's (it
//! holds host handles only that instance's handle table knows) and refuse
//! an image whose adapter allocations sit elsewhere.

use wasmtime::Store;
use wasmtime::component::Instance;

use super::access::{Access, GlobalValue};
use super::image::StateError;
use super::layout::{ADAPTER_ALLOCATION_STATE, ADAPTER_STATE_POINTER};
use crate::guest::GuestState;

/// Bytes of the adapter's state, kept from the fresh instance.
const ADAPTER_STATE_BYTES: usize = 64 * 1024;

/// The adapter's allocations as an instance's globals show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AdapterPlaces {
    state: u64,
    allocation: u64,
    stack: u64,
}

/// The preview-1 adapter's module, when the component has it, and the
/// range of the fresh instance's adapter state, which a restore keeps (it
/// holds host handles only this instance's handle table knows). Refused
/// unless the adapter's allocations sit where the `saved` globals have
/// them, or are not made yet.
pub(crate) async fn adapter_kept(access: &Access, saved: &[GlobalValue], store: &mut Store<GuestState>, instance: &Instance) -> Result<(Option<u32>, Vec<(usize, usize)>), StateError> {
    let adapter = access.globals.iter().find(|g| g.slot.name.as_deref() == Some(ADAPTER_STATE_POINTER)).map(|g| g.slot.module);
    let Some(module) = adapter else { return Ok((None, Vec::new())) };
    let (state, allocation, stack) = adapter_globals(access, module)?;
    let mut fresh = [0u64; 3];
    for (value, at) in fresh.iter_mut().zip([state, allocation, stack]) {
        *value = access.globals[at].get(&mut *store, instance).await?.0;
    }
    let fresh = AdapterPlaces { state: fresh[0], allocation: fresh[1], stack: fresh[2] };
    let value = |at: usize| saved.get(at).map(|v| v.0).ok_or_else(|| StateError::Corrupt("globals".into()));
    let saved = AdapterPlaces { state: value(state)?, allocation: value(allocation)?, stack: value(stack)? };
    let state_fits = fresh.state == 0 || fresh.state == saved.state;
    // The adapter's stack: unallocated yet, or where the image has it.
    let stack_fits = fresh.allocation == 0 || fresh.stack == saved.stack;
    if !state_fits || !stack_fits {
        return Err(StateError::AdapterMoved);
    }
    let protected = (fresh.state != 0).then(|| (fresh.state as usize, fresh.state as usize + ADAPTER_STATE_BYTES));
    Ok((adapter, protected.into_iter().collect()))
}

/// Positions in `access.globals` of the adapter's state pointer, allocation state and stack pointer.
fn adapter_globals(access: &Access, adapter: u32) -> Result<(usize, usize, usize), StateError> {
    let find = |name: &str| access.globals.iter().position(|g| g.slot.module == adapter && g.slot.name.as_deref() == Some(name));
    match (find(ADAPTER_STATE_POINTER), find(ADAPTER_ALLOCATION_STATE), find("__stack_pointer")) {
        (Some(state), Some(allocation), Some(stack)) => Ok((state, allocation, stack)),
        _ => Err(StateError::Unsupported("the preview-1 adapter's globals are not all named".into())),
    }
}

