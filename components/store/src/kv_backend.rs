//! Spin key-value as the store's backend (SQLite under `spin up` and
//! `anypath up`). Keys swap one at a time here, so a commit over one
//! collection is one compare-and-swap of its index after the document values
//! are written, and a commit over several is the two-phase commit of
//! [`crate::transaction`].

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use anypath_rest::store_keys::{CollectionKeys, KeyStyle};
use anypath_rest::{RestError, StoredIndex};
use spin_sdk::wit::wasi::keyvalue::{atomics, batch, store};

use crate::backend::{Backend, Outcome, Part, Snapshot, decode_index};
use crate::clock::pause_ms;
use crate::codec::encode;
use crate::error::{StoreError, kv_failed};
use crate::transaction::{self, Locked, Transaction};

/// The key-value store label granted to the store in `spin.toml`.
const STORE_LABEL: &str = "default";
/// Locks of other transactions waited out or finished before giving up.
const MAX_SETTLE_ROUNDS: usize = 64;

/// The `default` key-value store.
pub struct KvBackend {
    bucket: store::Bucket,
    /// Document values this request wrote, so a retry writes them once and a
    /// commit that gives up removes them.
    written: RefCell<HashSet<String>>,
    /// Collections whose creation another writer's ticket won: wait for its index.
    lost_tickets: RefCell<HashSet<String>>,
    /// The compare-and-swap each commit snapshot was read through, by index
    /// key: the swap then needs no second read of the head, and nothing can
    /// land between the read a journal was applied to and the swap's own.
    snapshots: RefCell<HashMap<String, atomics::Cas>>,
}

impl KvBackend {
    pub fn open() -> Result<Self, StoreError> {
        Ok(Self {
            bucket: store::open(STORE_LABEL).map_err(kv_failed)?,
            written: RefCell::default(),
            lost_tickets: RefCell::default(),
            snapshots: RefCell::default(),
        })
    }

    /// Swaps `bytes` in where `snapshot` is stored; false when it is no longer there.
    fn swap(&self, keys: &CollectionKeys, snapshot: &Snapshot, bytes: &[u8]) -> Result<bool, StoreError> {
        let Some(expected) = &snapshot.bytes else {
            // A swap on an absent key is an upsert on Spin's SQLite store, so
            // creation goes to whoever takes the first ticket; the others wait
            // for its index to appear and then swap as usual.
            let index_key = keys.index();
            if !self.lost_tickets.borrow().contains(&index_key) && atomics::increment(&self.bucket, &keys.ticket(), 1).map_err(kv_failed)? == 1 {
                self.bucket.set(&index_key, bytes).map_err(kv_failed)?;
                return Ok(true);
            }
            self.lost_tickets.borrow_mut().insert(index_key);
            pause_ms(1);
            return Ok(false);
        };
        match self.snapshots.borrow_mut().remove(&keys.index()) {
            // It read `expected`: the snapshot is what it read last.
            Some(cas) => match atomics::swap(cas, bytes) {
                Ok(()) => Ok(true),
                Err(atomics::CasError::CasFailed(_)) => Ok(false),
                Err(atomics::CasError::StoreError(e)) => Err(kv_failed(e)),
            },
            None => transaction::swap_if(&self.bucket, &keys.index(), expected, bytes),
        }
    }

    /// Removes what earlier attempts of this commit wrote and the landed
    /// one does not name (index chunks of an older head).
    fn forget_earlier_attempts(&self, writes: &[&Part<'_>]) {
        let landed: HashSet<String> =
            writes.iter().flat_map(|part| part.write.iter().flat_map(|w| &w.documents).map(|(tag, _)| part.keys.document(tag))).collect();
        let mut written = self.written.borrow_mut();
        for key in written.iter().filter(|key| !landed.contains(*key)) {
            let _ = self.bucket.delete(key);
        }
        written.clear();
    }

    fn forget_superseded(&self, parts: &[Part<'_>]) {
        for part in parts {
            for tag in part.write.iter().flat_map(|w| &w.superseded) {
                let _ = self.bucket.delete(&part.keys.document(tag));
            }
        }
    }
}

impl Backend for KvBackend {
    fn key_style(&self) -> KeyStyle {
        KeyStyle::Plain
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.bucket.get(key).map_err(kv_failed)?)
    }

    /// One host call for all of a list's documents, not one per document.
    fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if keys.len() < 2 {
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let found: HashMap<String, Vec<u8>> = batch::get_many(&self.bucket, keys).map_err(kv_failed)?
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect();
        Ok(keys.iter().map(|key| found.get(key).cloned()).collect())
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        Ok(self.bucket.set(key, value).map_err(kv_failed)?)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        Ok(self.bucket.delete(key).map_err(kv_failed)?)
    }

    fn increment(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        Ok(atomics::increment(&self.bucket, key, delta).map_err(kv_failed)?)
    }

    fn read_head(&self, keys: &CollectionKeys) -> Result<StoredIndex, StoreError> {
        match self.bucket.get(&keys.index()).map_err(kv_failed)? {
            Some(bytes) => transaction::visible(&self.bucket, keys, decode_index(&bytes)?),
            None => Ok(StoredIndex::default()),
        }
    }

    fn snapshot_head(&self, keys: &CollectionKeys) -> Result<(Option<Vec<u8>>, StoredIndex), StoreError> {
        let index_key = keys.index();
        for _ in 0..MAX_SETTLE_ROUNDS {
            let cas = atomics::Cas::new(&self.bucket, &index_key).map_err(kv_failed)?;
            let Some(bytes) = cas.current().map_err(kv_failed)? else {
                self.snapshots.borrow_mut().remove(&index_key);
                return Ok((None, StoredIndex::default()));
            };
            let head = decode_index(&bytes)?;
            if head.lock.is_none() {
                self.snapshots.borrow_mut().insert(index_key, cas);
                return Ok((Some(bytes), head));
            }
            transaction::settle(&self.bucket, keys, &bytes, &head)?;
        }
        Err(StoreError::Rest(RestError::Conflict("a collection stayed locked by another commit; try again".into())))
    }

    fn commit(&self, parts: &[Part<'_>]) -> Result<Outcome, StoreError> {
        // Reads are compared here, writes by their swaps below.
        for part in parts.iter().filter(|p| p.write.is_none()) {
            if self.bucket.get(&part.keys.index()).map_err(kv_failed)? != part.snapshot.bytes {
                return Ok(Outcome::Changed);
            }
        }
        let writes: Vec<&Part<'_>> = parts.iter().filter(|p| p.write.is_some()).collect();
        let mut values: Vec<(String, Vec<u8>)> = Vec::new();
        for part in &writes {
            for (tag, bytes) in part.write.iter().flat_map(|w| &w.documents) {
                let key = part.keys.document(tag);
                if !self.written.borrow().contains(&key) {
                    values.push((key, bytes.clone()));
                }
            }
        }
        // Several values in one batch: one durable transaction on Spin's SQLite store, not one each.
        match values.as_slice() {
            [] => {}
            [(key, bytes)] => self.bucket.set(key, bytes).map_err(kv_failed)?,
            _ => batch::set_many(&self.bucket, &values).map_err(kv_failed)?,
        }
        self.written.borrow_mut().extend(values.into_iter().map(|(key, _)| key));
        let committed = match writes.as_slice() {
            [] => true,
            [part] => match &part.write {
                Some(write) => self.swap(part.keys, &part.snapshot, &encode(&write.next)?)?,
                None => true,
            },
            _ => self.commit_many(&writes)?,
        };
        if !committed {
            return Ok(Outcome::Changed);
        }
        self.forget_superseded(parts);
        self.forget_earlier_attempts(&writes);
        Ok(Outcome::Committed)
    }

    fn discard(&self, _parts: &[Part<'_>]) {
        for key in self.written.borrow_mut().drain() {
            let _ = self.bucket.delete(&key);
        }
    }
}

impl KvBackend {
    /// Locks every written collection in order, then decides.
    fn commit_many(&self, writes: &[&Part<'_>]) -> Result<bool, StoreError> {
        let mut tx = Transaction::begin(&self.bucket, writes[0].keys)?;
        for part in writes {
            let Some(write) = &part.write else { continue };
            let bytes = encode(&tx.lock(&part.snapshot.layout.head, write.next.clone()))?;
            match self.swap(part.keys, &part.snapshot, &bytes) {
                Ok(true) => tx.locked.push(Locked { keys: part.keys.clone(), bytes, before: part.snapshot.layout.head.clone() }),
                Ok(false) => {
                    tx.abort(&self.bucket)?;
                    return Ok(false);
                }
                Err(e) => {
                    let _ = tx.abort(&self.bucket);
                    return Err(e);
                }
            }
        }
        tx.commit(&self.bucket)
    }
}
