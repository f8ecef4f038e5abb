//! `POST /load`: what a plan needs from each collection (some ids or
//! everything), with the tag of each document for the commit's read check,
//! and a reserved id when the plan creates one.

use std::collections::BTreeMap;

use anypath_rest::store_keys::CollectionKeys;
use anypath_rest::{Index, RestError};
use anypath_wire::{Documents, LoadAnswer, LoadRequest, LoadSpec, Loaded, LoadedCollection};

use crate::backend::Backend;
use crate::codec::{decode, encode};
use crate::error::StoreError;
use crate::indexes;

/// Loads retried when a document value vanished under a concurrent commit.
const MAX_LOAD_ATTEMPTS: usize = 8;

/// The requested collections (`LoadAnswer`).
pub fn load(backend: &dyn Backend, request: LoadRequest) -> Result<Vec<u8>, StoreError> {
    encode(&LoadAnswer { collections: load_collections(backend, &request.tenant, request.collections)? })
}

/// Each collection of `specs`, in order.
pub fn load_collections(backend: &dyn Backend, tenant: &str, specs: Vec<LoadSpec>) -> Result<Vec<LoadedCollection>, StoreError> {
    let mut loaded = Vec::with_capacity(specs.len());
    for spec in specs {
        let keys = CollectionKeys::new(tenant, &spec.name, backend.key_style())?;
        loaded.push(load_one(backend, &keys, spec)?);
    }
    Ok(loaded)
}

fn load_one(backend: &dyn Backend, keys: &CollectionKeys, spec: LoadSpec) -> Result<LoadedCollection, StoreError> {
    for _ in 0..MAX_LOAD_ATTEMPTS {
        let index = indexes::read_for(backend, keys, spec.ids.as_deref())?.index();
        let wanted: Vec<String> = match &spec.ids {
            Some(ids) => ids.clone(),
            None => index.docs.keys().cloned().collect(),
        };
        let (mut documents, mut absent_ids, mut tags) = (Vec::with_capacity(wanted.len()), Vec::new(), BTreeMap::new());
        let mut present = Vec::with_capacity(wanted.len());
        for id in wanted {
            match index.docs.get(&id) {
                Some(tag) => present.push((id, tag.clone())),
                None => absent_ids.push(id),
            }
        }
        let document_keys: Vec<String> = present.iter().map(|(_, tag)| keys.document(tag)).collect();
        let values = backend.get_many(&document_keys)?;
        // A value superseded by a commit after the index was read: read again.
        if values.iter().any(Option::is_none) {
            continue;
        }
        for ((id, tag), bytes) in present.into_iter().zip(values.into_iter().flatten()) {
            documents.push(decode(&bytes, "document")?);
            tags.insert(id, tag);
        }
        let reserved_id = if spec.reserve_id { Some(reserve_id(backend, keys, &index)?) } else { None };
        let collection =
            Loaded { name: spec.name.clone(), documents: Documents::Parsed(documents), complete: spec.ids.is_none(), absent_ids, reserved_id };
        return Ok(LoadedCollection { collection, version: index.version, tags });
    }
    Err(StoreError::Rest(RestError::Conflict(format!("{} kept changing while it was read", spec.name))))
}

/// A fresh integer id above every stored one: an atomic increment, so
/// concurrent creates never share an id and never need to re-run.
fn reserve_id(backend: &dyn Backend, keys: &CollectionKeys, index: &Index) -> Result<i64, StoreError> {
    let counter = keys.next_id();
    let id = backend.increment(&counter, 1)?;
    if id > index.max_int_id {
        return Ok(id);
    }
    // A client-chosen id moved the highest past the counter: jump over it.
    backend.increment(&counter, index.max_int_id - id + 1)
}
