//! Artifacts as callers reach them: the ones runs kept (listed by session,
//! one by id, opened through a signed link), a session file read back as
//! base64 up to the read cap, and an earlier artifact put back into a
//! session's files. The store itself is [`crate::stores::artifact_store`].

use std::sync::Arc;

use anypath_wire::{ArtifactContent, ArtifactList, FileInfo, LoadArtifactRequest};
use futures_util::future::BoxFuture;

use crate::error::InterpreterError;
use crate::held::session::Create;
use crate::interpreter::Interpreter;
use crate::names;
use crate::operation::{CallContext, Described, Operation, OperationKind, blocking};
use crate::stores::artifact_store::{Artifact, LinkQuery};

/// The interpreter's artifacts: see [`Interpreter::artifacts`].
pub struct Artifacts<'a> {
    interpreter: &'a Arc<Interpreter>,
}

impl Interpreter {
    /// The artifacts runs kept, and a session's files read as artifacts.
    pub fn artifacts(self: &Arc<Self>) -> Artifacts<'_> {
        Artifacts::of(self)
    }
}

impl<'a> Artifacts<'a> {
    pub(crate) fn of(interpreter: &'a Arc<Interpreter>) -> Self {
        Self { interpreter }
    }

    /// The session's live artifacts, newest first.
    pub fn session_artifacts(&self, tenant: &str, session_id: &str, base_url: &str) -> Result<Vec<Artifact>, InterpreterError> {
        let tenant = names::tenant(tenant)?;
        self.interpreter.artifact_store.list(tenant, names::session_id(session_id)?, base_url)
    }

    /// One artifact of the tenant's.
    pub fn artifact(&self, tenant: &str, id: &str, base_url: &str) -> Result<Artifact, InterpreterError> {
        self.interpreter.artifact_store.get(names::tenant(tenant)?, id, base_url)
    }

    /// A session file's bytes as base64, up to the read cap. A larger file is
    /// refused with a link to fetch it instead: the signed link of the
    /// artifact holding these bytes when a run kept one, else the session's
    /// file download route. A read never writes.
    pub fn read_artifact(&self, tenant: &str, session_id: &str, path: &str, base_url: &str) -> Result<ArtifactContent, InterpreterError> {
        use base64::Engine;
        let interpreter = self.interpreter;
        let read_cap = interpreter.config.read_cap_bytes;
        let session = interpreter.sessions().get(tenant, session_id, Create::No)?;
        let (info, host_path) = session.files.host_path(path)?;
        if info.size_bytes > read_cap {
            let kept = interpreter.artifact_store.find_content(&session.tenant, &session.id, &info.filename, &host_path, base_url)?;
            let download_url = match kept {
                Some(artifact) => artifact.download_url,
                None => format!("{base_url}/v1/sessions/{}/files/{}", session.id, crate::stores::artifact_store::url_path(&info.filename)),
            };
            return Err(InterpreterError::TooLarge { path: info.path, size: info.size_bytes, cap: read_cap, download_url });
        }
        let (info, bytes) = session.files.read(path)?;
        let head = &bytes[..bytes.len().min(crate::stores::mime::SNIFF_BYTES)];
        Ok(ArtifactContent {
            mime_type: crate::stores::mime::media_type(&info.filename, head),
            sha256: hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
            size_bytes: info.size_bytes,
            content_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
            path: info.path,
        })
    }

    /// Puts the tenant's artifact `artifact_id` into the session (created
    /// when new) as `filename`, by default the name it had: a report made
    /// yesterday, revised in a new session today. The bytes count toward the
    /// session's quota like an upload's.
    pub fn load_artifact(&self, tenant: &str, session_id: &str, request: &LoadArtifactRequest) -> Result<FileInfo, InterpreterError> {
        use std::io::Read;
        let interpreter = self.interpreter;
        let max_file_bytes = interpreter.config.quota.max_file_bytes;
        let (artifact, mut file) = interpreter.artifact_store.open_for_tenant(names::tenant(tenant)?, &request.artifact_id)?;
        // An artifact from a sub-directory lands under its own name.
        let own_name = artifact.filename.rsplit('/').next().unwrap_or(&artifact.filename);
        let filename = request.filename.as_deref().unwrap_or(own_name);
        names::filename(filename)?;
        // Refused before its bytes are read; the upload checks the rest.
        if artifact.size_bytes > max_file_bytes {
            return Err(InterpreterError::Quota(format!("the artifact is {} bytes, over the largest file of {}", artifact.size_bytes, max_file_bytes)));
        }
        let mut bytes = Vec::with_capacity(artifact.size_bytes as usize);
        file.read_to_end(&mut bytes).map_err(|e| InterpreterError::io("reading the artifact", e))?;
        interpreter.files().upload(tenant, session_id, filename, &bytes, request.overwrite, request.runtime)
    }

    /// An artifact's tenant, metadata and open file, for whoever holds a
    /// valid signed link to it: the link is the credential.
    pub fn open_signed(&self, id: &str, query: &LinkQuery) -> Result<(String, Artifact, std::fs::File), InterpreterError> {
        self.interpreter.artifact_store.open_signed(id, query)
    }

    /// [`Self::open_signed`] for a link naming a session's file by name.
    pub fn open_signed_file(&self, session_id: &str, filename: &str, query: &LinkQuery) -> Result<(String, Artifact, std::fs::File), InterpreterError> {
        self.interpreter.artifact_store.open_signed_file(session_id, filename, query)
    }
}

/// The session's live artifacts, newest first.
#[derive(Debug)]
pub struct ListArtifacts {
    /// The session the artifacts were kept from.
    pub session_id: String,
}

impl Operation for ListArtifacts {
    type Output = ArtifactList;

    fn describe(&self) -> Described {
        Described::new(OperationKind::ListArtifacts).session(&self.session_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<ArtifactList, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| {
            i.artifacts().session_artifacts(&c.tenant, &self.session_id, &c.base_url).map(|artifacts| ArtifactList { artifacts })
        }))
    }
}

/// One artifact of the caller's tenant.
#[derive(Debug)]
pub struct GetArtifact {
    /// The artifact's id.
    pub artifact_id: String,
}

impl Operation for GetArtifact {
    type Output = Artifact;

    fn describe(&self) -> Described {
        Described::new(OperationKind::Artifact).subject(&self.artifact_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<Artifact, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.artifacts().artifact(&c.tenant, &self.artifact_id, &c.base_url)))
    }
}

/// A session file's bytes as base64, up to the read cap.
#[derive(Debug)]
pub struct ReadArtifact {
    /// The session holding the file.
    pub session_id: String,
    /// The file's path in the session directory.
    pub path: String,
}

impl Operation for ReadArtifact {
    type Output = ArtifactContent;

    fn describe(&self) -> Described {
        Described::new(OperationKind::ReadArtifact).session(&self.session_id).subject(&self.path)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<ArtifactContent, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.artifacts().read_artifact(&c.tenant, &self.session_id, &self.path, &c.base_url)))
    }
}

/// An earlier artifact of the caller's tenant, back into the session's files.
#[derive(Debug)]
pub struct LoadArtifact {
    /// The session to write into (created when new).
    pub session_id: String,
    /// Which artifact, under which name.
    pub request: LoadArtifactRequest,
}

impl Operation for LoadArtifact {
    type Output = FileInfo;

    fn describe(&self) -> Described {
        Described::new(OperationKind::LoadArtifact).session(&self.session_id).subject(&self.request.artifact_id)
    }

    fn call(self, interpreter: Arc<Interpreter>, caller: &CallContext) -> BoxFuture<'_, Result<FileInfo, InterpreterError>> {
        Box::pin(blocking(interpreter, caller, move |i, c| i.artifacts().load_artifact(&c.tenant, &self.session_id, &self.request)))
    }
}
