//! Session lifecycle: the table of sessions named by the client and scoped
//! by tenant, each found in the table, loaded from its store or created;
//! an idle TTL, explicit close, forks, second code contexts over one
//! session's files, restarts, and the sweep that removes what expired.
//!
//! A restart of the process finds sessions again in their store; what is
//! past its TTL is removed at start. An expired session's home is first
//! moved aside, so the session table is never locked for the length of a
//! tree's removal.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use anypath_sandbox::{FilesLayout, LimitOverrides, Runtime};
use anypath_wire::{Closed, SessionInfo};
use futures_util::future::BoxFuture;

use crate::directory::session_files::SessionFiles;
use crate::error::InterpreterError;
use crate::gates::files_gate::Picture;
use crate::held::session::{Create, RunLock, Session, check_runtime, listed, unix_now};
use crate::held::stats::Stats;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};
use crate::stores::session_store::{DiscardedHome, SessionMeta};

pub use super::forks::{ForkSession, ForkSessions, child_names};

/// What the first run of a session opened in place of an expired one says.
/// The idle TTL of the service's own sessions ([`names::is_hidden`]): a
/// snapshot's stored session is removed with its record, never for idling.
const HIDDEN_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

fn expired_reason(ttl_seconds: u64) -> String {
    format!("the session expired (idle past its TTL of {ttl_seconds} s) and was removed with its state and files; it starts afresh")
}

/// How often a call looks a session up again when it was handed over to
/// another host while the call waited for it.
const MOVED_RETRIES: usize = 3;

/// The interpreter's sessions: see [`Interpreter::sessions`].
pub struct Sessions<'a> {
    pub(crate) interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// Session lifecycle: open, describe, close, fork, contexts, restart, the sweep.
    pub fn sessions(self: &Arc<Self>) -> Sessions<'_> {
        Sessions::of(self)
    }
}

impl<'a> Sessions<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// Creates the session, or returns it; `ttl` is capped by the server's
    /// maximum; `runtime` is the server's default when not given, and an
    /// existing session must already run it.
    pub fn open(&self, tenant: &str, session_id: &str, ttl: Option<Duration>, runtime: Option<Runtime>) -> Result<SessionInfo, InterpreterError> {
        let session = self.get(tenant, session_id, Create::Yes { ttl, runtime })?;
        Ok(info(&session))
    }

    /// The session as it is, without creating it.
    pub fn info(&self, tenant: &str, session_id: &str) -> Result<SessionInfo, InterpreterError> {
        if let Some(session) = self.listed(tenant, session_id, &Create::No)? {
            return Ok(info(&session));
        }
        // Described from the store, not loaded: on a store shared by several
        // hosts, looking at a session must not take it from the host using it.
        let store = &self.interpreter.store;
        let meta = store.read_meta(tenant, session_id).ok_or_else(|| InterpreterError::NoSuchSession(session_id.to_owned()))?;
        let idle = unix_now().saturating_sub(meta.last_used_unix);
        if idle >= meta.ttl_seconds {
            return Err(InterpreterError::NoSuchSession(session_id.to_owned()));
        }
        Ok(SessionInfo {
            session_id: session_id.to_owned(),
            ttl_seconds: meta.ttl_seconds,
            expires_in_seconds: meta.ttl_seconds - idle,
            live: false,
            hibernated: store.has_image(tenant, session_id),
            runtime: meta.runtime,
            memory_bytes: 0,
        })
    }

    /// Removes the session: its instance, its home, its files. The file
    /// work runs on the blocking pool.
    pub fn close<'f>(&'f self, tenant: &'f str, session_id: &'f str) -> BoxFuture<'f, Result<(), InterpreterError>> {
        Box::pin(async move {
            let (session, _running) = self.locked(tenant, session_id, Create::No).await?;
            self.unlist(&session);
            Stats::add(&self.interpreter.stats.sessions_closed, 1);
            let store = session.store.clone();
            let (tenant, id) = (session.tenant.clone(), session.id.clone());
            // The session is gone whether or not its home could be removed.
            let _ = tokio::task::spawn_blocking(move || store.remove_home(&tenant, &id)).await;
            Ok(())
        })
    }

    /// A new session `context_id` over the same files as `session_id` (its
    /// directory is shared, its state is its own), on `runtime` (the
    /// session's when `None`): a second code context of one sandbox.
    pub fn open_context(&self, tenant: &str, session_id: &str, context_id: &str, ttl: Option<Duration>, runtime: Option<Runtime>) -> Result<SessionInfo, InterpreterError> {
        let parent = self.get(tenant, session_id, Create::No)?;
        if self.get(tenant, context_id, Create::No).is_ok() {
            return Err(InterpreterError::SessionExists(context_id.to_owned()));
        }
        let runtime = runtime.unwrap_or(parent.runtime);
        self.interpreter.sandbox_for(runtime)?;
        let create = Create::Sharing { ttl, runtime, files: parent.files.dir().to_path_buf(), layout: parent.layout };
        let context = self.get(tenant, context_id, create)?;
        Ok(info(&context))
    }

    /// Starts the session's Python state afresh over the same files (a
    /// kernel restart), waiting for a run in progress: the live instance
    /// and any saved image are dropped.
    pub fn restart<'f>(&'f self, tenant: &'f str, session_id: &'f str) -> BoxFuture<'f, Result<(), InterpreterError>> {
        Box::pin(async move {
            let (session, mut live) = self.locked(tenant, session_id, Create::No).await?;
            live.reset();
            session.hibernated.store(false, Relaxed);
            session.had_state.store(false, Relaxed);
            let kept = session.clone();
            self.interpreter
                .off_workers(move |_| {
                    let _ = kept.store.remove_image(&kept.tenant, &kept.id);
                    kept.write_meta()
                })
                .await
        })
    }

    /// Removes every session idle past its TTL and every expired artifact
    /// (with blobs nothing refers to any more); returns how many sessions.
    pub fn sweep(&self) -> usize {
        let interpreter = self.interpreter;
        if let Err(e) = interpreter.artifact_store.sweep() {
            tracing::warn!(error = %e, "artifact sweep failed");
        }
        let expired: Vec<Arc<Session>> = {
            let sessions = interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
            sessions.values().filter(|s| s.idle() >= s.ttl).cloned().collect()
        };
        for session in &expired {
            // A session running code is in use, not idle: it stays.
            if let Ok(_running) = session.live.try_lock() {
                if session.had_state.load(Relaxed) {
                    interpreter.store.leave_expired_note(&session.tenant, &session.id, session.ttl.as_secs());
                }
                self.forget(session);
            }
        }
        let removed = expired.len() + sweep_store(interpreter);
        Stats::add(&interpreter.stats.sweeps, 1);
        Stats::add(&interpreter.stats.sessions_expired, removed as u64);
        removed
    }

    /// The session named `session_id` of `tenant`: known, found in the
    /// store, or (with `create`) new. An expired predecessor's home is
    /// removed after the session table is unlocked, so calls on other
    /// sessions never wait for it.
    ///
    /// A session the table does not hold is claimed from the store first,
    /// outside the table's lock: on a store shared by several hosts that may
    /// wait for another host to hand it over and bring its files here.
    pub(crate) fn get(&self, tenant: &str, session_id: &str, create: Create) -> Result<Arc<Session>, InterpreterError> {
        if let Some(session) = self.listed(tenant, session_id, &create)? {
            return Ok(session);
        }
        let store = &self.interpreter.store;
        if let Some(lapsed) = self.lapsed(tenant, session_id) {
            // Kept while the store cannot say (a 503): its state may be the newest.
            if store.reclaim(tenant, session_id)? {
                lapsed.touch();
                return Ok(lapsed);
            }
            self.unlist_lapsed(tenant, session_id);
        }
        let claiming = self.interpreter.claiming.claim(tenant, session_id);
        store.claim(tenant, session_id)?;
        let mut discarded = None;
        let session = self.get_locked(tenant, session_id, create, &mut discarded);
        drop(claiming);
        if let Some(home) = discarded {
            store.remove_discarded(home);
        }
        if session.is_err() {
            self.release_unused(tenant, session_id);
        }
        session
    }

    /// The session and its run lock, waiting for a run in progress as long
    /// as a busy call would. A session handed over to another host while
    /// this call waited is claimed again (and waited for once more).
    pub(crate) async fn locked(&self, tenant: &str, session_id: &str, create: Create) -> Result<(Arc<Session>, RunLock), InterpreterError> {
        let interpreter = self.interpreter;
        for _ in 0..MOVED_RETRIES {
            let session = match self.listed(tenant, session_id, &create)? {
                Some(session) => session,
                None => {
                    let (owner, id, create) = (tenant.to_owned(), session_id.to_owned(), create.clone());
                    interpreter.off_workers(move |i| i.sessions().get(&owner, &id, create)).await?
                }
            };
            let live = tokio::time::timeout(interpreter.config.busy_wait, session.live.clone().lock_owned())
                .await
                .map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
            if !session.moved.load(Relaxed) {
                return Ok((session, live));
            }
        }
        Err(InterpreterError::Busy(session_id.to_owned()))
    }

    /// [`Self::locked`] without waiting: `Busy` while a run holds the lock.
    /// Off the async workers.
    pub(crate) fn locked_now(&self, tenant: &str, session_id: &str, create: Create) -> Result<(Arc<Session>, RunLock), InterpreterError> {
        for _ in 0..MOVED_RETRIES {
            let session = self.get(tenant, session_id, create.clone())?;
            let live = session.live.clone().try_lock_owned().map_err(|_| InterpreterError::Busy(session_id.to_owned()))?;
            if !session.moved.load(Relaxed) {
                return Ok((session, live));
            }
        }
        Err(InterpreterError::Busy(session_id.to_owned()))
    }

    /// The session when the table holds it unexpired: no file is touched,
    /// so the async workers may ask. `None` means [`Self::get`] must look
    /// in the store or create it.
    pub(crate) fn listed(&self, tenant: &str, session_id: &str, create: &Create) -> Result<Option<Arc<Session>>, InterpreterError> {
        let key = (names::tenant(tenant)?.to_owned(), names::session_id(session_id)?.to_owned());
        let asked = match create {
            Create::Yes { runtime, .. } => *runtime,
            Create::Sandbox { runtime, .. } | Create::Sharing { runtime, .. } | Create::Copy { runtime, .. } => Some(*runtime),
            Create::No => None,
        };
        let sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
        listed(&sessions, &key, asked)
    }

    /// [`Self::get`] for one opening of the session at a time; the table
    /// is locked only to look and to insert, never while the store is
    /// asked (see `opening_gate`). An expired predecessor's home is moved
    /// aside into `discarded` (one rename), not removed.
    fn get_locked(&self, tenant: &str, session_id: &str, create: Create, discarded: &mut Option<DiscardedHome>) -> Result<Arc<Session>, InterpreterError> {
        let interpreter = self.interpreter;
        let store = &interpreter.store;
        let config = &interpreter.config;
        let tenant = names::tenant(tenant)?;
        let session_id = names::session_id(session_id)?;
        let may_create = !matches!(create, Create::No);
        let copy = matches!(create, Create::Copy { .. });
        let (ttl, asked, shared_files, asked_layout) = match create {
            Create::Yes { ttl, runtime } => (ttl, runtime, None, FilesLayout::MntData),
            Create::Sandbox { ttl, runtime } => (ttl, Some(runtime), None, FilesLayout::Root),
            Create::Sharing { ttl, runtime, files, layout } => (ttl, Some(runtime), Some(files), layout),
            Create::Copy { ttl, runtime, layout } => (Some(ttl), Some(runtime), None, layout),
            Create::No => (None, None, None, FilesLayout::MntData),
        };
        let key = (tenant.to_owned(), session_id.to_owned());
        let _opening = interpreter.opening.enter(&key);
        if let Some(session) = listed(&interpreter.table.lock().unwrap_or_else(|p| p.into_inner()), &key, asked)? {
            return Ok(session);
        }
        let (kept, expired): (Option<SessionMeta>, Option<SessionMeta>) = match store.read_meta(tenant, session_id) {
            Some(meta) if unix_now().saturating_sub(meta.last_used_unix) < meta.ttl_seconds => (Some(meta), None),
            found => (None, found),
        };
        if kept.is_none() && !may_create {
            return Err(InterpreterError::NoSuchSession(session_id.to_owned()));
        }
        // A session opened in place of one that expired holding state (still
        // listed, still in the store, or noted when it was removed) says so
        // on its first run: it is not the session its caller had.
        let replaced_ttl = match kept {
            Some(_) => None,
            None => {
                let listed = interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).get(&key).filter(|s| s.had_state.load(Relaxed)).map(|s| s.ttl.as_secs());
                let noted = store.take_expired_note(tenant, session_id);
                listed.or(expired.filter(|m| m.had_state).map(|m| m.ttl_seconds)).or(noted)
            }
        };
        let runtime = match &kept {
            Some(meta) => {
                check_runtime(session_id, meta.runtime, asked)?;
                meta.runtime
            }
            None => asked.unwrap_or_else(|| interpreter.default_runtime()),
        };
        let sandbox = interpreter.sandbox_for(runtime)?;
        let ttl = if names::is_hidden(session_id) {
            // The service's own sessions (snapshots) end when their record does.
            HIDDEN_TTL
        } else {
            ttl.or(kept.as_ref().map(|m| Duration::from_secs(m.ttl_seconds))).unwrap_or(config.default_ttl).min(config.max_ttl).max(Duration::from_secs(1))
        };
        let mut adopted = None;
        if kept.is_none() {
            // An expired predecessor: the name is free at once, the tree goes later.
            *discarded = store.discard_home(tenant, session_id);
            Stats::add(&interpreter.stats.sessions_created, 1);
            if !copy && shared_files.is_none() && asked_layout == FilesLayout::MntData {
                let ready = interpreter.ready.as_ref().filter(|ready| ready.runtime() == runtime);
                adopted = ready.and_then(|ready| ready.take(&store.home(tenant, session_id)));
            }
        }
        let dirs = store.prepare_home(tenant, session_id, shared_files.as_deref().filter(|_| kept.is_none()))?;
        let layout = kept.as_ref().map_or(asked_layout, |m| m.layout);
        layout.prepare(&dirs.files).map_err(|e| InterpreterError::io("laying out the session's files", e))?;
        // Made anew on every load: the mounted datasets and their access
        // list may have changed since an earlier process made it.
        let attached = kept.as_ref().map(|m| m.datasets.clone()).unwrap_or_default();
        let attached = interpreter.dataset_store.build_view(&interpreter.artifact_store, tenant, &dirs.datasets_view, &attached)?;
        let mut live = sandbox
            .live_instance(Some(dirs.files.clone()), &LimitOverrides::default())
            .with_layout(layout)
            .with_quota(config.quota)
            .with_datasets(dirs.datasets_view.clone());
        if let Some(started) = adopted {
            Stats::add(&interpreter.stats.sessions_started_ahead, 1);
            live.adopt(started);
        }
        // An earlier process's state: in its image when it was hibernated
        // (a graceful stop), else lost with that process.
        let had_state = kept.as_ref().is_some_and(|m| m.had_state);
        let hibernated = kept.is_some() && store.has_image(tenant, session_id);
        if had_state && !hibernated {
            live = live.with_state_lost_for("the process that held the session's state stopped without saving it; the session starts fresh with its files");
        }
        if had_state && hibernated && !store.image_is_current(tenant, session_id) {
            live = live.with_older_image("the host that held the session stopped without saving its state; what ran after its last saved image is lost");
        }
        if let Some(ttl_seconds) = replaced_ttl {
            live = live.with_state_lost_for(expired_reason(ttl_seconds));
        }
        let session = Arc::new(Session {
            tenant: tenant.to_owned(),
            id: session_id.to_owned(),
            store: store.clone(),
            files: SessionFiles::new(dirs.files),
            layout,
            gate: crate::gates::files_gate::FilesGate::new(live.change_notice()),
            datasets_view: dirs.datasets_view,
            attached: std::sync::Mutex::new(attached),
            runtime,
            ttl,
            last_used: std::sync::Mutex::new(Instant::now()),
            had_state: std::sync::atomic::AtomicBool::new(had_state),
            hibernated: std::sync::atomic::AtomicBool::new(hibernated),
            memory_bytes: std::sync::atomic::AtomicU64::new(0),
            memory_measured: std::sync::Mutex::new(None),
            memory_owed: std::sync::atomic::AtomicBool::new(false),
            give_back_owed: std::sync::atomic::AtomicBool::new(false),
            live: Arc::new(tokio::sync::Mutex::new(live)),
            moved: std::sync::atomic::AtomicBool::new(false),
            // A new session's directory was just made empty: its first run
            // need not walk it to know what it held.
            seen: std::sync::Mutex::new((kept.is_none() && shared_files.is_none()).then(Picture::new)),
            meta_written: std::sync::Mutex::new(None),
            running: std::sync::Mutex::new(None),
            fork_source: std::sync::Mutex::new(None),
            shared_state: std::sync::Mutex::new(None),
            commands_running: std::sync::atomic::AtomicUsize::new(0),
            checkpointed: std::sync::Mutex::new(Default::default()),
            quiet_checkpoint_owed: std::sync::atomic::AtomicBool::new(false),
            image_is_live_state: std::sync::atomic::AtomicBool::new(false),
        });
        session.write_meta()?;
        interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).insert(key, session.clone());
        Ok(session)
    }

    /// Removes the session from the table and its home from the store.
    pub(crate) fn forget(&self, session: &Session) {
        self.unlist(session);
        session.store.remove_home(&session.tenant, &session.id);
    }

    /// Takes the session out of the table (when it is still the one listed).
    pub(crate) fn unlist(&self, session: &Session) {
        let key = (session.tenant.clone(), session.id.clone());
        let mut sessions = self.interpreter.table.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.get(&key).is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), session)) {
            sessions.remove(&key);
        }
    }
}

/// The session as its callers see it.
pub(crate) fn info(session: &Session) -> SessionInfo {
    SessionInfo {
        session_id: session.id.clone(),
        ttl_seconds: session.ttl.as_secs(),
        expires_in_seconds: session.ttl.saturating_sub(session.idle()).as_secs(),
        live: session.is_live(),
        hibernated: session.hibernated.load(Relaxed),
        runtime: session.runtime,
        memory_bytes: if session.is_live() { session.memory_bytes.load(Relaxed) } else { 0 },
    }
}

/// Removes session homes in the store past their TTL (left by this or an
/// earlier process) that the table does not hold; returns how many.
pub(crate) fn sweep_store(interpreter: &Interpreter) -> usize {
    let store = &interpreter.store;
    let mut removed = 0;
    for key in store.homes() {
        let meta = store.read_meta(&key.0, &key.1);
        let expired = meta.as_ref().is_none_or(|m| unix_now().saturating_sub(m.last_used_unix) >= m.ttl_seconds);
        let known = interpreter.table.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&key);
        if expired && !known {
            if let Some(meta) = meta.as_ref().filter(|m| m.had_state) {
                store.leave_expired_note(&key.0, &key.1, meta.ttl_seconds);
            }
            if store.remove_home(&key.0, &key.1) {
                removed += 1;
            }
        }
    }
    store.forget_old_expired_notes();
    removed
}

/// Creates the session, or returns it as it is.
#[derive(Debug)]
pub struct OpenSession {
    /// The session's name, chosen by the client.
    pub session_id: String,
    /// Idle time after which it is removed (the server's default when absent).
    pub ttl: Option<Duration>,
    /// The runtime, when the call creates the session.
    pub runtime: Option<Runtime>,
}

impl Operation for OpenSession {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Open).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.sessions().open(&c.tenant, &self.session_id, self.ttl, self.runtime)))
    }
}

/// The session as it is, without creating it.
#[derive(Debug)]
pub struct DescribeSession {
    /// The session to describe.
    pub session_id: String,
}

impl Operation for DescribeSession {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Describe).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.sessions().info(&c.tenant, &self.session_id)))
    }
}

/// Removes the session and its files.
#[derive(Debug)]
pub struct CloseSession {
    /// The session to remove.
    pub session_id: String,
}

impl Operation for CloseSession {
    type Output = Closed;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Close).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Closed, InterpreterError>> {
        Box::pin(async move {
            interpreter.sessions().close(&caller.tenant, &self.session_id).await?;
            Ok(Closed { status: "closed".to_owned() })
        })
    }
}

/// A second session over the session's files, with Python state of its own.
#[derive(Debug)]
pub struct OpenContext {
    /// The session whose files the context shares.
    pub session_id: String,
    /// The context's own session name.
    pub context_id: String,
    /// The context's idle TTL (the server's default when absent).
    pub ttl: Option<Duration>,
    /// The context's runtime (the session's when absent): a JavaScript
    /// context beside a Python session shares its files.
    pub runtime: Option<Runtime>,
}

impl Operation for OpenContext {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::OpenContext).session(&self.session_id).subject(&self.context_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.sessions().open_context(&c.tenant, &self.session_id, &self.context_id, self.ttl, self.runtime)))
    }
}

/// Starts the session's Python state afresh over the same files.
#[derive(Debug)]
pub struct RestartSession {
    /// The session to restart.
    pub session_id: String,
}

impl Operation for RestartSession {
    type Output = ();

    fn describe(&self) -> Described {
        Described::new(OperationKind::Restart).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<(), InterpreterError>> {
        Box::pin(async move {
            interpreter.sessions().restart(&caller.tenant, &self.session_id).await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::interpreter::Interpreter;
    use crate::test_support::{Step, hold, interpreter, within};

    /// Reopening an expired session removes its old directory while the
    /// session table is free: with that removal held up, calls on other
    /// sessions (an existing one, a new one) still answer at once.
    #[test]
    fn an_expired_sessions_directory_is_removed_without_holding_the_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (_runtime, interpreter) = interpreter(dir.path());
        let short = Some(Duration::from_secs(1));
        interpreter.sessions().open("t", "old", short, None).expect("old session");
        interpreter.files().upload("t", "old", "left.txt", b"from before", false, None).expect("upload");
        interpreter.sessions().open("t", "other", None, None).expect("other session");
        std::thread::sleep(Duration::from_millis(1100));

        let (entered, release) = hold(dir.path(), Step::Removal);
        let reopening = {
            let interpreter = interpreter.clone();
            std::thread::spawn(move || interpreter.sessions().open("t", "old", None, None))
        };
        let removing = entered.recv_timeout(Duration::from_secs(10)).expect("the expired directory is removed");
        assert!(removing.starts_with(dir.path().join(crate::stores::session_store::local::DISCARDED)), "removed after being moved aside: {}", removing.display());

        let other = interpreter.clone();
        let answered = within(Duration::from_secs(5), move || other.sessions().info("t", "other").map(|i| i.session_id));
        assert_eq!(answered.map(Result::ok), Some(Some("other".to_owned())), "another session answers during the removal");
        let other = interpreter.clone();
        let created = within(Duration::from_secs(5), move || other.sessions().open("t", "new", None, None).is_ok());
        assert_eq!(created, Some(true), "a new session is created during the removal");
        assert!(!reopening.is_finished(), "the reopening call waits for its own removal");

        release.send(()).expect("released");
        let reopened = reopening.join().expect("no panic").expect("reopened");
        assert_eq!(reopened.session_id, "old");
        assert!(interpreter.files().list("t", "old").expect("files").is_empty(), "the reopened session starts empty");
        assert!(!removing.exists(), "the old tree is gone");
    }


    /// name says on its first run that it starts afresh, and why: whether
    /// it was still listed, already swept away, or found expired on disk by
    /// the next process. A session that never held state says nothing.
    #[test]
    fn a_session_opened_in_place_of_an_expired_one_says_its_state_was_lost() {
        let dir = tempfile::tempdir().expect("temp dir");
        let short = Some(Duration::from_secs(1));
        let run_in = |runtime: &tokio::runtime::Runtime, interpreter: &Arc<Interpreter>, id: &str, code: &str| {
            let report = runtime.block_on(interpreter.runs().run_python("t", id, anypath_wire::RunRequest::code(code), "http://h")).expect("run");
            assert_eq!(report.cell.error, None, "{id}");
            (report.cell.output.stdout.clone(), report.cell.state_reset, report.cell.state_note.unwrap_or_default())
        };
        {
            let (runtime, interpreter) = interpreter(dir.path());
            for id in ["listed", "swept", "stateless"] {
                interpreter.sessions().open("t", id, short, None).expect("opened");
            }
            for id in ["listed", "swept"] {
                run_in(&runtime, &interpreter, id, "x = 1");
            }
            std::thread::sleep(Duration::from_millis(2100));
            // Still listed, not swept yet.
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "listed", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
            assert!(note.contains("expired"), "{note}");
            assert!(interpreter.sessions().sweep() >= 2, "the other two expired");
            assert!(!dir.path().join("sessions/t/swept").exists(), "swept away");
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "swept", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
            assert!(note.contains("expired"), "{note}");
            let (stdout, reset, _) = run_in(&runtime, &interpreter, "swept", "x = 2\nprint('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("True\n", false), "said once, then the new session holds its own state");
            let (stdout, reset, note) = run_in(&runtime, &interpreter, "stateless", "print('x' in globals())");
            assert_eq!((stdout.as_str(), reset), ("False\n", false), "a session without state lost none: {note}");
            // Expires while no process runs.
            interpreter.sessions().open("t", "restarted", short, None).expect("opened");
            run_in(&runtime, &interpreter, "restarted", "x = 1");
        }
        std::thread::sleep(Duration::from_millis(2100));
        let (runtime, interpreter) = interpreter(dir.path());
        assert!(!dir.path().join("sessions/t/restarted").exists(), "removed when the next process started");
        let (stdout, reset, note) = run_in(&runtime, &interpreter, "restarted", "print('x' in globals())");
        assert_eq!((stdout.as_str(), reset), ("False\n", true), "{note}");
        assert!(note.contains("expired"), "{note}");
    }
}
