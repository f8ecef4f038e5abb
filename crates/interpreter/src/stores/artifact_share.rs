//! Artifacts published for the other hosts of a fleet: a host that keeps an
//! artifact publishes its index row and its content, and a host asked for
//! an artifact it does not know (a signed link made elsewhere, a session
//! moved here) finds it there. A store of one host has none.

use std::path::Path;

use anypath_wire::Artifact;

use crate::error::InterpreterError;

/// Where a fleet's hosts find one another's artifacts. Every method may
/// touch storage: call them off the async workers.
pub trait ArtifactShare: Send + Sync {
    /// Publishes an artifact of `tenant` just kept here, its content at `blob`.
    fn publish(&self, tenant: &str, artifact: &Artifact, blob: &Path) -> Result<(), InterpreterError>;

    /// The artifact `id` and its tenant, when a host published it and it lives.
    fn find(&self, id: &str) -> Result<Option<(String, Artifact)>, InterpreterError>;

    /// The live artifacts published for a session.
    fn session_artifacts(&self, tenant: &str, session_id: &str) -> Result<Vec<Artifact>, InterpreterError>;

    /// Writes the published content `sha256` to `into`.
    fn fetch_content(&self, sha256: &str, into: &Path) -> Result<(), InterpreterError>;
}
