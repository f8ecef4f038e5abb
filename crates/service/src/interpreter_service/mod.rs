//! The code interpreter as one service in front of [`Interpreter`], for
//! every transport: it resolves the caller's tenant, admits runs fairly,
//! moves file work (uploads, reads, listings, hashing, removals) onto the
//! blocking pool, counts limit breaches, checks a run's environment against
//! the allowlist and writes the audit trail: one line per operation
//! ([`audit`]). The HTTP API (`interpreter_api`), the MCP tools (`mcp`), E2B's
//! and Jupyter's APIs only extract a call's inputs, call one method here and
//! map its answer.

mod audit;
mod caller;
mod error;
mod limits;

use std::sync::Arc;
use std::time::Duration;

use anypath_interpreter::{Artifact, ArtifactContent, Entry, FileInfo, Interpreter, LinkQuery, LoadArtifactRequest, ReceivedFile, RunReport, RunRequest, SessionInfo};
use anypath_wire::{DatasetInfo, DatasetList};
use anypath_sandbox::{LiveSink, Runtime};
pub(crate) use anypath_wire::{ArtifactList, Closed, FileList};
use axum::body::Bytes;
use axum::http::HeaderMap;
use base64::Engine;

use audit::{Audit, Operation};
pub(crate) use caller::Caller;
pub(crate) use error::ServiceError;
pub(crate) use limits::RunningLimits;

use crate::serve::AppState;

/// The interpreter service: cheap to clone, one per process in effect.
#[derive(Clone)]
pub(crate) struct InterpreterService {
    state: Arc<AppState>,
    interpreter: Arc<Interpreter>,
}

/// A session to open.
#[derive(Debug)]
pub(crate) struct OpenSession {
    /// The session's name, chosen by the client.
    pub session_id: String,
    /// Idle time after which it is removed (the server's default when absent).
    pub ttl: Option<Duration>,
    /// The runtime, when the call creates the session.
    pub runtime: Option<Runtime>,
}

/// A file to write into a session.
#[derive(Debug)]
pub(crate) struct Upload {
    /// The session to write into (created when new).
    pub session_id: String,
    /// The file's name in the session directory.
    pub filename: String,
    /// The file's bytes.
    pub content: Content,
    /// Replace the file when it exists.
    pub overwrite: bool,
    /// The runtime, when the call creates the session.
    pub runtime: Option<Runtime>,
}

/// An upload's bytes as the transport received them.
#[derive(Debug)]
pub(crate) enum Content {
    /// Base64 (standard alphabet), decoded by the service off the async workers.
    Base64(String),
    /// The bytes themselves.
    Raw(Bytes),
}

/// What a signed link names.
#[derive(Debug)]
pub(crate) enum SignedTarget {
    /// `/v1/artifacts/{id}/content`.
    Artifact(String),
    /// `/files/{session_id}/{filename}`: a session's file by name.
    File {
        /// The session the file was kept from.
        session_id: String,
        /// The file's name in that session.
        filename: String,
    },
}

impl InterpreterService {
    /// The service of `state`, when the process runs a code interpreter.
    pub fn of(state: &Arc<AppState>) -> Result<Self, ServiceError> {
        let interpreter = state.interpreter.clone().ok_or(ServiceError::NoInterpreter)?;
        Ok(Self { state: state.clone(), interpreter })
    }

    /// The caller of a request with these headers: the tenant its key or
    /// token maps to (`Unauthorized` without one), and its links' base.
    pub fn caller(&self, headers: &HeaderMap, request_id: String) -> Result<Caller, ServiceError> {
        let Some(tenant) = self.state.tenant(headers) else {
            return Audit::anonymous(Operation::Authenticate, request_id, None).finish(Err(ServiceError::Unauthorized));
        };
        let base_url = self.state.base_url(&self.interpreter, headers);
        Ok(Caller { tenant, request_id, base_url })
    }

    /// The caller of a transport serving one tenant (stdio), with links
    /// under `address`.
    pub fn sole_caller(&self, tenant: String, address: &str) -> Caller {
        Caller { tenant, request_id: uuid::Uuid::new_v4().to_string(), base_url: self.interpreter.base_url(address) }
    }

    /// The limits this service was started with.
    pub fn limits(&self) -> RunningLimits {
        RunningLimits::of(&self.interpreter)
    }

    /// Creates the session, or returns it as it is.
    pub async fn open_session(&self, caller: &Caller, open: OpenSession) -> Result<SessionInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::Open).session(&open.session_id);
        audit.finish(self.for_caller(caller, move |i, c| i.sessions().open(&c.tenant, &open.session_id, open.ttl, open.runtime)).await)
    }

    /// The session as it is, without creating it.
    pub async fn session_info(&self, caller: &Caller, session_id: String) -> Result<SessionInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::Describe).session(&session_id);
        audit.finish(self.for_caller(caller, move |i, c| i.sessions().info(&c.tenant, &session_id)).await)
    }

    /// Removes the session and its files.
    pub async fn close_session(&self, caller: &Caller, session_id: String) -> Result<Closed, ServiceError> {
        let audit = Audit::of(caller, Operation::Close).session(&session_id);
        let closed = self.interpreter.sessions().close(&caller.tenant, &session_id).await;
        audit.finish(closed.map(|()| Closed { status: "closed".to_owned() }).map_err(Into::into))
    }

    /// A new session `new_id` with a copy of the session's files and state.
    pub async fn fork_session(&self, caller: &Caller, session_id: String, new_id: String) -> Result<SessionInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::Fork).session(&session_id).subject(&new_id);
        audit.finish(self.interpreter.sessions().fork(&caller.tenant, &session_id, &new_id).await.map_err(Into::into))
    }

    /// The caller acting for `tenant`, already resolved by the transport
    /// (an E2B sandbox call names its sandbox, and the sandbox its tenant).
    pub fn tenant_caller(&self, tenant: String, headers: &HeaderMap, request_id: String) -> Caller {
        let base_url = self.state.base_url(&self.interpreter, headers);
        Caller { tenant, request_id, base_url }
    }

    /// A second session over the session's files, with Python state of its own.
    pub async fn open_context(&self, caller: &Caller, session_id: String, context_id: String, ttl: Option<Duration>) -> Result<SessionInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::OpenContext).session(&session_id).subject(&context_id);
        audit.finish(self.for_caller(caller, move |i, c| i.sessions().open_context(&c.tenant, &session_id, &context_id, ttl)).await)
    }

    /// Parks the session's live state in its image now; false when none was live.
    pub async fn hibernate_session(&self, caller: &Caller, session_id: String) -> Result<bool, ServiceError> {
        let audit = Audit::of(caller, Operation::Hibernate).session(&session_id);
        audit.finish(self.interpreter.hibernation().hibernate_session(&caller.tenant, &session_id).await.map_err(Into::into))
    }

    /// Starts the session's Python state afresh over the same files.
    pub async fn restart_session(&self, caller: &Caller, session_id: String) -> Result<(), ServiceError> {
        let audit = Audit::of(caller, Operation::Restart).session(&session_id);
        audit.finish(self.interpreter.sessions().restart(&caller.tenant, &session_id).await.map_err(Into::into))
    }

    /// Stops the run going on in the session, if there is one (its client
    /// went away, or its sandbox is being killed).
    pub fn interrupt(&self, caller: &Caller, session_id: &str) {
        // Only an interrupt that stopped a run is worth a line.
        let audit = Audit::of(caller, Operation::Interrupt).session(session_id);
        if let Ok(true) = self.interpreter.runs().interrupt(&caller.tenant, session_id) {
            let _ = audit.finish(Ok(()));
        }
    }

    /// The entry at `path` of the session's tree.
    pub async fn stat_path(&self, caller: &Caller, session_id: String, path: String) -> Result<Entry, ServiceError> {
        let audit = Audit::of(caller, Operation::Stat).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().stat(&c.tenant, &session_id, &path)).await)
    }

    /// The entries under the directory `path`, `depth` levels deep.
    pub async fn list_dir(&self, caller: &Caller, session_id: String, path: String, depth: u32) -> Result<Vec<Entry>, ServiceError> {
        let audit = Audit::of(caller, Operation::ListDir).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().list_dir(&c.tenant, &session_id, &path, depth)).await)
    }

    /// Makes a directory and its parents; false when it was there.
    pub async fn make_dir(&self, caller: &Caller, session_id: String, path: String) -> Result<bool, ServiceError> {
        let audit = Audit::of(caller, Operation::MakeDir).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().make_dir(&c.tenant, &session_id, &path)).await)
    }

    /// Writes a file at `path`, making its directories.
    pub async fn write_path(&self, caller: &Caller, session_id: String, path: String, bytes: Bytes) -> Result<Entry, ServiceError> {
        let audit = Audit::of(caller, Operation::WriteFile).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().write_path(&c.tenant, &session_id, &path, &bytes)).await)
    }

    /// Removes a file or a directory.
    pub async fn remove_path(&self, caller: &Caller, session_id: String, path: String) -> Result<(), ServiceError> {
        let audit = Audit::of(caller, Operation::Remove).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().remove_path(&c.tenant, &session_id, &path)).await)
    }

    /// Moves a file or a directory.
    pub async fn move_path(&self, caller: &Caller, session_id: String, from: String, to: String) -> Result<Entry, ServiceError> {
        let audit = Audit::of(caller, Operation::Move).session(&session_id).subject(&format!("{from} -> {to}"));
        audit.finish(self.for_caller(caller, move |i, c| i.files().move_path(&c.tenant, &session_id, &from, &to)).await)
    }

    /// Writes a file into the session (created on first use).
    pub async fn upload(&self, caller: &Caller, upload: Upload) -> Result<FileInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::Upload).session(&upload.session_id).subject(&upload.filename);
        let uploaded = self.for_caller(caller, move |i, c| {
            let bytes = match upload.content {
                Content::Base64(text) => {
                    Bytes::from(base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(ServiceError::InvalidBase64)?)
                }
                Content::Raw(bytes) => bytes,
            };
            let Upload { session_id, filename, overwrite, runtime, .. } = upload;
            Ok::<_, ServiceError>(i.files().upload(&c.tenant, &session_id, &filename, &bytes, overwrite, runtime)?)
        })
        .await;
        audit.finish(uploaded)
    }

    /// An earlier artifact of the caller's tenant, back into the session's files.
    pub async fn load_artifact(&self, caller: &Caller, session_id: String, request: LoadArtifactRequest) -> Result<FileInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::LoadArtifact).session(&session_id).subject(&request.artifact_id);
        audit.finish(self.for_caller(caller, move |i, c| i.artifacts().load_artifact(&c.tenant, &session_id, &request)).await)
    }

    /// Every file of the session, and the datasets it reads at /data.
    pub async fn list_files(&self, caller: &Caller, session_id: String) -> Result<FileList, ServiceError> {
        let audit = Audit::of(caller, Operation::ListFiles).session(&session_id);
        audit.finish(self.for_caller(caller, move |i, c| i.files().list_with_datasets(&c.tenant, &session_id)).await)
    }

    /// The datasets the caller's tenant sees mounted or has staged.
    pub async fn list_datasets(&self, caller: &Caller) -> Result<DatasetList, ServiceError> {
        let audit = Audit::of(caller, Operation::ListDatasets);
        audit.finish(self.for_caller(caller, move |i, c| i.datasets().list(&c.tenant).map(|datasets| DatasetList { datasets })).await)
    }

    /// Where a body for a staged dataset is received before it is kept.
    pub async fn dataset_staging_path(&self) -> Result<std::path::PathBuf, ServiceError> {
        self.off_workers(|i| i.datasets().staging_path()).await
    }

    /// Keeps the `received` files as the caller's dataset `name`; a body
    /// that could not be received is the operation's failure.
    pub async fn stage_dataset(&self, caller: &Caller, name: String, received: Result<Vec<ReceivedFile>, ServiceError>) -> Result<DatasetInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::StageDataset).subject(&name);
        let staged = match received {
            Ok(files) => self.for_caller(caller, move |i, c| i.datasets().stage(&c.tenant, &name, files)).await,
            Err(e) => Err(e),
        };
        audit.finish(staged)
    }

    /// Bytes the caller may still stage as `name` (a refusal is the stage's
    /// failure, in the audit trail).
    pub async fn dataset_room(&self, caller: &Caller, name: String) -> Result<u64, ServiceError> {
        let audit = Audit::of(caller, Operation::StageDataset).subject(&name);
        let room = self.for_caller(caller, move |i, c| i.datasets().room(&c.tenant, &name)).await;
        match room {
            Ok(room) => Ok(room),
            Err(e) => audit.finish(Err(e)),
        }
    }

    /// Forgets the caller's staged dataset `name`.
    pub async fn remove_dataset(&self, caller: &Caller, name: String) -> Result<(), ServiceError> {
        let audit = Audit::of(caller, Operation::RemoveDataset).subject(&name);
        audit.finish(self.for_caller(caller, move |i, c| i.datasets().remove(&c.tenant, &name)).await)
    }

    /// Shows the caller's staged dataset in the session at /data/<name>.
    pub async fn attach_dataset(&self, caller: &Caller, session_id: String, name: String) -> Result<DatasetInfo, ServiceError> {
        let audit = Audit::of(caller, Operation::AttachDataset).session(&session_id).subject(&name);
        audit.finish(self.for_caller(caller, move |i, c| i.datasets().attach(&c.tenant, &session_id, &name)).await)
    }

    /// One file's bytes.
    pub async fn read_file(&self, caller: &Caller, session_id: String, path: String) -> Result<Vec<u8>, ServiceError> {
        let audit = Audit::of(caller, Operation::Read).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().read(&c.tenant, &session_id, &path).map(|(_, bytes)| bytes)).await)
    }

    /// Deletes one file.
    pub async fn delete_file(&self, caller: &Caller, session_id: String, path: String) -> Result<(), ServiceError> {
        let audit = Audit::of(caller, Operation::Remove).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.files().delete(&c.tenant, &session_id, &path)).await)
    }

    /// Runs code in the session (created on first use) once admission
    /// gives the tenant a slot: the same slots bound `/v1/exec`, the HTTP
    /// API and MCP. Refuses an environment name the allowlist does not
    /// let runs set. Writes one audit line per run, refused or not.
    pub async fn run_python(&self, caller: &Caller, session_id: String, request: RunRequest) -> Result<RunReport, ServiceError> {
        self.run_python_live(caller, session_id, request, None).await
    }

    /// [`Self::run_python`], sending output and results to `live` while the
    /// run goes on (HTTP server-sent events, MCP progress).
    pub async fn run_python_live(&self, caller: &Caller, session_id: String, request: RunRequest, live: Option<LiveSink>) -> Result<RunReport, ServiceError> {
        let audit = Audit::of(caller, Operation::Run).session(&session_id);
        if let Err(refused) = self.state.run_env.check(request.env.keys()) {
            return audit.finish_run(Err(refused.into()), None);
        }
        let permit = match self.state.admission.admit(&caller.tenant).await {
            Ok(permit) => permit,
            Err(refused) => {
                self.state.metrics.record_refusal(&caller.tenant, refused.code());
                return audit.finish_run(Err(refused.into()), None);
            }
        };
        let overrides = request.limits.clone();
        let ran = self.interpreter.runs().run_python_live(&caller.tenant, &session_id, request, &caller.base_url, live).await;
        drop(permit);
        let ran = ran.map_err(ServiceError::from);
        let limits = ran.as_ref().ok().and_then(|report| self.limits_of(report.runtime)).map(|l| l.narrowed_by(&overrides));
        if let Ok(report) = &ran {
            self.state.account(&caller.tenant, report.cell.error.as_ref());
            let cell = &report.cell;
            self.state.metrics.record_run(crate::metrics::Kind::Session, cell.error.as_ref(), cell.quota_exceeded, cell.metrics.duration_us);
        }
        audit.finish_run(ran, limits)
    }

    /// The limits one run of `runtime` has before a request lowers them.
    fn limits_of(&self, runtime: Runtime) -> Option<anypath_sandbox::Limits> {
        self.interpreter.sandboxes().iter().find(|s| s.runtime() == runtime).map(|s| s.limits())
    }

    /// The session's live artifacts, newest first.
    pub async fn session_artifacts(&self, caller: &Caller, session_id: String) -> Result<ArtifactList, ServiceError> {
        let audit = Audit::of(caller, Operation::ListArtifacts).session(&session_id);
        let listed = self
            .for_caller(caller, move |i, c| i.artifacts().session_artifacts(&c.tenant, &session_id, &c.base_url).map(|artifacts| ArtifactList { artifacts }))
            .await;
        audit.finish(listed)
    }

    /// A session file's bytes as base64, up to the read cap.
    pub async fn read_artifact(&self, caller: &Caller, session_id: String, path: String) -> Result<ArtifactContent, ServiceError> {
        let audit = Audit::of(caller, Operation::ReadArtifact).session(&session_id).subject(&path);
        audit.finish(self.for_caller(caller, move |i, c| i.artifacts().read_artifact(&c.tenant, &session_id, &path, &c.base_url)).await)
    }

    /// One artifact of the caller's tenant.
    pub async fn artifact(&self, caller: &Caller, artifact_id: String) -> Result<Artifact, ServiceError> {
        let audit = Audit::of(caller, Operation::Artifact).subject(&artifact_id);
        audit.finish(self.for_caller(caller, move |i, c| i.artifacts().artifact(&c.tenant, &artifact_id, &c.base_url)).await)
    }

    /// An artifact's metadata and open file, for whoever holds a valid
    /// signed link: the link is the credential, so there is no caller. Its
    /// audit line names the artifact's tenant once the link checks out,
    /// never the link's query.
    pub async fn open_signed(&self, request_id: &str, target: SignedTarget, query: LinkQuery) -> Result<(Artifact, std::fs::File), ServiceError> {
        let audit = Audit::anonymous(Operation::Download, request_id.to_owned(), None);
        let audit = match &target {
            SignedTarget::Artifact(id) => audit.subject(id),
            SignedTarget::File { session_id, filename } => audit.session(session_id).subject(filename),
        };
        let opened = self
            .off_workers(move |i| match target {
                SignedTarget::Artifact(id) => i.artifacts().open_signed(&id, &query),
                SignedTarget::File { session_id, filename } => i.artifacts().open_signed_file(&session_id, &filename, &query),
            })
            .await;
        match opened {
            Ok((tenant, artifact, file)) => audit.tenant(tenant).session(&artifact.session_id).finish(Ok((artifact, file))),
            Err(e) => audit.finish(Err(e)),
        }
    }

    /// Runs `work` for `caller` on the blocking pool.
    async fn for_caller<T: Send + 'static, E: Into<ServiceError> + Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&Arc<Interpreter>, &Caller) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let caller = caller.clone();
        self.off_workers(move |i| work(i, &caller)).await
    }

    /// Runs interpreter work that touches files on the blocking pool, off
    /// the async workers.
    async fn off_workers<T: Send + 'static, E: Into<ServiceError> + Send + 'static>(
        &self,
        work: impl FnOnce(&Arc<Interpreter>) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let interpreter = self.interpreter.clone();
        tokio::task::spawn_blocking(move || work(&interpreter)).await?.map_err(Into::into)
    }
}
