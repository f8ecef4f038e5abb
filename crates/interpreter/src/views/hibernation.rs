//! Hibernation: a session's live Python state parked in an image in its
//! store, and resumed from it by the next run. Idle sessions are parked
//! after a while, the least recently used ones when the live instances'
//! memory passes the budget, and all of them on a graceful stop.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anypath_sandbox::LiveInstance;
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::{Checkpointed, Create, Session};
use crate::interpreter::Interpreter;
use crate::operation::{CallContext, Described, Operation, OperationKind};

/// The interpreter's hibernation: see [`Interpreter::hibernation`].
pub struct Hibernation<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// Parking live state in images under the memory budget, and resuming it.
    pub fn hibernation(self: &Arc<Self>) -> Hibernation<'_> {
        Hibernation::of(self)
    }
}

impl<'a> Hibernation<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// Parks the session's live state in its image now, waiting for a run
    /// in progress; the next run resumes it. False when no state was live.
    pub fn hibernate_session<'f>(&'f self, tenant: &'f str, session_id: &'f str) -> BoxFuture<'f, Result<bool, InterpreterError>> {
        Box::pin(async move {
            let (session, mut live) = self.interpreter.sessions().locked(tenant, session_id, Create::No).await?;
            Ok(live.is_live() && self.hibernate(&session, &mut live).await)
        })
    }

    /// Hibernates every live session idle for `hibernate_after_idle`;
    /// returns how many.
    pub fn hibernate_idle(&self) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let idle: Vec<Arc<Session>> = {
                let sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
                sessions.values().filter(|s| s.idle() >= self.interpreter.config.hibernate_after_idle).cloned().collect()
            };
            let mut hibernated = 0;
            for session in idle {
                let Ok(mut live) = session.live.try_lock() else {
                    continue;
                };
                if live.is_live() && self.hibernate(&session, &mut live).await {
                    hibernated += 1;
                }
            }
            hibernated
        })
    }

    /// Hibernates every live session, waiting for runs in progress (on a
    /// graceful stop): the next process resumes them. A session whose image
    /// was read but not restored yet has it written back. Returns how many.
    pub fn hibernate_all(&self) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let all: Vec<Arc<Session>> = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
            let mut hibernated = 0;
            for session in all {
                let Ok(mut live) = tokio::time::timeout(self.interpreter.config.busy_wait, session.live.lock()).await else {
                    continue;
                };
                if (live.is_live() || live.is_hibernated()) && self.hibernate(&session, &mut live).await {
                    hibernated += 1;
                }
            }
            hibernated
        })
    }

    /// Keeps the live instances' memory within the budget: the least
    /// recently used idle sessions other than `current` are hibernated.
    pub(crate) async fn evict_beyond_limit(&self, current: &Session) {
        let budget = self.interpreter.config.session_memory_bytes;
        let candidates: Vec<Arc<Session>> = {
            let sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| !std::ptr::eq(Arc::as_ptr(s), current)).cloned().collect()
        };
        let held = |s: &Session| {
            if s.is_live() { s.memory_bytes.load(Relaxed) } else { 0 }
        };
        let mut total: u64 = held(current) + candidates.iter().map(|s| held(s)).sum::<u64>();
        if total <= budget {
            return;
        }
        for session in longest_idle_first(candidates, |s| s.idle()) {
            if total <= budget {
                break;
            }
            let Ok(mut live) = session.live.try_lock() else {
                continue;
            };
            if live.is_live() {
                total = total.saturating_sub(session.memory_bytes.load(Relaxed));
                self.hibernate(&session, &mut live).await;
            }
        }
    }

    /// Parks the session's state (live, or an image read but not restored
    /// yet) in its store, for a hand-over. Unlike hibernation for memory,
    /// an image that cannot be made or kept loses nothing: the instance is
    /// left as it was and the error returned.
    pub(crate) async fn park(&self, session: &Arc<Session>, live: &mut LiveInstance) -> Result<(), InterpreterError> {
        let started = std::time::Instant::now();
        let image = live.capture().await.map_err(|e| InterpreterError::Invalid(format!("the session's state cannot be saved for a hand-over: {e}")))?;
        let Some(image) = image else { return Ok(()) };
        let capture_us = started.elapsed().as_micros() as u64;
        let (kept, bytes) = (session.clone(), image.len() as u64);
        let saved = self.interpreter.off_workers(move |i| i.hibernation().save_image(&kept, &image)).await;
        // Where a hand-over's parking goes (the benchmark reads it).
        tracing::info!(session = %session.id, capture_us, save_us = started.elapsed().as_micros() as u64 - capture_us, bytes, "state parked");
        saved
    }

    /// Writes the live session's state and files to its store, the
    /// instance running on (`--checkpoint every-run`, after a run): a host
    /// that takes the session over after this one died resumes from here.
    /// A session holding a file open is left for a later run.
    ///
    /// When the image cannot be made or kept, the run's state is rolled
    /// back to `before` (the state the store holds), so the run can be
    /// retried without being applied twice, and the error says so.
    pub(crate) async fn checkpoint(&self, session: &Arc<Session>, live: &mut LiveInstance, before: RollBack) -> Result<(), InterpreterError> {
        let image = match live.checkpoint().await {
            Ok(Some(image)) => Arc::<[u8]>::from(image),
            Ok(None) => {
                *session.checkpointed.lock().unwrap_or_else(|p| p.into_inner()) = Checkpointed::Unknown;
                return Ok(());
            }
            Err(error) => return Err(self.roll_back(session, live, before, format!("its state could not be captured: {error}"))),
        };
        let (kept, saved) = (session.clone(), image.clone());
        let stored = self
            .interpreter
            .off_workers(move |i| {
                kept.store.persist_files(&kept.tenant, &kept.id, kept.files.dir())?;
                i.hibernation().save_image(&kept, &saved)
            })
            .await;
        match stored {
            Ok(()) => {
                *session.checkpointed.lock().unwrap_or_else(|p| p.into_inner()) = Checkpointed::Image(image);
                Ok(())
            }
            Err(error) => Err(self.roll_back(session, live, before, error.to_string())),
        }
    }

    /// Under `--checkpoint idle` on a store shared by a fleet: once the
    /// session has been quiet for [`QUIET_FOR`], its state is kept in the
    /// store (only the segments it changed are written), off every answer's
    /// path, so a host that dies loses only what ran since. Holds the run
    /// lock while it captures and writes: a run that comes meanwhile waits
    /// for it, then marks the image older before it changes the state.
    pub(crate) fn checkpoint_when_quiet(&self, session: &Arc<Session>) {
        let interpreter = self.interpreter;
        if interpreter.config.checkpoint != crate::config::Checkpoint::Idle || interpreter.store.shared_records().is_none() {
            return;
        }
        if session.quiet_checkpoint_owed.swap(true, Relaxed) {
            return;
        }
        let (interpreter, session) = (Arc::downgrade(interpreter), session.clone());
        tokio::spawn(async move {
            // Until the session has been quiet that long (a run meanwhile starts the wait again).
            while let Some(left) = QUIET_FOR.checked_sub(session.idle()).filter(|left| !left.is_zero()) {
                tokio::time::sleep(left).await;
            }
            session.quiet_checkpoint_owed.store(false, Relaxed);
            let Some(interpreter) = interpreter.upgrade() else { return };
            // A run holding the lock owes the next one.
            let Ok(mut live) = session.live.clone().try_lock_owned() else { return };
            // A session handed over, closed or expired meanwhile is not this host's to keep.
            let listed = interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).get(&(session.tenant.clone(), session.id.clone())).is_some_and(|s| Arc::ptr_eq(s, &session));
            if !live.is_live() || session.moved.load(Relaxed) || !listed || !session.store.holds(&session.tenant, &session.id) {
                return;
            }
            let image = match live.checkpoint().await {
                Ok(Some(image)) => image,
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(session = %session.id, %error, "a quiet session's state could not be captured");
                    return;
                }
            };
            let kept = session.clone();
            let stored = interpreter
                .off_workers(move |i| {
                    kept.store.persist_files(&kept.tenant, &kept.id, kept.files.dir())?;
                    i.hibernation().save_image(&kept, &image)
                })
                .await;
            match stored {
                Ok(()) => session.image_is_live_state.store(true, Relaxed),
                Err(error) => tracing::warn!(session = %session.id, %error, "a quiet session's state was not kept; it is kept when the session is parked"),
            }
            drop(live);
        });
    }

    /// Puts the session back to `before` after its checkpoint failed for
    /// `reason`: the error the run answers with.
    fn roll_back(&self, session: &Session, live: &mut LiveInstance, before: RollBack, reason: String) -> InterpreterError {
        let rolled_back = match before {
            RollBack::Fresh => {
                live.roll_back_to_fresh();
                true
            }
            RollBack::To(Checkpointed::Image(image)) => {
                live.resume_with(image.to_vec());
                true
            }
            RollBack::To(Checkpointed::Unknown) => false,
        };
        tracing::warn!(session = %session.id, %reason, rolled_back, "a run's checkpoint failed");
        InterpreterError::CheckpointFailed { reason, rolled_back }
    }

    /// What a failed checkpoint of the run about to start rolls back to.
    pub(crate) fn roll_back_point(session: &Session, live: &LiveInstance) -> RollBack {
        if !live.is_live() && !session.hibernated.load(Relaxed) && !live.is_hibernated() {
            return RollBack::Fresh;
        }
        RollBack::To(session.checkpointed.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Saves the live instance's state in the session's store and drops
    /// the instance. An image that cannot be made or kept (the session's
    /// quota counts it) loses the state, and the next run says why.
    async fn hibernate(&self, session: &Arc<Session>, live: &mut LiveInstance) -> bool {
        let image = match live.hibernate().await {
            Ok(Some(image)) => image,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(session = %session.id, %error, "a session's state could not be captured");
                live.lose_state(format!("its state could not be saved when it was parked ({error})"));
                return false;
            }
        };
        // Marked before the write is awaited: when this call is dropped (its
        // caller's client went away) the write still ends on the blocking
        // pool, and the next run reads the image; one that is not there is
        // reported lost (`live` holds the state as away until it is back).
        session.hibernated.store(true, Relaxed);
        let kept = session.clone();
        match self.interpreter.off_workers(move |i| i.hibernation().save_image(&kept, &image)).await {
            Ok(()) => {
                // A shared store keeps the files with the image, so a host
                // that takes the session over after this one died finds both.
                let kept = session.clone();
                let persisted = self.interpreter.off_workers(move |_| kept.store.persist_files(&kept.tenant, &kept.id, kept.files.dir())).await;
                if let Err(error) = persisted {
                    tracing::warn!(session = %session.id, %error, "a hibernated session's files were not kept in the shared store");
                }
                true
            }
            Err(error) => {
                session.hibernated.store(false, Relaxed);
                tracing::warn!(session = %session.id, %error, "a session's state image was not kept");
                live.lose_state(format!("its state could not be saved when it was parked ({error})"));
                false
            }
        }
    }

    /// Keeps a state image for `session`, if it fits the session's quota
    /// beside its files.
    pub(crate) fn save_image(&self, session: &Session, image: &[u8]) -> Result<(), InterpreterError> {
        let quota = self.interpreter.config.quota;
        let usage = anypath_sandbox::directory_usage(session.files.dir());
        let total = usage.bytes.saturating_add(image.len() as u64);
        if total > quota.max_session_bytes {
            return Err(InterpreterError::Quota(format!(
                "the state image ({} bytes) and the files ({} bytes) exceed the session's {} bytes",
                image.len(),
                usage.bytes,
                quota.max_session_bytes
            )));
        }
        // The stored image is no longer the shared state's, if it was.
        session.shared_state.lock().unwrap_or_else(|p| p.into_inner()).take();
        session.store.save_image(&session.tenant, &session.id, image)
    }

    /// Gives `to` the stored image `from` names (of a session of the same
    /// tenant, `bytes` long), shared where the store can (a link), if it
    /// fits `to`'s quota beside its files. Fails when that image is gone:
    /// the caller then saves the image itself.
    pub(crate) fn share_image(&self, from: ImageSource<'_>, to: &Session, bytes: u64) -> Result<(), InterpreterError> {
        let quota = self.interpreter.config.quota;
        let usage = anypath_sandbox::directory_usage(to.files.dir());
        if usage.bytes.saturating_add(bytes) > quota.max_session_bytes {
            return Err(InterpreterError::Quota(format!(
                "the state image ({bytes} bytes) and the files ({} bytes) exceed the session's {} bytes",
                usage.bytes, quota.max_session_bytes
            )));
        }
        to.shared_state.lock().unwrap_or_else(|p| p.into_inner()).take();
        match from {
            ImageSource::Stored(from) => to.store.copy_image(&to.tenant, &from.id, &to.id),
            ImageSource::ForkSource(parent) => to.store.copy_fork_source(&to.tenant, &parent.id, &to.id),
        }
    }

    /// Gives `to` a copy of `from`'s stored image (shared where the store
    /// can), if it fits `to`'s quota beside its files. `to` is a fork of
    /// `from`: the same tenant, in the same store.
    pub(crate) fn copy_image(&self, from: &Session, to: &Session) -> Result<(), InterpreterError> {
        let bytes = from.store.image_bytes(&from.tenant, &from.id);
        self.share_image(ImageSource::Stored(from), to, bytes)
    }

    /// Before a run: a hibernated session's image goes to its instance (and
    /// out of the store: from here on the state lives in the instance).
    ///
    /// Safe to drop at any await: until the image is in the instance the
    /// session stays marked hibernated and its image stays stored, and the
    /// instance holds the state as away, so no later run starts fresh
    /// without saying so.
    ///
    /// A saved state the store holds damaged, out of bounds or not the
    /// session's is refused with [`InterpreterError::ImageCorrupt`]: this
    /// run answers with it, and the next starts fresh and says so.
    pub(crate) async fn take_saved_state(&self, session: &Arc<Session>, live: &mut LiveInstance) -> Result<(), InterpreterError> {
        if live.is_live() || !session.hibernated.load(Relaxed) {
            return Ok(());
        }
        live.expect_saved_state();
        // A fork's or a snapshot's state shared in this process: its memory
        // is mapped, and its image never read back from the store.
        let shared = session.shared_state.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(state) = shared {
            session.hibernated.store(false, Relaxed);
            if self.interpreter.config.checkpoint == crate::config::Checkpoint::EveryRun {
                *session.checkpointed.lock().unwrap_or_else(|p| p.into_inner()) = Checkpointed::Image(state.image().clone());
            }
            live.resume_shared(state);
            self.remove_resumed_image(session).await;
            return Ok(());
        }
        let started = std::time::Instant::now();
        let read = {
            let session = session.clone();
            self.interpreter.off_workers(move |_| session.store.read_image(&session.tenant, &session.id)).await
        };
        if let Ok(image) = &read {
            // Where a resume's time goes (the benchmark reads it).
            tracing::info!(session = %session.id, read_us = started.elapsed().as_micros() as u64, bytes = image.len() as u64, "saved state read");
        }
        session.hibernated.store(false, Relaxed);
        let image = match read {
            Ok(image) => image,
            Err(error @ InterpreterError::ImageCorrupt { .. }) => {
                tracing::error!(session = %session.id, tenant = %session.tenant, %error, "a session's stored state was refused");
                live.lose_state(format!("its saved state was refused ({error})"));
                return Err(error);
            }
            Err(error) => {
                live.lose_state(format!("its saved state could not be read ({error})"));
                return Ok(());
            }
        };
        if self.interpreter.config.checkpoint == crate::config::Checkpoint::EveryRun {
            // What a failed checkpoint of this run rolls back to.
            *session.checkpointed.lock().unwrap_or_else(|p| p.into_inner()) = Checkpointed::Image(Arc::from(image.as_slice()));
        }
        live.resume_with(image);
        self.remove_resumed_image(session).await;
        Ok(())
    }

    /// Removes the stored image of a session whose state its instance now
    /// takes: an image left behind would be resumed, stale, by a process
    /// that finds it after a crash.
    async fn remove_resumed_image(&self, session: &Arc<Session>) {
        let stored = session.clone();
        let removed = self.interpreter.off_workers(move |_| stored.store.remove_image(&stored.tenant, &stored.id)).await;
        if let Err(error) = removed {
            tracing::warn!(session = %session.id, %error, "a resumed session's state image could not be removed; trying again");
            self.remove_stale_image_later(session.clone());
        }
    }

    /// Tries again, with backoff, to remove the image of a session whose
    /// state now lives in its instance (see [`Self::take_saved_state`]).
    /// Each try holds the session's run lock, so no hibernation is writing a
    /// new image meanwhile, and stops once the session is hibernated again:
    /// the image on disk is then its newest state.
    fn remove_stale_image_later(&self, session: Arc<Session>) {
        let interpreter = Arc::downgrade(self.interpreter);
        tokio::spawn(async move {
            for delay in REMOVAL_RETRIES {
                tokio::time::sleep(delay).await;
                let Some(interpreter) = interpreter.upgrade() else { return };
                let _running = session.live.lock().await;
                if session.hibernated.load(Relaxed) {
                    return;
                }
                let stored = session.clone();
                match interpreter.off_workers(move |_| stored.store.remove_image(&stored.tenant, &stored.id)).await {
                    Ok(()) => {
                        tracing::info!(session = %session.id, "a resumed session's stale state image was removed");
                        return;
                    }
                    Err(error) => tracing::warn!(session = %session.id, %error, "a resumed session's state image still could not be removed"),
                }
            }
            tracing::error!(session = %session.id, "a resumed session's stale state image stays on disk: a process that finds it after a crash would resume an older state");
        });
    }
}

/// How long a session under `--checkpoint idle` on a shared store is quiet
/// before its state is kept in the store.
const QUIET_FOR: Duration = Duration::from_secs(2);

/// How long to wait before each retry of a failed removal of a resumed
/// session's image.
const REMOVAL_RETRIES: [Duration; 5] =
    [Duration::from_millis(100), Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(10), Duration::from_secs(30)];

/// `sessions` in the order the memory budget hibernates them: the longest
/// `idle` first. Each idle time is read once, before the sort: read during
/// it, idle times grow as it goes and drop as runs touch sessions, which is
/// no order at all (the standard sort may then panic, taking the answer of
/// the run that asked with it).
fn longest_idle_first<T>(sessions: Vec<T>, idle: impl Fn(&T) -> Duration) -> Vec<T> {
    let mut keyed: Vec<(Duration, T)> = sessions.into_iter().map(|s| (idle(&s), s)).collect();
    keyed.sort_by_key(|(idle, _)| std::cmp::Reverse(*idle));
    keyed.into_iter().map(|(_, s)| s).collect()
}

/// A stored image another session is given by [`Hibernation::share_image`].
pub(crate) enum ImageSource<'a> {
    /// The session's own image (it is parked).
    Stored(&'a Session),
    /// The image the session's home keeps for its forks.
    ForkSource(&'a Session),
}

/// Parks the session's live state in its image now; false when none was live.
#[derive(Debug)]
pub struct HibernateSession {
    /// The session to park.
    pub session_id: String,
}

impl Operation for HibernateSession {
    type Output = bool;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Hibernate).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<bool, InterpreterError>> {
        let tenant = caller.tenant.clone();
        Box::pin(async move { interpreter.hibernation().hibernate_session(&tenant, &self.session_id).await })
    }
}

/// Where a run's failed checkpoint puts the session back.
pub(crate) enum RollBack {
    /// The session held no state before the run.
    Fresh,
    /// The state the store held before the run.
    To(Checkpointed),
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use crate::test_support::{Step, hold, interpreter, run, within};

    /// A state parked while its caller goes away (a client that disconnects
    /// while the memory budget hibernates another session, or its own) is
    /// not lost: the image being written is what the next run resumes.
    #[test]
    fn a_hibernation_dropped_while_its_image_is_written_is_resumed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        let (entered, release) = hold(dir.path(), Step::ImageWrite);
        let parking = {
            let interpreter = interpreter.clone();
            runtime.spawn(async move { interpreter.hibernation().hibernate_session("t", "s").await })
        };
        entered.recv_timeout(Duration::from_secs(30)).expect("the image is being written");
        parking.abort();
        assert!(runtime.block_on(parking).is_err_and(|e| e.is_cancelled()), "the hibernation was dropped mid-write");
        release.send(()).expect("released");
        // The write, let go, ends on the blocking pool by itself.
        let image = dir.path().join("sessions/t/s").join(crate::stores::session_store::local::STATE_IMAGE);
        let written = within(Duration::from_secs(30), move || {
            while !image.is_file() {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        assert!(written.is_some(), "the image was written");
        let report = run(&runtime, &interpreter, "print(x + 1)");
        let cell = &report.cell;
        assert_eq!((cell.output.stdout.as_str(), cell.state, cell.state_reset), ("42\n", anypath_wire::StateOrigin::Resumed, false), "{:?}", cell.error);
    }

    /// A resumed session's image that could not be removed (a failing
    /// disk) is removed on a later try, since a process that found it after
    /// a crash would resume the older state; and a retry never removes the
    /// image of a later hibernation, which is the newest state.
    #[test]
    fn a_resumed_image_that_could_not_be_removed_is_removed_on_a_retry() {
        use crate::test_support::fail;
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        let image = dir.path().join("sessions/t/s").join(crate::stores::session_store::local::STATE_IMAGE);
        let hibernate = |interpreter: &std::sync::Arc<crate::interpreter::Interpreter>| runtime.block_on(interpreter.hibernation().hibernate_session("t", "s")).expect("hibernated");
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        assert!(hibernate(&interpreter));
        fail(dir.path(), Step::ImageRemove, 1);
        let report = run(&runtime, &interpreter, "print(x + 1)");
        assert_eq!((report.cell.output.stdout.as_str(), report.cell.state), ("42\n", anypath_wire::StateOrigin::Resumed));
        assert!(image.is_file(), "the first removal failed");
        let removed = within(Duration::from_secs(30), {
            let image = image.clone();
            move || {
                while image.is_file() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        assert!(removed.is_some(), "a retry removed the stale image");

        // The same failure, then a new hibernation before the retry: its image stays.
        fail(dir.path(), Step::ImageRemove, 1);
        assert!(hibernate(&interpreter));
        let report = run(&runtime, &interpreter, "x = 43");
        assert_eq!(report.cell.state, anypath_wire::StateOrigin::Resumed);
        assert!(hibernate(&interpreter), "hibernated again before the retry");
        std::thread::sleep(Duration::from_millis(800));
        assert!(image.is_file(), "the retry left the newer image");
        let report = run(&runtime, &interpreter, "print(x)");
        assert_eq!((report.cell.output.stdout.as_str(), report.cell.state_reset), ("43\n", false));
    }

    /// A resume dropped while its image is read (the run's client went
    /// away) leaves the image where it was: the next run resumes it.
    #[test]
    fn a_resume_dropped_while_its_image_is_read_leaves_the_state_for_the_next_run() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        assert!(runtime.block_on(interpreter.hibernation().hibernate_session("t", "s")).expect("hibernated"));
        let (entered, release) = hold(dir.path(), Step::ImageRead);
        let resuming = {
            let interpreter = interpreter.clone();
            runtime.spawn(async move { interpreter.runs().run_python("t", "s", anypath_wire::RunRequest::code("x += 1"), "http://h").await })
        };
        entered.recv_timeout(Duration::from_secs(30)).expect("the image is being read");
        resuming.abort();
        assert!(runtime.block_on(resuming).is_err_and(|e| e.is_cancelled()), "the run was dropped mid-read");
        release.send(()).expect("released");
        let report = run(&runtime, &interpreter, "print(x + 1)");
        let cell = &report.cell;
        assert_eq!((cell.output.stdout.as_str(), cell.state, cell.state_reset), ("42\n", anypath_wire::StateOrigin::Resumed, false), "{:?}", cell.error);
    }

    /// A state handed out and never handed back is reported lost, with its
    /// reason, rather than taken for a session that held none.
    #[test]
    fn a_state_image_that_vanishes_is_reported_lost() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        assert_eq!(run(&runtime, &interpreter, "x = 41").cell.error, None);
        assert!(runtime.block_on(interpreter.hibernation().hibernate_session("t", "s")).expect("hibernated"));
        std::fs::remove_file(dir.path().join("sessions/t/s").join(crate::stores::session_store::local::STATE_IMAGE)).expect("image removed");
        let report = run(&runtime, &interpreter, "print(x)");
        let cell = &report.cell;
        assert!(cell.state_reset, "{cell:?}");
        assert!(cell.state_note.as_deref().is_some_and(|n| n.contains("could not be read")), "{:?}", cell.state_note);
    }

    /// The memory budget orders sessions by idle times read once each: read
    /// while the sort compares them (they change as it goes, and as runs
    /// touch sessions), they are no order, and the sort may panic, taking
    /// the answer of the run that asked for the eviction with it.
    #[test]
    fn the_eviction_order_reads_each_idle_time_once() {
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        let readings = AtomicU64::new(0);
        let first_read = Mutex::new(std::collections::HashMap::new());
        let sessions: Vec<u64> = (0..10_000).collect();
        // Each reading differs from the last, as a clock and concurrent touches make it.
        let ordered = super::longest_idle_first(sessions, |session| {
            let n = readings.fetch_add(1, Relaxed);
            let idle = Duration::from_nanos(n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40);
            first_read.lock().expect("readings").entry(*session).or_insert(idle);
            idle
        });
        assert_eq!(readings.load(Relaxed), 10_000, "one reading per session");
        let first_read = first_read.into_inner().expect("readings");
        let idle: Vec<Duration> = ordered.iter().map(|s| first_read[s]).collect();
        assert!(idle.windows(2).all(|w| w[0] >= w[1]), "the longest idle first");
        assert_eq!(ordered.len(), 10_000);
    }
}
