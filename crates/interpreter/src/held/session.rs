//! One session as the interpreter holds it while it is listed: its files,
//! its live instance behind the run lock, its idle time and what it last
//! wrote to its store.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anypath_sandbox::{FilesLayout, LiveInstance, Runtime};

use crate::directory::session_files::SessionFiles;
use crate::error::InterpreterError;
use crate::gates::files_gate::{FilesGate, Picture};
use crate::stores::session_store::{SessionMeta, SessionStore};

/// How stale a session's metadata (its last use) may be: runs in between
/// do not write it.
const META_REFRESH: Duration = Duration::from_secs(5);

/// A session's run lock, held apart from the session.
pub(crate) type RunLock = tokio::sync::OwnedMutexGuard<LiveInstance>;

/// The sessions listed now, by (tenant, session id).
pub(crate) type Table = HashMap<(String, String), Arc<Session>>;

/// A listed session.
pub(crate) struct Session {
    pub(crate) tenant: String,
    pub(crate) id: String,
    /// Where its metadata and state image are kept.
    pub(crate) store: Arc<dyn SessionStore>,
    pub(crate) files: SessionFiles,
    /// How the code sees its files (kept in its metadata).
    pub(crate) layout: FilesLayout,
    /// How file calls go beside its runs.
    pub(crate) gate: FilesGate,
    /// What the code sees at /data.
    pub(crate) datasets_view: PathBuf,
    /// The staged datasets attached to it (kept in its metadata).
    pub(crate) attached: Mutex<Vec<String>>,
    pub(crate) runtime: Runtime,
    pub(crate) ttl: Duration,
    pub(crate) last_used: Mutex<Instant>,
    /// A run has left Python state in the instance (kept in its metadata).
    pub(crate) had_state: AtomicBool,
    /// The state waits in the store's image (read under `live`'s lock).
    pub(crate) hibernated: AtomicBool,
    /// What the live instance held of its own after its last run: the
    /// pages of its memories it wrote, and the state image it keeps for
    /// more forks of the same state (see `crate::views::footprint`).
    pub(crate) memory_bytes: AtomicU64,
    /// When `memory_bytes` was last measured, and the instance's memory
    /// size and held image's size then: a run that left both as they were
    /// within a second of that reuses it (see `crate::views::footprint`).
    pub(crate) memory_measured: Mutex<Option<(Instant, u64, u64)>>,
    /// A measurement is scheduled for after the one that still stands.
    pub(crate) memory_owed: AtomicBool,
    /// A give-back of the pages its runs left as the image had them waits
    /// for the session to be idle long enough (see `footprint`).
    pub(crate) give_back_owed: AtomicBool,
    /// The live instance behind the run lock (shared, so a lock can be
    /// held apart from a borrow of the session: [`crate::views::sessions::Sessions::locked`]).
    pub(crate) live: Arc<tokio::sync::Mutex<LiveInstance>>,
    /// Handed over to another host sharing the store: a call that took the
    /// run lock after the hand-over looks the session up (claims it) again.
    pub(crate) moved: AtomicBool,
    /// The session directory as the last successful run left it, so the
    /// next run need not walk it again before it starts. Taken and kept by
    /// runs under `live`'s lock; a file call clears it (`gate`).
    pub(crate) seen: Mutex<Option<Picture>>,
    /// When the metadata was last written, and whether it said the session
    /// held state.
    pub(crate) meta_written: Mutex<Option<(Instant, bool)>>,
    /// The run going on now, if there is one: its id, and what stops it.
    pub(crate) running: Mutex<Option<(String, anypath_sandbox::Interrupt)>>,
    /// The image its last forks were given (held weakly: the live instance
    /// keeps it while its state is unchanged), when its store keeps it as
    /// the session's fork source: a fork of the same state shares that
    /// stored image instead of writing it again.
    pub(crate) fork_source: Mutex<Option<std::sync::Weak<[u8]>>>,
    /// The state its stored image holds, shared in this process by the fork
    /// or snapshot that made the session: its first run maps that state's
    /// memory instead of reading and restoring the image. Cleared whenever
    /// the stored image changes.
    pub(crate) shared_state: Mutex<Option<Arc<anypath_sandbox::state_image::SharedState>>>,
    /// Commands running in its shell now (see `crate::views::commands`).
    pub(crate) commands_running: std::sync::atomic::AtomicUsize,
    /// Under `--checkpoint every-run`, the state its last kept image holds:
    /// a run whose checkpoint fails is rolled back to it.
    pub(crate) checkpointed: Mutex<Checkpointed>,
    /// Under `--checkpoint idle` on a shared store: a checkpoint is owed
    /// once the session has been quiet a moment (see
    /// `crate::views::hibernation::Hibernation::checkpoint_when_quiet`).
    pub(crate) quiet_checkpoint_owed: AtomicBool,
    /// The store's image is the live state (a quiet checkpoint made it so):
    /// the next run marks it older before it changes the state.
    pub(crate) image_is_live_state: AtomicBool,
}

/// The state a session's store holds for it, as far as this host knows.
#[derive(Clone, Default)]
pub(crate) enum Checkpointed {
    /// Not known (a run left a file open, so none was kept after it).
    #[default]
    Unknown,
    /// This image.
    Image(Arc<[u8]>),
}

impl Session {
    pub(crate) fn idle(&self) -> Duration {
        self.last_used.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    pub(crate) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// Whether the instance holds Python state now (a running one does).
    pub(crate) fn is_live(&self) -> bool {
        self.live.try_lock().map_or(true, |l| l.is_live())
    }

    /// Whether the metadata should be written again: its last use is older
    /// than [`META_REFRESH`], or it says the session holds no state when it
    /// does (or the reverse). Between writes a crash loses at most that
    /// much of the idle time a restarted process counts.
    pub(crate) fn meta_due(&self) -> bool {
        let had_state = self.had_state.load(Relaxed);
        let written = self.meta_written.lock().unwrap_or_else(|p| p.into_inner());
        written.is_none_or(|(at, with_state)| at.elapsed() >= META_REFRESH || with_state != had_state)
    }

    /// Marks the session used; writes its metadata when due.
    pub(crate) fn touch_and_keep(&self) {
        self.touch();
        if self.meta_due() {
            let _ = self.write_meta();
        }
    }

    pub(crate) fn write_meta(&self) -> Result<(), InterpreterError> {
        let meta = SessionMeta {
            ttl_seconds: self.ttl.as_secs(),
            last_used_unix: unix_now(),
            runtime: self.runtime,
            had_state: self.had_state.load(Relaxed),
            datasets: self.attached.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            layout: self.layout,
        };
        self.store.write_meta(&self.tenant, &self.id, &meta)?;
        *self.meta_written.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), meta.had_state));
        Ok(())
    }
}

/// Whether a call may create the session it names, and how.
#[derive(Clone)]
pub(crate) enum Create {
    No,
    Yes { ttl: Option<Duration>, runtime: Option<Runtime> },
    /// As `Yes`, its files laid out as a sandbox's whole tree
    /// ([`FilesLayout::Root`]): E2B's sandboxes.
    Sandbox { ttl: Option<Duration>, runtime: Runtime },
    /// A new session whose directory is another session's: the same
    /// files, its own Python state (a second context of one sandbox).
    Sharing { ttl: Option<Duration>, runtime: Runtime, files: PathBuf, layout: FilesLayout },
    /// A new session about to receive another's files and state (a fork, a
    /// snapshot, a sandbox from a snapshot): laid out as `layout`, and never
    /// given an instance started ahead. Its state would replace that
    /// instance, or, mapped into it, save the child's first run a few
    /// milliseconds only to spend them starting a replacement beside it.
    Copy { ttl: Duration, runtime: Runtime, layout: FilesLayout },
}

impl Create {
    /// A new session laid out and run as `session` is, idle for `ttl` (a fork).
    pub(crate) fn like(session: &Session, ttl: Duration) -> Self {
        Self::Copy { ttl, runtime: session.runtime, layout: session.layout }
    }
}

/// The table's unexpired session under `key`, touched, when it runs the
/// runtime `asked` for (if any).
pub(crate) fn listed(sessions: &Table, key: &(String, String), asked: Option<Runtime>) -> Result<Option<Arc<Session>>, InterpreterError> {
    match sessions.get(key) {
        // A session whose hold lapsed may have moved to another host: it is claimed again.
        Some(session) if session.idle() < session.ttl && session.store.holds(&key.0, &key.1) => {
            check_runtime(&key.1, session.runtime, asked)?;
            session.touch();
            Ok(Some(session.clone()))
        }
        _ => Ok(None),
    }
}

/// An existing session runs the runtime it was created with: asking for another is an error.
pub(crate) fn check_runtime(session_id: &str, has: Runtime, asked: Option<Runtime>) -> Result<(), InterpreterError> {
    match asked {
        Some(asked) if asked != has => Err(InterpreterError::RuntimeMismatch { session: session_id.to_owned(), has, asked }),
        _ => Ok(()),
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
