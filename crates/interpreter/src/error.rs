//! Why an interpreter call failed; each kind maps to one HTTP status.

use crate::names::NameError;

/// A failed interpreter call.
#[derive(Debug, thiserror::Error)]
pub enum InterpreterError {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("no session {0:?} (it was closed, expired or never created)")]
    NoSuchSession(String),
    #[error("no file {0:?} in the session")]
    NoSuchFile(String),
    #[error("{0:?} exists; pass overwrite to replace it")]
    Exists(String),
    #[error("session {0:?} exists; a fork needs a new session id")]
    SessionExists(String),
    #[error("{0:?} is not a plain file")]
    NotAFile(String),
    #[error("session {0:?} is running other code; try again when it finishes")]
    Busy(String),
    #[error("{0}")]
    Invalid(String),
    #[error("no dataset {0:?} (it was never staged, or was removed)")]
    NoSuchDataset(String),
    #[error("no artifact {0:?} (it expired or never existed)")]
    NoSuchArtifact(String),
    #[error("no snapshot {0:?} (it was deleted, expired or never taken)")]
    NoSuchSnapshot(String),
    #[error("the snapshot was not kept: {0}")]
    SnapshotQuota(String),
    #[error("{filename:?} was not kept as an artifact: the tenant holds {held} bytes of artifacts, and the quota is {quota}")]
    ArtifactQuota { filename: String, held: u64, quota: u64 },
    #[error("{path} is {size} bytes, over the {cap}-byte read cap; fetch it from {download_url}")]
    TooLarge { path: String, size: u64, cap: u64, download_url: String },
    #[error("quota exceeded: {0}")]
    Quota(String),
    #[error("the link is invalid or has expired")]
    Forbidden,
    #[error("{what}: {source}")]
    Io { what: &'static str, source: std::io::Error },
    #[error("artifact index: {0}")]
    Index(#[from] rusqlite::Error),
    #[error("this server does not run the {0} runtime (it needs the runtime's files: `cargo xtask build`, or --python-data DIR)")]
    RuntimeUnavailable(anypath_sandbox::Runtime),
    #[error("session {session:?} runs {has}, not {asked}; a session keeps the runtime it was created with")]
    RuntimeMismatch { session: String, has: anypath_sandbox::Runtime, asked: anypath_sandbox::Runtime },
    /// An upload's content that is not base64.
    #[error("content_base64: {0}")]
    InvalidBase64(#[source] base64::DecodeError),
    /// The store sessions are shared through (an object store, the hosts'
    /// coordination) did not answer; nothing was changed.
    #[error("the shared session store is unavailable: {0}; try again shortly")]
    SharedStore(String),
    /// The session's saved state in the store is damaged, out of bounds or
    /// not the session's (`conflict`: whole, but of another runtime). Only
    /// this session is refused; its next run starts fresh and says so.
    #[error("the session's saved state cannot be used: {reason}")]
    ImageCorrupt { reason: String, conflict: bool },
    /// A run's state could not be kept under `--checkpoint every-run`; with
    /// `rolled_back`, the session is as it was before the run.
    #[error("the run's state could not be kept ({reason}); {}", if *rolled_back { "the session was rolled back to its state before the run, so the run may be retried (files it wrote stay)" } else { "the session keeps the run's state, which no image holds yet" })]
    CheckpointFailed { reason: String, rolled_back: bool },
    /// An operation's work on the blocking pool did not finish (it panicked
    /// or was cancelled).
    #[error("the call's file work did not finish: {0}")]
    Unfinished(String),
    /// The session runs as many commands at once as it may.
    #[error("session {0:?} already runs {1} commands at once; wait for one to end")]
    TooManyCommands(String, usize),
    /// Commands need the shell runtime, which this host was not started with.
    #[error("this server runs no shell (it needs the shell runtime: `cargo xtask build`, or --shell FILE)")]
    ShellUnavailable,
}

impl InterpreterError {
    pub(crate) fn index(e: rusqlite::Error) -> Self {
        Self::Index(e)
    }

    pub(crate) fn io(what: &'static str, source: std::io::Error) -> Self {
        Self::Io { what, source }
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        match self {
            Self::Name(_) | Self::Invalid(_) | Self::NotAFile(_) | Self::RuntimeUnavailable(_) | Self::InvalidBase64(_) => 400,
            Self::Forbidden => 403,
            Self::NoSuchSession(_) | Self::NoSuchFile(_) | Self::NoSuchArtifact(_) | Self::NoSuchDataset(_) | Self::NoSuchSnapshot(_) => 404,
            Self::Exists(_) | Self::SessionExists(_) | Self::Busy(_) | Self::RuntimeMismatch { .. } => 409,
            Self::TooLarge { .. } => 413,
            Self::ArtifactQuota { .. } | Self::Quota(_) | Self::SnapshotQuota(_) => 507,
            Self::Io { .. } | Self::Index(_) | Self::Unfinished(_) => 500,
            Self::SharedStore(_) => 503,
            Self::ImageCorrupt { conflict: true, .. } => 409,
            Self::CheckpointFailed { .. } => 503,
            Self::ImageCorrupt { conflict: false, .. } => 500,
            Self::ShellUnavailable => 501,
            Self::TooManyCommands(..) => 429,
        }
    }

    /// The stable error code of the JSON envelope.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Name(_) => "invalid_name",
            Self::Invalid(_) => "invalid_request",
            Self::NotAFile(_) => "not_a_file",
            Self::NoSuchSession(_) => "no_such_session",
            Self::NoSuchFile(_) => "no_such_file",
            Self::Exists(_) => "file_exists",
            Self::SessionExists(_) => "session_exists",
            Self::Busy(_) => "session_busy",
            Self::NoSuchArtifact(_) => "no_such_artifact",
            Self::NoSuchDataset(_) => "no_such_dataset",
            Self::NoSuchSnapshot(_) => "no_such_snapshot",
            Self::SnapshotQuota(_) => "snapshot_quota_exceeded",
            Self::ArtifactQuota { .. } => "artifact_quota_exceeded",
            Self::Quota(_) => "quota_exceeded",
            Self::TooLarge { .. } => "over_read_cap",
            Self::Forbidden => "forbidden",
            Self::Io { .. } | Self::Index(_) => "storage_failed",
            Self::RuntimeUnavailable(_) => "runtime_unavailable",
            Self::RuntimeMismatch { .. } => "runtime_mismatch",
            Self::InvalidBase64(_) => "invalid_base64",
            Self::Unfinished(_) => "internal",
            Self::SharedStore(_) => "session_store_unavailable",
            Self::ImageCorrupt { .. } => "session_image_corrupt",
            Self::CheckpointFailed { .. } => "checkpoint_failed",
            Self::ShellUnavailable => "shell_unavailable",
            Self::TooManyCommands(..) => "too_many_commands",
        }
    }
}
