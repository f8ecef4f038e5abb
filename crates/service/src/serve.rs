//! `anypath sandbox serve`: the sandbox as an HTTP JSON API, assembled.
//!
//! The service's own API (`/v1`: [`crate::v1`], the REST blocks and, with a
//! code interpreter, its sessions, datasets, snapshots and runs), the
//! service's own description (`/healthz`, `/readyz`, `/metrics`,
//! `/openapi.json`: [`crate::health`]), `/mcp` as MCP tools
//! ([`crate::mcp::http`]), Jupyter's kernel gateway API ([`crate::jupyter`])
//! and E2B's API on its own listener ([`crate::e2b`]); and the listeners
//! that serve them until the process is told to stop.

use std::sync::Arc;

use anypath_sandbox::BlockRunner;
use axum::Router;
use axum::middleware::from_fn;
use futures_util::future::BoxFuture;

pub use crate::options::ServeOptions;
pub use crate::shutdown::{hibernate_all, shutdown_signal, stopped_signal};
pub use crate::sweeper::{spawn_handovers, spawn_sweeper};
use crate::sweeper::spawn_interrupts;
use crate::state::AppState;

/// Serves until Ctrl-C or SIGTERM: the sandbox's API, and E2B's on its
/// own listener when one is asked for.
///
/// The service's entry points return boxed futures: an async function's
/// body, with all the generic server code it reaches, compiles again in
/// every crate that awaits it; boxed, it compiles once, here.
pub fn serve(sandbox: BlockRunner, options: ServeOptions) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(serve_until_stopped(sandbox, options))
}

async fn serve_until_stopped(sandbox: BlockRunner, mut options: ServeOptions) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    options.listen = listener.local_addr()?;
    let routers = routers(sandbox, &options);
    let state = routers.state.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let e2b_task = match (options.e2b_listen, routers.e2b) {
        (Some(address), Some(e2b)) => {
            let e2b_listener = tokio::net::TcpListener::bind(address).await.map_err(|e| anyhow::anyhow!("binding the E2B listener {address}: {e}"))?;
            tracing::info!(listen = %e2b_listener.local_addr()?, "E2B API serving");
            Some(tokio::spawn(serve_router(e2b_listener, e2b, stopped_signal(stopped.clone()))))
        }
        _ => None,
    };
    let served = serve_on(listener, routers.sandbox, async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    })
    .await;
    if let Some(task) = e2b_task {
        let _ = task.await;
    }
    Routers::stop(state).await;
    served
}

/// Serves `app` (a [`router`]) on an already bound listener until `shutdown` resolves.
pub fn serve_on(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, anyhow::Result<()>> {
    serve_listener(listener, app, Box::pin(shutdown), true)
}

/// [`serve_on`] without its log line, for the service's other listeners
/// (each announces itself in its own words).
pub fn serve_router(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, anyhow::Result<()>> {
    serve_listener(listener, app, Box::pin(shutdown), false)
}

/// What [`serve_on`] and [`serve_router`] share; not generic, so axum's
/// server compiles here once whatever `shutdown` their callers pass.
fn serve_listener(listener: tokio::net::TcpListener, app: Router, shutdown: BoxFuture<'static, ()>, announce: bool) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(async move {
        use axum::serve::ListenerExt;
        if announce {
            tracing::info!(listen = %listener.local_addr()?, "sandbox serving");
        }
        // A websocket answer is several small frames in a row (a kernel's
        // status, output, reply, status): with Nagle's algorithm each waits for
        // the client's delayed ACK of the one before, 40 ms a time.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY could not be set");
            }
        });
        axum::serve(listener, app).with_graceful_shutdown(shutdown).await?;
        Ok(())
    })
}

/// The sandbox's HTTP API (`/v1/exec`, `/healthz`, the code interpreter and
/// `/mcp`) with its admission limits.
pub fn router(sandbox: BlockRunner, options: &ServeOptions) -> Router {
    routers(sandbox, options).sandbox
}

/// The routers of one service: they share its state (admission, sessions).
pub struct Routers {
    /// The sandbox's own API ([`router`]).
    pub sandbox: Router,
    /// E2B's API ([`crate::e2b`]), when the service runs a code interpreter.
    pub e2b: Option<Router>,
    /// What the routers share: a graceful stop drains its runs ([`Routers::stop`]).
    pub state: Arc<AppState>,
}

impl Routers {
    /// What a graceful stop does once the listeners stopped: background
    /// runs may end (up to the drain deadline, then they are interrupted;
    /// every report is kept), then every live session is hibernated.
    pub fn stop(state: Arc<AppState>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let service = crate::interpreter_service::InterpreterService::of(&state).ok();
            let stop = |caller: &_, tracked: &_| {
                if let Some(service) = &service {
                    service.stop_tracked(caller, tracked);
                }
            };
            state.runs.drain(state.drain_runs, stop).await;
            if let Some(interpreter) = &state.interpreter {
                hibernate_all(interpreter).await;
            }
        })
    }
}

/// The interpreter's background duties: sweeping expired sessions and,
/// on a shared session store, handing sessions over and taking interrupts
/// other hosts ask for.
pub fn spawn_fleet_duties(state: &AppState) {
    if let Some(interpreter) = &state.interpreter {
        spawn_sweeper(Arc::downgrade(interpreter));
        spawn_handovers(Arc::downgrade(interpreter));
        spawn_interrupts(Arc::downgrade(interpreter), Arc::downgrade(&state.runs));
    }
}

/// The sandbox's API and E2B's, over one state.
pub fn routers(sandbox: BlockRunner, options: &ServeOptions) -> Routers {
    let state = AppState::new(sandbox, options);
    spawn_fleet_duties(&state);
    // E2B's routes answer in E2B's error shape: they take the id layer alone.
    // Inside the id layer, an audit line for every refusal no operation wrote one for.
    let e2b = crate::e2b::router(&state).map(|e2b| e2b.layer(from_fn(crate::refusal_audit::audit_refusals)).layer(from_fn(crate::request_id::assign)));
    let router = Router::new()
        .merge(crate::v1::routes(&state))
        .merge(crate::health::routes())
        .merge(crate::mcp::http::routes(&state, &options.mcp_allowed_hosts))
        .fallback(crate::envelope::not_found)
        .layer(from_fn(crate::envelope::every_error_an_envelope))
        .with_state(state.clone());
    // Jupyter's routes answer in Jupyter's error shape, outside the envelope layer.
    let router = match crate::jupyter::router(&state, options.jupyter_kernel_files) {
        Some(jupyter) => router.merge(jupyter),
        None => router,
    };
    // Outside both: every route, Jupyter's too, goes by the id this layer decides.
    let router = router.layer(from_fn(crate::refusal_audit::audit_refusals)).layer(from_fn(crate::request_id::assign));
    let sandbox = match crate::cors::cors_layer(&options.cors) {
        // Outermost: errors and refusals carry the headers too.
        Some(layer) => router.layer(layer),
        None => router,
    };
    Routers { sandbox, e2b, state }
}
