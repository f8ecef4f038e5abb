//! anypath's code interpreter: sessions with live Python state, session
//! files and runs, on the same sandbox (engine, limits, logging) as the REST
//! executor.
//!
//! [`Interpreter`] holds the shared state and hands out one part per
//! concern: [`sessions`] (the table, open, close, fork, contexts, restart,
//! the sweep), [`hibernation`] (parking state in images under the memory
//! budget, and resuming it), [`runs`], [`files`], [`artifacts`] and
//! [`datasets`]. What is kept per session goes through one seam,
//! [`SessionStore`] ([`LocalSessionStore`]: a directory tree). Each
//! operation a caller may ask for is a request struct beside its part that
//! implements [`Operation`], so a host runs them all through one generic
//! call that audits, admits and counts them.
//!
//! Public async functions return a boxed future ([`BoxFuture`]) made here:
//! an `async fn`'s body is compiled again in every crate that awaits it,
//! with all the generic code it reaches (wasmtime's bindings, hyper, axum),
//! so each binary and test harness above would compile it anew; boxed, it
//! compiles once, in this crate.
//!
//! [`BoxFuture`]: futures_util::future::BoxFuture

pub mod artifact_share;
pub mod artifact_store;
pub mod artifacts;
pub mod config;
pub mod dataset_store;
pub mod datasets;
pub mod error;
pub mod file_metadata;
pub mod files;
mod files_gate;
mod footprint;
mod handover;
pub mod hibernation;
mod interpreter;
mod local_records;
pub mod mime;
pub mod names;
mod opening;
mod opening_gate;
pub mod operation;
mod ready;
pub mod runs;
pub mod sandbox_open;
mod session;
pub mod session_files;
pub mod session_store;
pub mod sessions;
pub mod shared_files;
pub mod shared_records;
pub mod signing;
pub mod snapshots;
mod stats;
#[cfg(test)]
mod test_support;
pub mod tree;

pub use anypath_wire::{
    ArtifactContent, ArtifactFailure, LoadArtifactRequest, ReadinessCheck, RunReport, RunRequest,
    SessionInfo, StateOrigin,
};
pub use artifact_share::ArtifactShare;
pub use artifact_store::{
    Artifact, ArtifactConfig, ArtifactStore, DEFAULT_MAX_ARTIFACTS_PER_RUN, LinkQuery,
};
pub use config::{Checkpoint, InterpreterConfig, Storage};
pub use dataset_store::{AccessListError, DatasetAccess, DatasetConfig, ReceivedFile};
pub use error::InterpreterError;
pub use interpreter::Interpreter;
pub use operation::{CallContext, Described, Operation, OperationKind};
pub use session_files::{FileInfo, SessionFiles};
pub use session_store::{LocalSessionStore, SessionMeta, SessionStore};
pub use signing::Signer;
pub use snapshots::SnapshotConfig;
pub use stats::StatsSnapshot;
pub use tree::{Entry, EntryKind};
