//! `POST /commit`: a block's journal lands whole or not at all. Written once
//! for every backend: read each collection's index, re-check what the block
//! read, apply the journal, and hand the backend the new indexes and values
//! to make atomic; when an index moved in between (another commit landed),
//! read again and retry, so no concurrent update is lost and unrelated ones
//! do not conflict.

use anypath_rest::RestError;
use anypath_rest::journal::{MutationRecord, id_key};
use anypath_rest::store_keys::CollectionKeys;
use anypath_wire::{Change, CommitAnswer, CommitRequest};

use crate::backend::{Backend, IndexWrite, Outcome, Part};
use crate::codec::encode;
use crate::error::StoreError;
use crate::indexes;

/// Commit attempts while other commits keep landing in between.
const MAX_COMMIT_ATTEMPTS: usize = 64;

/// Lands `request`'s changes whole, answering the new versions (`CommitAnswer`);
/// a 409 when what a change read no longer holds.
pub fn commit(backend: &dyn Backend, request: CommitRequest) -> Result<Vec<u8>, StoreError> {
    let mut work = Vec::with_capacity(request.changes.len());
    for change in request.changes {
        let keys = CollectionKeys::new(&request.tenant, &change.name, backend.key_style())?;
        if change.mutations.iter().any(|m| m.collection != change.name) {
            return Err(RestError::BadRequest("a change may only hold mutations of its own collection".into()).into());
        }
        work.push((keys, change));
    }
    // One order for every committer, so multi-collection commits cannot deadlock.
    work.sort_by(|(_, a), (_, b)| a.name.cmp(&b.name));
    let prefix = tag_prefix();
    let mut last = Vec::new();
    for _ in 0..MAX_COMMIT_ATTEMPTS {
        let parts = match prepare(backend, &work, &prefix) {
            Ok(parts) => parts,
            Err(e) => {
                backend.discard(&last);
                return Err(e);
            }
        };
        match backend.commit(&parts) {
            Ok(Outcome::Committed) => {
                let mut answer = CommitAnswer::default();
                for ((_, change), part) in work.iter().zip(&parts) {
                    if let Some(write) = &part.write {
                        answer.versions.insert(change.name.clone(), write.next.version);
                    }
                }
                return encode(&answer);
            }
            Ok(Outcome::Changed) => last = parts,
            Err(e) => {
                backend.discard(&parts);
                return Err(e);
            }
        }
    }
    backend.discard(&last);
    Err(StoreError::Rest(RestError::Conflict("the collections are too busy to commit to; try again".into())))
}

/// Every collection's part against its current index; a conflict when what
/// the block read has changed.
fn prepare<'a>(backend: &dyn Backend, work: &'a [(CollectionKeys, Change)], prefix: &str) -> Result<Vec<Part<'a>>, StoreError> {
    let mut parts = Vec::with_capacity(work.len());
    for (keys, change) in work {
        let snapshot = indexes::snapshot(backend, keys, &ids_of(change))?;
        let index = snapshot.layout.index();
        index.check(&change.name, &change.check)?;
        let write = if change.mutations.is_empty() {
            None
        } else {
            let entries: Vec<&MutationRecord> = change.mutations.iter().collect();
            let applied = index.apply(&entries, prefix)?;
            let stored = snapshot.layout.restore(&applied.index, prefix);
            let mut documents = applied.writes.iter().map(|(tag, doc)| Ok((tag.clone(), encode(doc)?))).collect::<Result<Vec<_>, StoreError>>()?;
            for (tag, chunk) in &stored.chunks {
                documents.push((tag.clone(), encode(chunk)?));
            }
            let superseded = applied.superseded.into_iter().chain(stored.superseded).collect();
            Some(IndexWrite { next: stored.head, documents, superseded })
        };
        parts.push(Part { keys, snapshot, write });
    }
    Ok(parts)
}

/// Every id a change writes or depends on (a scan depends on the version alone).
fn ids_of(change: &Change) -> Vec<String> {
    let written = change.mutations.iter().map(|m| id_key(&m.id).unwrap_or_default());
    written.chain(change.check.reads.keys().cloned()).collect()
}

/// A random prefix for the tags of the document values one commit writes;
/// kept across its attempts, so a retry writes the same values.
fn tag_prefix() -> String {
    format!("{:016x}", wasi::random::random::get_random_u64())
}
