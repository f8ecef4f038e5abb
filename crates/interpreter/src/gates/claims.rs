//! The sessions this host is claiming from the store and has not listed
//! yet, with how many calls claim each: a hand-over asked for meanwhile
//! must not let go of the lease the claim just took.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

type Key = (String, String);

/// Claims in progress on this host, by (tenant, session id).
#[derive(Default)]
pub(crate) struct Claims {
    claiming: Mutex<HashMap<Key, usize>>,
}

impl Claims {
    /// Counts a claim of the session until the returned guard drops.
    pub(crate) fn claim(&self, tenant: &str, session_id: &str) -> Claiming<'_> {
        let key = (tenant.to_owned(), session_id.to_owned());
        *self.claiming.lock().unwrap_or_else(PoisonError::into_inner).entry(key.clone()).or_default() += 1;
        Claiming { claims: self, key }
    }

    /// Runs `release` unless a claim of `key` is in progress, holding new
    /// claims back until it is done: a claim that starts meanwhile takes
    /// the lease after it was let go.
    pub(crate) fn release_unclaimed(&self, key: &Key, release: impl FnOnce()) {
        let claiming = self.claiming.lock().unwrap_or_else(PoisonError::into_inner);
        if !claiming.contains_key(key) {
            release();
        }
    }
}

/// A claim of a session in progress (see [`Claims::claim`]).
pub(crate) struct Claiming<'a> {
    claims: &'a Claims,
    key: Key,
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        let mut claiming = self.claims.claiming.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = claiming.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                claiming.remove(&self.key);
            }
        }
    }
}
