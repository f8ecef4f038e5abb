//! `/mcp`: the tools over MCP's Streamable HTTP transport, on the sandbox
//! service, behind the same bearer token and API keys as the rest of it.
//!
//! Served statelessly with JSON answers: the 2026 protocol revision has no
//! protocol sessions, and the sandbox session is an explicit tool argument,
//! so any instance can answer any request.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::{CodeInterpreterTools, Tenant};
use crate::envelope::upload_body_limit;
use crate::serve::{AppState, error, request_id};

/// `/mcp`, when the service runs a code interpreter. `allowed_hosts` are the
/// `Host` values it answers (a guard against DNS rebinding); empty allows any.
pub fn routes(state: &Arc<AppState>, allowed_hosts: &[String]) -> Router<Arc<AppState>> {
    let Some(interpreter) = &state.interpreter else { return Router::new() };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(allowed_hosts.iter().cloned())
        .with_max_request_body_bytes(upload_body_limit(interpreter.max_upload_bytes()));
    let tools_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(CodeInterpreterTools::over_http(tools_state.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(state.clone(), authenticate))
}

/// Binds the caller's tenant to the request, or answers 401 before any
/// JSON-RPC is read.
async fn authenticate(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    match state.tenant(request.headers()) {
        Some(tenant) => {
            request.extensions_mut().insert(Tenant(tenant));
            next.run(request).await
        }
        None => {
            let message = "missing or wrong API key or bearer token";
            let mut response = error(StatusCode::UNAUTHORIZED, "unauthorized", message, &request_id(request.headers()));
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"anypath\""));
            response
        }
    }
}
