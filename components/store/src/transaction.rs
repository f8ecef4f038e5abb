//! Commits of a journal over several collections, all or nothing.
//!
//! Key-value stores swap one key at a time, so such a commit is a two-phase
//! commit with the decision in a key of its own. The committer writes the
//! decision `pending`, then locks each collection's index in name order (the
//! lock carries the index to come), then swaps the decision to `commit`
//! (the commit point: a swap on an existing key is strict on every Spin
//! store), then replaces each lock by its index. Until the decision says
//! `commit`, readers see every collection as it was; after, as it will be.
//! A lock whose transaction is pending for longer than `LOCK_TIMEOUT_MS`
//! may be aborted by anyone (the same strict swap, so the committer and an
//! aborter can never both win); whoever meets a decided lock finishes it.

use anypath_rest::store_keys::CollectionKeys;
use anypath_rest::{Lock, StoredIndex};
use spin_sdk::wit::wasi::keyvalue::{atomics, store};

use crate::clock::{now_ms, pause_ms};
use crate::codec::{decode, encode};
use crate::error::{StoreError, kv_failed};

/// How long a transaction may hold its locks before others may abort it.
const LOCK_TIMEOUT_MS: u64 = 10_000;

const PENDING: &[u8] = b"pending";
const COMMIT: &[u8] = b"commit";
const ABORT: &[u8] = b"abort";

/// What a transaction's decision key says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Pending,
    Commit,
    /// Aborted, or gone (a transaction deletes its key only once no lock of
    /// it is left, so a lock without a decision was abandoned before it).
    Abort,
}

/// What transaction `tx`'s decision key says now.
pub fn decision(bucket: &store::Bucket, keys: &CollectionKeys, tx: &str) -> Result<Decision, StoreError> {
    Ok(match bucket.get(&keys.transaction(tx)).map_err(kv_failed)?.as_deref() {
        Some(PENDING) => Decision::Pending,
        Some(COMMIT) => Decision::Commit,
        _ => Decision::Abort,
    })
}

/// The index as readers must see it: the committed state, or the locked
/// transaction's result once its decision is `commit`.
pub fn visible(bucket: &store::Bucket, keys: &CollectionKeys, mut index: StoredIndex) -> Result<StoredIndex, StoreError> {
    match index.lock.take() {
        Some(lock) if decision(bucket, keys, &lock.tx)? == Decision::Commit => Ok(*lock.next),
        _ => Ok(index),
    }
}

/// Swaps `to` into `key` if it still holds `expected`; false when it holds
/// something else or a racing writer swapped first.
pub fn swap_if(bucket: &store::Bucket, key: &str, expected: &[u8], to: &[u8]) -> Result<bool, StoreError> {
    let cas = atomics::Cas::new(bucket, key).map_err(kv_failed)?;
    if cas.current().map_err(kv_failed)?.as_deref() != Some(expected) {
        return Ok(false);
    }
    match atomics::swap(cas, to) {
        Ok(()) => Ok(true),
        Err(atomics::CasError::CasFailed(_)) => Ok(false),
        Err(atomics::CasError::StoreError(e)) => Err(kv_failed(e)),
    }
}

/// Swaps `to` in where `from` is; a lost race is fine (someone else moved on).
fn replace(bucket: &store::Bucket, keys: &CollectionKeys, from: &[u8], to: &StoredIndex) -> Result<(), StoreError> {
    swap_if(bucket, &keys.index(), from, &encode(to)?).map(drop)
}

/// Swaps `to` into the decision key if it still says `pending`.
fn decide(bucket: &store::Bucket, key: &str, to: &[u8]) -> Result<bool, StoreError> {
    swap_if(bucket, key, PENDING, to)
}

/// Finishes or waits out another transaction's lock found in `bytes`.
/// Returns once the caller should read the index again.
pub fn settle(bucket: &store::Bucket, keys: &CollectionKeys, bytes: &[u8], index: &StoredIndex) -> Result<(), StoreError> {
    let Some(lock) = &index.lock else { return Ok(()) };
    let mut outcome = decision(bucket, keys, &lock.tx)?;
    if outcome == Decision::Pending {
        if now_ms().saturating_sub(lock.since_ms) < LOCK_TIMEOUT_MS {
            pause_ms(2);
            return Ok(());
        }
        decide(bucket, &keys.transaction(&lock.tx), ABORT)?;
        outcome = decision(bucket, keys, &lock.tx)?;
    }
    match outcome {
        Decision::Commit => replace(bucket, keys, bytes, &lock.next),
        Decision::Abort => replace(bucket, keys, bytes, &StoredIndex { lock: None, ..index.clone() }),
        Decision::Pending => Ok(()),
    }
}

/// One collection locked by this transaction.
pub struct Locked {
    pub keys: CollectionKeys,
    /// The index value holding the lock.
    pub bytes: Vec<u8>,
    /// The committed state under the lock.
    pub before: StoredIndex,
}

/// A transaction under way.
pub struct Transaction {
    pub id: String,
    key: String,
    pub locked: Vec<Locked>,
}

impl Transaction {
    /// Writes the `pending` decision; nothing is locked yet.
    pub fn begin(bucket: &store::Bucket, any: &CollectionKeys) -> Result<Self, StoreError> {
        let id = format!("{:016x}{:016x}", wasi::random::random::get_random_u64(), wasi::random::random::get_random_u64());
        let key = any.transaction(&id);
        bucket.set(&key, PENDING).map_err(kv_failed)?;
        Ok(Self { id, key, locked: Vec::new() })
    }

    /// The index to swap in to lock a collection whose committed state is `before`.
    pub fn lock(&self, before: &StoredIndex, next: StoredIndex) -> StoredIndex {
        StoredIndex { lock: Some(Lock { tx: self.id.clone(), next: Box::new(next), since_ms: now_ms() }), ..before.clone() }
    }

    /// The commit point. False when someone aborted the transaction first.
    pub fn commit(self, bucket: &store::Bucket) -> Result<bool, StoreError> {
        if !decide(bucket, &self.key, COMMIT)? {
            self.abort(bucket)?;
            return Ok(false);
        }
        // Past the commit point: a lock not replaced here is finished by
        // whoever meets it next, which needs the decision key to stay.
        let mut finished = true;
        for locked in &self.locked {
            let replaced = decode::<StoredIndex>(&locked.bytes, "index")
                .and_then(|index| index.lock.map_or(Ok(()), |lock| replace(bucket, &locked.keys, &locked.bytes, &lock.next)));
            finished &= replaced.is_ok();
        }
        if finished {
            // Only now no lock of this transaction is left to need the decision.
            let _ = bucket.delete(&self.key);
        }
        Ok(true)
    }

    /// Releases every lock, restoring the committed state.
    pub fn abort(self, bucket: &store::Bucket) -> Result<(), StoreError> {
        decide(bucket, &self.key, ABORT)?;
        for locked in &self.locked {
            replace(bucket, &locked.keys, &locked.bytes, &locked.before)?;
        }
        let _ = bucket.delete(&self.key);
        Ok(())
    }
}
