//! anypath's code interpreter: sessions with live Python state, session
//! files and runs, on the same sandbox (engine, limits, logging) as the REST
//! executor.
//!
//! [`Interpreter`] (`interpreter.rs`; started in `opening.rs`, configured
//! by [`config`]) holds the shared state, and the folders say what it is:
//! - `held/`: what it holds in memory: each listed session's record and
//!   the table of them, homes made ahead, counters;
//! - `stores/`: what outlives the process: sessions' homes, metadata and
//!   images behind one seam ([`SessionStore`], [`LocalSessionStore`]),
//!   artifacts, datasets, the records a fleet shares;
//! - `gates/`: where calls on one session wait for one another;
//! - `directory/`: a session's directory on the host, by name and as a tree.
//!
//! None of these knows `Interpreter`. `views/` holds the parts it hands
//! out, each a view over that state doing one kind of work: [`sessions`]
//! (the table, open, close, fork, contexts, restart, the sweep, hand-over
//! between hosts), [`hibernation`] (parking state in images under the
//! memory budget, and resuming it), [`runs`], [`files`], [`artifacts`],
//! [`datasets`] and [`snapshots`]. Each operation a caller may ask for is
//! a request struct beside its view that implements [`Operation`], so a
//! host runs them all through one generic call that audits, admits and
//! counts them. Modules keep their paths at the crate's root
//! (`anypath_interpreter::sessions`, ...), whichever folder holds them.
//!
//! Public async functions return a boxed future ([`BoxFuture`]) made here:
//! an `async fn`'s body is compiled again in every crate that awaits it,
//! with all the generic code it reaches (wasmtime's bindings, hyper, axum),
//! so each binary and test harness above would compile it anew; boxed, it
//! compiles once, in this crate.
//!
//! [`BoxFuture`]: futures_util::future::BoxFuture

mod directory;
mod gates;
mod held;
mod interpreter;
mod opening;
mod stores;
#[cfg(test)]
mod test_support;
mod views;

pub mod config;
pub mod error;
pub mod names;
pub mod operation;

pub use directory::{file_metadata, session_files, tree};
pub use stores::{artifact_share, artifact_store, dataset_store, mime, session_store, shared_records, signing};
pub use views::{artifacts, commands, datasets, files, hibernation, runs, sandbox_open, sessions, shared_files, snapshots};

pub use anypath_wire::{
    ArtifactContent, ArtifactFailure, LoadArtifactRequest, ReadinessCheck, RunReport, RunRequest,
    SessionInfo, StateOrigin,
};
pub use artifact_share::ArtifactShare;
pub use artifact_store::{
    Artifact, ArtifactConfig, ArtifactStore, DEFAULT_MAX_ARTIFACTS_PER_RUN, LinkQuery,
};
pub use config::{Checkpoint, InterpreterConfig, SnapshotConfig, Storage};
pub use dataset_store::{AccessListError, DatasetAccess, DatasetConfig, ReceivedFile};
pub use error::InterpreterError;
pub use interpreter::Interpreter;
pub use operation::{CallContext, Described, Operation, OperationKind};
pub use session_files::{FileInfo, SessionFiles};
pub use session_store::{InterruptRequest, LocalSessionStore, SessionMeta, SessionStore};
pub use signing::Signer;
pub use held::stats::StatsSnapshot;
pub use tree::{Entry, EntryKind};
