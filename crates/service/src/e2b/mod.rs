//! E2B's API on a listener of its own (`--e2b-listen`), so code written for
//! E2B's SDKs (`e2b-code-interpreter`, `@e2b/code-interpreter`) runs here by
//! pointing `E2B_API_URL` and `E2B_SANDBOX_URL` at it.
//!
//! One address serves what E2B spreads over three: the control plane
//! ([`control`]: `/sandboxes`, `/v2/sandboxes`), envd's files ([`envd`],
//! [`filesystem`]) and commands ([`process`]) and the code interpreter's `/execute` and `/contexts`
//! ([`execute`]), with the watches of [`watch`]. Calls to a sandbox name it in `E2b-Sandbox-Id`, and carry
//! its access token in `X-Access-Token` when it has one. An E2B sandbox is
//! an interpreter session ([`registry`]): this is a transport over the
//! service facade, like `/v1` and MCP, never a second session flow.

mod call;
mod control;
mod envd;
mod error;
mod execute;
mod filesystem;
mod metrics;
mod paths;
mod process;
mod registry;
mod snapshots;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::routing::{delete, get, post};

use self::error::E2bError;
use self::registry::Registry;
use crate::interpreter_service::InterpreterService;
use crate::state::AppState;

/// The largest body an upload may send (the interpreter's file limit applies after).
pub(crate) const MAX_BODY_BYTES: usize = 512 << 20;

/// Where the sandboxes are kept, under the interpreter's root.
const SANDBOXES_FILE: &str = "e2b-sandboxes.json";

/// Header naming the sandbox a call is for.
const SANDBOX_ID: &str = "e2b-sandbox-id";
/// Header carrying a secure sandbox's access token.
const ACCESS_TOKEN: &str = "x-access-token";

/// What the E2B routes share.
pub(crate) struct E2b {
    service: InterpreterService,
    registry: Registry,
    runs: execute::Runs,
    watchers: watch::Watchers,
    /// The commands running in sandboxes, by pid (the service's registry).
    commands: Arc<crate::tracked_commands::TrackedCommands>,
    /// Names this process in `clientID`.
    client_id: String,
    /// The longest a session (and so a sandbox) may live.
    max_ttl: Duration,
}

/// E2B's API over the service of `state`; None without a code interpreter.
pub fn router(state: &Arc<AppState>) -> Option<Router> {
    let service = InterpreterService::of(state).ok()?;
    let config = state.interpreter.as_ref()?.config();
    let max_ttl = config.max_ttl;
    let e2b = Arc::new(E2b {
        service,
        // A fleet's hosts share their sandboxes; one host keeps them in a file.
        registry: match state.interpreter.as_ref().and_then(|i| i.shared_records()) {
            Some(records) => Registry::shared(records),
            None => Registry::load(config.root.join(SANDBOXES_FILE)),
        },
        runs: execute::Runs::default(),
        watchers: watch::Watchers::default(),
        commands: state.commands.clone(),
        client_id: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
        max_ttl,
    });
    control::spawn_reaper(Arc::downgrade(&e2b));
    let router = Router::new()
        .route("/sandboxes", post(control::create_v1).get(control::list_v1))
        .route("/v2/sandboxes", post(control::create_v2).get(control::list_v2))
        .route("/sandboxes/{id}", get(control::describe).delete(control::kill))
        .route("/sandboxes/{id}/timeout", post(control::set_timeout))
        .route("/sandboxes/{id}/pause", post(control::pause))
        .route("/sandboxes/{id}/connect", post(control::connect))
        .route("/v2/sandboxes/{id}/connect", post(control::connect))
        .route("/sandboxes/{id}/resume", post(control::resume))
        .route("/sandboxes/{id}/fork", post(control::fork))
        .route("/sandboxes/{id}/metrics", get(metrics::metrics))
        .route("/sandboxes/{id}/snapshots", post(snapshots::create))
        .route("/snapshots", get(snapshots::list))
        .route("/templates/{id}", delete(snapshots::delete))
        .route("/health", get(envd::health))
        .route("/files", get(envd::download).post(envd::upload))
        .route("/filesystem.Filesystem/{method}", post(filesystem::call))
        .route("/process.Process/{method}", post(process::call))
        .route("/execute", post(execute::execute))
        .route("/contexts", get(execute::list_contexts).post(execute::create_context))
        .route("/contexts/{id}", delete(execute::remove_context))
        .route("/contexts/{id}/restart", post(execute::restart_context))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(e2b);
    Some(router)
}

async fn not_found(uri: axum::http::Uri) -> E2bError {
    E2bError::not_found(format!("{} is not a route of this E2B-compatible API", uri.path()))
}

/// The sandbox a call names in `E2b-Sandbox-Id`.
fn sandbox_header(headers: &HeaderMap) -> Option<&str> {
    headers.get(SANDBOX_ID).and_then(|v| v.to_str().ok()).map(str::trim).filter(|id| !id.is_empty())
}
