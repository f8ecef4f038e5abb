//! The types that cross a boundary between anypath's parts, defined once:
//! the native host writes them, the Spin components read them, and neither
//! spells a field or an error kind by hand.
//!
//! - [`ExecError`]: why an execution produced no reply, with the questions
//!   callers ask of it ([`ExecError::is_limit`], [`ExecError::is_block_fault`]).
//! - [`ExecReport`]: what `POST /v1/exec` answers, with its parts [`Output`],
//!   [`Metrics`], [`ReadSet`] and [`MutationRecord`] ([`Op`]).
//! - [`ExecRequest`]: what `POST /v1/exec` is asked to run, with its
//!   [`CollectionInput`]s and [`LimitOverrides`].
//! - The store's bodies: [`LoadRequest`] / [`LoadAnswer`] and
//!   [`CommitRequest`] / [`CommitAnswer`], with the [`ReadCheck`] a commit
//!   re-checks; a [`LoadedCollection`] is the one loaded-collection type,
//!   [`Loaded`] (with its [`Documents`]), that the data operations work on,
//!   plus what the commit's check needs.
//! - [`PlannerStatus`]: the planner's `GET /status`, and [`SettingError`], a
//!   variable a component cannot use.
//! - [`ErrorEnvelope`]: the JSON body of every error answer.
//! - The code interpreter's session API: [`OpenSessionRequest`],
//!   [`UploadRequest`], [`RunRequest`] and what they answer
//!   ([`SessionInfo`], [`FileList`], [`RunReport`] with its [`CellReport`]
//!   and [`Artifact`]s), on the [`Runtime`] a session runs, and the
//!   datasets it reads at `/data` ([`DatasetInfo`], [`AttachDatasetRequest`]),
//!   and the snapshots new sessions start from ([`SnapshotInfo`]).
//! - Runs that outlive their caller: [`RunControl`] (background, callback)
//!   and [`RunStatus`] in its [`RunState`].
//! - [`request_id`]: which caller-given request id is kept, in every face.

mod commands;
mod datasets;
mod envelope;
mod exec;
mod exec_request;
mod loaded;
mod planner;
pub mod request_id;
mod runs;
mod runtime;
mod session;
mod snapshots;
mod store;

pub use commands::{CommandReport, CommandRequest, CommandStatus};
pub use datasets::{AttachDatasetRequest, DatasetFile, DatasetInfo, DatasetList, DatasetSource};
pub use envelope::{ErrorBody, ErrorEnvelope};
pub use exec::{ExecError, ExecReport, Metrics, MutationRecord, Op, Output, ReadSet};
pub use exec_request::{CollectionInput, ExecRequest, LimitOverrides};
pub use loaded::{Documents, Loaded};
pub use planner::{PlannerStatus, SettingError};
pub use runs::{RunControl, RunState, RunStatus};
pub use runtime::{Runtime, UnknownRuntime};
pub use session::{
    Artifact, ArtifactContent, ArtifactFailure, ArtifactList, CellReport, CellResult, Closed, FigureFormat, FileInfo, FileList, ForkRequest, ForkedSessions, MAX_FORKS_PER_CALL, OpenSessionRequest, RunReport,
    LiveEvent, LoadArtifactRequest, Readiness, ReadinessCheck, ResultKind, ResultOrigin, RunRequest, SessionInfo, StateOrigin, UploadRequest,
};
pub use snapshots::{SnapshotInfo, SnapshotList, SnapshotRequest};
pub use store::{Change, CommitAnswer, CommitRequest, LoadAnswer, LoadRequest, LoadSpec, LoadedCollection, ReadCheck};
