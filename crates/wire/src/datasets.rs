//! Datasets: read-only data a session's code finds at `/data/<name>`,
//! either mounted by the operator (`--datasets DIR`) or staged by a tenant
//! (`PUT /v1/datasets/{name}`) and attached to a session.

use serde::{Deserialize, Serialize};

/// Where a dataset comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DatasetSource {
    /// A sub-directory of the service's `--datasets` directory, in every
    /// session of the tenants allowed to see it.
    Mounted,
    /// Uploaded by the tenant, in the sessions it is attached to.
    Staged,
}

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DatasetFile {
    /// As the code sees it: `/data/<name>` or `/data/<name>/<file>`.
    pub path: String,
    pub size_bytes: u64,
    /// Hex SHA-256 of the bytes (staged datasets; a mounted file is not
    /// read to list it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A dataset as `GET /v1/datasets` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DatasetInfo {
    pub name: String,
    pub source: DatasetSource,
    /// Where the code finds it: `/data/<name>`.
    pub path: String,
    /// The bytes of all its files.
    pub size_bytes: u64,
    /// How many files it holds (`files` names at most 100).
    pub file_count: u64,
    /// Hex SHA-256 of a staged dataset: its one file's, or for several files
    /// that of the lines `<sha256>  <file>` in file order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// When it was staged (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_unix: Option<u64>,
    pub files: Vec<DatasetFile>,
}

/// `GET /v1/datasets`: what the caller's tenant may attach or sees mounted.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DatasetList {
    pub datasets: Vec<DatasetInfo>,
}

/// `POST /v1/sessions/{id}/datasets` (MCP `attach_dataset`): a staged
/// dataset of the tenant to show in a session at `/data/<name>`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachDatasetRequest {
    /// The dataset's name, as it was staged.
    pub name: String,
}
