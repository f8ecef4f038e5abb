//! An interpreter operation as a value: one request struct per operation,
//! beside the part it calls, says what it is for the audit trail
//! ([`Operation::describe`]) and does its work ([`Operation::call`]). A
//! host's facade runs any of them through one generic call, so a new
//! operation needs no new method there.

use std::future::Future;
use std::sync::Arc;

use anypath_wire::{RunReport, RunRequest};
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::interpreter::Interpreter;

/// One operation of the interpreter, for a caller.
pub trait Operation: Send + 'static {
    /// What the operation answers.
    type Output: Send + 'static;

    /// What the audit trail says of it: its name, session and subject.
    fn describe(&self) -> Described;

    /// Does the work for `caller`. Blocking file work goes to the blocking
    /// pool ([`blocking`]); only waiting (on a run, a lock) stays async.
    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Self::Output, InterpreterError>>;

    /// The run this operation asks for, when it is one: a host admits it,
    /// checks its environment and counts it.
    fn run_request(&self) -> Option<&RunRequest> {
        None
    }

    /// The environment a command asks for, when the operation is one: a
    /// host admits it as a run and checks its environment the same way.
    fn command_env(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        None
    }

    /// The report in a run's answer, when the operation is a run.
    fn run_report(output: &Self::Output) -> Option<&RunReport> {
        let _ = output;
        None
    }
}

/// Who an operation is for, as the interpreter needs to know it.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The tenant whose sessions, artifacts and datasets the call may touch.
    pub tenant: String,
    /// Base of the absolute links the answer carries (`http://host:port`,
    /// or the public URL).
    pub base_url: String,
}

/// An operation as the audit trail names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The operation's name.
    pub kind: OperationKind,
    /// The session it is on.
    pub session: Option<String>,
    /// What it names in it: a path, an artifact id, a dataset, a new session.
    pub subject: Option<String>,
}

impl Described {
    /// An operation of `kind` on no session in particular.
    pub fn new(kind: OperationKind) -> Self {
        Self { kind, session: None, subject: None }
    }

    /// The session the operation is on.
    pub fn session(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    /// What the operation names.
    pub fn subject(mut self, subject: &str) -> Self {
        self.subject = Some(subject.to_owned());
        self
    }
}

/// Makes [`OperationKind`] from its variants alone, each written once:
/// [`OperationKind::ALL`] lists them and [`OperationKind::name`] is each
/// one's name in snake case, so no second list can miss or misspell one.
macro_rules! operation_kinds {
    ($(#[$outer:meta])* pub enum OperationKind { $($(#[$inner:meta])* $kind:ident,)* }) => {
        $(#[$outer])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum OperationKind {
            $($(#[$inner])* $kind,)*
        }

        impl OperationKind {
            /// Every operation, in the order declared.
            pub const ALL: &[Self] = &[$(Self::$kind),*];

            /// The name an audit line carries as its `operation` and
            /// message: the variant's name in snake case (`OpenContext` is
            /// `open_context`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$kind => {
                        const BYTES: [u8; snake_len(stringify!($kind))] = snake_bytes(stringify!($kind));
                        const NAME: &str = match std::str::from_utf8(&BYTES) {
                            Ok(name) => name,
                            Err(_) => panic!("a variant's name is ASCII"),
                        };
                        NAME
                    })*
                }
            }
        }
    };
}

operation_kinds! {
    /// What was asked of the interpreter's host, by the name its audit line carries.
    pub enum OperationKind {
        /// A caller presented no valid credential.
        Authenticate,
        Open,
        Describe,
        Close,
        Fork,
        OpenContext,
        Hibernate,
        Restart,
        Interrupt,
        Upload,
        WriteFile,
        MakeDir,
        Move,
        Remove,
        Stat,
        ListDir,
        ListFiles,
        /// A session file's bytes, to an authenticated caller.
        Read,
        /// A session file's bytes as base64 (`read_artifact`).
        ReadArtifact,
        /// An artifact's metadata.
        Artifact,
        ListArtifacts,
        /// An artifact's bytes through a signed link.
        Download,
        LoadArtifact,
        Run,
        ListDatasets,
        StageDataset,
        RemoveDataset,
        AttachDataset,
        /// A session's state and files kept as a snapshot.
        Snapshot,
        ListSnapshots,
        DescribeSnapshot,
        DeleteSnapshot,
        /// A run's state and report, by its id.
        DescribeRun,
        /// A run's events, as they come or again from an event id.
        FollowRun,
        /// A command line run in a session's shell.
        Command,
        /// A command's state and report, by its id.
        DescribeCommand,
        /// A command's output, as it comes or again from an event id.
        FollowCommand,
        /// The commands running in a session.
        ListCommands,
        /// A command stopped by its id.
        StopCommand,
        /// Input written to a running command's stdin.
        CommandStdin,
    }
}

/// The length of ASCII `camel` (`CamelCase`) in snake case: one `_` more
/// before each capital but the first.
const fn snake_len(camel: &str) -> usize {
    let bytes = camel.as_bytes();
    let mut len = bytes.len();
    let mut i = 1;
    while i < bytes.len() {
        if bytes[i].is_ascii_uppercase() {
            len += 1;
        }
        i += 1;
    }
    len
}

/// ASCII `camel` (`CamelCase`) in snake case, in its [`snake_len`] bytes.
const fn snake_bytes<const N: usize>(camel: &str) -> [u8; N] {
    let bytes = camel.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut j) = (0, 0);
    while i < bytes.len() {
        if i > 0 && bytes[i].is_ascii_uppercase() {
            out[j] = b'_';
            j += 1;
        }
        out[j] = bytes[i].to_ascii_lowercase();
        i += 1;
        j += 1;
    }
    out
}

/// The body of an operation whose work is blocking file work: `work` runs
/// on the blocking pool with the interpreter and the caller.
pub fn blocking<T: Send + 'static>(
    interpreter: Arc<Interpreter>,
    caller: &CallContext,
    work: impl FnOnce(&Arc<Interpreter>, &CallContext) -> Result<T, InterpreterError> + Send + 'static,
) -> impl Future<Output = Result<T, InterpreterError>> + Send + 'static {
    let caller = caller.clone();
    async move {
        tokio::task::spawn_blocking(move || work(&interpreter, &caller))
            .await
            .unwrap_or_else(|e| Err(InterpreterError::Unfinished(e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::OperationKind;

    #[test]
    fn an_operation_is_named_by_its_variant_in_snake_case() {
        assert_eq!(OperationKind::Authenticate.name(), "authenticate");
        assert_eq!(OperationKind::OpenContext.name(), "open_context");
        assert_eq!(OperationKind::DescribeSnapshot.name(), "describe_snapshot");
        let mut names: Vec<&str> = OperationKind::ALL.iter().map(|kind| kind.name()).collect();
        assert!(names.iter().all(|name| name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') && !name.starts_with('_')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OperationKind::ALL.len(), "every operation has a name of its own");
    }
}
