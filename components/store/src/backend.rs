//! What the store needs from where it keeps data. Two implementations: Spin
//! key-value ([`crate::kv_backend`], the embedded default) and Redis through
//! Spin's outbound Redis interface ([`crate::redis_backend`]). Loads, the
//! read checks and the journal's application are written once, against this
//! trait ([`crate::commit`], [`crate::load`]); a backend only decides how an
//! index swap over one or several collections is made atomic.

use anypath_rest::store_keys::{CollectionKeys, KeyStyle};
use anypath_rest::{Layout, StoredIndex};

use crate::codec::decode;
use crate::error::StoreError;

/// A collection's index as a commit found it.
pub struct Snapshot {
    /// The stored head value exactly (none: the collection does not exist yet).
    pub bytes: Option<Vec<u8>>,
    /// The committed state in it, its chunks read.
    pub layout: Layout,
}

/// One collection's part in a commit.
pub struct Part<'a> {
    pub keys: &'a CollectionKeys,
    /// What the journal was applied to; the commit holds only while it is still stored.
    pub snapshot: Snapshot,
    /// The new state; none for a collection the block only read.
    pub write: Option<IndexWrite>,
}

/// The new state of a collection a journal changes.
pub struct IndexWrite {
    /// The head to swap in.
    pub next: StoredIndex,
    /// The new document values and index chunks, by tag.
    pub documents: Vec<(String, Vec<u8>)>,
    /// Tags of values the new index no longer names.
    pub superseded: Vec<String>,
}

/// How a commit attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every part landed, all at once.
    Committed,
    /// Some index is no longer its snapshot; nothing landed. Read again and retry.
    Changed,
}

/// A place to keep a store's values.
pub trait Backend {
    /// How tenant keys are spelled here.
    fn key_style(&self) -> KeyStyle;

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Several values in one go (one round trip where the backend allows).
    fn get_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;

    fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Adds `delta` to a counter (absent: 0) and answers the new value, atomically.
    fn increment(&self, key: &str, delta: i64) -> Result<i64, StoreError>;

    /// The committed index head as readers must see it (its chunks are
    /// read by [`crate::indexes`]).
    fn read_head(&self, keys: &CollectionKeys) -> Result<StoredIndex, StoreError>;

    /// The stored head and its bytes, for a commit to apply a journal to
    /// (finishing or waiting out whatever another commit left on it).
    fn snapshot_head(&self, keys: &CollectionKeys) -> Result<(Option<Vec<u8>>, StoredIndex), StoreError>;

    /// Makes every part's write land, and each read still hold, atomically:
    /// all of it when every index is still its snapshot, none of it otherwise.
    fn commit(&self, parts: &[Part<'_>]) -> Result<Outcome, StoreError>;

    /// Removes values a commit wrote but no index names (the commit gave up).
    fn discard(&self, parts: &[Part<'_>]);
}

/// Decodes an index head.
pub fn decode_index(bytes: &[u8]) -> Result<StoredIndex, StoreError> {
    decode(bytes, "index")
}
