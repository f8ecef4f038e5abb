//! Artifacts published for the fleet: each one's record on Redis (by id,
//! and in its session's set, expiring with it) and its content once in the
//! object store, beside the sessions' files under the same content names.

use std::path::Path;
use std::sync::Arc;

use anypath_interpreter::{ArtifactShare, InterpreterError};
use anypath_wire::Artifact;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};
use tokio::runtime::Handle;

use crate::coordination::Coordination;
use crate::error::SharedStoreError;
use crate::file_sync::FileSync;

/// An artifact's published record.
#[derive(Serialize, Deserialize)]
struct Published {
    tenant: String,
    artifact: Artifact,
}

/// The fleet's artifacts, as one host sees them.
pub(crate) struct SharedArtifacts {
    pub(crate) coordination: Arc<Coordination>,
    pub(crate) files: Arc<FileSync>,
    pub(crate) runtime: Handle,
}

impl SharedArtifacts {
    fn wait<T>(&self, future: impl Future<Output = Result<T, SharedStoreError>>) -> Result<T, InterpreterError> {
        Ok(self.runtime.block_on(future)?)
    }
}

impl ArtifactShare for SharedArtifacts {
    fn publish(&self, tenant: &str, artifact: &Artifact, blob: &Path) -> Result<(), InterpreterError> {
        let mut published = artifact.clone();
        // Links are made for each answer by the host that gives it.
        published.download_url.clear();
        published.file_url.clear();
        let record = serde_json::to_string(&Published { tenant: tenant.to_owned(), artifact: published }).map_err(SharedStoreError::from)?;
        self.wait(async {
            let path = self.files.blob(&artifact.sha256);
            if !self.files.keep_named(&path).await? {
                let content = std::fs::read(blob).map_err(|e| SharedStoreError::local(format!("reading {}", blob.display()), e))?;
                self.files.objects.put(&path, PutPayload::from(content)).await?;
            }
            self.coordination.publish_artifact(tenant, &artifact.session_id, &artifact.id, &record, artifact.expires_unix).await
        })
    }

    fn find(&self, id: &str) -> Result<Option<(String, Artifact)>, InterpreterError> {
        let record = self.wait(self.coordination.artifact(id))?;
        let Some(record) = record else { return Ok(None) };
        let published: Published = serde_json::from_str(&record).map_err(SharedStoreError::from)?;
        Ok(Some((published.tenant, published.artifact)))
    }

    fn session_artifacts(&self, tenant: &str, session_id: &str) -> Result<Vec<Artifact>, InterpreterError> {
        let records = self.wait(self.coordination.session_artifacts(tenant, session_id))?;
        let mut found = Vec::new();
        for record in records {
            let published: Published = serde_json::from_str(&record).map_err(SharedStoreError::from)?;
            if published.tenant == tenant {
                found.push(published.artifact);
            }
        }
        Ok(found)
    }

    fn fetch_content(&self, sha256: &str, into: &Path) -> Result<(), InterpreterError> {
        self.wait(async {
            let content = self.files.objects.get(&self.files.blob(sha256)).await?.bytes().await?;
            let mut file = std::fs::File::create(into).map_err(|e| SharedStoreError::local(format!("writing {}", into.display()), e))?;
            std::io::Write::write_all(&mut file, &content).map_err(|e| SharedStoreError::local(format!("writing {}", into.display()), e))?;
            // Placed by a hard link under the index's lock: the bytes are on disk first.
            file.sync_all().map_err(|e| SharedStoreError::local(format!("syncing {}", into.display()), e))
        })
    }
}
