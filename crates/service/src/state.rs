//! What every route of the sandbox service shares ([`AppState`]): the block
//! runner, the interpreter, admission, credentials and metrics, and the
//! questions every transport asks of them (who the caller is, where its
//! links point, whether a run may start).

use std::net::SocketAddr;
use std::sync::Arc;

use anypath_interpreter::Interpreter;
use anypath_sandbox::{BlockRunner, ExecError};
use axum::http::{HeaderMap, header};

use crate::admission::{Admission, Permit, Refused};
use crate::credentials::Credentials;
use crate::options::ServeOptions;

/// What every route of the sandbox service shares: the block runner, the
/// interpreter facade, admission, credentials and metrics.
pub struct AppState {
    /// Runs the REST blocks (`/v1/exec`).
    pub(crate) sandbox: BlockRunner,
    credentials: Credentials,
    pub(crate) interpreter: Option<Arc<Interpreter>>,
    pub(crate) admission: Arc<Admission>,
    /// Runs tracked by their id, background ones kept on disk.
    pub(crate) runs: Arc<crate::background_runs::RunRegistry>,
    /// Commands tracked by their id (E2B's processes, `/v1`'s background commands).
    pub(crate) commands: Arc<crate::tracked_commands::TrackedCommands>,
    /// How long a graceful stop waits for background runs.
    pub(crate) drain_runs: std::time::Duration,
    /// The admission of the app's public requests, under `anypath up`.
    pub(crate) app_requests: Option<Arc<Admission>>,
    /// What `/metrics` reports.
    pub(crate) metrics: crate::metrics::ServiceMetrics,
    /// Which environment variable names a run may set.
    pub(crate) run_env: crate::run_env::RunEnvPolicy,
    /// The address this service listens on: links fall back to it when a
    /// request names no `Host`.
    listen: SocketAddr,
}

impl AppState {
    /// The state every route (and the stdio MCP server) shares: credentials,
    /// the interpreter and the admission limits.
    pub fn new(sandbox: BlockRunner, options: &ServeOptions) -> Arc<Self> {
        let admission = Admission::new(options.admission);
        Arc::new(AppState {
            sandbox,
            credentials: Credentials::new(
                options.token.as_deref(),
                options.trusted_token.as_deref(),
                &options.api_keys,
                options.exec_like_every_route,
            ),
            run_env: options.run_env.clone(),
            interpreter: options.interpreter.clone(),
            metrics: crate::metrics::ServiceMetrics::new(options.interpreter.as_ref(), &admission),
            admission,
            app_requests: options.app_requests.clone(),
            runs: crate::background_runs::RunRegistry::new(
                options.interpreter.as_ref().map(|i| i.config().root.join("runs")),
                options.interpreter.as_ref().and_then(|i| i.shared_records()),
                options.callbacks.clone(),
                options.interpreter.as_ref().map(|i| i.signer().clone()),
            ),
            commands: Arc::default(),
            drain_runs: options.drain_runs,
            listen: options.listen,
        })
    }

    /// The caller's tenant: the one its `X-API-Key` maps to; for a caller
    /// holding a token (the service's bearer token, or the app's trusted
    /// one) the tenant it names in `x-anypath-tenant` (the app's components
    /// act for the tenant they bound the request to), else `default`. Anyone
    /// else is `default` when neither keys nor a token are configured, and
    /// none (401) otherwise: without a token, naming a tenant counts for nothing.
    pub(crate) fn tenant(&self, headers: &HeaderMap) -> Option<String> {
        self.credentials.identify(headers).tenant()
    }

    /// The tenant of a caller presenting `token` as Jupyter's clients do
    /// ([`crate::credentials::Credentials::identify_token`]).
    pub(crate) fn tenant_of_token(&self, token: Option<&str>, headers: &HeaderMap) -> Option<String> {
        self.credentials.identify_token(token, headers).tenant()
    }

    /// Whether the caller may run REST blocks
    /// ([`crate::credentials::Credentials::may_execute`]).
    pub(crate) fn may_execute(&self, headers: &HeaderMap) -> bool {
        self.credentials.may_execute(headers)
    }

    /// The base of the absolute links an answer to this request carries.
    pub(crate) fn base_url(&self, interpreter: &Interpreter, headers: &HeaderMap) -> String {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).map(str::to_owned);
        interpreter.base_url(&host.unwrap_or_else(|| self.listen.to_string()))
    }

    /// The tenant a REST block runs for, by the same rule as [`Self::tenant`]
    /// (`default` when it names none). Used for fair admission and
    /// accounting, never for data.
    pub(crate) fn exec_tenant(&self, headers: &HeaderMap) -> String {
        self.tenant(headers).unwrap_or_else(|| "default".to_owned())
    }

    /// A slot for one execution of `tenant`, or why it is refused (counted
    /// in the metrics).
    pub(crate) async fn admit(&self, tenant: &str) -> Result<Permit, Refused> {
        self.admission.admit(tenant).await.inspect_err(|refused| self.metrics.record_refusal(tenant, refused.code()))
    }

    /// Counts an execution that ended on a limit against its tenant.
    pub(crate) fn account(&self, tenant: &str, error: Option<&ExecError>) {
        if error.is_some_and(ExecError::is_limit) {
            self.admission.record_limit_breach(tenant);
        }
    }
}
