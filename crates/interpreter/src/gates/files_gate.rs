//! How calls on a session's files go beside its runs: never through the
//! run lock. A file call waits for nothing a cell does (the directory is a
//! host directory the guest reaches through WASI, so a cell sees a file
//! appear as it would on a machine of its own); only a hand-over of the
//! session to another host, which copies the directory out, waits for the
//! file calls in progress and holds new ones back until it is done.
//!
//! A run still tells what it changed: every change from outside a run
//! counts a generation, and the run that saw the generation move neither
//! keeps its picture of the directory for the next run nor reports as its
//! own a file a file call wrote.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use anypath_sandbox::ChangeNotice;

/// Each file of a session directory with its size and modification time:
/// what a run saw, kept for the next run while no file call changed it.
pub(crate) type Picture = HashMap<String, (u64, SystemTime)>;

/// The most files a session remembers as written from outside between two runs.
const MAX_REMEMBERED: usize = 10_000;

/// A session's gate for its file calls.
pub(crate) struct FilesGate {
    /// Shared by file calls, taken whole by a hand-over.
    lock: tokio::sync::RwLock<()>,
    /// Counts the changes made from outside a run.
    generation: AtomicU64,
    /// What file calls left since the current run started, by path: a run
    /// that finds a file just so did not make it.
    written: Mutex<HashMap<String, (u64, SystemTime)>>,
    /// Tells the session's instances to recount their quota.
    notice: ChangeNotice,
}

/// A file call's hold on the gate: a hand-over waits until it is dropped.
pub(crate) type FilesHold<'a> = tokio::sync::RwLockReadGuard<'a, ()>;

impl FilesGate {
    pub(crate) fn new(notice: ChangeNotice) -> Self {
        Self { lock: tokio::sync::RwLock::new(()), generation: AtomicU64::new(0), written: Mutex::new(HashMap::new()), notice }
    }

    /// Holds the gate for one file call (waiting only for a hand-over in
    /// progress). Off the async workers.
    pub(crate) fn enter(&self) -> FilesHold<'_> {
        self.lock.blocking_read()
    }

    /// Holds the gate for a command's whole run, waiting as [`Self::enter`]
    /// does, on the async workers.
    pub(crate) async fn enter_async(&self) -> FilesHold<'_> {
        self.lock.read().await
    }

    /// Holds every file call back, once those in progress ended (a hand-over).
    pub(crate) async fn close(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        self.lock.write().await
    }

    /// A file call changed the directory: the next run recounts and walks
    /// it, and a run going on does not keep what it saw. `wrote` is a file
    /// it wrote, as it left it.
    pub(crate) fn changed(&self, seen: &Mutex<Option<Picture>>, wrote: Option<(&str, u64, SystemTime)>) {
        if let Some((path, size, modified)) = wrote {
            let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
            if written.len() < MAX_REMEMBERED {
                written.insert(path.to_owned(), (size, modified));
            }
        }
        // Under the picture's lock, after the change: a run that checks the
        // generation there either sees it moved or has its picture cleared.
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        *seen = None;
        self.notice.changed();
    }

    /// A run starts: what file calls wrote before it is in its picture.
    /// The generation it starts at.
    pub(crate) fn run_started(&self) -> u64 {
        self.written.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps `picture` for the next run, unless a file call changed the
    /// directory since the run that took it started at `generation`.
    pub(crate) fn keep_seen(&self, seen: &Mutex<Option<Picture>>, generation: u64, picture: Picture) {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        *seen = (self.generation.load(Ordering::Acquire) == generation).then_some(picture);
    }

    /// Whether the file at `path` is as a file call left it during the run.
    pub(crate) fn written_outside(&self, path: &str, state: &(u64, SystemTime)) -> bool {
        self.written.lock().unwrap_or_else(|p| p.into_inner()).get(path) == Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_during_a_run_drops_its_picture_and_is_not_its_own() {
        let gate = FilesGate::new(ChangeNotice::default());
        let seen = Mutex::new(None);
        let generation = gate.run_started();
        gate.keep_seen(&seen, generation, Picture::new());
        assert!(seen.lock().expect("seen").is_some(), "an undisturbed run keeps its picture");
        let generation = gate.run_started();
        let at = SystemTime::UNIX_EPOCH;
        gate.changed(&seen, Some(("up.txt", 3, at)));
        gate.keep_seen(&seen, generation, Picture::new());
        assert!(seen.lock().expect("seen").is_none(), "a picture taken before the change is stale");
        assert!(gate.written_outside("up.txt", &(3, at)));
        assert!(!gate.written_outside("up.txt", &(4, at)), "changed again since: by the run");
        gate.run_started();
        assert!(!gate.written_outside("up.txt", &(3, at)), "the next run's picture holds it");
    }
}
