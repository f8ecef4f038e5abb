//! Sessions kept in a local directory tree, the layout a restarted process
//! finds again:
//!
//! - `<root>/sessions/<tenant>/<session_id>/`: the session's home, with
//!   `meta.json` (TTL, last use, attached datasets), `data/` (what the code
//!   sees at /mnt/data), `datasets/` (what it sees at /data) and, while it is
//!   hibernated, `state.img`; once it was forked, `fork-source.img`, the
//!   image of the state its last forks took (a link to theirs);
//! - `<root>/discarded/`: homes moved aside, to be removed while the session
//!   table is free (one rename in place of a whole tree's removal);
//! - `<root>/expired/<tenant>/<session_id>`: the note a session that expired
//!   holding state leaves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{DATASETS_VIEW, DiscardedHome, SessionDirs, SessionMeta, SessionStore};
use crate::error::InterpreterError;

/// The image a session's last forks were given, kept in its home for the
/// next fork of the same state to link to (see [`SessionStore::keep_fork_source`]).
const FORK_SOURCE: &str = "fork-source.img";

/// Where expired sessions' homes are moved, under the root, to be removed
/// once the session table is unlocked.
pub(crate) const DISCARDED: &str = "discarded";

/// A hibernated session's state image, beside `data/` (outside what the code sees).
pub(crate) const STATE_IMAGE: &str = "state.img";

/// Where a session that expired holding state leaves a note, under the root.
const EXPIRED: &str = "expired";

/// How long the note of an expired session is kept.
const EXPIRED_NOTE_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The note an expired session that held state leaves (see [`EXPIRED`]).
#[derive(Serialize, Deserialize)]
struct ExpiredNote {
    ttl_seconds: u64,
}

/// Sessions under one root directory.
#[derive(Debug)]
pub struct LocalSessionStore {
    root: PathBuf,
}

impl LocalSessionStore {
    /// The store under `root`: makes its directories and removes the homes
    /// a killed process moved aside but never removed.
    pub fn open(root: &Path) -> Result<Self, InterpreterError> {
        std::fs::create_dir_all(root.join("sessions")).map_err(|e| InterpreterError::io("creating the session root", e))?;
        let _ = std::fs::remove_dir_all(root.join(DISCARDED));
        std::fs::create_dir_all(root.join(DISCARDED)).map_err(|e| InterpreterError::io("creating the discarded-sessions directory", e))?;
        Ok(Self { root: root.to_path_buf() })
    }

    fn image(&self, tenant: &str, session_id: &str) -> PathBuf {
        self.home(tenant, session_id).join(STATE_IMAGE)
    }

    fn note(&self, tenant: &str, session_id: &str) -> PathBuf {
        self.root.join(EXPIRED).join(tenant).join(session_id)
    }
}

impl SessionStore for LocalSessionStore {
    fn home(&self, tenant: &str, session_id: &str) -> PathBuf {
        self.root.join("sessions").join(tenant).join(session_id)
    }

    fn prepare_home(&self, tenant: &str, session_id: &str, shared_files: Option<&Path>) -> Result<SessionDirs, InterpreterError> {
        let home = self.home(tenant, session_id);
        let files = home.join("data");
        if let Some(shared) = shared_files {
            std::fs::create_dir_all(&home).map_err(|e| InterpreterError::io("creating the session directory", e))?;
            std::os::unix::fs::symlink(shared, &files).map_err(|e| InterpreterError::io("sharing the session directory", e))?;
        }
        std::fs::create_dir_all(&files).map_err(|e| InterpreterError::io("creating the session directory", e))?;
        Ok(SessionDirs { files, datasets_view: home.join(DATASETS_VIEW) })
    }

    fn read_meta(&self, tenant: &str, session_id: &str) -> Option<SessionMeta> {
        serde_json::from_slice(&std::fs::read(self.home(tenant, session_id).join("meta.json")).ok()?).ok()
    }

    fn write_meta(&self, tenant: &str, session_id: &str, meta: &SessionMeta) -> Result<(), InterpreterError> {
        let bytes = serde_json::to_vec(meta).unwrap_or_default();
        std::fs::write(self.home(tenant, session_id).join("meta.json"), bytes).map_err(|e| InterpreterError::io("writing session metadata", e))
    }

    fn has_image(&self, tenant: &str, session_id: &str) -> bool {
        self.image(tenant, session_id).is_file()
    }

    fn image_bytes(&self, tenant: &str, session_id: &str) -> u64 {
        std::fs::metadata(self.image(tenant, session_id)).map_or(0, |m| m.len())
    }

    fn save_image(&self, tenant: &str, session_id: &str, image: &[u8]) -> Result<(), InterpreterError> {
        let path = self.image(tenant, session_id);
        let partial = self.home(tenant, session_id).join(format!("{STATE_IMAGE}.partial"));
        #[cfg(test)]
        crate::test_support::pause_at(crate::test_support::Step::ImageWrite, &path);
        write_synced(&partial, image).map_err(|e| InterpreterError::io("writing a state image", e))?;
        std::fs::rename(&partial, &path).map_err(|e| InterpreterError::io("writing a state image", e))
    }

    fn read_image(&self, tenant: &str, session_id: &str) -> Result<Vec<u8>, InterpreterError> {
        let path = self.image(tenant, session_id);
        #[cfg(test)]
        crate::test_support::pause_at(crate::test_support::Step::ImageRead, &path);
        std::fs::read(&path).map_err(|e| InterpreterError::io("reading a state image", e))
    }

    /// A hard link: images are written beside their place and renamed
    /// over it, never changed in place, so the two names share the bytes
    /// safely. Copied where a link cannot be made.
    fn copy_image(&self, tenant: &str, from: &str, to: &str) -> Result<(), InterpreterError> {
        link_or_copy(&self.image(tenant, from), &self.image(tenant, to)).map_err(|e| InterpreterError::io("copying a state image", e))
    }

    /// A link only: a copy would cost what saving the image again costs.
    fn keep_fork_source(&self, tenant: &str, parent: &str, child: &str) -> Result<bool, InterpreterError> {
        let target = self.home(tenant, parent).join(FORK_SOURCE);
        let partial = partial(&target);
        let _ = std::fs::remove_file(&partial);
        let linked = std::fs::hard_link(self.image(tenant, child), &partial).and_then(|()| std::fs::rename(&partial, &target));
        Ok(linked.is_ok())
    }

    fn copy_fork_source(&self, tenant: &str, parent: &str, to: &str) -> Result<(), InterpreterError> {
        link_or_copy(&self.home(tenant, parent).join(FORK_SOURCE), &self.image(tenant, to)).map_err(|e| InterpreterError::io("copying a fork's state image", e))
    }

    fn remove_image(&self, tenant: &str, session_id: &str) -> Result<(), InterpreterError> {
        let path = self.image(tenant, session_id);
        #[cfg(test)]
        if crate::test_support::fails_at(crate::test_support::Step::ImageRemove, &path) {
            return Err(InterpreterError::io("removing a resumed state image", std::io::Error::other("a failure the test asked for")));
        }
        std::fs::remove_file(path).map_err(|e| InterpreterError::io("removing a resumed state image", e))
    }

    /// Where the rename fails (the tree is elsewhere), the tree is removed
    /// in place, since the path must be free before the new session takes it.
    fn discard_home(&self, tenant: &str, session_id: &str) -> Option<DiscardedHome> {
        let home = self.home(tenant, session_id);
        let aside = self.root.join(DISCARDED).join(uuid::Uuid::new_v4().simple().to_string());
        match std::fs::rename(&home, &aside) {
            Ok(()) => Some(DiscardedHome::new(aside)),
            Err(_) => {
                if std::fs::symlink_metadata(&home).is_ok() {
                    let _ = std::fs::remove_dir_all(&home);
                }
                None
            }
        }
    }

    fn remove_discarded(&self, discarded: DiscardedHome) {
        remove_tree(discarded.path());
    }

    fn remove_home(&self, tenant: &str, session_id: &str) -> bool {
        remove_tree(&self.home(tenant, session_id))
    }

    fn homes(&self) -> Vec<(String, String)> {
        let Ok(tenants) = std::fs::read_dir(self.root.join("sessions")) else { return Vec::new() };
        let mut homes = Vec::new();
        for tenant in tenants.flatten() {
            let Ok(entries) = std::fs::read_dir(tenant.path()) else { continue };
            let tenant = tenant.file_name().to_string_lossy().into_owned();
            homes.extend(entries.flatten().map(|home| (tenant.clone(), home.file_name().to_string_lossy().into_owned())));
        }
        homes
    }

    fn leave_expired_note(&self, tenant: &str, session_id: &str, ttl_seconds: u64) {
        let path = self.note(tenant, session_id);
        let bytes = serde_json::to_vec(&ExpiredNote { ttl_seconds }).unwrap_or_default();
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, bytes));
        if let Err(error) = written {
            tracing::warn!(tenant, session = session_id, %error, "an expired session's note was not written");
        }
    }

    fn take_expired_note(&self, tenant: &str, session_id: &str) -> Option<u64> {
        let path = self.note(tenant, session_id);
        let note: Option<ExpiredNote> = serde_json::from_slice(&std::fs::read(&path).ok()?).ok();
        let _ = std::fs::remove_file(&path);
        note.map(|n| n.ttl_seconds)
    }

    fn forget_old_expired_notes(&self) {
        let Ok(tenants) = std::fs::read_dir(self.root.join(EXPIRED)) else { return };
        for tenant in tenants.flatten() {
            for note in std::fs::read_dir(tenant.path()).into_iter().flatten().flatten() {
                let old = note.metadata().and_then(|m| m.modified()).ok().and_then(|at| at.elapsed().ok()).is_some_and(|age| age >= EXPIRED_NOTE_KEPT);
                if old {
                    let _ = std::fs::remove_file(note.path());
                }
            }
        }
    }

    fn check_writable(&self) -> Result<(), String> {
        tempfile::NamedTempFile::new_in(&self.root).map(drop).map_err(|e| format!("the data directory {} is not writable: {e}", self.root.display()))
    }
}

/// Removes a directory tree no session refers to any more; true when it is gone.
fn remove_tree(path: &Path) -> bool {
    #[cfg(test)]
    crate::test_support::pause_at(crate::test_support::Step::Removal, path);
    std::fs::remove_dir_all(path).is_ok()
}

/// Writes `bytes` to a new file at `path` and waits until they are on the
/// disk: an image is renamed into its place only after, so a crash or a
/// power cut never leaves an image's name on a file whose bytes were lost.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_data()
}

/// Makes `target` (a state image) hold `source`'s bytes, whole or not at
/// all: a link where the filesystem can make one (a saved image is never
/// changed in place), else a copy.
fn link_or_copy(source: &Path, target: &Path) -> std::io::Result<()> {
    let partial = partial(target);
    let _ = std::fs::remove_file(&partial);
    std::fs::hard_link(source, &partial).or_else(|_| {
        std::fs::copy(source, &partial)?;
        std::fs::File::open(&partial)?.sync_data()
    })?;
    std::fs::rename(&partial, target)
}

/// Where `target` is written before it is renamed into place.
fn partial(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}
