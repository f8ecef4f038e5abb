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
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::CodeInterpreterTools;
use crate::envelope::{ApiError, upload_body_limit};
use crate::interpreter_service::InterpreterService;
use crate::request_id::RequestId;
use crate::state::AppState;

/// `/mcp`, when the service runs a code interpreter. `allowed_hosts` are the
/// `Host` values it answers (a guard against DNS rebinding); empty allows any.
pub fn routes(state: &Arc<AppState>, allowed_hosts: &[String]) -> Router<Arc<AppState>> {
    let (Some(interpreter), Ok(service)) = (&state.interpreter, InterpreterService::of(state)) else { return Router::new() };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(allowed_hosts.iter().cloned())
        .with_max_request_body_bytes(upload_body_limit(interpreter.max_upload_bytes()));
    // Built once: each stateless request gets a copy of the same tools.
    let tools = CodeInterpreterTools::over_http(service.clone());
    let mcp = StreamableHttpService::new(move || Ok(tools.clone()), Arc::new(NeverSessionManager::default()), config);
    Router::new().nest_service("/mcp", mcp).layer(axum::middleware::from_fn_with_state(service, authenticate))
}

/// Binds the resolved caller to the request, or answers 401 before any
/// JSON-RPC is read.
async fn authenticate(State(service): State<InterpreterService>, request_id: RequestId, mut request: Request, next: Next) -> Response {
    match service.caller(request.headers(), request_id.into_string()) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => {
            let mut response = ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.to_string()).into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"anypath\""));
            response
        }
    }
}
