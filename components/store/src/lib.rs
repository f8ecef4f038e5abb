//! The store component: per-tenant JSON collections on Spin key-value.
//!
//! Private, and the only component with a key-value grant. `POST /load`
//! returns the named collections with their versions; `POST /commit` applies
//! a mutation journal to a collection only if its version still matches, with
//! a compare-and-swap, so concurrent writers can never lose an update. The
//! first write to a new collection takes a creation ticket (an atomic
//! increment), because on Spin's SQLite store a compare-and-swap on an absent
//! key is an upsert.

use anypath_rest::journal::{Collection, JournalError, MutationRecord};
use anypath_rest::{ErrorEnvelope, RestError, names};
use serde::{Deserialize, Serialize};
use spin_sdk::http::{IntoResponse, Method, Request, Response};
use spin_sdk::http_component;
use spin_sdk::wit::wasi::keyvalue::{atomics, store};

/// The key-value store label granted to this component in `spin.toml`.
const STORE_LABEL: &str = "default";

#[derive(Deserialize)]
struct LoadRequest {
    tenant: String,
    collections: Vec<String>,
}

#[derive(Serialize)]
struct Loaded {
    name: String,
    version: u64,
    documents: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct CommitRequest {
    tenant: String,
    changes: Vec<Change>,
}

#[derive(Deserialize)]
struct Change {
    name: String,
    expected_version: u64,
    mutations: Vec<MutationRecord>,
}

/// Why a request to the store failed.
enum StoreError {
    Rest(RestError),
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

#[http_component]
fn handle(request: Request) -> anyhow::Result<impl IntoResponse> {
    let request_id = request.header("x-request-id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
    let result = match (request.method(), request.path()) {
        (Method::Post, "/load") => parse(request.body()).and_then(load),
        (Method::Post, "/commit") => parse(request.body()).and_then(commit),
        _ => Err(StoreError::Rest(RestError::NotFound(format!("no store endpoint {}", request.path())))),
    };
    Ok(match result {
        Ok(body) => json(200, body),
        Err(StoreError::Rest(e)) => json(e.status(), serde_json::to_vec(&ErrorEnvelope::from_error(&e, &request_id))?),
        Err(StoreError::Backend(message)) => {
            json(500, serde_json::to_vec(&ErrorEnvelope::new("store_failed", message, &request_id))?)
        }
    })
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(body).map_err(|e| RestError::BadRequest(format!("invalid store request: {e}")).into())
}

/// `t/<tenant>/c/<collection>`: names are checked first, so no key leaves its tenant.
fn key(tenant: &str, collection: &str) -> Result<String, StoreError> {
    Ok(format!("anypath/v1/t/{}/c/{}", names::tenant(tenant)?, names::collection(collection)?))
}

fn load(request: LoadRequest) -> Result<Vec<u8>, StoreError> {
    let bucket = store::open(STORE_LABEL)?;
    let mut loaded = Vec::with_capacity(request.collections.len());
    for name in request.collections {
        let stored = match bucket.get(&key(&request.tenant, &name)?)? {
            Some(bytes) => decode(&bytes)?,
            None => Collection::default(),
        };
        loaded.push(Loaded { name, version: stored.version, documents: stored.documents });
    }
    serde_json::to_vec(&serde_json::json!({ "collections": loaded })).map_err(|e| StoreError::Backend(e.to_string()))
}

fn decode(bytes: &[u8]) -> Result<Collection, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("stored collection is corrupt: {e}")))
}

fn commit(request: CommitRequest) -> Result<Vec<u8>, StoreError> {
    let bucket = store::open(STORE_LABEL)?;
    let mut versions = serde_json::Map::new();
    for change in request.changes {
        let key = key(&request.tenant, &change.name)?;
        let entries: Vec<&MutationRecord> = change.mutations.iter().filter(|m| m.collection == change.name).collect();
        if entries.len() != change.mutations.len() {
            return Err(RestError::BadRequest("a change may only hold mutations of its own collection".into()).into());
        }
        let version = commit_one(&bucket, &key, change.expected_version, &entries)?;
        versions.insert(change.name, version.into());
    }
    serde_json::to_vec(&serde_json::json!({ "versions": versions })).map_err(|e| StoreError::Backend(e.to_string()))
}

fn conflict(message: String) -> StoreError {
    StoreError::Rest(RestError::Conflict(message))
}

fn applied(collection: &mut Collection, expected: u64, entries: &[&MutationRecord]) -> Result<Vec<u8>, StoreError> {
    collection.apply(expected, entries).map_err(|e| match e {
        JournalError::VersionConflict { .. } => conflict(e.to_string()),
        JournalError::Inconsistent { .. } => StoreError::Rest(RestError::BadRequest(e.to_string())),
    })?;
    serde_json::to_vec(collection).map_err(|e| StoreError::Backend(e.to_string()))
}

fn commit_one(bucket: &store::Bucket, key: &str, expected: u64, entries: &[&MutationRecord]) -> Result<u64, StoreError> {
    let cas = atomics::Cas::new(bucket, key)?;
    match cas.current()? {
        Some(bytes) => {
            let mut collection = decode(&bytes)?;
            let encoded = applied(&mut collection, expected, entries)?;
            match atomics::swap(cas, &encoded) {
                Ok(()) => Ok(collection.version),
                Err(atomics::CasError::CasFailed(_)) => Err(conflict(format!("{key} changed during the commit"))),
                Err(atomics::CasError::StoreError(e)) => Err(e.into()),
            }
        }
        None => {
            if expected != 0 {
                return Err(conflict(format!("{key} no longer exists")));
            }
            // Check the journal before taking the ticket: a refused journal must not
            // consume the only ticket that may create this collection.
            let mut collection = Collection::default();
            let encoded = applied(&mut collection, 0, entries)?;
            let ticket = atomics::increment(bucket, &format!("{key}/ticket"), 1)?;
            if ticket != 1 {
                return Err(conflict(format!("{key} is being created by another request")));
            }
            bucket.set(key, &encoded)?;
            Ok(collection.version)
        }
    }
}

fn json(status: u16, body: Vec<u8>) -> Response {
    Response::builder().status(status).header("content-type", "application/json").body(body).build()
}
