//! A collection's index as read: its head from the backend, then the sealed
//! chunks the head names (one batched read), unless the head alone knows
//! every id the reader asks about (a create's fresh id, the newest
//! documents). Chunks are immutable and removed only after a newer head
//! stopped naming them, so a chunk missing means the head was superseded
//! meanwhile: read the head again.

use anypath_rest::store_keys::CollectionKeys;
use anypath_rest::stored_index::Chunk;
use anypath_rest::{Index, Layout, RestError, StoredIndex};

use crate::backend::{Backend, Snapshot};
use crate::codec::decode;
use crate::error::StoreError;

/// Heads read again when their chunks were superseded under the reader.
const MAX_HEAD_READS: usize = 16;

/// The committed index, whole, as readers must see it.
pub fn read_index(backend: &dyn Backend, keys: &CollectionKeys) -> Result<Index, StoreError> {
    Ok(read_for(backend, keys, None)?.index())
}

/// The committed index as readers must see it, for looking up `ids` (all:
/// whole). Its [`Layout::index`] is right for those ids, and may hold no others.
pub fn read_for(backend: &dyn Backend, keys: &CollectionKeys, ids: Option<&[String]>) -> Result<Layout, StoreError> {
    for _ in 0..MAX_HEAD_READS {
        if let Some(layout) = layout_for(backend, keys, backend.read_head(keys)?, ids)? {
            return Ok(layout);
        }
    }
    Err(kept_changing())
}

/// The stored index for a commit to apply a journal about `ids` to.
pub fn snapshot(backend: &dyn Backend, keys: &CollectionKeys, ids: &[String]) -> Result<Snapshot, StoreError> {
    for _ in 0..MAX_HEAD_READS {
        let (bytes, head) = backend.snapshot_head(keys)?;
        if let Some(layout) = layout_for(backend, keys, head, Some(ids))? {
            return Ok(Snapshot { bytes, layout });
        }
    }
    Err(kept_changing())
}

/// `head` alone when it knows every one of `ids`, else with its chunks;
/// none when a chunk is gone.
fn layout_for(backend: &dyn Backend, keys: &CollectionKeys, head: StoredIndex, ids: Option<&[String]>) -> Result<Option<Layout>, StoreError> {
    if head.chunks.is_empty() || ids.is_some_and(|ids| head.knows(ids.iter().map(String::as_str))) {
        return Ok(Some(Layout::head_only(head)));
    }
    with_chunks(backend, keys, head)
}

/// `head` with its chunks; none when one of them is gone.
fn with_chunks(backend: &dyn Backend, keys: &CollectionKeys, head: StoredIndex) -> Result<Option<Layout>, StoreError> {
    let chunk_keys: Vec<String> = head.chunks.iter().map(|tag| keys.document(tag)).collect();
    let mut chunks = Vec::with_capacity(chunk_keys.len());
    for value in backend.get_many(&chunk_keys)? {
        let Some(bytes) = value else { return Ok(None) };
        chunks.push(decode::<Chunk>(&bytes, "index chunk")?);
    }
    Layout::new(head, chunks).map(Some).map_err(|e| StoreError::Backend(e.to_string()))
}

fn kept_changing() -> StoreError {
    StoreError::Rest(RestError::Conflict("a collection's index kept changing while it was read; try again".into()))
}
