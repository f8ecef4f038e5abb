//! Files that outlive the sessions using them: one session of a tenant
//! holds only files and is kept open while anything uses them, and other
//! sessions work in its directory, each with Python state of its own and
//! on a runtime of its own choosing. Closing one of those removes its
//! state, never the files. (Jupyter's kernels of one tenant share their
//! files this way, as the kernels of a Jupyter server share its root
//! directory.)

use std::sync::Arc;
use std::time::Duration;

use anypath_sandbox::Runtime;
use anypath_wire::SessionInfo;
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::{Create, Session};
use crate::interpreter::Interpreter;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};
use crate::views::sessions::{Sessions, info};

impl Sessions<'_> {
    /// Opens `session_id` (creating it when missing) and marks it used now,
    /// on disk too: a restarted process then finds it unexpired for as long
    /// as the sessions over its files were in use.
    pub fn keep_open(&self, tenant: &str, session_id: &str, ttl: Option<Duration>) -> Result<SessionInfo, InterpreterError> {
        let session = self.kept_open(tenant, session_id, ttl)?;
        Ok(info(&session))
    }

    /// A new session `session_id` over the files of `files_of` (kept open as
    /// [`Self::keep_open`] keeps it), with Python state of its own, on
    /// `runtime` (the server's default when absent), whatever runtime
    /// `files_of` was made with.
    pub fn open_over(
        &self,
        tenant: &str,
        files_of: &str,
        files_ttl: Option<Duration>,
        session_id: &str,
        ttl: Option<Duration>,
        runtime: Option<Runtime>,
    ) -> Result<SessionInfo, InterpreterError> {
        let owner = self.kept_open(tenant, files_of, files_ttl)?;
        if session_id == files_of || self.get(tenant, session_id, Create::No).is_ok() {
            return Err(InterpreterError::SessionExists(session_id.to_owned()));
        }
        let runtime = runtime.unwrap_or_else(|| self.interpreter.default_runtime());
        let create = Create::Sharing { ttl, runtime, files: owner.files.dir().to_path_buf(), layout: owner.layout };
        let session = self.get(tenant, session_id, create)?;
        Ok(info(&session))
    }

    fn kept_open(&self, tenant: &str, session_id: &str, ttl: Option<Duration>) -> Result<Arc<Session>, InterpreterError> {
        let session = self.get(tenant, session_id, Create::Yes { ttl, runtime: None })?;
        session.touch_and_keep();
        Ok(session)
    }
}

/// Opens a session that holds files for others (creating it when missing)
/// and marks it used now.
#[derive(Debug)]
pub struct KeepOpen {
    /// The session holding the files.
    pub session_id: String,
    /// Its idle TTL when it is created (the server's default when absent).
    pub ttl: Option<Duration>,
}

impl Operation for KeepOpen {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Open).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.sessions().keep_open(&c.tenant, &self.session_id, self.ttl)))
    }
}

/// A new session over another session's files, on a runtime of its own.
#[derive(Debug)]
pub struct OpenOver {
    /// The session holding the files (created when missing).
    pub files_of: String,
    /// Its idle TTL when it is created.
    pub files_ttl: Option<Duration>,
    /// The new session's name.
    pub session_id: String,
    /// The new session's idle TTL (the server's default when absent).
    pub ttl: Option<Duration>,
    /// The new session's runtime (the server's default when absent).
    pub runtime: Option<Runtime>,
}

impl Operation for OpenOver {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::OpenContext).session(&self.files_of).subject(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.sessions().open_over(&c.tenant, &self.files_of, self.files_ttl, &self.session_id, self.ttl, self.runtime)))
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::interpreter;

    /// Sessions over one holder's files see each other's files on either
    /// runtime; closing one leaves the files; another tenant's holder of
    /// the same name is another directory.
    #[test]
    fn files_outlive_the_sessions_over_them_and_stay_the_tenants() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (runtime, interpreter) = interpreter(dir.path());
        let sessions = interpreter.sessions();
        sessions.open_over("alice", "files", None, "k1", None, None).expect("k1 over the files");
        interpreter.files().upload("alice", "k1", "kept.txt", b"from k1", false, None).expect("written through k1");
        interpreter.sessions().open_over("alice", "files", None, "k2", None, None).expect("k2 over the files");
        assert!(interpreter.files().list("alice", "k2").expect("files").iter().any(|f| f.filename == "kept.txt"), "k2 sees k1's file");
        runtime.block_on(interpreter.sessions().close("alice", "k1")).expect("k1 closed");
        assert!(interpreter.files().list("alice", "files").expect("files").iter().any(|f| f.filename == "kept.txt"), "the file outlived k1");
        assert!(matches!(interpreter.sessions().open_over("alice", "files", None, "k2", None, None), Err(crate::error::InterpreterError::SessionExists(_))));
        interpreter.sessions().open_over("bob", "files", None, "k1", None, None).expect("bob's own");
        assert!(interpreter.files().list("bob", "k1").expect("files").is_empty(), "another tenant's holder is another directory");
    }
}
