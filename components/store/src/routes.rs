//! The store's endpoints: which handler serves each path, with its request
//! parsed first (a bad one is a 400 whatever the backend's state) and the
//! backend opened for it.

use anypath_rest::RestError;
use serde::Deserialize;
use spin_sdk::http::{Method, Request};

use crate::backend::Backend;
use crate::codec::{encode, parse};
use crate::error::StoreError;
use crate::open_backend::open;
use crate::{commit, describe, execute, load, memo, plans};

/// The body of a 200 answer to `request`, or why there is none.
pub fn route(request: &Request) -> Result<Vec<u8>, StoreError> {
    let body = request.body();
    match (request.method(), request.path()) {
        (Method::Post, "/load") => with(body, load::load),
        (Method::Post, "/commit") => with(body, commit::commit),
        (Method::Post, "/execute") => with(body, execute::execute),
        (Method::Post, "/describe") => with(body, describe::describe).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/get") => with(body, plans::get).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/put") => with(body, plans::put).and_then(|v| encode(&v)),
        (Method::Post, "/plan-cache/evict") => with(body, plans::evict).and_then(|v| encode(&v)),
        (Method::Post, "/planner-memo/get") => with(body, memo::get).and_then(|v| encode(&v)),
        (Method::Post, "/planner-memo/put") => with(body, memo::put).and_then(|v| encode(&v)),
        _ => Err(StoreError::Rest(RestError::NotFound(format!("no store endpoint {}", request.path())))),
    }
}

/// Parses the request, then runs `handler` on the backend.
fn with<T: for<'de> Deserialize<'de>, R>(
    body: &[u8],
    handler: impl FnOnce(&dyn Backend, T) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let request = parse(body)?;
    handler(open()?.as_ref(), request)
}
