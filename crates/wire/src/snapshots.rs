//! Snapshots of the code interpreter's sessions (`/v1/sessions/{id}/snapshots`,
//! `/v1/snapshots`, the MCP tools and E2B's snapshot calls): a session's
//! Python state and files kept under an id, from which new sessions start.

use serde::{Deserialize, Serialize};

use crate::Runtime;

/// `POST /v1/sessions/{id}/snapshots`: a snapshot of the session to keep.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// A name to find it by besides its id. A name is one snapshot's at a
    /// time: a later snapshot given the same name takes it over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a client sees of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotInfo {
    /// The id new sessions name it by (`from_snapshot`).
    pub snapshot_id: String,
    /// Its names (none, or the one it was given).
    pub names: Vec<String>,
    /// The session it was taken from.
    pub session_id: String,
    /// The Python its sessions run.
    pub runtime: Runtime,
    /// When it was taken, in seconds since the Unix epoch.
    pub created_unix: u64,
    /// When it is removed, in seconds since the Unix epoch.
    pub expires_unix: u64,
    /// Bytes it holds: the saved state and the files.
    pub size_bytes: u64,
}

/// `GET /v1/snapshots`: the tenant's snapshots, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SnapshotList {
    pub snapshots: Vec<SnapshotInfo>,
}
