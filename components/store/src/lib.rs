//! The store component: per-tenant JSON collections, and the public face
//! for every request the rules plan.
//!
//! The only component with data access. It is the app's public route
//! (`/...`): a request the rules plan is served here, where the data is
//! ([`public`]); anything else is handed to the private gateway
//! ([`hand_over`]). The endpoints below answer only the app's own
//! components, by service chaining. Layout per collection
//! (see `anypath_rest::journal`): an index value, one immutable value per
//! document version and a counter for reserved ids. `POST /load` reads what
//! a plan needs (some ids or everything, plus a reserved id); `POST /commit`
//! re-checks what the block read and lands the journal whole or not at all
//! (`commit`). `POST /execute` runs a request the rules plan right here,
//! by the same data operations a block calls in the sandbox (`execute`),
//! loading, committing and re-running on a conflict as the gateway does
//! for a block. Also the plan cache (`/plan-cache/get|put|evict`), the
//! planner memo (`/planner-memo/get|put`) and `/describe` (a short summary
//! of collections for the planner's prompt).
//!
//! Where data lives is the `store_backend` variable: `kv` (Spin key-value,
//! the embedded default) or `redis` (the server at `redis_url`), both behind
//! one [`backend::Backend`].
//!
//! This file only names the modules and the entry point: [`routes`] picks
//! the handler for a path, and a failure becomes its answer in one place
//! ([`error::into_response`]).

mod answer;
mod backend;
mod clock;
mod codec;
mod commit;
mod describe;
mod error;
mod execute;
mod hand_over;
mod indexes;
mod kv_backend;
mod load;
mod memo;
mod open_backend;
mod plans;
mod public;
mod redis_backend;
mod routes;
mod timed_backend;
mod transaction;

use spin_sdk::http::{IncomingRequest, Request, Response, ResponseOutparam};
use spin_sdk::http_component;

#[http_component]
async fn handle(incoming: IncomingRequest, out: ResponseOutparam) {
    front::respond::serve(incoming, out, |request| {
        // Only another component of the app reaches the endpoints; from
        // outside, `/load` is a collection like any other.
        if front::checks::chained(&request) { endpoint(&request) } else { public::answer(&request) }
    })
    .await;
}

/// Answers one of the app's own components: the endpoint's JSON body, or its failure's answer.
fn endpoint(request: &Request) -> Response {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let started = std::time::Instant::now();
    let routed = routes::route(request);
    // The handler's own time, which the gateway sets beside the hop's
    // round trip: what the hop itself (a new instance, the call) costs is the difference.
    let timing = format!("store-handler;dur={:.2}{}", started.elapsed().as_secs_f64() * 1e3, timed_backend::take_entries());
    let mut response = match routed {
        Ok(body) => answer::json_response(200, body),
        Err(error) => error::into_response(&error, &request_id),
    };
    response.set_header("server-timing", timing);
    response
}
