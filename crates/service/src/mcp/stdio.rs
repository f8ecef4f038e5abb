//! `anypath mcp`: the tools over stdio, for an agent that starts the server
//! itself (Claude Code, editors). Logs go to stderr; stdout carries only
//! JSON-RPC.
//!
//! Download links need an HTTP listener, so the signed-download routes are
//! served on a loopback port beside the stdio transport.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use futures_util::future::BoxFuture;
use rmcp::ServiceExt;

use super::CodeInterpreterTools;
use crate::interpreter_service::InterpreterService;
use crate::state::AppState;

/// Serves the tools on stdin/stdout until the client closes them.
///
/// Boxed here so that rmcp's generic session code compiles in this crate
/// once: an async function's body compiles again in every crate that awaits it.
pub fn serve(state: Arc<AppState>, tenant: String, downloads: SocketAddr) -> BoxFuture<'static, anyhow::Result<()>> {
    Box::pin(serve_stdio(state, tenant, downloads))
}

async fn serve_stdio(state: Arc<AppState>, tenant: String, downloads: SocketAddr) -> anyhow::Result<()> {
    let service = InterpreterService::of(&state).context("the MCP server needs a code interpreter")?;
    let listener = tokio::net::TcpListener::bind(downloads)
        .await
        .with_context(|| format!("binding the download listener {downloads}"))?;
    let address = listener.local_addr()?;
    let caller = service.sole_caller(tenant, &address.to_string());
    // Its answers name their request as the service's do.
    let routes = crate::v1::signed_download_routes().layer(axum::middleware::from_fn(crate::request_id::assign)).with_state(state.clone());
    let downloads_task = tokio::spawn(async move { axum::serve(listener, routes).await });
    tracing::info!(tenant = %caller.tenant, downloads = %caller.base_url, "mcp serving on stdio");

    let tools = CodeInterpreterTools::for_sole_caller(service, caller);
    let running = tools.serve(rmcp::transport::stdio()).await.context("starting the MCP session on stdio")?;
    let reason = running.waiting().await.context("the MCP session on stdio failed")?;
    tracing::info!(?reason, "mcp stopped");
    downloads_task.abort();
    Ok(())
}
