//! The planner component: turns a request context into a plan and one Python block.
//!
//! Private (reachable only by service chaining). `POST /plan` with a
//! `RequestContext` answers the `Plan`, or an error envelope whose status says
//! why no plan exists.

use anypath_rest::{ErrorEnvelope, RequestContext, RestError, rules};
use spin_sdk::http::{IntoResponse, Request, Response};
use spin_sdk::http_component;

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let result = serde_json::from_slice::<RequestContext>(request.body())
        .map_err(|e| RestError::BadRequest(format!("invalid request context: {e}")))
        .and_then(|ctx| rules::plan(&ctx));
    Ok(match result {
        Ok(plan) => json(200, &serde_json::to_vec(&plan)?),
        Err(error) => json(error.status(), &serde_json::to_vec(&ErrorEnvelope::from_error(&error, &request_id))?),
    })
}

fn json(status: u16, body: &[u8]) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body.to_vec()).build()
}
