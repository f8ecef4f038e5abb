//! The plan cache: plans the LLM made, by request shape, per tenant.

use anypath_rest::store_keys::{KeyStyle, tenant_prefix};
use anypath_rest::{CachedPlan, PlanCacheEntry, PlanCacheKey, PlanEvicted, PlanStored, RestError};

use crate::backend::Backend;
use crate::codec::encode;
use crate::error::StoreError;

/// `anypath/v2/t/<tenant>/plans/<sha256 hex>`.
fn cache_key(tenant: &str, key: &str, style: KeyStyle) -> Result<String, StoreError> {
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RestError::BadRequest("a plan-cache key is 64 hex digits".into()).into());
    }
    Ok(format!("{}plans/{key}", tenant_prefix(tenant, style)?))
}

/// The cached plan, or none. A stored plan that no longer parses (the plan
/// schema changed since) is a miss, not an error: the planner asks the LLM.
pub fn get(backend: &dyn Backend, lookup: PlanCacheKey) -> Result<CachedPlan, StoreError> {
    let stored = backend.get(&cache_key(&lookup.tenant, &lookup.key, backend.key_style())?)?;
    Ok(CachedPlan { plan: stored.and_then(|bytes| serde_json::from_slice(&bytes).ok()) })
}

/// Stores a plan under its request shape's key.
pub fn put(backend: &dyn Backend, entry: PlanCacheEntry) -> Result<PlanStored, StoreError> {
    let bytes = encode(&entry.plan)?;
    backend.set(&cache_key(&entry.tenant, &entry.key, backend.key_style())?, &bytes)?;
    Ok(PlanStored { stored: true })
}

/// Forgets a cached plan (its block failed, so the next request plans afresh).
pub fn evict(backend: &dyn Backend, lookup: PlanCacheKey) -> Result<PlanEvicted, StoreError> {
    backend.delete(&cache_key(&lookup.tenant, &lookup.key, backend.key_style())?)?;
    Ok(PlanEvicted { evicted: true })
}
