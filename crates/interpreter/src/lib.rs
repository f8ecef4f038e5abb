//! anypath's code interpreter: sessions with live Python state, session
//! files and runs, on the same sandbox (engine, limits, logging) as the REST
//! executor. The host's interpreter service puts admission, file work on
//! the blocking pool and logging in front of [`Interpreter`]; its transports
//! (the HTTP API, MCP) are thin layers over that service, one call per tool.

pub mod artifacts;
pub mod datasets;
pub mod error;
pub mod files;
pub mod mime;
pub mod names;
mod ready;
pub mod sessions;
pub mod signing;
mod stats;
pub mod tree;

pub use error::InterpreterError;
pub use files::{FileInfo, SessionFiles};
pub use datasets::{AccessListError, DatasetAccess, DatasetConfig, ReceivedFile};
pub use artifacts::{Artifact, ArtifactConfig, ArtifactStore, DEFAULT_MAX_ARTIFACTS_PER_RUN, LinkQuery};
pub use sessions::{ArtifactContent, ArtifactFailure, Interpreter, LoadArtifactRequest, InterpreterConfig, RunReport, RunRequest, SessionInfo, StateOrigin, Storage};
pub use signing::Signer;
pub use stats::StatsSnapshot;
pub use tree::{Entry, EntryKind};
