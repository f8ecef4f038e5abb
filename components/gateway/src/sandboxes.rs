//! The pool of sandbox hosts as the gateway uses it: one block's execution
//! on the first host of the request's ranking that answers, and each host's
//! readiness for `/readyz`.

use std::time::Duration;

use anypath_rest::SandboxPool;
use anypath_rest::sandbox_pool::no_host_answered;
use http_client::{Answer, CallError, call};
use serde_json::{Value, json};

use crate::config::Config;
use crate::failure::Failure;

/// The longest `/readyz` waits for one host, so that one silent host does not
/// hold the probe for a whole call timeout.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `POST /v1/exec` of `body`, on the first host that answers.
///
/// A REST block is stateless (the host gets everything it needs in the
/// request and returns a journal the gateway commits), so any host may run
/// it, and running it again elsewhere after a transport failure is safe.
/// Hosts are ranked by rendezvous hashing of the request id rather than taken
/// round robin: a component instance keeps no state between requests to
/// count with, request ids are random (so blocks spread evenly), and each
/// request gets its own fallback order, so the blocks of a lost host spread
/// over all the others instead of all falling on one neighbour. Only a call
/// that got no answer (refused, reset, name not resolved, timed out, denied
/// by the allowlist) moves on, each host at most once; a host's HTTP error is
/// its answer. No host answering is a 503, or a 504 when every host timed out.
pub fn exec(config: &Config, request_id: &str, body: &[u8], headers: &[(&str, &str)]) -> Result<Answer, Failure> {
    let pool = pool(config)?;
    let tried = pool.first_answer(request_id.as_bytes(), |host| {
        call(&format!("http://{host}/v1/exec"), Some(body), headers, config.call_timeout)
    });
    match tried {
        Ok(answered) => {
            for (host, error) in &answered.skipped {
                // Beside the request's own log line: which host failed it, and how.
                front::log::write(&json!({"request_id": request_id, "sandbox_unreachable": host, "error": error.to_string(), "ran_on": answered.host}));
            }
            Ok(answered.answer)
        }
        // Every host silent past the call timeout: the block may be what hangs them.
        Err(failures) if failures.iter().all(|(_, e)| matches!(e, CallError::Timeout)) => {
            Err(Failure::new(504, "sandbox_timeout", no_host_answered(&failures), "timeout"))
        }
        Err(failures) => Err(Failure::new(503, "sandbox_unavailable", no_host_answered(&failures), "unavailable")),
    }
}

/// Calls `f` with the headers a sandbox host needs to act for `tenant`: the
/// request id, the tenant (for its fair share; a block cannot reach this
/// header) and the token that entitles the gateway to name it.
pub fn with_tenant_headers<T>(config: &Config, request_id: &str, tenant: &str, f: impl FnOnce(&[(&str, &str)]) -> T) -> T {
    let bearer = format!("Bearer {}", config.sandbox_token);
    let mut headers = vec![("x-request-id", request_id), ("x-anypath-tenant", tenant)];
    if !config.sandbox_token.is_empty() {
        headers.push(("authorization", bearer.as_str()));
    }
    f(&headers)
}

/// Asks the host that would run this request's block (the first of its
/// ranking) whether the tenant would be admitted now: its refusal (429 or
/// 503) is the request's answer, before anything is planned or loaded. Any
/// other outcome, a host without the route or no answer included, lets the
/// request go on: `POST /v1/exec` decides in the end.
pub fn refused_before_planning(config: &Config, request_id: &str, headers: &[(&str, &str)]) -> Option<Failure> {
    let pool = config.sandbox_pool.as_ref().ok()?;
    let host = pool.ranked(request_id.as_bytes()).into_iter().next()?;
    let answer = call(&format!("http://{host}/v1/admission"), None, headers, config.call_timeout).ok()?;
    matches!(answer.status, 429 | 503).then(|| Failure::passed_on(&answer, "sandbox"))
}

/// `/readyz`'s view of the pool: whether any host is ready, and each host's state.
pub fn readiness(config: &Config, request_id: &str) -> (bool, Value) {
    let pool = match &config.sandbox_pool {
        Ok(pool) => pool,
        Err(e) => return (false, json!({"sandbox_hosts": [], "error": e.to_string()})),
    };
    let timeout = config.call_timeout.min(READY_TIMEOUT);
    let hosts: Vec<Value> = pool
        .hosts()
        .iter()
        .map(|host| match call(&format!("http://{host}/healthz"), None, &[("x-request-id", request_id)], timeout) {
            Ok(answer) if answer.status == 200 => json!({"host": host, "ready": true}),
            Ok(answer) => json!({"host": host, "ready": false, "error": format!("the host answered {}", answer.status)}),
            Err(e) => json!({"host": host, "ready": false, "error": e.to_string()}),
        })
        .collect();
    let ready = hosts.iter().any(|h| h["ready"] == json!(true));
    (ready, json!({"sandbox_hosts": hosts}))
}

fn pool(config: &Config) -> Result<&SandboxPool, Failure> {
    config
        .sandbox_pool
        .as_ref()
        .map_err(|e| Failure::new(503, "sandbox_unavailable", format!("no sandbox host can be used: {e}"), "unavailable"))
}
