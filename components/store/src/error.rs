//! The one place a failure becomes the store's HTTP answer. What each
//! failure answers is `anypath_rest::store_error`'s; this module writes it
//! as Spin's response, and names a key-value failure.

pub use anypath_rest::store_error::StoreError;
use spin_sdk::http::Response;
use spin_sdk::wit::wasi::keyvalue::store;

use crate::answer::json_response;

/// A key-value call's failure, as the store reports it (500).
pub fn kv_failed(e: store::Error) -> StoreError {
    StoreError::Backend(format!("key-value: {e:?}"))
}

/// The response `error` gets, its envelope naming `request_id`.
pub fn into_response(error: &StoreError, request_id: &str) -> Response {
    let answer = error.answer(request_id);
    // An envelope is strings only, which always encode.
    let mut response = json_response(answer.status, serde_json::to_vec(&answer.envelope).unwrap_or_default());
    if let Some(seconds) = answer.retry_after {
        response.set_header("retry-after", seconds);
    }
    response
}
