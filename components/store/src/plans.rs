//! The plan cache: plans the LLM made, by request shape, per tenant.

use anypath_rest::RestError;
use serde::Deserialize;
use serde_json::{Value, json};
use crate::StoreError;
use crate::backend::Backend;
use crate::keys::{KeyStyle, tenant_prefix};

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
fn cache_key(tenant: &str, key: &str, style: KeyStyle) -> Result<String, StoreError> {
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RestError::BadRequest("a plan-cache key is 64 hex digits".into()).into());
    }
    Ok(format!("{}plans/{key}", tenant_prefix(tenant, style)?))
}

/// `{"plan": <plan or null>}`.
pub fn get(backend: &dyn Backend, lookup: Lookup) -> Result<Value, StoreError> {
    let plan = match backend.get(&cache_key(&lookup.tenant, &lookup.key, backend.key_style())?)? {
        Some(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        None => Value::Null,
    };
    Ok(json!({ "plan": plan }))
}

pub fn put(backend: &dyn Backend, entry: Entry) -> Result<Value, StoreError> {
    let bytes = serde_json::to_vec(&entry.plan).map_err(|e| StoreError::Backend(e.to_string()))?;
    backend.set(&cache_key(&entry.tenant, &entry.key, backend.key_style())?, &bytes)?;
    Ok(json!({ "stored": true }))
}

pub fn evict(backend: &dyn Backend, lookup: Lookup) -> Result<Value, StoreError> {
    backend.delete(&cache_key(&lookup.tenant, &lookup.key, backend.key_style())?)?;
    Ok(json!({ "evicted": true }))
}
