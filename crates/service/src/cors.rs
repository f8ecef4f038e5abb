//! Which web pages on other origins may call the sandbox service: the
//! app's CORS policy as tower-http's layer.

use std::time::Duration;

use anypath_rest::cors::{ALLOWED_HEADERS, CorsPolicy, EXPOSED_HEADERS, MAX_AGE_SECONDS};
use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The policy as tower-http's layer: the same origins, request and exposed
/// headers and preflight lifetime as the gateway's; None when it allows no origin.
pub(crate) fn cors_layer(policy: &CorsPolicy) -> Option<CorsLayer> {
    if !policy.is_enabled() {
        return None;
    }
    let origins = match policy.listed_origins() {
        None => AllowOrigin::any(),
        Some(list) => AllowOrigin::list(list.iter().filter_map(|origin| HeaderValue::from_str(origin).ok())),
    };
    let names = |names: &[&str]| names.iter().filter_map(|name| HeaderName::from_bytes(name.as_bytes()).ok()).collect::<Vec<_>>();
    // MCP's Streamable HTTP reads these two besides the app's own.
    let mut allowed = names(ALLOWED_HEADERS);
    allowed.extend(names(&["mcp-session-id", "mcp-protocol-version", "accept"]));
    let mut exposed = names(EXPOSED_HEADERS);
    exposed.extend(names(&["mcp-session-id", "content-disposition"]));
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS])
            .allow_headers(allowed)
            .expose_headers(exposed)
            .max_age(Duration::from_secs(u64::from(MAX_AGE_SECONDS)))
            .allow_credentials(policy.allows_credentials()),
    )
}
