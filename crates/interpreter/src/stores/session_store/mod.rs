//! What is kept for each session, behind one seam: its home (the directory
//! its code sees at /mnt/data and its view of datasets at /data), its
//! metadata, its hibernated state image, and the notes sessions that expired
//! holding state leave. [`LocalSessionStore`] keeps them in a directory tree;
//! the rest of the interpreter talks to [`SessionStore`], not to paths.
//!
//! Every method may touch storage: call them off the async workers.

pub mod local;

use std::path::{Path, PathBuf};

use anypath_sandbox::Runtime;
use serde::{Deserialize, Serialize};

use crate::error::InterpreterError;

pub use local::LocalSessionStore;

/// A session's view of its datasets, beside its files: what the code sees at /data.
pub(crate) const DATASETS_VIEW: &str = "datasets";

/// What is kept of a session between calls and across a restart of the process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionMeta {
    /// Idle time after which the session is removed.
    pub ttl_seconds: u64,
    /// When the session was last used, in seconds since the Unix epoch.
    pub last_used_unix: u64,
    /// Absent in sessions written before runtimes existed: those ran `python`.
    #[serde(default)]
    pub runtime: Runtime,
    /// A run has left Python state in the session's instance: a process
    /// that finds the session on disk starts a fresh one and must say so.
    #[serde(default)]
    pub had_state: bool,
    /// The staged datasets attached to the session, shown again at /data
    /// when a later process loads it.
    #[serde(default)]
    pub datasets: Vec<String>,
    /// How the code sees the files; absent before layouts existed.
    #[serde(default)]
    pub layout: anypath_sandbox::FilesLayout,
}

/// The directories a session's instance is given, on this host.
#[derive(Debug, Clone)]
pub struct SessionDirs {
    /// What the code sees at /mnt/data.
    pub files: PathBuf,
    /// What the code sees at /data.
    pub datasets_view: PathBuf,
}

/// A session's home moved out of its place, to be removed once nothing
/// waits on it (the session table is unlocked).
#[derive(Debug)]
pub struct DiscardedHome(PathBuf);

impl DiscardedHome {
    /// The home now at `path`.
    pub fn new(path: PathBuf) -> Self {
        Self(path)
    }

    /// Where the home now is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// An interrupt another host of a fleet asks for: tenant, session id, and
/// the run (any run of the session when `None`).
pub type InterruptRequest = (String, String, Option<String>);

/// Storage of sessions: what is kept for each one, by tenant and session id.
pub trait SessionStore: Send + Sync {
    /// The session's home on this host: the directory that holds its files
    /// and its datasets view (a new session may be given a home made ahead,
    /// moved there).
    fn home(&self, tenant: &str, session_id: &str) -> PathBuf;

    /// Makes the session's home and its files directory; with
    /// `shared_files`, the files directory is that one (another session's,
    /// seen through a link its removal does not follow).
    fn prepare_home(&self, tenant: &str, session_id: &str, shared_files: Option<&Path>) -> Result<SessionDirs, InterpreterError>;

    /// The session's metadata, when it has any that reads.
    fn read_meta(&self, tenant: &str, session_id: &str) -> Option<SessionMeta>;

    /// Keeps the session's metadata.
    fn write_meta(&self, tenant: &str, session_id: &str, meta: &SessionMeta) -> Result<(), InterpreterError>;

    /// Whether a state image waits for the session.
    fn has_image(&self, tenant: &str, session_id: &str) -> bool;

    /// The bytes of the session's state image (0 without one): it counts
    /// toward the session's quota.
    fn image_bytes(&self, tenant: &str, session_id: &str) -> u64;

    /// Keeps `image` as the session's state image, whole or not at all.
    fn save_image(&self, tenant: &str, session_id: &str, image: &[u8]) -> Result<(), InterpreterError>;

    /// The session's state image.
    fn read_image(&self, tenant: &str, session_id: &str) -> Result<Vec<u8>, InterpreterError>;

    /// Removes the session's state image.
    fn remove_image(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError>;

    /// Gives session `to` of the tenant a copy of `from`'s state image (a
    /// fork of a parked session, a session started from a snapshot). By
    /// default read and saved again; a store may share the bytes instead,
    /// since a saved image is never changed in place.
    fn copy_image(&self, tenant: &str, from: &str, to: &str) -> Result<(), InterpreterError> {
        let image = self.read_image(tenant, from)?;
        self.save_image(tenant, to, &image)
    }

    /// Keeps session `child`'s stored image (just saved by a fork of
    /// `parent`) also as `parent`'s fork source, so that later forks of the
    /// same state share it ([`Self::copy_fork_source`]) after every child
    /// resumed and dropped its own. False where the store cannot share
    /// bytes: each fork then saves the image again.
    fn keep_fork_source(&self, _tenant: &str, _parent: &str, _child: &str) -> Result<bool, InterpreterError> {
        Ok(false)
    }

    /// Gives session `to` of the tenant `parent`'s fork source as its state
    /// image (see [`Self::keep_fork_source`]).
    fn copy_fork_source(&self, _tenant: &str, _parent: &str, _to: &str) -> Result<(), InterpreterError> {
        Err(InterpreterError::Invalid("this store keeps no fork sources".into()))
    }

    /// Moves the session's home out of its place at once, so a new session
    /// may take it; `None` when there was nothing to move (or it was
    /// removed in place).
    fn discard_home(&self, tenant: &str, session_id: &str) -> Option<DiscardedHome>;

    /// Removes a home [`Self::discard_home`] moved aside.
    fn remove_discarded(&self, discarded: DiscardedHome);

    /// Removes the session's home with everything in it; true when it is gone.
    fn remove_home(&self, tenant: &str, session_id: &str) -> bool;

    /// Every session home kept, as (tenant, session id), for the sweep.
    fn homes(&self) -> Vec<(String, String)>;

    /// Notes that the session expired holding state, so a session opened
    /// later under its name says the state it finds is not the one it had.
    /// Best effort.
    fn leave_expired_note(&self, tenant: &str, session_id: &str, ttl_seconds: u64);

    /// The TTL noted when the session expired holding state, taken
    /// (removed) for the session now opened in its place.
    fn take_expired_note(&self, tenant: &str, session_id: &str) -> Option<u64>;

    /// Removes expired sessions' notes kept long enough.
    fn forget_old_expired_notes(&self);

    /// Whether the store takes a write now (for readiness), and why not.
    fn check_writable(&self) -> Result<(), String>;

    /// Makes this host the session's one holder before it is loaded here,
    /// and its home here current: a store shared by several hosts waits
    /// until the host that holds it has handed it over (or its hold has
    /// expired), then brings its files. A store of one host has nothing to
    /// claim.
    fn claim(&self, _tenant: &str, _session_id: &str) -> Result<(), InterpreterError> {
        Ok(())
    }

    /// Whether this host still holds the session it loaded: false once a
    /// shared store's hold on it has lapsed (the host was paused or cut
    /// off), when another host may have moved it on. Never touches storage.
    fn holds(&self, _tenant: &str, _session_id: &str) -> bool {
        true
    }

    /// Takes back the hold on a session this host loaded and stopped
    /// trusting (the store was out of reach past the hold's length): true
    /// when no other host held it meanwhile, so what this host has of it is
    /// still its newest state; false when it moved on. An error when the
    /// store is still out of reach.
    fn reclaim(&self, _tenant: &str, _session_id: &str) -> Result<bool, InterpreterError> {
        Ok(true)
    }

    /// Keeps the session's files (`files`, its directory here) where the
    /// next host to claim it finds them.
    fn persist_files(&self, _tenant: &str, _session_id: &str, _files: &Path) -> Result<(), InterpreterError> {
        Ok(())
    }

    /// Lets go of the session: another host may claim it now.
    fn release(&self, _tenant: &str, _session_id: &str) {}

    /// Whether the state image is the newest state the session had: false
    /// when runs after it were acknowledged by a host that stopped before
    /// saving again (their state went with it).
    fn image_is_current(&self, _tenant: &str, _session_id: &str) -> bool {
        true
    }

    /// The store's own figures for `/metrics` (name, help, value): what a
    /// shared store wrote, read and swept. None for a store of one host.
    fn store_metrics(&self) -> Vec<(String, &'static str, f64)> {
        Vec::new()
    }

    /// Where this fleet's hosts publish their artifacts, when the store is
    /// shared: links and session listings then work on every host.
    fn artifact_share(&self) -> Option<std::sync::Arc<dyn crate::stores::artifact_share::ArtifactShare>> {
        None
    }

    /// Records every host of the fleet sees, when the store is shared
    /// (see [`crate::stores::shared_records`]).
    fn shared_records(&self) -> Option<std::sync::Arc<dyn crate::stores::shared_records::SharedRecords>> {
        None
    }

    /// The sessions other hosts ask this one to hand over, as (tenant,
    /// session id), when the store is shared; taken once.
    fn handover_requests(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<(String, String)>> {
        None
    }

    /// The interrupts other hosts sharing the store ask this one for, as
    /// (tenant, session id, run id or any run); taken once.
    fn interrupt_requests(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<InterruptRequest>> {
        None
    }

    /// Asks the host that holds the session, when another holds it, to
    /// interrupt its run (`run_id`'s only, when given); true when asked.
    fn ask_interrupt(&self, _tenant: &str, _session_id: &str, _run_id: Option<&str>) -> Result<bool, InterpreterError> {
        Ok(false)
    }
}
