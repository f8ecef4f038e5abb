//! Opening a session laid out as a sandbox's whole tree (E2B's sandboxes):
//! its files directory is the code's `/`, the code works in `/home/user`,
//! and the layout stays with the session (its forks and code contexts
//! share it; a later process finds it in the session's metadata).

use std::sync::Arc;
use std::time::Duration;

use anypath_sandbox::Runtime;
use anypath_wire::SessionInfo;
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::Create;
use crate::interpreter::Interpreter;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};

/// Creates a sandbox-layout session, or returns it as it is.
#[derive(Debug)]
pub struct OpenSandbox {
    /// The session's name, chosen by the client.
    pub session_id: String,
    /// Idle time after which it is removed (the server's default when absent).
    pub ttl: Option<Duration>,
    /// The runtime it runs.
    pub runtime: Runtime,
}

impl Operation for OpenSandbox {
    type Output = SessionInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Open).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<SessionInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| {
            let session = i.sessions().get(&c.tenant, &self.session_id, Create::Sandbox { ttl: self.ttl, runtime: self.runtime })?;
            Ok(crate::views::sessions::info(&session))
        }))
    }
}
