//! How the sandbox service listens and admits work: what the binary's
//! flags (and `anypath up`) decide before the service starts.

use std::net::SocketAddr;
use std::sync::Arc;

use anypath_interpreter::Interpreter;

use crate::admission::AdmissionConfig;

/// How the server listens and admits work.
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// Shared secret expected as `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Execution slots and queue places, in all and per tenant.
    pub admission: AdmissionConfig,
    /// `key:tenant` pairs: an `X-API-Key` header selects the tenant of a
    /// code-interpreter call. Without any, every caller is tenant `default`.
    pub api_keys: Vec<(String, String)>,
    /// The code interpreter, when this service offers it.
    pub interpreter: Option<Arc<Interpreter>>,
    /// `Host` values `/mcp` answers (a DNS-rebinding guard); empty allows any.
    pub mcp_allowed_hosts: Vec<String>,
    /// A second bearer token, for the app's own components (`anypath up`
    /// makes one per process): its holder may name the tenant it acts for.
    pub trusted_token: Option<String>,
    /// Which web pages on other origins may call (none by default).
    pub cors: anypath_rest::cors::CorsPolicy,
    /// Where E2B's API listens ([`crate::e2b`]), when it is served.
    pub e2b_listen: Option<SocketAddr>,
    /// REST blocks (`/v1/exec`, `/v1/admission`) take any credential the
    /// other routes take, instead of `token` alone (`anypath up`, whose
    /// token and keys are the app's, so every listener asks for the same).
    pub exec_like_every_route: bool,
    /// Which environment variable names a run may set.
    pub run_env: crate::run_env::RunEnvPolicy,
    /// Where Jupyter's kernels keep their files ([`crate::jupyter`]).
    pub jupyter_kernel_files: KernelFiles,
    /// The admission of the app's public requests, when an app is served
    /// beside this service (`anypath up`): `/healthz` reports it too.
    pub app_requests: Option<Arc<crate::admission::Admission>>,
    /// The hosts runs' callbacks may go to (none by default).
    pub callbacks: crate::background_runs::CallbackPolicy,
    /// How long a graceful stop waits for background runs before it
    /// interrupts them.
    pub drain_runs: std::time::Duration,
}

/// Where Jupyter's kernels keep their files (`--jupyter-kernel-files`;
/// [`crate::jupyter`] serves them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KernelFiles {
    /// Every kernel of a tenant works in one directory that outlives the
    /// kernels, as on a Jupyter server.
    #[default]
    Shared,
    /// Each kernel works in a directory of its own, removed with it.
    PerKernel,
}
