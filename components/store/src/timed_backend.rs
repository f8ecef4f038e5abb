//! A backend whose calls are timed, by kind, for the store's
//! `Server-Timing` answer: what a request spent reading, reserving ids,
//! writing and committing, beside the handler's whole time (the rest is
//! JSON and the data operations themselves).

use std::cell::RefCell;
use std::time::Instant;

use anypath_rest::StoredIndex;
use anypath_rest::store_keys::{CollectionKeys, KeyStyle};

use crate::backend::{Backend, Outcome, Part};
use crate::error::StoreError;

std::thread_local! {
    /// Milliseconds per kind of backend call in this request.
    static SPENT: RefCell<Vec<(&'static str, f64)>> = const { RefCell::new(Vec::new()) };
}

/// The `Server-Timing` entries of the backend calls so far, taken.
pub fn take_entries() -> String {
    SPENT.with(|spent| std::mem::take(&mut *spent.borrow_mut()))
        .iter()
        .map(|(name, ms)| format!(", {name};dur={ms:.2}"))
        .collect()
}

fn timed<T>(kind: &'static str, call: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let value = call();
    let ms = started.elapsed().as_secs_f64() * 1e3;
    SPENT.with(|spent| {
        let mut spent = spent.borrow_mut();
        match spent.iter_mut().find(|(name, _)| *name == kind) {
            Some((_, total)) => *total += ms,
            None => spent.push((kind, ms)),
        }
    });
    value
}

/// Times every call of the backend it wraps.
pub struct Timed(pub Box<dyn Backend>);

/// The kinds, as the gateway passes them on.
const READ: &str = "store-read";
const IDS: &str = "store-ids";
const WRITE: &str = "store-write";
const COMMIT: &str = "store-commit";

impl Backend for Timed {
    fn key_style(&self) -> KeyStyle {
        self.0.key_style()
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        timed(READ, || self.0.get(key))
    }

    fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        timed(READ, || self.0.get_many(keys))
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        timed(WRITE, || self.0.set(key, value))
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        timed(WRITE, || self.0.delete(key))
    }

    fn increment(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        timed(IDS, || self.0.increment(key, delta))
    }

    fn read_head(&self, keys: &CollectionKeys) -> Result<StoredIndex, StoreError> {
        timed(READ, || self.0.read_head(keys))
    }

    fn snapshot_head(&self, keys: &CollectionKeys) -> Result<(Option<Vec<u8>>, StoredIndex), StoreError> {
        timed(READ, || self.0.snapshot_head(keys))
    }

    fn commit(&self, parts: &[Part<'_>]) -> Result<Outcome, StoreError> {
        timed(COMMIT, || self.0.commit(parts))
    }

    fn discard(&self, parts: &[Part<'_>]) {
        timed(COMMIT, || self.0.discard(parts))
    }
}
