//! What the planner learnt about its LLM server (the structured-output mode
//! and the tool choice it accepts), kept in the store by key across
//! requests, since each request is a fresh component instance. A memo that
//! cannot be read is a miss and one that cannot be kept only costs a
//! refusal later: neither fails the request.

use http_client::call;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::Config;

const STORE_MEMO_GET: &str = "http://store.spin.internal/planner-memo/get";
const STORE_MEMO_PUT: &str = "http://store.spin.internal/planner-memo/put";

#[derive(Serialize)]
struct Lookup<'a> {
    key: &'a str,
}

/// The store's answer to a lookup: the memo, or null.
#[derive(Deserialize)]
struct Found<T> {
    value: Option<T>,
}

#[derive(Serialize)]
struct Entry<'a, T> {
    key: &'a str,
    value: &'a T,
}

/// The memo kept under `key`, if there is one of this type.
pub fn recall<T: DeserializeOwned>(config: &Config, key: &str, request_id: &str) -> Option<T> {
    let body = serde_json::to_vec(&Lookup { key }).ok()?;
    let answer = call(STORE_MEMO_GET, Some(&body), &[("x-request-id", request_id)], config.call_timeout).ok()?;
    let found: Found<T> = serde_json::from_slice(&answer.body).ok().filter(|_| answer.status == 200)?;
    found.value
}

/// Keeps `value` under `key` for later requests.
pub fn keep<T: Serialize>(config: &Config, key: &str, value: &T, request_id: &str) {
    if let Ok(body) = serde_json::to_vec(&Entry { key, value }) {
        let _ = call(STORE_MEMO_PUT, Some(&body), &[("x-request-id", request_id)], config.call_timeout);
    }
}
