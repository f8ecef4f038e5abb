//! Calls to the other components, by service chaining.

use std::time::Duration;

use http_client::{Answer, CallError, call};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::failure::Failure;

pub const PLANNER_PLAN: &str = "http://planner.spin.internal/plan";
pub const PLANNER_STATUS: &str = "http://planner.spin.internal/status";
pub const STORE_LOAD: &str = "http://store.spin.internal/load";
pub const STORE_COMMIT: &str = "http://store.spin.internal/commit";
pub const STORE_EXECUTE: &str = "http://store.spin.internal/execute";
pub const STORE_PLAN_PUT: &str = "http://store.spin.internal/plan-cache/put";
pub const STORE_PLAN_EVICT: &str = "http://store.spin.internal/plan-cache/evict";

std::thread_local! {
    /// The `Server-Timing` entries the components this request called
    /// answered with (the store's own handler time), for the gateway's header.
    static CALLEE_TIMINGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The called components' `Server-Timing` entries so far, taken.
pub fn take_callee_timings() -> Vec<String> {
    CALLEE_TIMINGS.with(|kept| std::mem::take(&mut *kept.borrow_mut()))
}

/// `POST url` with a JSON body and the request id.
pub fn post(url: &str, body: &impl Serialize, timeout: Duration, request_id: &str) -> Result<Answer, CallError> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    call(url, Some(&bytes), &[("x-request-id", request_id)], timeout)
}

/// `POST url`, answering the JSON body of a 200 or the failure `what` caused.
pub fn post_json<T: DeserializeOwned>(url: &str, body: &impl Serialize, what: &str, timeout: Duration, request_id: &str) -> Result<T, Failure> {
    let answer = post(url, body, timeout, request_id).map_err(|e| Failure::unavailable(what, e))?;
    if let Some(timing) = &answer.server_timing {
        CALLEE_TIMINGS.with(|kept| kept.borrow_mut().push(timing.clone()));
    }
    if answer.status != 200 {
        return Err(Failure::passed_on(&answer, what));
    }
    serde_json::from_slice(&answer.body)
        .map_err(|e| Failure::new(502, format!("{what}_failed"), format!("the {what} answered invalid JSON: {e}"), "upstream"))
}
