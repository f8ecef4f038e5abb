//! A session's files as its callers reach them: uploads, listings, reads,
//! deletes and the tree operations (stat, list, make, write, remove, move),
//! each within the session's quota and never while a run changes the
//! directory under it.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use anypath_sandbox::Runtime;
use anypath_wire::{FileInfo, FileList};
use bytes::Bytes;

use crate::error::InterpreterError;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};
use crate::session::{Create, Session};
use crate::tree::Entry;

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
        names::filename(filename)?;
        // Under the run lock, so a run cannot write between the check and the upload.
        let (session, running) = self.interpreter.sessions().locked_now(tenant, session_id, Create::Yes { ttl: None, runtime })?;
        let name = names::filename(filename)?;
        self.check_write(&session, name, &session.files.dir().join(name), bytes.len() as u64)?;
        session.forget_seen(&running);
        session.files.write(filename, bytes, overwrite)
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

    /// Deletes one file, under the run lock: a run or an upload counting the
    /// session's usage never sees a file vanish halfway.
    pub fn delete(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        let (session, running) = self.interpreter.sessions().locked_now(tenant, session_id, Create::No)?;
        session.forget_seen(&running);
        session.files.delete(path)
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
        self.change_tree(tenant, session_id, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, 0)?;
            session.files.make_dir(path)
        })
    }

    /// Writes `bytes` at `path`, replacing a file there and making its
    /// directories; within the session's quota.
    pub fn write_path(&self, tenant: &str, session_id: &str, path: &str, bytes: &[u8]) -> Result<Entry, InterpreterError> {
        self.change_tree(tenant, session_id, |session| {
            self.check_write(session, path, &session.files.resolve(path)?, bytes.len() as u64)?;
            session.files.write_path(path, bytes)
        })
    }

    /// Removes the file or directory at `path`.
    pub fn remove_path(&self, tenant: &str, session_id: &str, path: &str) -> Result<(), InterpreterError> {
        self.change_tree(tenant, session_id, |session| session.files.remove(path))
    }

    /// Moves `from` to `to` in the session's tree.
    pub fn move_path(&self, tenant: &str, session_id: &str, from: &str, to: &str) -> Result<Entry, InterpreterError> {
        self.change_tree(tenant, session_id, |session| session.files.move_path(from, to))
    }

    /// Changes the session's tree while no run is going (`Busy` otherwise),
    /// and makes the next run count its directory again.
    fn change_tree<T>(&self, tenant: &str, session_id: &str, change: impl FnOnce(&Session) -> Result<T, InterpreterError>) -> Result<T, InterpreterError> {
        let (session, running) = self.interpreter.sessions().locked_now(tenant, session_id, Create::No)?;
        let changed = change(&session);
        session.forget_seen(&running);
        changed
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<FileInfo, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| {
            use base64::Engine;
            let bytes = match self.content {
                Content::Base64(text) => Bytes::from(base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(InterpreterError::InvalidBase64)?),
                Content::Raw(bytes) => bytes,
            };
            i.files().upload(&c.tenant, &self.session_id, &self.filename, &bytes, self.overwrite, self.runtime)
        })
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<FileList, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().list_with_datasets(&c.tenant, &self.session_id))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<Vec<u8>, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().read(&c.tenant, &self.session_id, &self.path).map(|(_, bytes)| bytes))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<(), InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().delete(&c.tenant, &self.session_id, &self.path))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<Entry, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().stat(&c.tenant, &self.session_id, &self.path))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<Vec<Entry>, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().list_dir(&c.tenant, &self.session_id, &self.path, self.depth))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<bool, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().make_dir(&c.tenant, &self.session_id, &self.path))
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
}

impl Operation for WritePath {
    type Output = Entry;

    fn describe(&self) -> Described {
        Described::new(OperationKind::WriteFile).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<Entry, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().write_path(&c.tenant, &self.session_id, &self.path, &self.bytes))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<(), InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().remove_path(&c.tenant, &self.session_id, &self.path))
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

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> impl Future<Output = Result<Entry, InterpreterError>> + Send {
        blocking(interpreter, caller, move |i, c| i.files().move_path(&c.tenant, &self.session_id, &self.from, &self.to))
    }
}
