//! A session's files as its callers reach them: uploads, listings, reads,
//! deletes and the tree operations (stat, list, make, write, remove, move),
//! each within the session's quota. None waits for, or is refused because
//! of, a run going on: files and code are independent, and a cell sees a
//! file a call writes appear as it would on a machine of its own (see
//! [`crate::gates::files_gate`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use anypath_sandbox::Runtime;
use anypath_wire::{FileInfo, FileList};
use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::directory::tree::Entry;
use crate::error::InterpreterError;
use crate::held::session::{Create, Session};
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};

/// How often a file call looks a session up again when it was handed over
/// to another host while the call waited for it.
const MOVED_RETRIES: usize = 3;

/// The interpreter's session files: see [`Interpreter::files`].
pub struct Files<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// A session's files and tree, within its quota.
    pub fn files(self: &Arc<Self>) -> Files<'_> {
        Files::of(self)
    }
}

impl<'a> Files<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// Writes a file into the session (created on first use, on `runtime`
    /// or the server's default).
    pub fn upload(&self, tenant: &str, session_id: &str, filename: &str, bytes: &[u8], overwrite: bool, runtime: Option<Runtime>) -> Result<FileInfo, InterpreterError> {
        // Checked first, so a refused name creates no session either.
        let name = names::filename(filename)?;
        self.change(tenant, session_id, Create::Yes { ttl: None, runtime }, |session| {
            self.check_write(session, name, &session.files.dir().join(name), bytes.len() as u64)?;
            let written = session.files.write(filename, bytes, overwrite)?;
            Ok((written, Some(name.to_owned())))
        })
    }

    /// Every file of the session.
    pub fn list(&self, tenant: &str, session_id: &str) -> Result<Vec<FileInfo>, InterpreterError> {
        self.interpreter.sessions().get(tenant, session_id, Create::No)?.files.list()
    }

    /// Every file of the session, and the datasets it reads at /data.
    pub fn list_with_datasets(&self, tenant: &str, session_id: &str) -> Result<FileList, InterpreterError> {
        let interpreter = self.interpreter;
        let session = interpreter.sessions().get(tenant, session_id, Create::No)?;
        let files = session.files.list()?;
        let datasets = interpreter.dataset_store.shown(&interpreter.artifact_store, &session.tenant, &session.datasets_view)?;
        Ok(FileList { files, datasets })
    }

    /// One file's bytes.
    pub fn read(&self, tenant: &str, session_id: &str, path: &str) -> Result<(FileInfo, Vec<u8>), InterpreterError> {
        self.interpreter.sessions().get(tenant, session_id, Create::No)?.files.read(path)
    }

    /// Deletes one file.
    pub fn delete(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        self.change(tenant, session_id, Create::No, |session| session.files.delete(path).map(|()| ((), None)))
    }

    /// The entry at `path` of the session's tree (`""`: its directory).
    pub fn stat(&self, tenant: &str, session_id: &str, path: &str) -> Result<Entry, InterpreterError> {
        self.interpreter.sessions().get(tenant, session_id, Create::No)?.files.stat(path)
    }

    /// The entries under the directory `path`, `depth` levels deep.
    pub fn list_dir(&self, tenant: &str, session_id: &str, path: &str, depth: u32) -> Result<Vec<Entry>, InterpreterError> {
        self.interpreter.sessions().get(tenant, session_id, Create::No)?.files.list_dir(path, depth)
    }

    /// Makes the directory `path` with its parents; false when it was there.
    pub fn make_dir(&self, tenant: &str, session_id: &str, path: &str) -> Result<bool, InterpreterError> {
        self.change(tenant, session_id, Create::No, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, 0)?;
            session.files.make_dir(path).map(|made| (made, None))
        })
    }

    /// Writes `bytes` at `path` with `metadata`, replacing a file there
    /// and making its directories; within the session's quota.
    pub fn write_path(&self, tenant: &str, session_id: &str, path: &str, bytes: &[u8], metadata: &BTreeMap<String, String>) -> Result<Entry, InterpreterError> {
        self.change(tenant, session_id, Create::No, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, bytes.len() as u64)?;
            let entry = session.files.write_path(path, bytes, metadata)?;
            let wrote = entry.path.clone();
            Ok((entry, Some(wrote)))
        })
    }

    /// Removes the file or directory at `path`.
    pub fn remove_path(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        self.change(tenant, session_id, Create::No, |session| session.files.remove(path).map(|()| ((), None)))
    }

    /// Moves `from` to `to` in the session's tree.
    pub fn move_path(&self, tenant: &str, session_id: &str, from: &str, to: &str) -> Result<Entry, InterpreterError> {
        self.change(tenant, session_id, Create::No, |session| {
            let entry = session.files.move_path(from, to)?;
            let wrote = entry.path.clone();
            Ok((entry, Some(wrote)))
        })
    }

    /// Changes the session's files beside whatever its runs do, holding
    /// back only a hand-over (a session handed over meanwhile is looked up,
    /// and so claimed, again), and makes the next run count its directory
    /// again. `change` gives its result and the file it left, if any, by
    /// its path in the directory (not a run's artifact).
    fn change<T>(&self, tenant: &str, session_id: &str, create: Create, change: impl FnOnce(&Session) -> Result<(T, Option<String>), InterpreterError>) -> Result<T, InterpreterError> {
        for _ in 0..MOVED_RETRIES {
            let session = self.interpreter.sessions().get(tenant, session_id, create.clone())?;
            let _hold = session.gate.enter();
            if session.moved.load(Relaxed) {
                continue;
            }
            let changed = change(&session);
            let wrote = match &changed {
                Ok((_, Some(path))) => session.files.dir().join(path).symlink_metadata().ok().map(|m| (path.as_str(), m.len(), m.modified().unwrap_or(std::time::UNIX_EPOCH))),
                _ => None,
            };
            // Counted again after a failure too: it may have left part of its change.
            session.gate.changed(&session.seen, wrote);
            return changed.map(|(result, _)| result);
        }
        Err(InterpreterError::Busy(session_id.to_owned()))
    }

    /// Whether writing `size` bytes at `path` (named `name` in errors) keeps
    /// the session within its quota, counting the file it replaces and the
    /// state image it keeps.
    fn check_write(&self, session: &Session, name: &str, path: &Path, size: u64) -> Result<(), InterpreterError> {
        let quota = self.interpreter.config.quota;
        let replaced = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len());
        let usage = anypath_sandbox::directory_usage(session.files.dir());
        let image = session.store.image_bytes(&session.tenant, &session.id);
        // Saturating: the directory may have changed since it was counted.
        let bytes = usage.bytes.saturating_add(image).saturating_sub(replaced.unwrap_or(0)).saturating_add(size);
        let files = usage.files.saturating_add(u64::from(replaced.is_none()));
        if size > quota.max_file_bytes {
            return Err(InterpreterError::Quota(format!("{name} is {size} bytes; a file may hold {}", quota.max_file_bytes)));
        }
        if bytes > quota.max_session_bytes {
            return Err(InterpreterError::Quota(format!("the session would hold {bytes} bytes; its quota is {}", quota.max_session_bytes)));
        }
        if files > quota.max_files {
            return Err(InterpreterError::Quota(format!("the session would hold {files} entries; its quota is {}", quota.max_files)));
        }
        Ok(())
    }
}

/// A file to write into a session (created when new).
#[derive(Debug)]
pub struct Upload {
    /// The session to write into.
    pub session_id: String,
    /// The file's name in the session directory.
    pub filename: String,
    /// The file's bytes.
    pub content: Content,
    /// Replace the file when it exists.
    pub overwrite: bool,
    /// The runtime, when the call creates the session.
    pub runtime: Option<Runtime>,
}

/// An upload's bytes as the transport received them.
#[derive(Debug)]
pub enum Content {
    /// Base64 (standard alphabet), decoded off the async workers.
    Base64(String),
    /// The bytes themselves.
    Raw(Bytes),
}

impl Operation for Upload {
    type Output = FileInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Upload).session(&self.session_id).subject(&self.filename)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<FileInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| {
            use base64::Engine;
            let bytes = match self.content {
                Content::Base64(text) => Bytes::from(base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(InterpreterError::InvalidBase64)?),
                Content::Raw(bytes) => bytes,
            };
            i.files().upload(&c.tenant, &self.session_id, &self.filename, &bytes, self.overwrite, self.runtime)
        }))
    }
}

/// Every file of the session, and the datasets it reads at /data.
#[derive(Debug)]
pub struct ListFiles {
    /// The session to list.
    pub session_id: String,
}

impl Operation for ListFiles {
    type Output = FileList;

    fn describe(&self) -> Described {
        Described::new(OperationKind::ListFiles).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<FileList, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().list_with_datasets(&c.tenant, &self.session_id)))
    }
}

/// One file's bytes.
#[derive(Debug)]
pub struct ReadFile {
    /// The session holding the file.
    pub session_id: String,
    /// The file's path in the session directory.
    pub path: String,
}

impl Operation for ReadFile {
    type Output = Vec<u8>;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Read).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Vec<u8>, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().read(&c.tenant, &self.session_id, &self.path).map(|(_, bytes)| bytes)))
    }
}

/// Deletes one file.
#[derive(Debug)]
pub struct DeleteFile {
    /// The session holding the file.
    pub session_id: String,
    /// The file's path in the session directory.
    pub path: String,
}

impl Operation for DeleteFile {
    type Output = ();

    fn describe(&self) -> Described {
        Described::new(OperationKind::Remove).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<(), InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().delete(&c.tenant, &self.session_id, &self.path)))
    }
}

/// The entry at `path` of the session's tree.
#[derive(Debug)]
pub struct StatPath {
    /// The session holding the tree.
    pub session_id: String,
    /// The entry's path (`""`: the session directory).
    pub path: String,
}

impl Operation for StatPath {
    type Output = Entry;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Stat).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Entry, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().stat(&c.tenant, &self.session_id, &self.path)))
    }
}

/// The entries under the directory `path`, `depth` levels deep.
#[derive(Debug)]
pub struct ListDir {
    /// The session holding the tree.
    pub session_id: String,
    /// The directory to list.
    pub path: String,
    /// How many levels deep.
    pub depth: u32,
}

impl Operation for ListDir {
    type Output = Vec<Entry>;

    fn describe(&self) -> Described {
        Described::new(OperationKind::ListDir).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Vec<Entry>, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().list_dir(&c.tenant, &self.session_id, &self.path, self.depth)))
    }
}

/// Makes a directory and its parents; false when it was there.
#[derive(Debug)]
pub struct MakeDir {
    /// The session holding the tree.
    pub session_id: String,
    /// The directory to make.
    pub path: String,
}

impl Operation for MakeDir {
    type Output = bool;

    fn describe(&self) -> Described {
        Described::new(OperationKind::MakeDir).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<bool, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().make_dir(&c.tenant, &self.session_id, &self.path)))
    }
}

/// Writes a file at `path`, making its directories.
#[derive(Debug)]
pub struct WritePath {
    /// The session holding the tree.
    pub session_id: String,
    /// The file's path.
    pub path: String,
    /// The file's bytes.
    pub bytes: Bytes,
    /// Its metadata, replacing any the file had.
    pub metadata: BTreeMap<String, String>,
}

impl Operation for WritePath {
    type Output = Entry;

    fn describe(&self) -> Described {
        Described::new(OperationKind::WriteFile).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Entry, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().write_path(&c.tenant, &self.session_id, &self.path, &self.bytes, &self.metadata)))
    }
}

/// Removes a file or a directory.
#[derive(Debug)]
pub struct RemovePath {
    /// The session holding the tree.
    pub session_id: String,
    /// What to remove.
    pub path: String,
}

impl Operation for RemovePath {
    type Output = ();

    fn describe(&self) -> Described {
        Described::new(OperationKind::Remove).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<(), InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().remove_path(&c.tenant, &self.session_id, &self.path)))
    }
}

/// Moves a file or a directory.
#[derive(Debug)]
pub struct MovePath {
    /// The session holding the tree.
    pub session_id: String,
    /// Where the entry is.
    pub from: String,
    /// Where it goes.
    pub to: String,
}

impl Operation for MovePath {
    type Output = Entry;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Move).session(&self.session_id).subject(&format!("{} -> {}", self.from, self.to))
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Entry, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.files().move_path(&c.tenant, &self.session_id, &self.from, &self.to)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use crate::test_support::interpreter;

    /// A file call made while a cell runs answers at once (it neither waits
    /// for the cell nor is refused), the cell sees the file appear, and the
    /// file is not reported as the cell's artifact.
    #[test]
    fn file_calls_go_on_beside_a_running_cell() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        interpreter.sessions().open("t", "s", None, None).expect("opened");
        let code = "import os, time\nopen('started', 'w').close()\ndeadline = time.time() + 20\n\
                    while not os.path.exists('during.txt') and time.time() < deadline:\n    time.sleep(0.05)\n\
                    print(open('during.txt').read())";
        let running = {
            let interpreter = interpreter.clone();
            runtime.spawn(async move { interpreter.runs().run_python("t", "s", anypath_wire::RunRequest::code(code), "http://h").await })
        };
        let started = dir.path().join("sessions/t/s/data/started");
        let waited = Instant::now();
        while !started.exists() && waited.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(started.exists(), "the cell started");
        let answered = Instant::now();
        interpreter.files().write_path("t", "s", "tree/x.txt", b"x", &BTreeMap::new()).expect("written while the cell runs");
        assert!(interpreter.files().make_dir("t", "s", "made").expect("made"));
        interpreter.files().upload("t", "s", "during.txt", b"seen by the cell", false, None).expect("uploaded while the cell runs");
        assert!(answered.elapsed() < Duration::from_secs(2), "took {:?}", answered.elapsed());
        let report = runtime.block_on(running).expect("no panic").expect("ran");
        assert_eq!((report.cell.error, report.cell.output.stdout.as_str()), (None, "seen by the cell\n"));
        let artifacts: Vec<String> = report.artifacts.into_iter().map(|a| a.filename).collect();
        assert_eq!(artifacts, ["started"], "what the file calls wrote is not the cell's");
    }
}
