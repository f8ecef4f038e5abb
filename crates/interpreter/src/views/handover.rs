//! Sessions between the hosts of a fleet: handing a session over to the
//! store for another host, letting go of holds nobody uses, and noticing a
//! hold that lapsed while this host was cut off or paused. A store of one
//! host makes each of these do nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::Session;
use crate::views::sessions::Sessions;

impl Sessions<'_> {
    /// Hands the session over to the store for another host: its state
    /// parked in an image, its files kept, its hold released, and this host
    /// no longer lists it. Waits for a run in progress (as long as a busy
    /// call would). A session this host does not list is only released.
    pub fn hand_over<'f>(&'f self, tenant: &'f str, session_id: &'f str) -> BoxFuture<'f, Result<(), InterpreterError>> {
        Box::pin(async move {
            let interpreter = self.interpreter;
            let key = (tenant.to_owned(), session_id.to_owned());
            let listed = interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
            if let Some(session) = listed {
                let mut live = tokio::time::timeout(interpreter.config.busy_wait, session.live.lock())
                    .await
                    .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
                if session.moved.load(Relaxed) {
                    return Ok(());
                }
                // File calls go on beside runs: the ones in progress end first, and
                // new ones wait, then find the session moved and claim it again.
                let _files = session.gate.close().await;
                // Files, then state, then metadata, each kept in the store before
                // the next: a store that refuses one leaves the session live here
                // as it was, and the asking host is told no.
                let kept = session.clone();
                let started = std::time::Instant::now();
                interpreter.off_workers(move |_| kept.store.persist_files(&kept.tenant, &kept.id, kept.files.dir())).await?;
                let files_us = started.elapsed().as_micros() as u64;
                if live.is_live() || live.is_hibernated() {
                    interpreter.hibernation().park(&session, &mut live).await?;
                }
                let park_us = started.elapsed().as_micros() as u64 - files_us;
                let kept = session.clone();
                let written = interpreter.off_workers(move |_| kept.write_meta()).await;
                // Where a hand-over's time goes on the holder (the benchmark reads it).
                tracing::info!(session = %session_id, files_us, park_us, meta_us = started.elapsed().as_micros() as u64 - files_us - park_us, "hand-over phases");
                if let Err(error) = written {
                    // The state goes on here: the image just kept is not its newest.
                    let stale = session.clone();
                    let _ = interpreter.off_workers(move |_| stale.store.remove_image(&stale.tenant, &stale.id)).await;
                    return Err(error);
                }
                // Under the run lock: a call waiting for it sees the move and claims the session again.
                session.moved.store(true, Relaxed);
                self.unlist(&session);
                drop(live);
            }
            let (owner, id) = key;
            interpreter
                .off_workers(move |i| {
                    i.sessions().release_unused(&owner, &id);
                    Ok(())
                })
                .await
        })
    }

    /// The sessions other hosts sharing the store ask this one to hand
    /// over ([`Self::hand_over`] each); `None` on a store of one host, or
    /// when taken before.
    pub fn handover_requests(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<(String, String)>> {
        self.interpreter.store.handover_requests()
    }

    /// Hands every listed session over (on a graceful stop, after their
    /// state was parked): the next host to be asked for one claims it at once.
    pub fn hand_over_all(&self) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let keys: Vec<(String, String)> = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
            let mut handed = 0;
            for (tenant, id) in keys {
                match self.hand_over(&tenant, &id).await {
                    Ok(()) => handed += 1,
                    Err(error) => tracing::warn!(session = %id, %error, "a session was not handed over"),
                }
            }
            handed
        })
    }

    /// Lets go of the session's hold unless a call of this host lists it or
    /// is claiming it (a call that failed, or a hand-over asked for a
    /// session this host does not list: the asking host asks again).
    pub(crate) fn release_unused(&self, tenant: &str, session_id: &str) {
        let key = (tenant.to_owned(), session_id.to_owned());
        // The claims' lock is held across the store's release (a call that
        // would list the session claims it first, so it waits and claims
        // again after); the table's only while it is looked at. Async
        // workers take the table's lock: holding it across the store's I/O
        // (a blocking Redis call) left a worker waiting on it while the
        // reply it needed sat unread, and the host hung.
        self.interpreter.claiming.release_unclaimed(&key, || {
            let listed = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key);
            if !listed {
                self.interpreter.store.release(tenant, session_id);
            }
        });
    }

    /// The session the table lists unexpired while this host's hold on it
    /// lapsed (see [`Self::unlist_lapsed`]).
    pub(crate) fn lapsed(&self, tenant: &str, session_id: &str) -> Option<Arc<Session>> {
        let key = (tenant.to_owned(), session_id.to_owned());
        let sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
        sessions.get(&key).filter(|s| s.idle() < s.ttl && !s.store.holds(tenant, session_id)).cloned()
    }

    /// Takes the session out of the table when this host's hold on it
    /// lapsed (it was paused or cut off past its lease): another host may
    /// have moved it on, so what this host has of it is stale. A call still
    /// waiting for its run lock then sees it moved.
    pub(crate) fn unlist_lapsed(&self, tenant: &str, session_id: &str) {
        let key = (tenant.to_owned(), session_id.to_owned());
        let mut sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get(&key).filter(|s| !s.store.holds(tenant, session_id)) {
            session.moved.store(true, Relaxed);
            sessions.remove(&key);
        }
    }
}
