//! What each live session costs the host, measured after its runs: the
//! pages of its instance's memories it has made its own (see
//! `anypath_sandbox::MemoryRegions`), plus the state image it keeps after
//! a fork or snapshot for the next copy of the same state
//! (`LiveInstance::held_image_bytes`), which the memory budget, the health
//! report and the metrics count instead of linear memory sizes.
//!
//! The kernel walks every present page of the memories to say so: about
//! a millisecond for a `python-data` session's 140 MiB, more than the warm
//! cell itself. So a run that left the memories' size as it was within
//! [`MEASURED_FOR`] of the last measurement is measured that long after it,
//! off the reply path; growth is measured at once, so a session that grows
//! still pushes others out of the budget.
//!
//! A session idle for [`GIVE_BACK_AFTER`] gives back the pages its runs
//! left as the runtime's image had them
//! (`LiveInstance::give_back_unchanged_pages`), about a third of what a
//! `python-data` session holds of its own, and is measured again. Not
//! sooner: the next run writes most of those pages again and takes each
//! back with a fault, so a session in use (a cell every few seconds) would
//! pay that on every run.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use anypath_sandbox::LiveInstance;

use crate::held::session::Session;
use crate::interpreter::Interpreter;

impl Interpreter {
    /// Measures what `session`'s live instance holds of its own now and
    /// keeps it as the session's memory; 0 without a live instance. The
    /// page tables are read on the blocking pool. When the last
    /// measurement still stands, the run is measured a second later
    /// instead, off its reply path (once, however many runs come between).
    pub(crate) async fn measure_memory(self: &Arc<Self>, session: &Arc<Session>, live: &mut LiveInstance) {
        let (size, held) = (live.memory_bytes(), live.held_image_bytes());
        // A held image made or dropped since is counted at once, like growth.
        let stands = live.is_live()
            && session
                .memory_measured
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|(at, then, held_then)| then == size && held_then == held && at.elapsed() < MEASURED_FOR);
        if !stands {
            self.measure_now(session, live).await;
        } else if !session.memory_owed.swap(true, Relaxed) {
            let (interpreter, session) = (self.clone(), session.clone());
            tokio::spawn(async move {
                tokio::time::sleep(MEASURED_FOR).await;
                session.memory_owed.store(false, Relaxed);
                // A run holding the lock measures at its own end.
                if let Ok(mut live) = session.live.clone().try_lock_owned()
                    && live.is_live()
                {
                    interpreter.measure_now(&session, &mut live).await;
                }
            });
        }
        if !session.give_back_owed.swap(true, Relaxed) {
            let (interpreter, session) = (self.clone(), session.clone());
            tokio::spawn(async move {
                // Until the session has been idle that long (a run meanwhile starts the wait again).
                while let Some(left) = GIVE_BACK_AFTER.checked_sub(session.idle()).filter(|left| !left.is_zero()) {
                    tokio::time::sleep(left).await;
                }
                session.give_back_owed.store(false, Relaxed);
                // A run holding the lock owes the next give-back.
                if let Ok(mut live) = session.live.clone().try_lock_owned()
                    && live.is_live()
                {
                    live.give_back_unchanged_pages().await;
                    interpreter.measure_now(&session, &mut live).await;
                }
            });
        }
    }

    async fn measure_now(self: &Arc<Self>, session: &Session, live: &mut LiveInstance) {
        let held = live.held_image_bytes();
        *session.memory_measured.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), live.memory_bytes(), held));
        let pages = match live.memory_regions().await {
            Some(regions) => self
                .off_workers(move |_| Ok(regions.private_bytes()))
                .await
                .unwrap_or_else(|_| live.memory_bytes()),
            None => live.memory_bytes(),
        };
        session.memory_bytes.store(pages.saturating_add(held), Relaxed);
    }
}

/// How long a session is idle before it gives back the pages its runs
/// left as the image had them.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(10);

/// How long a measurement of a session's own pages stands while its
/// memories keep their size.
const MEASURED_FOR: Duration = Duration::from_secs(1);
