//! The code interpreter as one service in front of [`Interpreter`], for
//! every transport: it resolves the caller's tenant and runs any interpreter
//! [`Operation`] through one generic [`InterpreterService::call`], which
//! writes the audit trail (one line per operation, [`audit`]) and, for runs,
//! checks the environment against the allowlist, admits the run fairly and
//! counts limit breaches. The HTTP API (`v1`), the MCP tools (`mcp`),
//! E2B's and Jupyter's APIs only extract a call's inputs, build the
//! operation's request, call here and map its answer. A run with its output
//! live starts here too ([`InterpreterService::start_live`]), and a run
//! tracked by its id is the run registry's (`background_runs`) with this
//! facade as its start ([`InterpreterService::start_tracked`]): the registry
//! and the live run know the caller and the error ([`crate::caller`],
//! [`crate::service_error`]) and never the facade.

pub(crate) mod audit;
mod limits;

use std::sync::Arc;

use anypath_interpreter::operation::Operation;
use anypath_interpreter::{Artifact, Interpreter, LinkQuery, OperationKind, ReceivedFile, RunRequest, runs};
use anypath_sandbox::Runtime;
use anypath_wire::{DatasetInfo, RunControl};
use axum::http::HeaderMap;

pub(crate) use anypath_interpreter::files::{Content, Upload};
pub(crate) use anypath_interpreter::sessions::OpenSession;
pub(crate) use anypath_wire::{Closed, FileList};
pub(crate) use audit::Audit;
pub(crate) use crate::caller::Caller;
pub(crate) use crate::service_error::ServiceError;
pub(crate) use limits::RunningLimits;

use crate::background_runs::{RunRegistry, Started, Tracked};
use crate::live_run::LiveRun;
use crate::state::AppState;

/// The interpreter service: cheap to clone, one per process in effect.
#[derive(Clone)]
pub(crate) struct InterpreterService {
    state: Arc<AppState>,
    interpreter: Arc<Interpreter>,
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
            return Audit::anonymous(OperationKind::Authenticate, request_id, None).finish(Err(ServiceError::Unauthorized));
        };
        let base_url = self.state.base_url(&self.interpreter, headers);
        Ok(Caller { tenant, request_id, base_url })
    }

    /// The caller of a transport serving one tenant (stdio), with links
    /// under `address`.
    pub fn sole_caller(&self, tenant: String, address: &str) -> Caller {
        Caller { tenant, request_id: uuid::Uuid::new_v4().to_string(), base_url: self.interpreter.base_url(address) }
    }

    /// The caller acting for `tenant`, already resolved by the transport
    /// (an E2B sandbox call names its sandbox, and the sandbox its tenant).
    pub fn tenant_caller(&self, tenant: String, headers: &HeaderMap, request_id: String) -> Caller {
        let base_url = self.state.base_url(&self.interpreter, headers);
        Caller { tenant, request_id, base_url }
    }

    /// The limits this service was started with.
    pub fn limits(&self) -> RunningLimits {
        RunningLimits::of(&self.interpreter)
    }

    /// Does `op` for `caller` and writes its audit line. A run (an
    /// operation with a run request) is first checked against the
    /// environment allowlist and admitted (a slot per tenant: the same
    /// slots bound `/v1/exec`, the HTTP API and MCP); its limit breaches and
    /// metrics are counted, and its line carries its facts, refused or not.
    pub async fn call<O: Operation>(&self, caller: &Caller, op: O) -> Result<O::Output, ServiceError> {
        let described = op.describe();
        let reserved = reserved_session(&described);
        let audit = Audit::described(caller, described);
        if let Some(refused) = reserved {
            return audit.finish(Err(ServiceError::from(refused)));
        }
        if let Some(env) = op.command_env() {
            // A command is admitted as a run is: the same allowlist, the same slots.
            if let Err(refused) = self.state.run_env.check(env.keys()) {
                return audit.finish(Err(refused.into()));
            }
            let permit = match self.state.admission.admit(&caller.tenant).await {
                Ok(permit) => permit,
                Err(refused) => {
                    self.state.metrics.record_refusal(&caller.tenant, refused.code());
                    return audit.finish(Err(refused.into()));
                }
            };
            let done = op.call(self.interpreter.clone(), &caller.context()).await;
            drop(permit);
            return audit.finish(done.map_err(ServiceError::from));
        }
        let Some(request) = op.run_request() else {
            let done = op.call(self.interpreter.clone(), &caller.context()).await;
            return audit.finish(done.map_err(ServiceError::from));
        };
        if let Err(refused) = self.state.run_env.check(request.env.keys()) {
            return audit.finish(Err(refused.into()));
        }
        let overrides = request.limits;
        let permit = match self.state.admission.admit(&caller.tenant).await {
            Ok(permit) => permit,
            Err(refused) => {
                self.state.metrics.record_refusal(&caller.tenant, refused.code());
                return audit.finish(Err(refused.into()));
            }
        };
        let ran = op.call(self.interpreter.clone(), &caller.context()).await;
        drop(permit);
        let ran = ran.map_err(ServiceError::from);
        let limits = match ran.as_ref().ok().and_then(O::run_report) {
            Some(report) => {
                let limits = self.limits_of(report.runtime).map(|l| l.narrowed_by(&overrides));
                self.state.account(&caller.tenant, report.cell.error.as_ref());
                let cell = &report.cell;
                self.state.metrics.record_run(crate::metrics::Kind::Session, cell.error.as_ref(), cell.quota_exceeded, cell.metrics.duration_us);
                limits
            }
            None => None,
        };
        audit.finish_run(ran, O::run_report, limits)
    }

    /// The limits one run of `runtime` has before a request lowers them.
    fn limits_of(&self, runtime: Runtime) -> Option<anypath_sandbox::Limits> {
        self.interpreter.sandboxes().iter().find(|s| s.runtime() == runtime).map(|s| s.limits())
    }

    /// Stops the run going on in the session, if there is one (its client
    /// went away, or its sandbox is being killed).
    pub fn interrupt(&self, caller: &Caller, session_id: &str) {
        // Only an interrupt that stopped a run is worth a line.
        let audit = Audit::of(caller, OperationKind::Interrupt).session(session_id);
        match self.interpreter.runs().interrupt(&caller.tenant, session_id) {
            Ok(true) => {
                let _ = audit.finish(Ok(()));
            }
            Ok(false) => self.interrupt_elsewhere(caller, session_id, None),
            Err(_) => {}
        }
    }

    /// Asks the host of the fleet that holds the session, when another
    /// does, to stop its run; off the async workers, answered by no one.
    fn interrupt_elsewhere(&self, caller: &Caller, session_id: &str, run_id: Option<&str>) {
        let (interpreter, caller, session_id, run_id) = (self.interpreter.clone(), caller.clone(), session_id.to_owned(), run_id.map(str::to_owned));
        tokio::task::spawn_blocking(move || {
            if let Ok(true) = interpreter.runs().interrupt_elsewhere(&caller.tenant, &session_id, run_id.as_deref()) {
                let audit = Audit::of(&caller, OperationKind::Interrupt).session(&session_id);
                let audit = match &run_id {
                    Some(run_id) => audit.subject(run_id),
                    None => audit,
                };
                let _ = audit.finish(Ok(()));
            }
        });
    }

    /// The commands tracked by their id.
    pub(crate) fn commands(&self) -> &Arc<crate::tracked_commands::TrackedCommands> {
        &self.state.commands
    }

    /// The runs tracked by their id.
    pub fn runs(&self) -> &Arc<RunRegistry> {
        &self.state.runs
    }

    /// Starts running `request` in `session_id` for `caller` on a task of
    /// its own, through [`Self::call`] ([`LiveRun`]): it goes on when the
    /// client that asked goes away. Without `live` the run has no events:
    /// its report alone holds its output.
    pub fn start_live(&self, caller: Caller, session_id: String, request: RunRequest, live: bool) -> LiveRun {
        let service = self.clone();
        LiveRun::spawn(live, move |sink| audit::carried(async move { service.call(&caller, runs::RunCode { session_id, request, live: sink }).await }))
    }

    /// Starts `request` tracked by its id in the run registry
    /// ([`RunRegistry::start`]), run by [`Self::start_live`].
    pub async fn start_tracked(&self, caller: &Caller, session_id: String, request: RunRequest, control: &RunControl, followed: bool) -> Result<Started, ServiceError> {
        let (service, run_caller) = (self.clone(), caller.clone());
        self.runs().start(caller, session_id, request, control, followed, move |session_id, request, live| service.start_live(run_caller, session_id, request, live)).await
    }

    /// Stops a tracked run: its session's run is interrupted when it is
    /// this one; a run still waiting for its session is cancelled.
    pub fn stop_tracked(&self, caller: &Caller, tracked: &Tracked) {
        if tracked.state().is_final() {
            return;
        }
        tracked.mark_interrupt_asked();
        if !self.interrupt_run(caller, tracked.session_id(), tracked.run_id()) {
            tracked.abort();
        }
    }

    /// Stops the session's run when it is the run `run_id`: true when it
    /// was stopped (a run still waiting for the session is not).
    pub fn interrupt_run(&self, caller: &Caller, session_id: &str, run_id: &str) -> bool {
        let audit = Audit::of(caller, OperationKind::Interrupt).session(session_id).subject(run_id);
        let stopped = matches!(self.interpreter.runs().interrupt_run(&caller.tenant, session_id, run_id), Ok(true));
        let _ = audit.finish(Ok(()));
        if !stopped {
            // The run may be on another host of the fleet.
            self.interrupt_elsewhere(caller, session_id, Some(run_id));
        }
        stopped
    }

    /// Where a body for a staged dataset is received before it is kept.
    pub async fn dataset_staging_path(&self) -> Result<std::path::PathBuf, ServiceError> {
        self.off_workers(|i| i.datasets().staging_path()).await
    }

    /// Keeps the `received` files as the caller's dataset `name`; a body
    /// that could not be received is the operation's failure, in the same
    /// audit line a stage that was refused would write.
    pub async fn stage_dataset(&self, caller: &Caller, name: String, received: Result<Vec<ReceivedFile>, ServiceError>) -> Result<DatasetInfo, ServiceError> {
        match received {
            Ok(files) => self.call(caller, anypath_interpreter::datasets::StageDataset { name, files }).await,
            Err(e) => Audit::of(caller, OperationKind::StageDataset).subject(&name).finish(Err(e)),
        }
    }

    /// Bytes the caller may still stage as `name` (a refusal is the stage's
    /// failure, in the audit trail; an answer writes no line of its own).
    pub async fn dataset_room(&self, caller: &Caller, name: String) -> Result<u64, ServiceError> {
        let audit = Audit::of(caller, OperationKind::StageDataset).subject(&name);
        let tenant = caller.tenant.clone();
        let room = self.off_workers(move |i| i.datasets().room(&tenant, &name)).await;
        match room {
            Ok(room) => Ok(room),
            Err(e) => audit.finish(Err(e)),
        }
    }

    /// An artifact's metadata and open file, for whoever holds a valid
    /// signed link: the link is the credential, so there is no caller. Its
    /// audit line names the artifact's tenant once the link checks out,
    /// never the link's query.
    pub async fn open_signed(&self, request_id: &str, target: SignedTarget, query: LinkQuery) -> Result<(Artifact, std::fs::File), ServiceError> {
        let audit = Audit::anonymous(OperationKind::Download, request_id.to_owned(), None);
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

/// A session the service keeps for itself (a snapshot's state) named by a
/// client, as the session an operation is on or the one a fork or a second
/// context makes: refused, so such sessions are reached only through the
/// operations made for them.
fn reserved_session(described: &anypath_interpreter::Described) -> Option<anypath_interpreter::InterpreterError> {
    let makes_session = matches!(described.kind, OperationKind::Fork | OperationKind::OpenContext);
    let named = described.session.iter().chain(described.subject.iter().filter(|_| makes_session));
    named.map(|id| anypath_interpreter::names::client_session_id(id)).find_map(Result::err).map(anypath_interpreter::InterpreterError::from)
}
