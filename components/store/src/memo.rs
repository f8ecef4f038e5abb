//! What the planner learnt about its LLM server (the structured-output mode
//! it accepts), kept across requests. Not tenant data: one small JSON object
//! per key.

use anypath_rest::RestError;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::codec::encode;
use crate::error::StoreError;

/// A memo is a setting, not a document.
const MAX_MEMO_BYTES: usize = 1024;

#[derive(Deserialize)]
pub struct Lookup {
    key: String,
}

#[derive(Deserialize)]
pub struct Entry {
    key: String,
    value: Value,
}

/// `anypath/v2/planner/<64 hex digits>`.
fn memo_key(key: &str) -> Result<String, StoreError> {
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RestError::BadRequest("a planner memo key is 64 hex digits".into()).into());
    }
    Ok(format!("anypath/v2/planner/{key}"))
}

/// `{"value": <object or null>}`.
pub fn get(backend: &dyn Backend, lookup: Lookup) -> Result<Value, StoreError> {
    let value = match backend.get(&memo_key(&lookup.key)?)? {
        Some(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        None => Value::Null,
    };
    Ok(json!({ "value": value }))
}

/// Stores a memo (a JSON object of at most [`MAX_MEMO_BYTES`]).
pub fn put(backend: &dyn Backend, entry: Entry) -> Result<Value, StoreError> {
    let bytes = encode(&entry.value)?;
    if !entry.value.is_object() || bytes.len() > MAX_MEMO_BYTES {
        return Err(RestError::BadRequest(format!("a planner memo is a JSON object of at most {MAX_MEMO_BYTES} bytes")).into());
    }
    backend.set(&memo_key(&entry.key)?, &bytes)?;
    Ok(json!({ "stored": true }))
}
