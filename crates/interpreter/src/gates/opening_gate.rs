//! One opening of a session at a time on this host, without holding the
//! session table while the store is asked.
//!
//! Opening a session reads and writes its store; on a shared store that is
//! a network call driven by the async runtime's workers. Holding the table's
//! lock across it would let the workers (which look sessions up in the
//! table) block on the lock while the call they must drive waits for them:
//! a deadlock. The gate serialises openings of one session only; the table
//! is locked for lookups and the final insert.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex, PoisonError};

type Key = (String, String);

/// Sessions being opened on this host (see the module's doc).
#[derive(Default)]
pub(crate) struct OpeningGate {
    opening: Mutex<HashSet<Key>>,
    finished: Condvar,
}

impl OpeningGate {
    /// Waits until no other call opens `key`, then opens it until the
    /// returned guard drops. Blocks: call it off the async workers.
    pub(crate) fn enter(&self, key: &Key) -> Opening<'_> {
        let mut opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        while opening.contains(key) {
            opening = self.finished.wait(opening).unwrap_or_else(PoisonError::into_inner);
        }
        opening.insert(key.clone());
        Opening { gate: self, key: key.clone() }
    }
}

/// An opening in progress (see [`OpeningGate::enter`]).
pub(crate) struct Opening<'a> {
    gate: &'a OpeningGate,
    key: Key,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.gate.opening.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.key);
        self.gate.finished.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn one_opening_of_a_key_at_a_time_and_other_keys_pass() {
        let gate = Arc::new(OpeningGate::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let key = ("t".to_owned(), "s".to_owned());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (gate, inside, most, key) = (gate.clone(), inside.clone(), most.clone(), key.clone());
                std::thread::spawn(move || {
                    let _open = gate.enter(&key);
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        // Another session opens while the first is held.
        let held = gate.enter(&key);
        let other = gate.enter(&("t".to_owned(), "other".to_owned()));
        drop((held, other));
        for thread in threads {
            thread.join().expect("thread");
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}
