//! Jupyter's kernel gateway API on the sandbox listener, beside `/v1`, so
//! Jupyter's own clients run cells in anypath sessions: JupyterLab and
//! Jupyter Server started with `--gateway-url`, nbclient and papermill
//! through jupyter_server's `GatewayKernelManager`, AutoGen's Jupyter
//! executors, Open WebUI's code interpreter.
//!
//! [`rest`] serves `/api/kernelspecs` and `/api/kernels`; [`channels`]
//! the kernel's websocket (`/api/kernels/{id}/channels`, JSON text frames,
//! protocol 5.3), whose shell requests [`shell`] answers. A kernel is one
//! interpreter session ([`kernels`]) with its limits, hibernation and
//! tenant, working in files its tenant's kernels share ([`files`]): this
//! is a transport over the service facade, like `/v1`, MCP and E2B's API,
//! never a second session flow.

mod channels;
mod error;
mod files;
mod kernels;
mod message;
mod rest;
mod shell;
mod specs;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::routing::{get, post};

pub use crate::options::KernelFiles;

use self::error::JupyterError;
use self::kernels::{Kernel, Kernels};
use crate::interpreter_service::{Caller, InterpreterService};
use crate::request_id::RequestId;
use crate::state::AppState;

/// Where the kernels are kept, under the interpreter's root.
const KERNELS_FILE: &str = "jupyter-kernels.json";
/// How often kernels whose sessions expired are forgotten.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// What the Jupyter routes share.
pub(crate) struct Jupyter {
    service: InterpreterService,
    state: Arc<AppState>,
    kernels: Kernels,
    specs: Vec<specs::Spec>,
    /// A kernel's session lives this long idle (hibernated, never culled, before that).
    session_ttl: Duration,
    /// Where kernels keep their files.
    kernel_files: KernelFiles,
    /// When each tenant's shared kernel files were last marked used.
    files_kept: files::Kept,
    /// The Python version of each kernelspec's runtime, once a kernel told it.
    versions: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// The kernel gateway API over the service of `state`, its kernels keeping
/// their files as `kernel_files` says; None without a code interpreter.
pub fn router(state: &Arc<AppState>, kernel_files: KernelFiles) -> Option<Router> {
    let service = InterpreterService::of(state).ok()?;
    let config = state.interpreter.as_ref()?.config();
    let runtimes: Vec<_> = service.limits().runtimes.iter().map(|(runtime, _)| *runtime).collect();
    let shared_records = state.interpreter.as_ref().and_then(|i| i.shared_records());
    let jupyter = Arc::new(Jupyter {
        kernel_files: files::effective(kernel_files, shared_records.is_some()),
        files_kept: files::Kept::default(),
        // A fleet's hosts share their kernels; one host keeps them in a file.
        kernels: match shared_records {
            Some(records) => Kernels::shared(records),
            None => Kernels::load(config.root.join(KERNELS_FILE)),
        },
        specs: specs::offered(&runtimes, state.interpreter.as_ref().is_some_and(|i| i.has_shell())),
        session_ttl: config.max_ttl,
        versions: std::sync::Mutex::default(),
        service,
        state: state.clone(),
    });
    spawn_sweeper(Arc::downgrade(&jupyter));
    let router = Router::new()
        .route("/api", get(rest::version))
        .route("/api/kernelspecs", get(rest::list_specs))
        .route("/api/kernelspecs/{name}", get(rest::get_spec))
        .route("/api/kernels", get(rest::list_kernels).post(rest::start_kernel))
        .route("/api/kernels/{id}", get(rest::get_kernel).delete(rest::shut_down))
        .route("/api/kernels/{id}/interrupt", post(rest::interrupt))
        .route("/api/kernels/{id}/restart", post(rest::restart))
        .route("/api/kernels/{id}/channels", get(channels::connect))
        // jupyter_server's gateway kernel client (nbclient, papermill) opens
        // the websocket without its auth header: its `GatewayClient.ws_url`
        // can carry the token in the path instead.
        .route("/token/{token}/api/kernels/{id}/channels", get(channels::connect_with_path_token))
        .with_state(jupyter);
    Some(router)
}

/// The token a Jupyter client presents: `Authorization: token T` or
/// `Bearer T`, else `?token=T` (how browsers open the websocket).
fn presented_token(headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    let from_header = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("token ").or_else(|| v.strip_prefix("Bearer ")))
        .map(|token| token.trim().to_owned());
    from_header.or_else(|| query.and_then(|q| url::form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned())))
}

/// Forgets, every [`SWEEP_EVERY`], the kernels whose sessions expired
/// (idle past their TTL): their clients then see them gone, as a culled
/// kernel is, instead of a fresh session under the old id.
fn spawn_sweeper(jupyter: std::sync::Weak<Jupyter>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        loop {
            every.tick().await;
            let Some(jupyter) = jupyter.upgrade() else { break };
            jupyter.forget_expired().await;
        }
    });
}

impl Jupyter {
    async fn forget_expired(&self) {
        for kernel in self.kernels.all() {
            let caller = self.service.tenant_caller(kernel.record.tenant.clone(), &HeaderMap::new(), uuid::Uuid::new_v4().to_string());
            let gone = matches!(
                self.service.call(&caller, anypath_interpreter::sessions::DescribeSession { session_id: kernel.record.session_id.clone() }).await,
                Err(crate::interpreter_service::ServiceError::Interpreter(anypath_interpreter::InterpreterError::NoSuchSession(_)))
            );
            if gone {
                if let Err(error) = self.kernels.remove(&kernel.record.id).await {
                    tracing::warn!(kernel = %kernel.record.id, %error, "an expired kernel's record stays; removed on a later sweep");
                    continue;
                }
                tracing::info!(tenant = %kernel.record.tenant, kernel = %kernel.record.id, "kernel forgotten: its session expired");
            }
        }
    }

    /// The caller presenting `token`, acting for its tenant.
    fn caller_presenting(&self, headers: &HeaderMap, token: Option<String>, request_id: RequestId) -> Result<Caller, JupyterError> {
        let tenant = self.state.tenant_of_token(token.as_deref(), headers).ok_or_else(JupyterError::unauthorized)?;
        Ok(self.service.tenant_caller(tenant, headers, request_id.into_string()))
    }

    /// The language of the kernelspec named `spec` (Python when unknown).
    fn language(&self, spec: &str) -> specs::Language {
        self.specs.iter().find(|s| s.name == spec).map_or(specs::Language::Python, |s| s.language)
    }

    /// The Python version kernels of `spec` run, when one has told it.
    fn python_version(&self, spec: &str) -> Option<String> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner()).get(spec).cloned()
    }

    /// Learns the Python version of `spec` from a fresh kernel's session,
    /// once (a Python kernel's only).
    async fn learn_python_version(&self, caller: &Caller, spec: &str, session_id: &str) {
        if self.language(spec) == specs::Language::Python
            && self.python_version(spec).is_none()
            && let Some(version) = shell::ask_python_version(self, caller, session_id).await
        {
            self.versions.lock().unwrap_or_else(|p| p.into_inner()).insert(spec.to_owned(), version);
        }
    }

    /// The caller's kernel `id`; another tenant's is not found.
    async fn kernel(&self, caller: &Caller, id: &str) -> Result<Arc<Kernel>, JupyterError> {
        self.kernels.get(&caller.tenant, id).await?.ok_or_else(|| JupyterError::no_kernel(id))
    }
}

/// The caller presenting the request's token (in its header or query),
/// acting for its tenant; 401 without a valid one.
pub(crate) struct JupyterCaller(pub Caller);

impl FromRequestParts<Arc<Jupyter>> for JupyterCaller {
    type Rejection = JupyterError;

    async fn from_request_parts(parts: &mut Parts, jupyter: &Arc<Jupyter>) -> Result<Self, JupyterError> {
        let Ok(request_id) = RequestId::from_request_parts(parts, jupyter).await;
        let token = presented_token(&parts.headers, parts.uri.query());
        jupyter.caller_presenting(&parts.headers, token, request_id).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_as_jupyter_clients_send_them() {
        let mut headers = HeaderMap::new();
        assert_eq!(presented_token(&headers, Some("session_id=x&token=abc")), Some("abc".to_owned()));
        headers.insert(header::AUTHORIZATION, "token t1".parse().expect("a header"));
        assert_eq!(presented_token(&headers, Some("token=abc")), Some("t1".to_owned()), "the header first");
        headers.insert(header::AUTHORIZATION, "Bearer t2".parse().expect("a header"));
        assert_eq!(presented_token(&headers, None), Some("t2".to_owned()));
    }
}
