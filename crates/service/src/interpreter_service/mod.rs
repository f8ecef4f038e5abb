//! The code interpreter as one service in front of [`Interpreter`], for
//! every transport: it resolves the caller's tenant, admits runs fairly,
//! moves file work (uploads, reads, listings, hashing, removals) onto the
//! blocking pool, counts limit breaches and writes the run's log line. The
//! HTTP API (`interpreter_api`) and the MCP tools (`mcp`) only extract a
//! call's inputs, call one method here and map its answer.

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
        let tenant = self.state.tenant(headers).ok_or(ServiceError::Unauthorized)?;
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
        self.for_caller(caller, move |i, c| i.open_session(&c.tenant, &open.session_id, open.ttl, open.runtime)).await
    }

    /// The session as it is, without creating it.
    pub async fn session_info(&self, caller: &Caller, session_id: String) -> Result<SessionInfo, ServiceError> {
        self.for_caller(caller, move |i, c| i.session_info(&c.tenant, &session_id)).await
    }

    /// Removes the session and its files.
    pub async fn close_session(&self, caller: &Caller, session_id: String) -> Result<Closed, ServiceError> {
        self.interpreter.close_session(&caller.tenant, &session_id).await?;
        Ok(Closed { status: "closed".to_owned() })
    }

    /// A new session `new_id` with a copy of the session's files and state.
    pub async fn fork_session(&self, caller: &Caller, session_id: String, new_id: String) -> Result<SessionInfo, ServiceError> {
        Ok(self.interpreter.fork_session(&caller.tenant, &session_id, &new_id).await?)
    }

    /// The caller acting for `tenant`, already resolved by the transport
    /// (an E2B sandbox call names its sandbox, and the sandbox its tenant).
    pub fn tenant_caller(&self, tenant: String, headers: &HeaderMap, request_id: String) -> Caller {
        let base_url = self.state.base_url(&self.interpreter, headers);
        Caller { tenant, request_id, base_url }
    }

    /// A second session over the session's files, with Python state of its own.
    pub async fn open_context(&self, caller: &Caller, session_id: String, context_id: String, ttl: Option<Duration>) -> Result<SessionInfo, ServiceError> {
        self.for_caller(caller, move |i, c| i.open_context(&c.tenant, &session_id, &context_id, ttl)).await
    }

    /// Parks the session's live state in its image now; false when none was live.
    pub async fn hibernate_session(&self, caller: &Caller, session_id: String) -> Result<bool, ServiceError> {
        Ok(self.interpreter.hibernate_session(&caller.tenant, &session_id).await?)
    }

    /// Starts the session's Python state afresh over the same files.
    pub async fn restart_session(&self, caller: &Caller, session_id: String) -> Result<(), ServiceError> {
        Ok(self.interpreter.restart_session(&caller.tenant, &session_id).await?)
    }

    /// Stops the run going on in the session, if there is one (its client
    /// went away, or its sandbox is being killed).
    pub fn interrupt(&self, caller: &Caller, session_id: &str) {
        if let Ok(true) = self.interpreter.interrupt(&caller.tenant, session_id) {
            tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, session = session_id, "run interrupted");
        }
    }

    /// The entry at `path` of the session's tree.
    pub async fn stat_path(&self, caller: &Caller, session_id: String, path: String) -> Result<Entry, ServiceError> {
        self.for_caller(caller, move |i, c| i.stat_path(&c.tenant, &session_id, &path)).await
    }

    /// The entries under the directory `path`, `depth` levels deep.
    pub async fn list_dir(&self, caller: &Caller, session_id: String, path: String, depth: u32) -> Result<Vec<Entry>, ServiceError> {
        self.for_caller(caller, move |i, c| i.list_dir(&c.tenant, &session_id, &path, depth)).await
    }

    /// Makes a directory and its parents; false when it was there.
    pub async fn make_dir(&self, caller: &Caller, session_id: String, path: String) -> Result<bool, ServiceError> {
        self.for_caller(caller, move |i, c| i.make_dir(&c.tenant, &session_id, &path)).await
    }

    /// Writes a file at `path`, making its directories.
    pub async fn write_path(&self, caller: &Caller, session_id: String, path: String, bytes: Bytes) -> Result<Entry, ServiceError> {
        self.for_caller(caller, move |i, c| i.write_path(&c.tenant, &session_id, &path, &bytes)).await
    }

    /// Removes a file or a directory.
    pub async fn remove_path(&self, caller: &Caller, session_id: String, path: String) -> Result<(), ServiceError> {
        self.for_caller(caller, move |i, c| i.remove_path(&c.tenant, &session_id, &path)).await
    }

    /// Moves a file or a directory.
    pub async fn move_path(&self, caller: &Caller, session_id: String, from: String, to: String) -> Result<Entry, ServiceError> {
        self.for_caller(caller, move |i, c| i.move_path(&c.tenant, &session_id, &from, &to)).await
    }

    /// Writes a file into the session (created on first use).
    pub async fn upload(&self, caller: &Caller, upload: Upload) -> Result<FileInfo, ServiceError> {
        self.for_caller(caller, move |i, c| {
            let bytes = match upload.content {
                Content::Base64(text) => {
                    Bytes::from(base64::engine::general_purpose::STANDARD.decode(text.trim()).map_err(ServiceError::InvalidBase64)?)
                }
                Content::Raw(bytes) => bytes,
            };
            let Upload { session_id, filename, overwrite, runtime, .. } = upload;
            Ok::<_, ServiceError>(i.upload_file(&c.tenant, &session_id, &filename, &bytes, overwrite, runtime)?)
        })
        .await
    }

    /// An earlier artifact of the caller's tenant, back into the session's files.
    pub async fn load_artifact(&self, caller: &Caller, session_id: String, request: LoadArtifactRequest) -> Result<FileInfo, ServiceError> {
        self.for_caller(caller, move |i, c| i.load_artifact(&c.tenant, &session_id, &request)).await
    }

    /// Every file of the session, and the datasets it reads at /data.
    pub async fn list_files(&self, caller: &Caller, session_id: String) -> Result<FileList, ServiceError> {
        self.for_caller(caller, move |i, c| i.session_files(&c.tenant, &session_id)).await
    }

    /// The datasets the caller's tenant sees mounted or has staged.
    pub async fn list_datasets(&self, caller: &Caller) -> Result<DatasetList, ServiceError> {
        self.for_caller(caller, move |i, c| i.list_datasets(&c.tenant).map(|datasets| DatasetList { datasets })).await
    }

    /// Where a body for a staged dataset is received before it is kept.
    pub async fn dataset_staging_path(&self) -> Result<std::path::PathBuf, ServiceError> {
        self.off_workers(|i| i.artifacts().staging_path()).await
    }

    /// Keeps the received `files` as the caller's dataset `name`.
    pub async fn stage_dataset(&self, caller: &Caller, name: String, files: Vec<ReceivedFile>) -> Result<DatasetInfo, ServiceError> {
        self.for_caller(caller, move |i, c| i.stage_dataset(&c.tenant, &name, files)).await
    }

    /// Bytes the caller may still stage as `name`.
    pub async fn dataset_room(&self, caller: &Caller, name: String) -> Result<u64, ServiceError> {
        self.for_caller(caller, move |i, c| i.dataset_room(&c.tenant, &name)).await
    }

    /// Forgets the caller's staged dataset `name`.
    pub async fn remove_dataset(&self, caller: &Caller, name: String) -> Result<(), ServiceError> {
        self.for_caller(caller, move |i, c| i.remove_dataset(&c.tenant, &name)).await
    }

    /// Shows the caller's staged dataset in the session at /data/<name>.
    pub async fn attach_dataset(&self, caller: &Caller, session_id: String, name: String) -> Result<DatasetInfo, ServiceError> {
        self.for_caller(caller, move |i, c| i.attach_dataset(&c.tenant, &session_id, &name)).await
    }

    /// One file's bytes.
    pub async fn read_file(&self, caller: &Caller, session_id: String, path: String) -> Result<Vec<u8>, ServiceError> {
        self.for_caller(caller, move |i, c| i.read_file(&c.tenant, &session_id, &path).map(|(_, bytes)| bytes)).await
    }

    /// Deletes one file.
    pub async fn delete_file(&self, caller: &Caller, session_id: String, path: String) -> Result<(), ServiceError> {
        self.for_caller(caller, move |i, c| i.delete_file(&c.tenant, &session_id, &path)).await
    }

    /// Runs code in the session (created on first use) once admission
    /// gives the tenant a slot: the same slots bound `/v1/exec`, the HTTP
    /// API and MCP. Writes one log line per run, refused or not.
    pub async fn run_python(&self, caller: &Caller, session_id: String, request: RunRequest) -> Result<RunReport, ServiceError> {
        self.run_python_live(caller, session_id, request, None).await
    }

    /// [`Self::run_python`], sending output and results to `live` while the
    /// run goes on (HTTP server-sent events, MCP progress).
    pub async fn run_python_live(&self, caller: &Caller, session_id: String, request: RunRequest, live: Option<LiveSink>) -> Result<RunReport, ServiceError> {
        let permit = match self.state.admission.admit(&caller.tenant).await {
            Ok(permit) => permit,
            Err(refused) => {
                self.state.metrics.record_refusal(&caller.tenant, refused.code());
                log_unran(caller, &session_id, refused.code());
                return Err(refused.into());
            }
        };
        let ran = self.interpreter.run_python_live(&caller.tenant, &session_id, request, &caller.base_url, live).await;
        drop(permit);
        match ran {
            Ok(report) => {
                self.state.account(&caller.tenant, report.cell.error.as_ref());
                let cell = &report.cell;
                self.state.metrics.record_run(crate::metrics::Kind::Session, cell.error.as_ref(), cell.quota_exceeded, cell.metrics.duration_us);
                log_run(caller, &report);
                Ok(report)
            }
            Err(e) => {
                log_unran(caller, &session_id, e.code());
                Err(e.into())
            }
        }
    }

    /// The session's live artifacts, newest first.
    pub async fn session_artifacts(&self, caller: &Caller, session_id: String) -> Result<ArtifactList, ServiceError> {
        self.for_caller(caller, move |i, c| {
            i.session_artifacts(&c.tenant, &session_id, &c.base_url).map(|artifacts| ArtifactList { artifacts })
        })
        .await
    }

    /// A session file's bytes as base64, up to the read cap.
    pub async fn read_artifact(&self, caller: &Caller, session_id: String, path: String) -> Result<ArtifactContent, ServiceError> {
        self.for_caller(caller, move |i, c| i.read_artifact(&c.tenant, &session_id, &path, &c.base_url)).await
    }

    /// One artifact of the caller's tenant.
    pub async fn artifact(&self, caller: &Caller, artifact_id: String) -> Result<Artifact, ServiceError> {
        self.for_caller(caller, move |i, c| i.artifact(&c.tenant, &artifact_id, &c.base_url)).await
    }

    /// An artifact's metadata and open file, for whoever holds a valid
    /// signed link: the link is the credential, so there is no caller.
    pub async fn open_signed(&self, target: SignedTarget, query: LinkQuery) -> Result<(Artifact, std::fs::File), ServiceError> {
        self.off_workers(move |i| match target {
            SignedTarget::Artifact(id) => i.artifacts().open_signed(&id, &query),
            SignedTarget::File { session_id, filename } => i.artifacts().open_signed_file(&session_id, &filename, &query),
        })
        .await
    }

    /// Runs `work` for `caller` on the blocking pool.
    async fn for_caller<T: Send + 'static, E: Into<ServiceError> + Send + 'static>(
        &self,
        caller: &Caller,
        work: impl FnOnce(&Interpreter, &Caller) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let caller = caller.clone();
        self.off_workers(move |i| work(i, &caller)).await
    }

    /// Runs interpreter work that touches files on the blocking pool, off
    /// the async workers.
    async fn off_workers<T: Send + 'static, E: Into<ServiceError> + Send + 'static>(
        &self,
        work: impl FnOnce(&Interpreter) -> Result<T, E> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let interpreter = self.interpreter.clone();
        tokio::task::spawn_blocking(move || work(&interpreter)).await?.map_err(Into::into)
    }
}

/// The log line of a run: never the code, its output or its files.
fn log_run(caller: &Caller, report: &RunReport) {
    let metrics = &report.cell.metrics;
    tracing::info!(
        request_id = %caller.request_id, tenant = %caller.tenant, session = %report.session_id, run_id = %report.run_id,
        runtime = %report.runtime, outcome = report.cell.error.as_ref().map_or("ok", |e| e.kind()),
        duration_us = metrics.duration_us, fuel = metrics.fuel_consumed, peak_memory_bytes = metrics.peak_memory_bytes,
        state_reset = report.cell.state_reset, "run"
    );
}

/// The log line of a run that never ran: refused, or failed before its code
/// started; `outcome` is the error's code.
fn log_unran(caller: &Caller, session_id: &str, outcome: &str) {
    tracing::info!(request_id = %caller.request_id, tenant = %caller.tenant, session = session_id, outcome, "run");
}
