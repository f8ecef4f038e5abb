//! The store component: per-tenant JSON collections.
//!
//! Private, and the only component with data access. Layout per collection
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

mod backend;
mod commit;
mod describe;
mod execute;
mod indexes;
mod keys;
mod kv_backend;
mod load;
mod memo;
mod plans;
mod redis_backend;
mod transaction;

use anypath_rest::journal::JournalError;
use anypath_rest::{ErrorEnvelope, RestError};
use serde::{Deserialize, Serialize};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;
use spin_sdk::wit::wasi::keyvalue::store;

use backend::Backend;

/// Why a request to the store failed.
pub(crate) enum StoreError {
    Rest(RestError),
    /// The data store cannot be reached now (503, worth a retry).
    Unavailable(String),
    Backend(String),
}

impl From<RestError> for StoreError {
    fn from(e: RestError) -> Self {
        Self::Rest(e)
    }
}

impl From<store::Error> for StoreError {
    fn from(e: store::Error) -> Self {
        Self::Backend(format!("key-value: {e:?}"))
    }
}

impl From<JournalError> for StoreError {
    fn from(e: JournalError) -> Self {
        match e {
            JournalError::Conflict { .. } => Self::Rest(RestError::Conflict(e.to_string())),
            JournalError::Inconsistent { .. } => Self::Rest(RestError::BadRequest(e.to_string())),
        }
    }
}

/// The backend the `store_backend` variable names.
fn open() -> Result<Box<dyn Backend>, StoreError> {
    // A manifest that does not hand the store these variables means the default.
    let variable = |name: &str| match spin_sdk::variables::get(name) {
        Ok(value) => Ok(value),
        Err(spin_sdk::variables::Error::Undefined(_)) => Ok(String::new()),
        Err(e) => Err(StoreError::Backend(format!("variable {name}: {e:?}"))),
    };
    match variable("store_backend")?.trim() {
        "" | "kv" => Ok(Box::new(kv_backend::KvBackend::open()?)),
        "redis" => {
            let url = variable("redis_url")?;
            if url.trim().is_empty() {
                return Err(StoreError::Backend("store_backend is redis but redis_url is empty".into()));
            }
            Ok(Box::new(redis_backend::RedisBackend::open(url.trim())?))
        }
        other => Err(StoreError::Backend(format!("store_backend must be kv or redis, not {other:?}"))),
    }
}

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let result = route(&request);
    Ok(match result {
        Ok(body) => json(200, body),
        Err(StoreError::Rest(e)) => json(e.status(), serde_json::to_vec(&e.envelope(&request_id))?),
        Err(StoreError::Unavailable(message)) => {
            let mut response = json(503, serde_json::to_vec(&ErrorEnvelope::new("store_unavailable", message, &request_id))?);
            response.set_header("retry-after", "1");
            response
        }
        Err(StoreError::Backend(message)) => {
            json(500, serde_json::to_vec(&ErrorEnvelope::new("store_failed", message, &request_id))?)
        }
    })
}

fn route(request: &Request) -> Result<Vec<u8>, StoreError> {
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

/// Parses the request first (a bad one is a 400 whatever the backend's
/// state), then runs `handler` on the backend.
fn with<T: for<'de> Deserialize<'de>, R>(
    body: &[u8],
    handler: impl FnOnce(&dyn Backend, T) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let request = parse(body)?;
    handler(open()?.as_ref(), request)
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(body).map_err(|e| RestError::BadRequest(format!("invalid store request: {e}")).into())
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Backend(e.to_string()))
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("stored {what} is corrupt: {e}")))
}

pub(crate) fn pause_ms(ms: u64) {
    wasi::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
}

fn json(status: u16, body: Vec<u8>) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body).build()
}
