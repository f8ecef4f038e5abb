//! Session homes made ahead: a new `python` session takes one whose
//! directories exist and whose instance is started and set up, renamed into
//! the session's place, so its first run pays for neither. The instance's
//! preopens are open descriptors, which follow the rename.
//!
//! On disk: `<root>/ready-sessions/<id>/` with `data/`, `datasets/` and an
//! empty `meta.json` (overwritten in place, rather than created, when taken),
//! cleared when the interpreter starts (the instances died with the
//! process that made them).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anypath_sandbox::{PreStarted, SessionRuntime};

/// How many homes wait ready.
const READY_HOMES: usize = 2;

/// Homes made ahead for one runtime's new sessions.
pub(crate) struct ReadyHomes {
    dir: PathBuf,
    runtime: SessionRuntime,
    ready: Mutex<Vec<ReadyHome>>,
    /// A refill is under way.
    filling: AtomicBool,
}

struct ReadyHome {
    path: PathBuf,
    started: PreStarted,
}

impl ReadyHomes {
    /// Homes under `root/ready-sessions` for `runtime`'s sessions; what an
    /// earlier process left there is removed. Filled in the background
    /// from the first [`Self::take`] (or [`Self::fill`]) on.
    pub(crate) fn new(root: &Path, runtime: SessionRuntime) -> Arc<Self> {
        let dir = root.join("ready-sessions");
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(error) = std::fs::create_dir_all(&dir) {
            tracing::warn!(%error, "no session homes are made ahead");
        }
        Arc::new(Self { dir, runtime, ready: Mutex::new(Vec::new()), filling: AtomicBool::new(false) })
    }

    /// Moves a ready home to `home` (which must not exist) and returns its
    /// instance, for the session to adopt; `None` when none is ready or the
    /// move fails (the caller makes the home itself). Starts a refill.
    /// The runtime the homes' instances run.
    pub(crate) fn runtime(&self) -> anypath_sandbox::Runtime {
        self.runtime.runtime()
    }

    pub(crate) fn take(self: &Arc<Self>, home: &Path) -> Option<PreStarted> {
        let taken = self.ready.lock().unwrap_or_else(|p| p.into_inner()).pop();
        self.fill();
        let ready = taken?;
        let moved = home.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::rename(&ready.path, home));
        match moved {
            Ok(()) => Some(ready.started),
            Err(error) => {
                tracing::warn!(%error, "a ready session home could not be moved into place");
                let _ = std::fs::remove_dir_all(&ready.path);
                None
            }
        }
    }

    /// Makes homes until [`READY_HOMES`] wait, in the background; nothing
    /// outside a tokio runtime, or while a refill runs.
    pub(crate) fn fill(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.filling.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        runtime.spawn(async move {
            while this.ready.lock().unwrap_or_else(|p| p.into_inner()).len() < READY_HOMES {
                match this.make().await {
                    Ok(home) => this.ready.lock().unwrap_or_else(|p| p.into_inner()).push(home),
                    Err(error) => {
                        tracing::warn!(%error, "a session home could not be made ahead");
                        break;
                    }
                }
            }
            this.filling.store(false, Ordering::Release);
        });
    }

    /// One home: its directories (on the blocking pool), then its instance.
    async fn make(&self) -> Result<ReadyHome, String> {
        let path = self.dir.join(uuid::Uuid::new_v4().simple().to_string());
        let made = path.clone();
        tokio::task::spawn_blocking(move || {
            // Never `create_dir_all`: a data directory taken away stays away.
            std::fs::create_dir(&made)?;
            std::fs::create_dir(made.join("data"))?;
            std::fs::create_dir(made.join(crate::stores::session_store::DATASETS_VIEW))?;
            // Written over when the session takes the home: no new inode then.
            std::fs::write(made.join("meta.json"), b"{}")
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        match self.runtime.prestart(path.join("data"), path.join(crate::stores::session_store::DATASETS_VIEW)).await {
            Ok(started) => Ok(ReadyHome { path, started }),
            Err(error) => {
                let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(path)).await;
                Err(error.to_string())
            }
        }
    }
}
