//! The public REST face, where the data is: a request the rules plan is
//! served here, with no hop to another component; anything else (another
//! planner's work, `OPTIONS`, health and docs, every refusal) goes to the
//! gateway, which answers it as it always has ([`hand_over`]).
//!
//! A request served here passes the same checks, in the same order, as in
//! the gateway (`front::checks`), and its answer is built by the same code
//! (`front::reply`), so a client cannot tell which component answered.

use std::time::Instant;

use anypath_rest::RequestContext;
use anypath_rest::settings::Settings;
use front::FrontSettings;
use front::checks;
use front::log::{Committed, RequestLine, Usage};
use front::reply::{self, Outcome};
use spin_sdk::http::{Request, Response};

use crate::hand_over;
use crate::open_backend::open;
use crate::{error, execute, timed_backend};

/// Answers one public request.
pub fn answer(request: &Request) -> Response {
    let started = Instant::now();
    let mut settings = Settings::new(|name: &str| spin_sdk::variables::get(name).ok());
    let front = FrontSettings::read(&mut settings);
    // A variable that cannot be used: the gateway says which, as it always has.
    let usable = settings.errors().is_empty();
    match usable.then(|| served_here(request, &front)).flatten() {
        Some((ctx, tenant)) => serve(request, &front, &ctx, &tenant, started),
        None => hand_over::to_gateway(request),
    }
}

/// The request's context and tenant when the rules serve it here: it
/// passes every check, its method is one the rules serve on its path, and
/// the rules plan it without asking the planner. `None` otherwise, refusals
/// included: the gateway answers those, so each has one author.
fn served_here(request: &Request, front: &FrontSettings) -> Option<(RequestContext, String)> {
    let header = |name| request.header(name).and_then(|v| v.as_str());
    if anypath_rest::cors::is_preflight(&request.method().to_string(), header("origin"), header("access-control-request-method")) {
        return None;
    }
    let (mut ctx, tenant) = checks::context(request, front).ok()?;
    if !checks::rules_accept(&ctx) {
        return None;
    }
    checks::finish(&mut ctx, front).ok()?;
    checks::runs_in_store(&ctx, front).then_some((ctx, tenant))
}

fn serve(request: &Request, front: &FrontSettings, ctx: &RequestContext, tenant: &str, started: Instant) -> Response {
    let request_id = checks::request_id(request);
    let mut committed = Committed::default();
    let ran = open().and_then(|backend| execute::run(backend.as_ref(), tenant, ctx));
    let mut outcome = match ran {
        Ok(report) => {
            committed = Committed::from_report(&report);
            reply::served(&report.reply, ctx, request, &committed, &request_id)
        }
        Err(failure) => {
            let mut response = error::into_response(&failure, &request_id);
            response.set_header("x-request-id", &request_id);
            Outcome { status: *response.status(), response, detail: "rejected" }
        }
    };
    outcome.response.set_header("x-anypath-plan", "rules");
    let handled = started.elapsed().as_secs_f64() * 1e3;
    outcome.response.set_header("server-timing", format!("store-handler;dur={handled:.2}{}", timed_backend::take_entries()));
    let origin = request.header("origin").and_then(|v| v.as_str());
    for (name, value) in front.cors.response_headers(origin) {
        outcome.response.set_header(name, &value);
    }
    RequestLine {
        request_id: &request_id,
        method: &request.method().to_string(),
        path: request.path(),
        status: outcome.status,
        detail: outcome.detail,
        plan: "rules",
        usage: &Usage::default(),
        committed: &committed,
        config_errors: &[],
        duration_ms: started.elapsed().as_secs_f64() * 1e3,
    }
    .write();
    outcome.response
}
