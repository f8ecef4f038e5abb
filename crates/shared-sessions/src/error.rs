//! Why the shared store failed a call; every kind reaches callers as the
//! interpreter's "store unavailable" answer, with a retry hint.

use anypath_interpreter::InterpreterError;

/// A failed call to the object store or to Redis.
#[derive(Debug, thiserror::Error)]
pub enum SharedStoreError {
    /// `--session-store` is not an `s3://bucket/prefix` URL.
    #[error("the session store must be s3://BUCKET[/PREFIX], not {0:?}")]
    Location(String),
    /// The object store refused or failed a call.
    #[error("object store: {0}")]
    Objects(#[from] object_store::Error),
    /// Redis refused or failed a call.
    #[error("coordination (Redis): {0}")]
    Coordination(#[from] redis::RedisError),
    /// A record that does not parse (written by another version, or damaged).
    #[error("a stored record does not parse: {0}")]
    Record(#[from] serde_json::Error),
    /// A file of a session's directory could not be read or written here.
    #[error("{what}: {source}")]
    Local { what: String, source: std::io::Error },
    /// The host that holds the session neither handed it over nor let its
    /// lease lapse in time.
    #[error("the session is held by another host that did not hand it over in time")]
    HeldElsewhere,
    /// This host's lease lapsed (it was paused or cut off): another host
    /// may have moved the session on, so nothing of this host's is kept.
    #[error("this host no longer holds the session (its lease lapsed)")]
    LeaseLost,
    /// What the store holds for the session is damaged, out of bounds or
    /// not the session's: it is refused, for that session only.
    #[error("the session's stored image is unusable: {0}")]
    Corrupt(String),
    /// The stored image is whole but cannot be this session's (another
    /// runtime's).
    #[error("the session's stored image does not fit it: {0}")]
    Conflict(String),
}

impl SharedStoreError {
    pub(crate) fn local(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Local { what: what.into(), source }
    }

    pub(crate) fn corrupt(what: String) -> Self {
        Self::Corrupt(what)
    }
}

impl From<SharedStoreError> for InterpreterError {
    fn from(error: SharedStoreError) -> Self {
        match error {
            SharedStoreError::Corrupt(reason) => InterpreterError::ImageCorrupt { reason, conflict: false },
            SharedStoreError::Conflict(reason) => InterpreterError::ImageCorrupt { reason, conflict: true },
            other => InterpreterError::SharedStore(other.to_string()),
        }
    }
}
