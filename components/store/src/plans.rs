//! The plan cache: plans the LLM made, by request shape, per tenant.

use anypath_rest::{RestError, names};
use serde::Deserialize;
use serde_json::{Value, json};
use spin_sdk::wit::wasi::keyvalue::store;

use crate::StoreError;

#[derive(Deserialize)]
pub struct Lookup {
    tenant: String,
    key: String,
}

#[derive(Deserialize)]
pub struct Entry {
    tenant: String,
    key: String,
    plan: Value,
}

/// `anypath/v2/t/<tenant>/plans/<sha256 hex>`.
fn cache_key(tenant: &str, key: &str) -> Result<String, StoreError> {
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RestError::BadRequest("a plan-cache key is 64 hex digits".into()).into());
    }
    Ok(format!("anypath/v2/t/{}/plans/{key}", names::tenant(tenant)?))
}

/// `{"plan": <plan or null>}`.
pub fn get(bucket: &store::Bucket, lookup: Lookup) -> Result<Value, StoreError> {
    let plan = match bucket.get(&cache_key(&lookup.tenant, &lookup.key)?)? {
        Some(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        None => Value::Null,
    };
    Ok(json!({ "plan": plan }))
}

pub fn put(bucket: &store::Bucket, entry: Entry) -> Result<Value, StoreError> {
    let bytes = serde_json::to_vec(&entry.plan).map_err(|e| StoreError::Backend(e.to_string()))?;
    bucket.set(&cache_key(&entry.tenant, &entry.key)?, &bytes)?;
    Ok(json!({ "stored": true }))
}

pub fn evict(bucket: &store::Bucket, lookup: Lookup) -> Result<Value, StoreError> {
    bucket.delete(&cache_key(&lookup.tenant, &lookup.key)?)?;
    Ok(json!({ "evicted": true }))
}
